//===- hip_device.cpp - AMD GPUs through the HIP runtime, opened with dlopen ------------------===//
//
// What is HIP's own: the runtime library (opened once per process and per library path, never
// closed), its entry points behind the shared device's table (gpu::Driver), the device's
// attributes and gfx arch, the code-object format and hipRTC. Everything else (memory, streams,
// launches, graphs, errors, the lost context) is the shared implementation in runtime/gpu_common.
// Only the few types and constants used here are declared (from the HIP runtime API reference),
// so building cubecc needs neither ROCm headers nor a GPU. hipDeviceProp_t changed layout between
// ROCm 5 and 6, so the only field read from it, gcnArchName, is found by content: the properties
// are read into a large zeroed block and the first NUL-terminated "gfx..." string in it is the
// name.
//
// HIP has no context to push: the device is made current around each call with hipSetDevice and
// the caller's current device restored. Kernel arguments are passed as one packed argument buffer
// (HIP_LAUNCH_PARAM_BUFFER_POINTER), laid out with the C alignment of each parameter, which is
// how AMD kernels read them. A faulting kernel usually aborts the process on ROCm (the HSA
// runtime's default); where it returns an error instead, the context is lost and reset as on CUDA.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/hip_device.h"
#include "gpu_common/gpu_device.h"
#include "src/symbols.h"

#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace cubecc::runtime {

namespace {

//===- The HIP API: the types, constants and entry points used here ---------------------------===//

using hipError_t = int;
using hipModule_t = struct ihipModule_t *;
using hipFunction_t = struct ihipModuleSymbol_t *;
using hipStream_t = struct ihipStream_t *;
using hipEvent_t = struct ihipEvent_t *;
using hipGraph_t = struct ihipGraph *;
using hipGraphExec_t = struct hipGraphExec *;

constexpr hipError_t hipSuccess = 0;

// hipDeviceAttribute_t (the same values in ROCm 5 and 6)
constexpr int kAttrMaxBlockDimX = 26; // Y = 27, Z = 28
constexpr int kAttrMaxGridDimX = 29;  // Y = 30, Z = 31
constexpr int kAttrMaxThreadsPerBlock = 56;
constexpr int kAttrMaxSharedMemoryPerBlock = 74;
constexpr int kAttrWarpSize = 87;
// hipFunction_attribute
constexpr int kFuncMaxThreadsPerBlock = 0;
constexpr int kFuncSharedSizeBytes = 1;
constexpr int kFuncNumRegs = 4;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDefault = 0x0;
constexpr unsigned kEventDisableTiming = 0x2;
// hipStreamCaptureMode: Global = 0, ThreadLocal = 1, Relaxed = 2
constexpr int kCaptureModeThreadLocal = 1;
void *const kLaunchParamBufferPointer = reinterpret_cast<void *>(0x1);
void *const kLaunchParamBufferSize = reinterpret_cast<void *>(0x2);
void *const kLaunchParamEnd = reinterpret_cast<void *>(0x3);

/// What the codes mean (hipError_t in hip_runtime_api.h; most share CUDA's numbers).
const gpu::ResultCodes kCodes{
    .not_ready = 600, // hipErrorNotReady
    .out_of_memory = {2},
    // hipErrorNotInitialized, hipErrorDeinitialized, hipErrorInsufficientDriver,
    // hipErrorNoDevice, hipErrorInvalidDevice
    .no_device = {3, 4, 35, 100, 101},
    .over_limits = {701}, // hipErrorLaunchOutOfResources
    // hipErrorECCNotCorrectable, hipErrorIllegalAddress, hipErrorLaunchTimeOut, hipErrorAssert,
    // hipErrorHardwareStackError, hipErrorIllegalInstruction, hipErrorMisalignedAddress,
    // hipErrorInvalidAddressSpace, hipErrorInvalidPc, hipErrorLaunchFailure
    .sticky = {214, 700, 702, 710, 714, 715, 716, 717, 718, 719},
};

struct Api {
  hipError_t (*hipInit)(unsigned);
  hipError_t (*hipRuntimeGetVersion)(int *);
  const char *(*hipGetErrorName)(hipError_t);
  const char *(*hipGetErrorString)(hipError_t);
  hipError_t (*hipGetDeviceCount)(int *);
  hipError_t (*hipGetDevice)(int *);
  hipError_t (*hipSetDevice)(int);
  hipError_t (*hipDeviceGetName)(char *, int, int);
  hipError_t (*hipDeviceGetAttribute)(int *, int, int);
  hipError_t (*hipDeviceTotalMem)(size_t *, int);
  hipError_t (*hipGetDeviceProperties)(void *, int);
  hipError_t (*hipDeviceSynchronize)();
  hipError_t (*hipDevicePrimaryCtxReset)(int);
  hipError_t (*hipStreamCreateWithFlags)(hipStream_t *, unsigned);
  hipError_t (*hipStreamDestroy)(hipStream_t);
  hipError_t (*hipStreamSynchronize)(hipStream_t);
  hipError_t (*hipStreamWaitEvent)(hipStream_t, hipEvent_t, unsigned);
  hipError_t (*hipEventCreateWithFlags)(hipEvent_t *, unsigned);
  hipError_t (*hipEventDestroy)(hipEvent_t);
  hipError_t (*hipEventRecord)(hipEvent_t, hipStream_t);
  hipError_t (*hipEventQuery)(hipEvent_t);
  hipError_t (*hipEventSynchronize)(hipEvent_t);
  hipError_t (*hipEventElapsedTime)(float *, hipEvent_t, hipEvent_t);
  hipError_t (*hipMalloc)(void **, size_t);
  hipError_t (*hipFree)(void *);
  hipError_t (*hipMemcpyHtoDAsync)(void *, const void *, size_t, hipStream_t);
  hipError_t (*hipMemcpyDtoHAsync)(void *, void *, size_t, hipStream_t);
  hipError_t (*hipModuleLoadData)(hipModule_t *, const void *);
  hipError_t (*hipModuleUnload)(hipModule_t);
  hipError_t (*hipModuleGetFunction)(hipFunction_t *, hipModule_t, const char *);
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, unsigned, hipStream_t, void **, void **);
  hipError_t (*hipFuncGetAttribute)(int *, int, hipFunction_t) = nullptr; ///< optional
  // Graphs (HIP 4.5+); when one is missing graphs fall back to recorded launches.
  hipError_t (*hipStreamBeginCapture)(hipStream_t, int) = nullptr;
  hipError_t (*hipStreamEndCapture)(hipStream_t, hipGraph_t *) = nullptr;
  hipError_t (*hipGraphInstantiateWithFlags)(hipGraphExec_t *, hipGraph_t,
                                             unsigned long long) = nullptr;
  hipError_t (*hipGraphLaunch)(hipGraphExec_t, hipStream_t) = nullptr;
  hipError_t (*hipGraphExecDestroy)(hipGraphExec_t) = nullptr;
  hipError_t (*hipGraphDestroy)(hipGraph_t) = nullptr;
  bool graphs = false;
};

