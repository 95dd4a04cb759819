//===- cuda_device.cpp - NVIDIA GPUs through the CUDA driver API, opened with dlopen ----------===//
//
// What is CUDA's own: the driver library (opened once per process and per library path, never
// closed: unloading a driver that still holds contexts is a crash waiting to happen), its entry
// points behind the shared device's table (gpu::Driver), the device's attributes and sm_XY arch,
// the binary formats (CUBIN for the arch, else PTX for the driver to JIT) and NVRTC. Everything
// else (memory, streams, launches, graphs, errors, the lost context) is the shared implementation
// in runtime/gpu_common. Only the few types and constants used here are declared (from the CUDA
// driver API reference), so building cubecc needs neither CUDA headers nor a driver.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/cuda_device.h"
#include "gpu_common/gpu_device.h"
#include "src/symbols.h"

#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

namespace cubecc::runtime {

namespace {

//===- The driver API: the types, constants and entry points used here -----------------------===//

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;

// CUdevice_attribute
constexpr int kAttrMaxThreadsPerBlock = 1;
constexpr int kAttrMaxBlockDimX = 2; // Y = 3, Z = 4
constexpr int kAttrMaxGridDimX = 5;  // Y = 6, Z = 7
constexpr int kAttrMaxSharedMemoryPerBlock = 8;
constexpr int kAttrWarpSize = 10;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kAttrMaxSharedMemoryPerBlockOptin = 97;
// CUfunction_attribute
constexpr int kFuncMaxThreadsPerBlock = 0;
constexpr int kFuncSharedSizeBytes = 1;
constexpr int kFuncNumRegs = 4;
constexpr int kFuncMaxDynamicSharedSizeBytes = 8;
// CUjit_option
constexpr int kJitInfoLogBuffer = 3;
constexpr int kJitInfoLogBufferSizeBytes = 4;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDefault = 0x0;
constexpr unsigned kEventDisableTiming = 0x2;
// CUstreamCaptureMode: only this thread's unsafe calls are refused during a capture.
constexpr int kCaptureModeThreadLocal = 1;

/// What the codes mean (CUresult in cuda.h).
const gpu::ResultCodes kCodes{
    .not_ready = 600, // CUDA_ERROR_NOT_READY
    .out_of_memory = {2},
    // NOT_INITIALIZED, DEINITIALIZED, STUB_LIBRARY, INSUFFICIENT_DRIVER, DEVICE_UNAVAILABLE,
    // NO_DEVICE, INVALID_DEVICE
    .no_device = {3, 4, 34, 35, 46, 100, 101},
    .over_limits = {701}, // LAUNCH_OUT_OF_RESOURCES
    // ECC_UNCORRECTABLE, NVLINK_UNCORRECTABLE, ILLEGAL_ADDRESS, LAUNCH_TIMEOUT, ASSERT,
    // HARDWARE_STACK_ERROR, ILLEGAL_INSTRUCTION, MISALIGNED_ADDRESS, INVALID_ADDRESS_SPACE,
    // INVALID_PC, LAUNCH_FAILED: "the process must be terminated and relaunched" for the context
    .sticky = {214, 220, 700, 702, 710, 714, 715, 716, 717, 718, 719},
};

/// The names of the errors a user is likely to meet, for when the driver cannot name them (the
/// toolkit's stub library answers every call, cuGetErrorName included, with error 34).
const char *known_error_name(CUresult r) {
  switch (r) {
  case 1:
    return "CUDA_ERROR_INVALID_VALUE";
  case 2:
    return "CUDA_ERROR_OUT_OF_MEMORY";
  case 3:
    return "CUDA_ERROR_NOT_INITIALIZED";
  case 4:
    return "CUDA_ERROR_DEINITIALIZED";
  case 34:
    return "CUDA_ERROR_STUB_LIBRARY";
  case 35:
    return "CUDA_ERROR_INSUFFICIENT_DRIVER";
  case 36:
    return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
  case 46:
    return "CUDA_ERROR_DEVICE_UNAVAILABLE";
  case 100:
    return "CUDA_ERROR_NO_DEVICE";
  case 101:
    return "CUDA_ERROR_INVALID_DEVICE";
  case 200:
    return "CUDA_ERROR_INVALID_IMAGE";
  case 201:
    return "CUDA_ERROR_INVALID_CONTEXT";
  case 209:
    return "CUDA_ERROR_NO_BINARY_FOR_GPU";
  case 218:
    return "CUDA_ERROR_INVALID_PTX";
  case 222:
    return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
  case 400:
    return "CUDA_ERROR_INVALID_HANDLE";
  case 500:
    return "CUDA_ERROR_NOT_FOUND";
  case 700:
    return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case 701:
    return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  case 719:
    return "CUDA_ERROR_LAUNCH_FAILED";
  case 803:
    return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
  case 999:
    return "CUDA_ERROR_UNKNOWN";
  default:
    return nullptr;
  }
}

/// The entry points, looked up by their exported (versioned) names.
struct Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuDevicePrimaryCtxReset)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncGetAttribute)(int *, int, CUfunction);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  // Graphs (CUDA 11.4+); when one is missing graphs fall back to recorded launches.
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  bool graphs = false;
};

