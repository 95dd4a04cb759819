//===- lsan_defaults.cpp - LeakSanitizer settings of the sanitizer build's programs ----------===//
//
// Linked into every test executable and, in a sanitizer build (CUBECC_SANITIZE), into cubecc and
// cubecc-opt. LeakSanitizer reads both functions at exit; without sanitizers nothing calls them.
//
// use_tls=0: LeakSanitizer in GCC 12 reads glibc 2.36's dynamic TLS vector wrongly once enough
// libraries with thread-local storage are loaded (hipRTC, comgr and LLVM through dlopen): its
// tracer follows a bogus "DTLS" range and dies with "Tracer caught signal 11", which fails the
// process at exit after it did its work right. Whether it happens depends on the heap's layout,
// so it comes and goes with unrelated changes. Not scanning thread-local storage avoids it, and
// can only add reports (memory reachable only from TLS then counts as leaked), never hide one.
// The suppressions name the third-party libraries whose per-thread and per-process caches are
// such memory (LLVM, Mesa's lavapipe, the Vulkan loader and validation layer, hipRTC, comgr and
// NVRTC keep caches that live until the process ends); cubecc's own allocations are still
// checked.
//
//===-----------------------------------------------------------------------------------------===//

extern "C" __attribute__((used)) const char *__lsan_default_options() {
  return "use_tls=0:print_suppressions=0";
}

extern "C" __attribute__((used)) const char *__lsan_default_suppressions() {
  return "leak:_dlerror_run\n" // dlerror's message, kept per thread by glibc
         "leak:_dl_exception_create\n"
         "leak:dl_open_worker\n" // the dynamic loader's own lists for a dlopen
         // ... and its global scope, grown by a dlopen with RTLD_GLOBAL (oneTBB opens its
         // allocator so); the unwinder stops in the loader before reaching dl_open_worker
         "leak:add_to_global_resize\n"
         "leak:pthread_setspecific\n" // pthread keys' blocks, kept in the thread's descriptor
         "leak:libamdhip64.so\n"
         "leak:libamd_comgr.so\n"
         "leak:libLLVM\n"
         "leak:libnvrtc\n"
         "leak:libvulkan_lvp.so\n"
         "leak:libvulkan.so\n"
         "leak:libVkLayer_khronos_validation.so\n";
}