template <class T> T as(void *handle) {
  return static_cast<T>(handle);
}

/// A loaded HIP runtime, or why it could not be loaded; the shared device's table.
class HipLibrary final : public gpu::Driver {
public:
  std::string path;
  std::string error; ///< non-empty: unusable ("no device: hip: ...")
  Api api{};

  const char *backend() const override { return "hip"; }
  std::string describe(hipError_t r) const override {
    const char *name = api.hipGetErrorName ? api.hipGetErrorName(r) : nullptr;
    const char *text = api.hipGetErrorString ? api.hipGetErrorString(r) : nullptr;
    std::string out = name && *name ? std::string(name) : fmt::format("HIP error {}", r);
    if (text && *text && std::string_view(text) != out)
      out += fmt::format(" ({})", text);
    return out;
  }
  const gpu::ResultCodes &codes() const override { return kCodes; }
  bool has_graphs() const override { return api.graphs; }

  hipError_t retain_context(int, void **context) const override {
    *context = nullptr; // the device is the context
    return hipSuccess;
  }
  void release_context(int) const override {}
  hipError_t reset_context(int ordinal) const override {
    return api.hipDevicePrimaryCtxReset(ordinal);
  }
  hipError_t enter(int ordinal, void *, intptr_t *saved) const override {
    int previous = -1;
    if (api.hipGetDevice(&previous) != hipSuccess)
      previous = -1;
    *saved = previous;
    return previous == ordinal ? hipSuccess : api.hipSetDevice(ordinal);
  }
  void leave(int ordinal, intptr_t saved) const override {
    if (saved >= 0 && saved != ordinal)
      api.hipSetDevice(static_cast<int>(saved));
  }
  hipError_t synchronize_context() const override { return api.hipDeviceSynchronize(); }