template <class T> T as(void *handle) {
  return static_cast<T>(handle);
}

/// A loaded driver library, or why it could not be loaded; the shared device's table.
class CudaDriver final : public gpu::Driver {
public:
  std::string path;
  std::string error; ///< non-empty: the library is unusable ("no device: cuda: ...")
  Api api{};

  const char *backend() const override { return "cuda"; }
  std::string describe(CUresult r) const override {
    const char *name = nullptr, *text = nullptr;
    if (api.cuGetErrorName && api.cuGetErrorName(r, &name) != CUDA_SUCCESS)
      name = nullptr;
    if (api.cuGetErrorString && api.cuGetErrorString(r, &text) != CUDA_SUCCESS)
      text = nullptr;
    if (!name)
      name = known_error_name(r);
    std::string out = name ? std::string(name) : fmt::format("CUDA error {}", r);
    if (text && *text)
      out += fmt::format(" ({})", text);
    return out;
  }
  const gpu::ResultCodes &codes() const override { return kCodes; }
  bool has_graphs() const override { return api.graphs; }

  CUresult retain_context(int ordinal, void **context) const override {
    CUdevice device = 0;
    CUcontext c = nullptr;
    CUresult r = api.cuDeviceGet(&device, ordinal);
    if (r == CUDA_SUCCESS)
      r = api.cuDevicePrimaryCtxRetain(&c, device);
    *context = c;
    return r;
  }
  void release_context(int ordinal) const override {
    CUdevice device = 0;
    if (api.cuDeviceGet(&device, ordinal) == CUDA_SUCCESS)
      api.cuDevicePrimaryCtxRelease(device);
  }
  CUresult reset_context(int ordinal) const override {
    CUdevice device = 0;
    CUresult r = api.cuDeviceGet(&device, ordinal);
    return r == CUDA_SUCCESS ? api.cuDevicePrimaryCtxReset(device) : r;
  }
  CUresult enter(int, void *context, intptr_t *) const override {
    return api.cuCtxPushCurrent(as<CUcontext>(context));
  }
  void leave(int, intptr_t) const override {
    CUcontext popped = nullptr;
    api.cuCtxPopCurrent(&popped);
  }
  CUresult synchronize_context() const override { return api.cuCtxSynchronize(); }

  CUresult allocate(gpu::Pointer *pointer, size_t bytes) const override {
    CUdeviceptr p = 0;
    CUresult r = api.cuMemAlloc(&p, bytes);
    *pointer = p;
    return r;
  }
  CUresult free(gpu::Pointer pointer) const override { return api.cuMemFree(pointer); }
  CUresult copy_to_device(gpu::Pointer dst, const void *src, size_t bytes,
                          gpu::Stream s) const override {
    return api.cuMemcpyHtoDAsync(dst, src, bytes, as<CUstream>(s));
  }
  CUresult copy_to_host(void *dst, gpu::Pointer src, size_t bytes, gpu::Stream s) const override {
    return api.cuMemcpyDtoHAsync(dst, src, bytes, as<CUstream>(s));
  }