  hipError_t allocate(gpu::Pointer *pointer, size_t bytes) const override {
    void *p = nullptr;
    hipError_t r = api.hipMalloc(&p, bytes);
    *pointer = reinterpret_cast<uintptr_t>(p);
    return r;
  }
  hipError_t free(gpu::Pointer pointer) const override {
    return api.hipFree(reinterpret_cast<void *>(static_cast<uintptr_t>(pointer)));
  }
  hipError_t copy_to_device(gpu::Pointer dst, const void *src, size_t bytes,
                            gpu::Stream s) const override {
    return api.hipMemcpyHtoDAsync(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)), src, bytes,
                                  as<hipStream_t>(s));
  }
  hipError_t copy_to_host(void *dst, gpu::Pointer src, size_t bytes, gpu::Stream s) const override {
    return api.hipMemcpyDtoHAsync(dst, reinterpret_cast<void *>(static_cast<uintptr_t>(src)), bytes,
                                  as<hipStream_t>(s));
  }

  hipError_t create_stream(gpu::Stream *stream) const override {
    hipStream_t s = nullptr;
    hipError_t r = api.hipStreamCreateWithFlags(&s, kStreamNonBlocking);
    *stream = s;
    return r;
  }
  hipError_t destroy_stream(gpu::Stream s) const override {
    return api.hipStreamDestroy(as<hipStream_t>(s));
  }
  hipError_t synchronize_stream(gpu::Stream s) const override {
    return api.hipStreamSynchronize(as<hipStream_t>(s));
  }
  hipError_t wait_event(gpu::Stream s, gpu::Event e) const override {
    return api.hipStreamWaitEvent(as<hipStream_t>(s), as<hipEvent_t>(e), 0);
  }
  hipError_t create_event(gpu::Event *event, bool timing) const override {
    hipEvent_t e = nullptr;
    hipError_t r = api.hipEventCreateWithFlags(&e, timing ? kEventDefault : kEventDisableTiming);
    *event = e;
    return r;
  }
  hipError_t destroy_event(gpu::Event e) const override {
    return api.hipEventDestroy(as<hipEvent_t>(e));
  }
  hipError_t record_event(gpu::Event e, gpu::Stream s) const override {
    return api.hipEventRecord(as<hipEvent_t>(e), as<hipStream_t>(s));
  }
  hipError_t query_event(gpu::Event e) const override {
    return api.hipEventQuery(as<hipEvent_t>(e));
  }
  hipError_t synchronize_event(gpu::Event e) const override {
    return api.hipEventSynchronize(as<hipEvent_t>(e));
  }
  hipError_t elapsed_ms(float *ms, gpu::Event start, gpu::Event end) const override {
    return api.hipEventElapsedTime(ms, as<hipEvent_t>(start), as<hipEvent_t>(end));
  }

  hipError_t load_module(gpu::Module *module, const std::string &image,
                         std::string *log) const override {
    hipModule_t m = nullptr;
    hipError_t r = api.hipModuleLoadData(&m, image.data());
    *module = m;
    log->clear(); // hipModuleLoadData has no log
    return r;
  }
  hipError_t unload_module(gpu::Module m) const override {
    return api.hipModuleUnload(as<hipModule_t>(m));
  }
  hipError_t get_function(gpu::Function *function, gpu::Module m, const char *name) const override {
    hipFunction_t f = nullptr;
    hipError_t r = api.hipModuleGetFunction(&f, as<hipModule_t>(m), name);
    *function = f;
    return r;
  }
  hipError_t function_attribute(int *value, gpu::FunctionAttribute which,
                                gpu::Function f) const override {
    if (!api.hipFuncGetAttribute)
      return 801; // hipErrorNotSupported: an old HIP runtime
    int attribute = which == gpu::FunctionAttribute::MaxThreadsPerBlock  ? kFuncMaxThreadsPerBlock
                    : which == gpu::FunctionAttribute::StaticSharedBytes ? kFuncSharedSizeBytes
                                                                         : kFuncNumRegs;
    return api.hipFuncGetAttribute(value, attribute, as<hipFunction_t>(f));
  }
  hipError_t set_max_dynamic_shared(gpu::Function, int) const override {
    return hipSuccess; // never needed: HIP has no opt-in beyond the per-block maximum
  }
  hipError_t launch(gpu::Function f, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
                    unsigned dynamic_shared, gpu::Stream s,
                    gpu::PackedArguments &arguments) const override {
    arguments.extra = {kLaunchParamBufferPointer, arguments.bytes.data(), kLaunchParamBufferSize,
                       &arguments.size, kLaunchParamEnd};
    return api.hipModuleLaunchKernel(as<hipFunction_t>(f), grid[0], grid[1], grid[2], block[0],
                                     block[1], block[2], dynamic_shared, as<hipStream_t>(s),
                                     nullptr,
                                     arguments.bytes.empty() ? nullptr : arguments.extra.data());
  }

  hipError_t begin_capture(gpu::Stream s) const override {
    return api.hipStreamBeginCapture(as<hipStream_t>(s), kCaptureModeThreadLocal);
  }
  hipError_t end_capture(gpu::Stream s, gpu::Graph *graph) const override {
    hipGraph_t g = nullptr;
    hipError_t r = api.hipStreamEndCapture(as<hipStream_t>(s), &g);
    *graph = g;
    return r;
  }
  hipError_t instantiate_graph(gpu::GraphExec *exec, gpu::Graph graph) const override {
    hipGraphExec_t e = nullptr;
    hipError_t r = api.hipGraphInstantiateWithFlags(&e, as<hipGraph_t>(graph), 0);
    *exec = e;
    return r;
  }
  hipError_t launch_graph(gpu::GraphExec exec, gpu::Stream s) const override {
    return api.hipGraphLaunch(as<hipGraphExec_t>(exec), as<hipStream_t>(s));
  }
  hipError_t destroy_graph_exec(gpu::GraphExec exec) const override {
    return api.hipGraphExecDestroy(as<hipGraphExec_t>(exec));
  }
  hipError_t destroy_graph(gpu::Graph graph) const override {
    return api.hipGraphDestroy(as<hipGraph_t>(graph));
  }
};

void load_runtime(HipLibrary &rt) {
  const char *env = std::getenv("CUBECC_HIP_LIBRARY");
  bool from_env = env && *env;
  std::vector<std::string> candidates;
  if (from_env)
    candidates = {env};
  else
    candidates = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
  void *library = nullptr;
  std::string why;
  for (const std::string &path : candidates) {
    dlerror();
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) {
      rt.path = path;
      break;
    }
    const char *e = dlerror();
    why = e ? e : "dlopen failed";
  }
  if (!library) {
    rt.error = from_env
                   ? fmt::format("no device: hip: cannot load CUBECC_HIP_LIBRARY={}: {}", env, why)
                   : "no device: hip: libamdhip64.so not found (no ROCm HIP runtime)";
    return;
  }
  SymbolLoader symbols(library);
  auto need = [&](auto &slot, std::initializer_list<const char *> names) {
    symbols.need(slot, names);
  };
  Api &a = rt.api;
  need(a.hipInit, {"hipInit"});
  need(a.hipRuntimeGetVersion, {"hipRuntimeGetVersion"});
  need(a.hipGetErrorName, {"hipGetErrorName"});
  need(a.hipGetErrorString, {"hipGetErrorString"});
  need(a.hipGetDeviceCount, {"hipGetDeviceCount"});
  need(a.hipGetDevice, {"hipGetDevice"});
  need(a.hipSetDevice, {"hipSetDevice"});
  need(a.hipDeviceGetName, {"hipDeviceGetName"});
  need(a.hipDeviceGetAttribute, {"hipDeviceGetAttribute"});
  need(a.hipDeviceTotalMem, {"hipDeviceTotalMem"});
  need(a.hipGetDeviceProperties, {"hipGetDevicePropertiesR0600", "hipGetDeviceProperties"});
  need(a.hipDeviceSynchronize, {"hipDeviceSynchronize"});
  need(a.hipDevicePrimaryCtxReset, {"hipDevicePrimaryCtxReset"});
  need(a.hipStreamCreateWithFlags, {"hipStreamCreateWithFlags"});
  need(a.hipStreamDestroy, {"hipStreamDestroy"});
  need(a.hipStreamSynchronize, {"hipStreamSynchronize"});
  need(a.hipStreamWaitEvent, {"hipStreamWaitEvent"});
  need(a.hipEventCreateWithFlags, {"hipEventCreateWithFlags"});
  need(a.hipEventDestroy, {"hipEventDestroy"});
  need(a.hipEventRecord, {"hipEventRecord"});
  need(a.hipEventQuery, {"hipEventQuery"});
  need(a.hipEventSynchronize, {"hipEventSynchronize"});
  need(a.hipEventElapsedTime, {"hipEventElapsedTime"});
  need(a.hipMalloc, {"hipMalloc"});
  need(a.hipFree, {"hipFree"});
  need(a.hipMemcpyHtoDAsync, {"hipMemcpyHtoDAsync"});
  need(a.hipMemcpyDtoHAsync, {"hipMemcpyDtoHAsync"});
  need(a.hipModuleLoadData, {"hipModuleLoadData"});
  need(a.hipModuleUnload, {"hipModuleUnload"});
  need(a.hipModuleGetFunction, {"hipModuleGetFunction"});
  need(a.hipModuleLaunchKernel, {"hipModuleLaunchKernel"});
  if (void *p = dlsym(library, "hipFuncGetAttribute")) // optional
    a.hipFuncGetAttribute = reinterpret_cast<decltype(a.hipFuncGetAttribute)>(p);
  if (const std::string &missing = symbols.missing(); !missing.empty())
    rt.error = fmt::format("no device: hip: {} lacks {}", rt.path, missing);
  SymbolLoader graph_symbols(library);
  graph_symbols.need(a.hipStreamBeginCapture, {"hipStreamBeginCapture"});
  graph_symbols.need(a.hipStreamEndCapture, {"hipStreamEndCapture"});
  graph_symbols.need(a.hipGraphInstantiateWithFlags, {"hipGraphInstantiateWithFlags"});
  graph_symbols.need(a.hipGraphLaunch, {"hipGraphLaunch"});
  graph_symbols.need(a.hipGraphExecDestroy, {"hipGraphExecDestroy"});
  graph_symbols.need(a.hipGraphDestroy, {"hipGraphDestroy"});
  a.graphs = graph_symbols.missing().empty();
}