  CUresult create_stream(gpu::Stream *stream) const override {
    CUstream s = nullptr;
    CUresult r = api.cuStreamCreate(&s, kStreamNonBlocking);
    *stream = s;
    return r;
  }
  CUresult destroy_stream(gpu::Stream s) const override {
    return api.cuStreamDestroy(as<CUstream>(s));
  }
  CUresult synchronize_stream(gpu::Stream s) const override {
    return api.cuStreamSynchronize(as<CUstream>(s));
  }
  CUresult wait_event(gpu::Stream s, gpu::Event e) const override {
    return api.cuStreamWaitEvent(as<CUstream>(s), as<CUevent>(e), 0);
  }
  CUresult create_event(gpu::Event *event, bool timing) const override {
    CUevent e = nullptr;
    CUresult r = api.cuEventCreate(&e, timing ? kEventDefault : kEventDisableTiming);
    *event = e;
    return r;
  }
  CUresult destroy_event(gpu::Event e) const override { return api.cuEventDestroy(as<CUevent>(e)); }
  CUresult record_event(gpu::Event e, gpu::Stream s) const override {
    return api.cuEventRecord(as<CUevent>(e), as<CUstream>(s));
  }
  CUresult query_event(gpu::Event e) const override { return api.cuEventQuery(as<CUevent>(e)); }
  CUresult synchronize_event(gpu::Event e) const override {
    return api.cuEventSynchronize(as<CUevent>(e));
  }
  CUresult elapsed_ms(float *ms, gpu::Event start, gpu::Event end) const override {
    return api.cuEventElapsedTime(ms, as<CUevent>(start), as<CUevent>(end));
  }

  CUresult load_module(gpu::Module *module, const std::string &image,
                       std::string *log) const override {
    std::string error_log(16384, '\0'), info_log(16384, '\0');
    int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes, kJitInfoLogBuffer,
                     kJitInfoLogBufferSizeBytes};
    void *values[] = {error_log.data(), reinterpret_cast<void *>(uintptr_t(error_log.size())),
                      info_log.data(), reinterpret_cast<void *>(uintptr_t(info_log.size()))};
    CUmodule m = nullptr;
    // PTX must be NUL-terminated: std::string's c_str() is.
    CUresult r = api.cuModuleLoadDataEx(&m, image.c_str(), 4, options, values);
    *module = m;
    *log = error_log.c_str();
    return r;
  }
  CUresult unload_module(gpu::Module m) const override {
    return api.cuModuleUnload(as<CUmodule>(m));
  }
  CUresult get_function(gpu::Function *function, gpu::Module m, const char *name) const override {
    CUfunction f = nullptr;
    CUresult r = api.cuModuleGetFunction(&f, as<CUmodule>(m), name);
    *function = f;
    return r;
  }
  CUresult function_attribute(int *value, gpu::FunctionAttribute which,
                              gpu::Function f) const override {
    int attribute = which == gpu::FunctionAttribute::MaxThreadsPerBlock  ? kFuncMaxThreadsPerBlock
                    : which == gpu::FunctionAttribute::StaticSharedBytes ? kFuncSharedSizeBytes
                                                                         : kFuncNumRegs;
    return api.cuFuncGetAttribute(value, attribute, as<CUfunction>(f));
  }
  CUresult set_max_dynamic_shared(gpu::Function f, int bytes) const override {
    return api.cuFuncSetAttribute(as<CUfunction>(f), kFuncMaxDynamicSharedSizeBytes, bytes);
  }
  CUresult launch(gpu::Function f, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
                  unsigned dynamic_shared, gpu::Stream s,
                  gpu::PackedArguments &arguments) const override {
    // kernelParams: a pointer to each parameter; the driver knows each one's size.
    arguments.pointers.clear();
    for (size_t offset : arguments.offsets)
      arguments.pointers.push_back(arguments.bytes.data() + offset);
    return api.cuLaunchKernel(
        as<CUfunction>(f), grid[0], grid[1], grid[2], block[0], block[1], block[2], dynamic_shared,
        as<CUstream>(s), arguments.pointers.empty() ? nullptr : arguments.pointers.data(), nullptr);
  }

  CUresult begin_capture(gpu::Stream s) const override {
    return api.cuStreamBeginCapture(as<CUstream>(s), kCaptureModeThreadLocal);
  }
  CUresult end_capture(gpu::Stream s, gpu::Graph *graph) const override {
    CUgraph g = nullptr;
    CUresult r = api.cuStreamEndCapture(as<CUstream>(s), &g);
    *graph = g;
    return r;
  }
  CUresult instantiate_graph(gpu::GraphExec *exec, gpu::Graph graph) const override {
    CUgraphExec e = nullptr;
    CUresult r = api.cuGraphInstantiateWithFlags(&e, as<CUgraph>(graph), 0);
    *exec = e;
    return r;
  }
  CUresult launch_graph(gpu::GraphExec exec, gpu::Stream s) const override {
    return api.cuGraphLaunch(as<CUgraphExec>(exec), as<CUstream>(s));
  }
  CUresult destroy_graph_exec(gpu::GraphExec exec) const override {
    return api.cuGraphExecDestroy(as<CUgraphExec>(exec));
  }
  CUresult destroy_graph(gpu::Graph graph) const override {
    return api.cuGraphDestroy(as<CUgraph>(graph));
  }
};