const HipLibrary &hip_runtime() {
  static std::mutex mutex;
  // By CUBECC_HIP_LIBRARY ("" when unset), loaded once and kept.
  static std::map<std::string, std::unique_ptr<HipLibrary>> runtimes;
  const char *env = std::getenv("CUBECC_HIP_LIBRARY");
  std::string key = env ? env : "";
  std::lock_guard lock(mutex);
  std::unique_ptr<HipLibrary> &rt = runtimes[key];
  if (!rt) {
    rt = std::make_unique<HipLibrary>();
    load_runtime(*rt);
  }
  return *rt;
}

/// The first NUL-terminated "gfx<hex digits>..." string in `block` (gcnArchName), or "".
std::string find_gcn_arch_name(const std::vector<char> &block) {
  for (size_t i = 0; i + 4 < block.size(); ++i) {
    if ((i > 0 && block[i - 1] != '\0') || std::memcmp(&block[i], "gfx", 3) != 0 ||
        !std::isxdigit(static_cast<unsigned char>(block[i + 3])))
      continue;
    size_t end = i;
    while (end < block.size() && block[end] != '\0' &&
           std::isprint(static_cast<unsigned char>(block[end])))
      ++end;
    if (end < block.size() && block[end] == '\0')
      return std::string(&block[i], end - i);
  }
  return {};
}