void load_driver(CudaDriver &d, const std::string &path, bool from_env) {
  d.path = path;
  dlerror();
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    d.error = from_env ? fmt::format("no device: cuda: cannot load CUBECC_CUDA_LIBRARY={}: {}",
                                     path, why ? why : "dlopen failed")
                       : fmt::format("no device: cuda: {} not found (no NVIDIA driver)", path);
    return;
  }
  SymbolLoader symbols(library);
  auto need = [&](auto &slot, std::initializer_list<const char *> names) {
    symbols.need(slot, names);
  };
  Api &a = d.api;
  need(a.cuInit, {"cuInit"});
  need(a.cuDriverGetVersion, {"cuDriverGetVersion"});
  need(a.cuGetErrorName, {"cuGetErrorName"});
  need(a.cuGetErrorString, {"cuGetErrorString"});
  need(a.cuDeviceGetCount, {"cuDeviceGetCount"});
  need(a.cuDeviceGet, {"cuDeviceGet"});
  need(a.cuDeviceGetName, {"cuDeviceGetName"});
  need(a.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  need(a.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"});
  need(a.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  need(a.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
  need(a.cuDevicePrimaryCtxReset, {"cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset"});
  need(a.cuCtxPushCurrent, {"cuCtxPushCurrent_v2"});
  need(a.cuCtxPopCurrent, {"cuCtxPopCurrent_v2"});
  need(a.cuCtxSynchronize, {"cuCtxSynchronize"});
  need(a.cuStreamCreate, {"cuStreamCreate"});
  need(a.cuStreamDestroy, {"cuStreamDestroy_v2"});
  need(a.cuStreamSynchronize, {"cuStreamSynchronize"});
  need(a.cuStreamWaitEvent, {"cuStreamWaitEvent"});
  need(a.cuEventCreate, {"cuEventCreate"});
  need(a.cuEventDestroy, {"cuEventDestroy_v2"});
  need(a.cuEventRecord, {"cuEventRecord"});
  need(a.cuEventQuery, {"cuEventQuery"});
  need(a.cuEventSynchronize, {"cuEventSynchronize"});
  // CUDA 12.8 added the _v2 (the CUDA 13 headers' cuEventElapsedTime); older drivers lack it.
  need(a.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  need(a.cuMemAlloc, {"cuMemAlloc_v2"});
  need(a.cuMemFree, {"cuMemFree_v2"});
  need(a.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"});
  need(a.cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"});
  need(a.cuModuleLoadDataEx, {"cuModuleLoadDataEx"});
  need(a.cuModuleUnload, {"cuModuleUnload"});
  need(a.cuModuleGetFunction, {"cuModuleGetFunction"});
  need(a.cuFuncGetAttribute, {"cuFuncGetAttribute"});
  need(a.cuFuncSetAttribute, {"cuFuncSetAttribute"});
  need(a.cuLaunchKernel, {"cuLaunchKernel"});
  if (const std::string &missing = symbols.missing(); !missing.empty())
    d.error =
        fmt::format("no device: cuda: {} lacks {} (a driver older than CUDA 11?)", path, missing);
  SymbolLoader graph_symbols(library);
  graph_symbols.need(a.cuStreamBeginCapture, {"cuStreamBeginCapture_v2"});
  graph_symbols.need(a.cuStreamEndCapture, {"cuStreamEndCapture"});
  graph_symbols.need(a.cuGraphInstantiateWithFlags, {"cuGraphInstantiateWithFlags"});
  graph_symbols.need(a.cuGraphLaunch, {"cuGraphLaunch"});
  graph_symbols.need(a.cuGraphExecDestroy, {"cuGraphExecDestroy"});
  graph_symbols.need(a.cuGraphDestroy, {"cuGraphDestroy"});
  a.graphs = graph_symbols.missing().empty();
}

/// The driver at `CUBECC_CUDA_LIBRARY` or libcuda.so.1, loaded once per path and kept.
const CudaDriver &driver() {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<CudaDriver>> drivers;
  const char *env = std::getenv("CUBECC_CUDA_LIBRARY");
  bool from_env = env && *env;
  std::string path = from_env ? env : "libcuda.so.1";
  std::lock_guard lock(mutex);
  std::unique_ptr<CudaDriver> &d = drivers[path];
  if (!d) {
    d = std::make_unique<CudaDriver>();
    load_driver(*d, path, from_env);
  }
  return *d;
}

/// Opens the device CUBECC_CUDA_DEVICE names (default 0) and reads what the shared device needs.
gpu::Setup open_setup() {
  const CudaDriver &driver = runtime::driver();
  if (!driver.error.empty())
    throw Error(ErrorKind::NoDevice, driver.error);
  const Api &a = driver.api;
  auto fail = [&](CUresult r, const char *call) {
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: cuda: {} failed: {}", call, driver.describe(r)));
  };

  CUresult r = a.cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: cuda: {} from cuInit: {} is the CUDA toolkit's stub "
                            "library, not an NVIDIA driver",
                            driver.describe(r), driver.path));
  if (r == CUDA_ERROR_NO_DEVICE)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: cuda: no CUDA device (cuInit: {})", driver.describe(r)));
  if (r != CUDA_SUCCESS)
    fail(r, "cuInit");
  int count = 0;
  if ((r = a.cuDeviceGetCount(&count)) != CUDA_SUCCESS)
    fail(r, "cuDeviceGetCount");
  if (count <= 0)
    throw Error(ErrorKind::NoDevice, "no device: cuda: no CUDA device");

  gpu::Setup s;
  s.driver = &driver;
  if (const char *env = std::getenv("CUBECC_CUDA_DEVICE"); env && *env) {
    char *end = nullptr;
    unsigned long value = std::strtoul(env, &end, 10);
    if (*end != '\0' || value >= static_cast<unsigned long>(count))
      throw Error(ErrorKind::NoDevice,
                  fmt::format("no device: cuda: CUBECC_CUDA_DEVICE={} is not a device index "
                              "(there are {} CUDA devices)",
                              env, count));
    s.ordinal = static_cast<int>(value);
  }
  CUdevice device = 0;
  if ((r = a.cuDeviceGet(&device, s.ordinal)) != CUDA_SUCCESS)
    fail(r, "cuDeviceGet");

  char name[256] = {};
  if ((r = a.cuDeviceGetName(name, sizeof(name) - 1, device)) != CUDA_SUCCESS)
    fail(r, "cuDeviceGetName");
  auto attribute = [&](int which, const char *what) {
    int value = 0;
    CUresult ar = a.cuDeviceGetAttribute(&value, which, device);
    if (ar != CUDA_SUCCESS)
      throw Error(ErrorKind::NoDevice,
                  fmt::format("no device: cuda: cuDeviceGetAttribute({}) failed: {}", what,
                              driver.describe(ar)));
    return value;
  };
  int major = attribute(kAttrComputeCapabilityMajor, "compute capability major");
  int minor = attribute(kAttrComputeCapabilityMinor, "compute capability minor");
  int warp = attribute(kAttrWarpSize, "warp size");
  s.max_threads = attribute(kAttrMaxThreadsPerBlock, "max threads per block");
  s.max_shared = attribute(kAttrMaxSharedMemoryPerBlock, "max shared memory per block");
  s.max_shared_optin = attribute(kAttrMaxSharedMemoryPerBlockOptin, "opt-in shared memory");
  for (int i = 0; i < 3; ++i) {
    s.max_block[i] = attribute(kAttrMaxBlockDimX + i, "max block dimension");
    s.max_grid[i] = attribute(kAttrMaxGridDimX + i, "max grid dimension");
  }
  int version = 0;
  if ((r = a.cuDriverGetVersion(&version)) != CUDA_SUCCESS)
    fail(r, "cuDriverGetVersion");
  size_t total_memory = 0;
  if ((r = a.cuDeviceTotalMem(&total_memory, device)) != CUDA_SUCCESS)
    fail(r, "cuDeviceTotalMem");

  s.arch = fmt::format("sm_{}{}", major, minor);
  DeviceInfo &info = s.info;
  info.backend = "cuda";
  info.name = name;
  info.driver =
      fmt::format("CUDA driver {}.{} ({})", version / 1000, version % 1000 / 10, driver.path);
  info.vendor = "NVIDIA";
  info.arch = s.arch;
  info.subgroup_size = static_cast<uint32_t>(warp);
  info.max_buffer_bytes = total_memory;
  // cuEventElapsedTime has a resolution of about half a microsecond.
  info.timestamp_period_ns = 500;
  codegen::TargetFeatures &f = info.features;
  f = codegen::cuda_features(s.arch);
  f.target = "cuda:" + s.arch;
  f.subgroup_size = static_cast<uint32_t>(warp);
  f.linear_subgroups = true;
  // Beyond the 48 KiB a block gets by default, the kernel opts in at load (gpu_device.cpp).
  f.max_shared_bytes = std::min<uint32_t>(
      f.max_shared_bytes, static_cast<uint32_t>(std::max(s.max_shared, s.max_shared_optin)));
  f.max_workgroup_invocations =
      std::min<uint32_t>(f.max_workgroup_invocations, static_cast<uint32_t>(s.max_threads));
  for (int i = 0; i < 3; ++i)
    f.max_workgroup_size[i] =
        std::min<uint32_t>(f.max_workgroup_size[i], static_cast<uint32_t>(s.max_block[i]));
  return s;
}

} // namespace

struct CudaDevice::Impl {
  std::shared_ptr<gpu::Core> core;
  std::once_flag binary_targets_once;
  std::vector<BinaryTarget> binary_targets; ///< what load_binary takes, made on first need
};

//===- CudaDevice -----------------------------------------------------------------------------===//

CudaDevice::CudaDevice(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<CudaDevice> CudaDevice::open() {
  auto impl = std::make_shared<Impl>();
  impl->core = gpu::Core::open(open_setup());
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(impl)));
}

CudaDevice::~CudaDevice() = default;

const DeviceInfo &CudaDevice::info() const {
  return impl_->core->info();
}

const std::string &CudaDevice::arch() const {
  return impl_->core->arch();
}

std::unique_ptr<DeviceStream> CudaDevice::create_stream() {
  return impl_->core->create_stream();
}

DeviceMemory CudaDevice::allocate(uint64_t bytes) {
  return impl_->core->allocate(bytes);
}

void CudaDevice::free(DeviceMemory memory) {
  impl_->core->free(memory);
}

DeviceMemory CudaDevice::adopt_memory(const ExternalMemory &memory) {
  if (memory.kind != ExternalMemory::Kind::Cuda)
    return Device::adopt_memory(memory);
  return impl_->core->adopt_memory(memory);
}

void CudaDevice::release_adopted(DeviceMemory) {
  // Nothing to do: no queued work uses it any more (the Runtime's deletion queue).
}

ExternalMemory CudaDevice::native_memory(const DeviceMemory &memory) const {
  return ExternalMemory::cuda(reinterpret_cast<uintptr_t>(memory.handle), memory.bytes);
}

std::unique_ptr<CompiledKernel> CudaDevice::compile(const ir::Kernel &kernel) {
  impl_->core->check_alive();
  std::vector<ir::Diagnostic> errors;
  // Only the CUBIN for this device's arch: compile_cuda accepts only archs NVRTC knows, so it
  // always exists, and the PTX (a second NVRTC run) would never be loaded.
  std::optional<codegen::CudaBinary> binary =
      codegen::compile_cuda(kernel, {arch()}, errors, codegen::CudaOutputs::Cubins);
  if (!binary)
    throw Error(ErrorKind::Compile,
                fmt::format("{}: cannot compile kernel '{}':\n{}", info().features.target,
                            kernel.name(), ir::to_string(errors)),
                errors);
  return load(*binary, ErrorKind::Compile);
}

std::vector<BinaryTarget> CudaDevice::binary_targets() const {
  // The CUBIN for this arch first, then PTX for any virtual arch it can JIT, newest first. Made
  // on the first environment lookup (asking NVRTC its version is not start-up work), then kept.
  Impl &d = *impl_;
  std::call_once(d.binary_targets_once, [&d] {
    const std::string &arch = d.core->arch();
    std::string toolkit = codegen::cuda_toolkit();
    d.binary_targets.push_back({"cuda:" + arch, "cubin", "", toolkit});
    int number = std::stoi(arch.substr(3)); // "sm_90a" -> 90
    static constexpr int kVirtualArchs[] = {120, 100, 90, 89, 87, 86, 80, 75, 72, 70, 62, 61, 60};
    for (int v : kVirtualArchs)
      if (v <= number)
        d.binary_targets.push_back({fmt::format("cuda:compute_{}", v), "ptx", "", toolkit});
  });
  return d.binary_targets;
}

std::unique_ptr<CompiledKernel> CudaDevice::load_binary(const KernelBinary &binary) {
  codegen::CudaBinary cuda;
  cuda.source.abi = binary.abi;
  cuda.source.entry = binary.entry;
  if (binary.target.format == "cubin") {
    cuda.cubins.push_back({arch(), std::string(binary.bytes)});
  } else if (binary.target.format == "ptx") {
    cuda.ptx = std::string(binary.bytes);
    cuda.ptx_arch = binary.target.target.substr(binary.target.target.find(':') + 1);
  } else {
    throw Error(ErrorKind::Environment,
                fmt::format("{}: kernel '{}': cannot load a {} binary", info().features.target,
                            binary.abi.name, binary.target.format));
  }
  return load(cuda, ErrorKind::Environment);
}

std::unique_ptr<CompiledKernel> CudaDevice::compile_binary(const codegen::CudaBinary &binary) {
  return load(binary, ErrorKind::Environment);
}

std::unique_ptr<CompiledKernel> CudaDevice::load(const codegen::CudaBinary &binary,
                                                 ErrorKind refused) {
  // The CUBIN for this device, else the PTX for the driver to compile.
  const std::string *image = nullptr;
  std::string loaded_from;
  for (const codegen::CudaBinary::Cubin &cubin : binary.cubins)
    if (cubin.arch == arch() && !cubin.bytes.empty()) {
      image = &cubin.bytes;
      loaded_from = "cubin " + cubin.arch;
    }
  if (!image && !binary.ptx.empty()) {
    image = &binary.ptx;
    loaded_from = "ptx " + binary.ptx_arch;
  }
  if (!image)
    throw Error(refused, fmt::format("{}: kernel '{}': the binary has neither a CUBIN for {} nor "
                                     "PTX",
                                     info().features.target, binary.source.abi.name, arch()));
  return impl_->core->load_module(binary.source.abi, binary.source.entry, *image, loaded_from,
                                  refused);
}

const DeviceKind &cuda_device_kind() {
  static const DeviceKind kind{
      "cuda", DeviceClass::Gpu, [] { return std::unique_ptr<Device>(CudaDevice::open()); }, {}};
  return kind;
}

} // namespace cubecc::runtime