/// Opens the device CUBECC_HIP_DEVICE names (default 0) and reads what the shared device needs.
gpu::Setup open_setup() {
  const HipLibrary &rt = hip_runtime();
  if (!rt.error.empty())
    throw Error(ErrorKind::NoDevice, rt.error);
  const Api &a = rt.api;
  auto fail = [&](hipError_t r, const char *call) {
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: hip: {} failed: {}", call, rt.describe(r)));
  };

  // Without a GPU, hipInit fails (hipErrorInvalidDevice) before hipGetDeviceCount says why.
  hipError_t init = a.hipInit(0);
  int count = 0;
  hipError_t r = a.hipGetDeviceCount(&count);
  if (r != hipSuccess || count <= 0)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: hip: no AMD GPU (hipGetDeviceCount: {})",
                            r != hipSuccess ? rt.describe(r) : "0 devices"));
  if (init != hipSuccess)
    fail(init, "hipInit");

  gpu::Setup s;
  s.driver = &rt;
  if (const char *env = std::getenv("CUBECC_HIP_DEVICE"); env && *env) {
    char *end = nullptr;
    unsigned long value = std::strtoul(env, &end, 10);
    if (*end != '\0' || value >= static_cast<unsigned long>(count))
      throw Error(ErrorKind::NoDevice,
                  fmt::format("no device: hip: CUBECC_HIP_DEVICE={} is not a device index "
                              "(there are {} HIP devices)",
                              env, count));
    s.ordinal = static_cast<int>(value);
  }
  int device = s.ordinal;

  char name[256] = {};
  if ((r = a.hipDeviceGetName(name, sizeof(name) - 1, device)) != hipSuccess)
    fail(r, "hipDeviceGetName");
  auto attribute = [&](int which, const char *what) {
    int value = 0;
    hipError_t ar = a.hipDeviceGetAttribute(&value, which, device);
    if (ar != hipSuccess)
      throw Error(ErrorKind::NoDevice,
                  fmt::format("no device: hip: hipDeviceGetAttribute({}) failed: {}", what,
                              rt.describe(ar)));
    return value;
  };
  int warp = attribute(kAttrWarpSize, "warp size");
  s.max_threads = attribute(kAttrMaxThreadsPerBlock, "max threads per block");
  s.max_shared = attribute(kAttrMaxSharedMemoryPerBlock, "max shared memory per block");
  s.max_shared_optin = s.max_shared; // HIP has no opt-in beyond it
  for (int i = 0; i < 3; ++i) {
    s.max_block[i] = attribute(kAttrMaxBlockDimX + i, "max block dimension");
    s.max_grid[i] = attribute(kAttrMaxGridDimX + i, "max grid dimension");
  }
  if (warp != 32 && warp != 64)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: hip: {} reports a wavefront of {} (expected 32 or 64; "
                            "a HIP runtime cubecc does not know?)",
                            name, warp));
  // Far larger than hipDeviceProp_t of any ROCm release, zeroed, so a larger struct cannot
  // overrun it and the scan stops at real data.
  std::vector<char> properties(64 * 1024, '\0');
  if ((r = a.hipGetDeviceProperties(properties.data(), device)) != hipSuccess)
    fail(r, "hipGetDeviceProperties");
  std::string arch_name = find_gcn_arch_name(properties); // "gfx90a:sramecc+:xnack-"
  s.arch = arch_name.substr(0, arch_name.find(':'));
  if (s.arch.empty())
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: hip: cannot find the gfx architecture of {} in "
                            "hipGetDeviceProperties",
                            name));
  int version = 0;
  a.hipRuntimeGetVersion(&version);
  size_t total_memory = 0;
  if ((r = a.hipDeviceTotalMem(&total_memory, device)) != hipSuccess)
    fail(r, "hipDeviceTotalMem");

  DeviceInfo &info = s.info;
  info.backend = "hip";
  info.name = name;
  info.vendor = "AMD";
  info.arch = s.arch;
  info.driver = fmt::format("HIP runtime {}.{}.{} ({})", version / 10000000, version / 100000 % 100,
                            version % 100000, rt.path);
  info.subgroup_size = static_cast<uint32_t>(warp);
  info.max_buffer_bytes = total_memory;
  info.timestamp_period_ns = 1000; // hipEventElapsedTime: about a microsecond
  codegen::TargetFeatures &f = info.features;
  f = codegen::hip_features(s.arch);
  f.target = "hip:" + s.arch;
  f.subgroup_size = static_cast<uint32_t>(warp);
  f.linear_subgroups = true;
  f.max_shared_bytes = std::min<uint32_t>(f.max_shared_bytes, static_cast<uint32_t>(s.max_shared));
  f.max_workgroup_invocations =
      std::min<uint32_t>(f.max_workgroup_invocations, static_cast<uint32_t>(s.max_threads));
  for (int i = 0; i < 3; ++i)
    f.max_workgroup_size[i] =
        std::min<uint32_t>(f.max_workgroup_size[i], static_cast<uint32_t>(s.max_block[i]));
  return s;
}

} // namespace

struct HipDevice::Impl {
  std::shared_ptr<gpu::Core> core;
  std::once_flag binary_targets_once;
  std::vector<BinaryTarget> binary_targets; ///< what load_binary takes, made on first need
};

//===- HipDevice ------------------------------------------------------------------------------===//

HipDevice::HipDevice(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<HipDevice> HipDevice::open() {
  auto impl = std::make_shared<Impl>();
  impl->core = gpu::Core::open(open_setup());
  return std::unique_ptr<HipDevice>(new HipDevice(std::move(impl)));
}

HipDevice::~HipDevice() = default;

const DeviceInfo &HipDevice::info() const {
  return impl_->core->info();
}

const std::string &HipDevice::arch() const {
  return impl_->core->arch();
}

std::unique_ptr<DeviceStream> HipDevice::create_stream() {
  return impl_->core->create_stream();
}

DeviceMemory HipDevice::allocate(uint64_t bytes) {
  return impl_->core->allocate(bytes);
}

void HipDevice::free(DeviceMemory memory) {
  impl_->core->free(memory);
}

DeviceMemory HipDevice::adopt_memory(const ExternalMemory &memory) {
  if (memory.kind != ExternalMemory::Kind::Hip)
    return Device::adopt_memory(memory);
  return impl_->core->adopt_memory(memory);
}

void HipDevice::release_adopted(DeviceMemory) {
  // Nothing to do: no queued work uses it any more (the Runtime's deletion queue).
}

ExternalMemory HipDevice::native_memory(const DeviceMemory &memory) const {
  return ExternalMemory::hip(memory.handle, memory.bytes);
}

std::unique_ptr<CompiledKernel> HipDevice::compile(const ir::Kernel &kernel) {
  impl_->core->check_alive();
  std::vector<ir::Diagnostic> errors;
  std::optional<codegen::HipBinary> binary = codegen::compile_hip(kernel, {arch()}, errors);
  if (!binary)
    throw Error(ErrorKind::Compile,
                fmt::format("{}: cannot compile kernel '{}':\n{}", info().features.target,
                            kernel.name(), ir::to_string(errors)),
                errors);
  return load(*binary, ErrorKind::Compile);
}

std::vector<BinaryTarget> HipDevice::binary_targets() const {
  // Made on the first environment lookup (hipRTC's version means loading comgr), then kept.
  Impl &d = *impl_;
  std::call_once(d.binary_targets_once, [&d] {
    d.binary_targets.push_back({"hip:" + d.core->arch(), "hsaco", "", codegen::hip_toolkit()});
  });
  return d.binary_targets;
}

std::unique_ptr<CompiledKernel> HipDevice::load_binary(const KernelBinary &binary) {
  if (binary.target.format != "hsaco")
    throw Error(ErrorKind::Environment,
                fmt::format("{}: kernel '{}': cannot load a {} binary", info().features.target,
                            binary.abi.name, binary.target.format));
  codegen::HipBinary hip;
  hip.source.abi = binary.abi;
  hip.source.entry = binary.entry;
  hip.code_objects.push_back({arch(), std::string(binary.bytes)});
  return load(hip, ErrorKind::Environment);
}

std::unique_ptr<CompiledKernel> HipDevice::compile_binary(const codegen::HipBinary &binary) {
  return load(binary, ErrorKind::Environment);
}

std::unique_ptr<CompiledKernel> HipDevice::load(const codegen::HipBinary &binary,
                                                ErrorKind refused) {
  const std::string *image = nullptr;
  std::string archs;
  for (const codegen::HipBinary::CodeObject &object : binary.code_objects) {
    archs += (archs.empty() ? "" : ", ") + object.arch;
    if (object.arch == arch() && !object.bytes.empty())
      image = &object.bytes;
  }
  if (!image)
    throw Error(refused,
                fmt::format("{}: kernel '{}': the binary has no code object for {} (it has: {})",
                            info().features.target, binary.source.abi.name, arch(),
                            archs.empty() ? "none" : archs));
  return impl_->core->load_module(binary.source.abi, binary.source.entry, *image,
                                  "code object " + arch(), refused);
}

const DeviceKind &hip_device_kind() {
  static const DeviceKind kind{
      "hip", DeviceClass::Gpu, [] { return std::unique_ptr<Device>(HipDevice::open()); }, {}};
  return kind;
}

} // namespace cubecc::runtime
