//===- cuda_device.cpp - NVIDIA GPUs through the CUDA driver API, opened with dlopen ----------===//
//
// The driver is opened once per process (per library path) and never closed: unloading a driver
// that still holds contexts is a crash waiting to happen, and reopening a device stays cheap.
// Only the few types and constants used here are declared (from the CUDA driver API reference),
// so building cubecc needs neither CUDA headers nor a driver.
//
// Per device: the primary context (shared with any CUDA runtime user in the process, pushed
// around each call so the calling thread's current context is left as it was) and one
// non-blocking stream. Launches are queued on the stream between two events; copies are queued
// on it too and waited for, so they are ordered with the launches. synchronize() waits for the
// stream and turns each event pair into a launch time.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/cuda_device.h"
#include "src/symbols.h"

#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_set>

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
// CUstreamCaptureMode: only this thread's unsafe calls are refused during a capture.
constexpr int kCaptureModeThreadLocal = 1;

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
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
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

/// A loaded driver library, or why it could not be loaded.
struct Driver {
  std::string path;
  std::string error; ///< non-empty: the library is unusable ("no device: cuda: ...")
  Api api{};

  std::string describe(CUresult r) const {
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
};

Driver load_driver(const std::string &path, bool from_env) {
  Driver d;
  d.path = path;
  dlerror();
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    d.error = from_env ? fmt::format("no device: cuda: cannot load CUBECC_CUDA_LIBRARY={}: {}",
                                     path, why ? why : "dlopen failed")
                       : fmt::format("no device: cuda: {} not found (no NVIDIA driver)", path);
    return d;
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
  need(a.cuCtxPushCurrent, {"cuCtxPushCurrent_v2"});
  need(a.cuCtxPopCurrent, {"cuCtxPopCurrent_v2"});
  need(a.cuStreamCreate, {"cuStreamCreate"});
  need(a.cuStreamDestroy, {"cuStreamDestroy_v2"});
  need(a.cuStreamSynchronize, {"cuStreamSynchronize"});
  need(a.cuEventCreate, {"cuEventCreate"});
  need(a.cuEventDestroy, {"cuEventDestroy_v2"});
  need(a.cuEventRecord, {"cuEventRecord"});
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
  return d;
}

/// The driver at `CUBECC_CUDA_LIBRARY` or libcuda.so.1, loaded once per path.
const Driver &driver() {
  static std::mutex mutex;
  static std::map<std::string, Driver> drivers;
  const char *env = std::getenv("CUBECC_CUDA_LIBRARY");
  bool from_env = env && *env;
  std::string path = from_env ? env : "libcuda.so.1";
  std::lock_guard lock(mutex);
  auto it = drivers.find(path);
  if (it == drivers.end())
    it = drivers.emplace(path, load_driver(path, from_env)).first;
  return it->second;
}

/// A launch's two events, recorded around it on the device's stream.
struct EventPair {
  CUevent start = nullptr;
  CUevent end = nullptr;
};

} // namespace

struct CudaDevice::Impl {
  /// Launches whose events are kept before their times are collected (by waiting for them).
  static constexpr size_t kMaxPendingLaunches = 1024;

  const Driver *driver = nullptr;
  const Api *api = nullptr;
  DeviceInfo info;
  std::string arch; ///< "sm_90"
  std::once_flag binary_targets_once;
  std::vector<BinaryTarget> binary_targets; ///< what load_binary takes, made on first need
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  int max_grid[3] = {0, 0, 0};
  int max_block[3] = {0, 0, 0};
  int max_threads = 0;
  int max_shared = 0;
  int max_shared_optin = 0;

  std::unordered_set<CUdeviceptr> allocations;
  std::vector<EventPair> free_events;
  std::vector<EventPair> pending; ///< launches queued since their times were last collected
  std::vector<double> completed_times;
  std::vector<double> last_times;

  Impl() = default;
  Impl(const Impl &) = delete;
  Impl &operator=(const Impl &) = delete;
  ~Impl();

  void check(CUresult r, std::string_view what) const {
    if (r != CUDA_SUCCESS)
      throw Error(fmt::format("cuda: {} failed: {}", what, driver->describe(r)));
  }

  /// Makes the device's context current on this thread for the scope of a call.
  class Scope {
  public:
    explicit Scope(const Impl &d) : d_(d) {
      d.check(d.api->cuCtxPushCurrent(d.context), "cuCtxPushCurrent");
    }
    ~Scope() {
      CUcontext popped = nullptr;
      d_.api->cuCtxPopCurrent(&popped);
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    const Impl &d_;
  };

  void open();
  /// Waits for the stream, then turns the pending event pairs into completed launch times.
  void wait(std::string_view why);
  EventPair take_events();
  /// Checks and queues a launch on the stream; `timed` puts it between two events (not during a
  /// graph's capture).
  void enqueue(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
               std::span<const LaunchArg> args, bool timed);
};

//===- Opening --------------------------------------------------------------------------------===//

void CudaDevice::Impl::open() {
  driver = &runtime::driver();
  if (!driver->error.empty())
    throw Error(driver->error);
  api = &driver->api;
  const Api &a = *api;
  auto fail = [&](CUresult r, const char *call) {
    throw Error(fmt::format("no device: cuda: {} failed: {}", call, driver->describe(r)));
  };

  CUresult r = a.cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    throw Error(fmt::format("no device: cuda: {} from cuInit: {} is the CUDA toolkit's stub "
                            "library, not an NVIDIA driver",
                            driver->describe(r), driver->path));
  if (r == CUDA_ERROR_NO_DEVICE)
    throw Error(fmt::format("no device: cuda: no CUDA device (cuInit: {})", driver->describe(r)));
  if (r != CUDA_SUCCESS)
    fail(r, "cuInit");
  int count = 0;
  if ((r = a.cuDeviceGetCount(&count)) != CUDA_SUCCESS)
    fail(r, "cuDeviceGetCount");
  if (count <= 0)
    throw Error("no device: cuda: no CUDA device");

  int index = 0;
  if (const char *env = std::getenv("CUBECC_CUDA_DEVICE"); env && *env) {
    char *end = nullptr;
    unsigned long value = std::strtoul(env, &end, 10);
    if (*end != '\0' || value >= static_cast<unsigned long>(count))
      throw Error(fmt::format("no device: cuda: CUBECC_CUDA_DEVICE={} is not a device index "
                              "(there are {} CUDA devices)",
                              env, count));
    index = static_cast<int>(value);
  }
  if ((r = a.cuDeviceGet(&device, index)) != CUDA_SUCCESS)
    fail(r, "cuDeviceGet");

  char name[256] = {};
  if ((r = a.cuDeviceGetName(name, sizeof(name) - 1, device)) != CUDA_SUCCESS)
    fail(r, "cuDeviceGetName");
  auto attribute = [&](int which, const char *what) {
    int value = 0;
    CUresult ar = a.cuDeviceGetAttribute(&value, which, device);
    if (ar != CUDA_SUCCESS)
      throw Error(fmt::format("no device: cuda: cuDeviceGetAttribute({}) failed: {}", what,
                              driver->describe(ar)));
    return value;
  };
  int major = attribute(kAttrComputeCapabilityMajor, "compute capability major");
  int minor = attribute(kAttrComputeCapabilityMinor, "compute capability minor");
  int warp = attribute(kAttrWarpSize, "warp size");
  max_threads = attribute(kAttrMaxThreadsPerBlock, "max threads per block");
  max_shared = attribute(kAttrMaxSharedMemoryPerBlock, "max shared memory per block");
  max_shared_optin = attribute(kAttrMaxSharedMemoryPerBlockOptin, "opt-in shared memory");
  for (int i = 0; i < 3; ++i) {
    max_block[i] = attribute(kAttrMaxBlockDimX + i, "max block dimension");
    max_grid[i] = attribute(kAttrMaxGridDimX + i, "max grid dimension");
  }
  int version = 0;
  if ((r = a.cuDriverGetVersion(&version)) != CUDA_SUCCESS)
    fail(r, "cuDriverGetVersion");
  size_t total_memory = 0;
  if ((r = a.cuDeviceTotalMem(&total_memory, device)) != CUDA_SUCCESS)
    fail(r, "cuDeviceTotalMem");

  arch = fmt::format("sm_{}{}", major, minor);
  info.backend = "cuda";
  info.name = name;
  info.driver =
      fmt::format("CUDA driver {}.{} ({})", version / 1000, version % 1000 / 10, driver->path);
  info.vendor = "NVIDIA";
  info.arch = arch;
  info.subgroup_size = static_cast<uint32_t>(warp);
  info.max_buffer_bytes = total_memory;
  // cuEventElapsedTime has a resolution of about half a microsecond.
  info.timestamp_period_ns = 500;
  codegen::TargetFeatures &f = info.features;
  f = codegen::cuda_features(arch);
  f.target = "cuda:" + arch;
  f.subgroup_size = static_cast<uint32_t>(warp);
  f.linear_subgroups = true;
  // Static __shared__ arrays are limited to the per-block default (48 KiB).
  f.max_shared_bytes = std::min<uint32_t>(f.max_shared_bytes, static_cast<uint32_t>(max_shared));
  f.max_workgroup_invocations =
      std::min<uint32_t>(f.max_workgroup_invocations, static_cast<uint32_t>(max_threads));
  for (int i = 0; i < 3; ++i)
    f.max_workgroup_size[i] =
        std::min<uint32_t>(f.max_workgroup_size[i], static_cast<uint32_t>(max_block[i]));

  if ((r = a.cuDevicePrimaryCtxRetain(&context, device)) != CUDA_SUCCESS) {
    context = nullptr;
    fail(r, "cuDevicePrimaryCtxRetain");
  }
  if ((r = a.cuCtxPushCurrent(context)) != CUDA_SUCCESS)
    fail(r, "cuCtxPushCurrent");
  r = a.cuStreamCreate(&stream, kStreamNonBlocking);
  CUcontext popped = nullptr;
  a.cuCtxPopCurrent(&popped);
  if (r != CUDA_SUCCESS) {
    stream = nullptr;
    fail(r, "cuStreamCreate");
  }
}

CudaDevice::Impl::~Impl() {
  if (!api || !context)
    return;
  const Api &a = *api;
  if (a.cuCtxPushCurrent(context) == CUDA_SUCCESS) {
    if (stream)
      a.cuStreamSynchronize(stream); // errors were the launches'; reported or not, go on
    for (EventPair &e : pending)
      free_events.push_back(e);
    for (EventPair &e : free_events) {
      a.cuEventDestroy(e.start);
      a.cuEventDestroy(e.end);
    }
    for (CUdeviceptr p : allocations)
      a.cuMemFree(p);
    if (stream)
      a.cuStreamDestroy(stream);
    CUcontext popped = nullptr;
    a.cuCtxPopCurrent(&popped);
  }
  a.cuDevicePrimaryCtxRelease(device);
}

void CudaDevice::Impl::wait(std::string_view why) {
  CUresult r = api->cuStreamSynchronize(stream);
  if (r != CUDA_SUCCESS) {
    // The launches' results are lost; their events go back to the pool.
    free_events.insert(free_events.end(), pending.begin(), pending.end());
    pending.clear();
    throw Error(fmt::format("cuda: a queued launch failed (found by cuStreamSynchronize {}): {}",
                            why, driver->describe(r)));
  }
  for (const EventPair &e : pending) {
    float ms = 0;
    check(api->cuEventElapsedTime(&ms, e.start, e.end), "cuEventElapsedTime");
    completed_times.push_back(double(ms) * 1e6);
    free_events.push_back(e);
  }
  pending.clear();
}

EventPair CudaDevice::Impl::take_events() {
  if (!free_events.empty()) {
    EventPair e = free_events.back();
    free_events.pop_back();
    return e;
  }
  EventPair e;
  check(api->cuEventCreate(&e.start, kEventDefault), "cuEventCreate");
  CUresult r = api->cuEventCreate(&e.end, kEventDefault);
  if (r != CUDA_SUCCESS) {
    api->cuEventDestroy(e.start);
    check(r, "cuEventCreate");
  }
  return e;
}

namespace {

/// A loaded module and its kernel function. Keeps the device's Impl alive: a kernel may outlive
/// the Device.
class CudaKernel final : public CompiledKernel {
public:
  CudaKernel(std::shared_ptr<CudaDevice::Impl> impl, codegen::KernelAbi abi)
      : impl_(std::move(impl)) {
    abi_ = std::move(abi);
  }
  ~CudaKernel() override {
    if (!module)
      return;
    const Api &a = *impl_->api;
    if (a.cuCtxPushCurrent(impl_->context) != CUDA_SUCCESS)
      return;
    a.cuStreamSynchronize(impl_->stream); // queued launches may use the module
    a.cuModuleUnload(module);
    CUcontext popped = nullptr;
    a.cuCtxPopCurrent(&popped);
  }
  const CudaDevice::Impl *owner() const { return impl_.get(); }

  CUmodule module = nullptr;
  CUfunction function = nullptr;
  unsigned dynamic_shared = 0; ///< bytes of shared memory the kernel declares dynamically
  std::string loaded_from;     ///< "cubin sm_90" or "ptx compute_80"

private:
  std::shared_ptr<CudaDevice::Impl> impl_;
};

void check_range(const DeviceMemory &memory, uint64_t offset, uint64_t bytes, const char *what) {
  if (!memory.handle || offset > memory.bytes || bytes > memory.bytes - offset)
    throw Error(fmt::format("cuda: {}: the range [{}, {}) lies outside the {} bytes of the "
                            "memory",
                            what, offset, offset + bytes, memory.bytes));
}

CUdeviceptr pointer_of(const DeviceMemory &memory) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(memory.handle));
}

} // namespace

//===- CudaDevice -----------------------------------------------------------------------------===//

CudaDevice::CudaDevice(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<CudaDevice> CudaDevice::open() {
  auto impl = std::make_shared<Impl>();
  impl->open();
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(impl)));
}

CudaDevice::~CudaDevice() = default;

const DeviceInfo &CudaDevice::info() const {
  return impl_->info;
}

const std::string &CudaDevice::arch() const {
  return impl_->arch;
}

DeviceMemory CudaDevice::allocate(uint64_t bytes) {
  Impl &d = *impl_;
  Impl::Scope scope(d);
  CUdeviceptr p = 0;
  d.check(d.api->cuMemAlloc(&p, std::max<uint64_t>(bytes, 1)),
          fmt::format("cuMemAlloc of {} bytes", bytes));
  d.allocations.insert(p);
  return DeviceMemory{reinterpret_cast<void *>(static_cast<uintptr_t>(p)), bytes};
}

void CudaDevice::free(DeviceMemory memory) {
  Impl &d = *impl_;
  CUdeviceptr p = pointer_of(memory);
  if (!p || !d.allocations.erase(p))
    return;
  if (d.api->cuCtxPushCurrent(d.context) != CUDA_SUCCESS)
    return;
  // cuMemFree waits for the work queued on the device that may still use the memory.
  d.api->cuMemFree(p);
  CUcontext popped = nullptr;
  d.api->cuCtxPopCurrent(&popped);
}

DeviceMemory CudaDevice::adopt_memory(const ExternalMemory &memory) {
  if (memory.kind != ExternalMemory::Kind::Cuda)
    return Device::adopt_memory(memory);
  // Not in `allocations`: free() never frees it.
  return DeviceMemory{reinterpret_cast<void *>(static_cast<uintptr_t>(memory.handle)),
                      memory.bytes};
}

void CudaDevice::release_adopted(DeviceMemory) {
  Impl &d = *impl_;
  if (d.api->cuCtxPushCurrent(d.context) != CUDA_SUCCESS)
    return;
  // Launches queued on the stream may still use the memory its owner is about to free; a failure
  // is reported by the next synchronize().
  d.api->cuStreamSynchronize(d.stream);
  CUcontext popped = nullptr;
  d.api->cuCtxPopCurrent(&popped);
}

ExternalMemory CudaDevice::native_memory(const DeviceMemory &memory) const {
  return ExternalMemory::cuda(pointer_of(memory), memory.bytes);
}

void CudaDevice::upload(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) {
  check_range(dst, offset, bytes, "upload");
  if (!bytes)
    return;
  Impl &d = *impl_;
  Impl::Scope scope(d);
  // On the stream: after the launches queued before it, and waited for, so `src` may go.
  d.check(d.api->cuMemcpyHtoDAsync(pointer_of(dst) + offset, src, bytes, d.stream),
          fmt::format("cuMemcpyHtoDAsync of {} bytes", bytes));
  d.wait("after an upload");
}

void CudaDevice::download(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) {
  check_range(src, offset, bytes, "download");
  if (!bytes)
    return;
  Impl &d = *impl_;
  Impl::Scope scope(d);
  d.check(d.api->cuMemcpyDtoHAsync(dst, pointer_of(src) + offset, bytes, d.stream),
          fmt::format("cuMemcpyDtoHAsync of {} bytes", bytes));
  d.wait("after a download");
}

std::unique_ptr<CompiledKernel> CudaDevice::compile(const ir::Kernel &kernel) {
  std::vector<ir::Diagnostic> errors;
  // Only the CUBIN for this device's arch: compile_cuda accepts only archs NVRTC knows, so it
  // always exists, and the PTX (a second NVRTC run) would never be loaded.
  std::optional<codegen::CudaBinary> binary =
      codegen::compile_cuda(kernel, {impl_->arch}, errors, codegen::CudaOutputs::Cubins);
  if (!binary)
    throw Error(fmt::format("{}: cannot compile kernel '{}':\n{}", impl_->info.features.target,
                            kernel.name(), ir::to_string(errors)));
  return compile_binary(*binary);
}

std::vector<BinaryTarget> CudaDevice::binary_targets() const {
  // The CUBIN for this arch first, then PTX for any virtual arch it can JIT, newest first. Made
  // on the first environment lookup (asking NVRTC its version is not start-up work), then kept.
  Impl &d = *impl_;
  std::call_once(d.binary_targets_once, [&d] {
    std::string toolkit = codegen::cuda_toolkit();
    d.binary_targets.push_back({"cuda:" + d.arch, "cubin", "", toolkit});
    int number = std::stoi(d.arch.substr(3)); // "sm_90a" -> 90
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
    cuda.cubins.push_back({impl_->arch, std::string(binary.bytes)});
  } else if (binary.target.format == "ptx") {
    cuda.ptx = std::string(binary.bytes);
    cuda.ptx_arch = binary.target.target.substr(binary.target.target.find(':') + 1);
  } else {
    throw Error(fmt::format("{}: kernel '{}': cannot load a {} binary", impl_->info.features.target,
                            binary.abi.name, binary.target.format));
  }
  return compile_binary(cuda);
}

std::unique_ptr<CompiledKernel> CudaDevice::compile_binary(const codegen::CudaBinary &binary) {
  Impl &d = *impl_;
  const codegen::KernelAbi &abi = binary.source.abi;
  const std::string &name = abi.name;
  const std::string &target = d.info.features.target;

  uint64_t invocations =
      uint64_t(abi.workgroup_size[0]) * abi.workgroup_size[1] * abi.workgroup_size[2];
  for (int i = 0; i < 3; ++i)
    if (abi.workgroup_size[i] == 0 || abi.workgroup_size[i] > uint32_t(d.max_block[i]))
      invocations = ~uint64_t(0);
  if (invocations > uint64_t(d.max_threads))
    throw Error(fmt::format("{}: kernel '{}' has workgroup size ({}, {}, {}); the device allows "
                            "at most ({}, {}, {}) and {} threads per block",
                            target, name, abi.workgroup_size[0], abi.workgroup_size[1],
                            abi.workgroup_size[2], d.max_block[0], d.max_block[1], d.max_block[2],
                            d.max_threads));
  if (abi.shared_bytes > uint32_t(std::max(d.max_shared, d.max_shared_optin)))
    throw Error(fmt::format("{}: kernel '{}' uses {} bytes of shared memory; the device has {}",
                            target, name, abi.shared_bytes,
                            std::max(d.max_shared, d.max_shared_optin)));

  // The CUBIN for this device, else the PTX for the driver to compile.
  const std::string *image = nullptr;
  std::string loaded_from;
  for (const codegen::CudaBinary::Cubin &cubin : binary.cubins)
    if (cubin.arch == d.arch && !cubin.bytes.empty()) {
      image = &cubin.bytes;
      loaded_from = "cubin " + cubin.arch;
    }
  if (!image && !binary.ptx.empty()) {
    image = &binary.ptx; // NUL-terminated: std::string's c_str()
    loaded_from = "ptx " + binary.ptx_arch;
  }
  if (!image)
    throw Error(fmt::format("{}: kernel '{}': the binary has neither a CUBIN for {} nor PTX",
                            target, name, d.arch));

  auto compiled = std::make_unique<CudaKernel>(impl_, abi);
  compiled->loaded_from = loaded_from;
  Impl::Scope scope(d);
  std::string error_log(16384, '\0'), info_log(16384, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes, kJitInfoLogBuffer,
                   kJitInfoLogBufferSizeBytes};
  void *values[] = {error_log.data(), reinterpret_cast<void *>(uintptr_t(error_log.size())),
                    info_log.data(), reinterpret_cast<void *>(uintptr_t(info_log.size()))};
  CUresult r = d.api->cuModuleLoadDataEx(&compiled->module, image->c_str(), 4, options, values);
  if (r != CUDA_SUCCESS) {
    compiled->module = nullptr;
    std::string log = error_log.c_str();
    throw Error(fmt::format("{}: loading kernel '{}' ({}) failed: cuModuleLoadDataEx: {}{}{}",
                            target, name, loaded_from, d.driver->describe(r),
                            log.empty() ? "" : "\n", log));
  }
  std::string entry = binary.source.entry.empty() ? name : binary.source.entry;
  d.check(d.api->cuModuleGetFunction(&compiled->function, compiled->module, entry.c_str()),
          fmt::format("cuModuleGetFunction('{}') for kernel '{}'", entry, name));

  auto function_attribute = [&](int which, const char *what) {
    int value = 0;
    d.check(d.api->cuFuncGetAttribute(&value, which, compiled->function),
            fmt::format("cuFuncGetAttribute({}) for kernel '{}'", what, name));
    return value;
  };
  // Registers may limit a block below the device's maximum.
  int max_threads = function_attribute(kFuncMaxThreadsPerBlock, "max threads per block");
  if (invocations > uint64_t(max_threads))
    throw Error(fmt::format("{}: kernel '{}' has {} invocations per workgroup, but with its {} "
                            "registers per thread the device runs at most {} per block",
                            target, name, invocations,
                            function_attribute(kFuncNumRegs, "registers"), max_threads));
  // Shared memory the emitter declared dynamically (extern __shared__) is passed at launch.
  int static_shared = function_attribute(kFuncSharedSizeBytes, "static shared memory");
  if (abi.shared_bytes > uint32_t(static_shared)) {
    compiled->dynamic_shared = abi.shared_bytes - uint32_t(static_shared);
    if (abi.shared_bytes > uint32_t(d.max_shared))
      d.check(d.api->cuFuncSetAttribute(compiled->function, kFuncMaxDynamicSharedSizeBytes,
                                        int(compiled->dynamic_shared)),
              fmt::format("cuFuncSetAttribute(max dynamic shared memory) for kernel '{}'", name));
  }
  return compiled;
}

void CudaDevice::launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                        std::span<const LaunchArg> args) {
  impl_->enqueue(kernel, num_workgroups, args, true);
}

void CudaDevice::Impl::enqueue(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                               std::span<const LaunchArg> args, bool timed) {
  Impl &d = *this;
  const auto *k = dynamic_cast<const CudaKernel *>(&kernel);
  if (!k || k->owner() != this)
    throw Error(
        fmt::format("cuda: kernel '{}' was compiled for another device", kernel.abi().name));
  const codegen::KernelAbi &abi = k->abi();
  for (int i = 0; i < 3; ++i)
    if (num_workgroups[i] > uint32_t(d.max_grid[i]))
      throw Error(fmt::format("cuda: launch of kernel '{}': a grid of {}x{}x{} workgroups "
                              "exceeds the device's maximum of {}x{}x{}",
                              abi.name, num_workgroups[0], num_workgroups[1], num_workgroups[2],
                              d.max_grid[0], d.max_grid[1], d.max_grid[2]));
  if (args.size() != abi.params.size())
    throw Error(fmt::format("cuda: launch of kernel '{}': {} arguments for {} parameters", abi.name,
                            args.size(), abi.params.size()));

  // The launch ABI of cuda.h: per buffer a device pointer and its element count (both 8 bytes);
  // per value lane its bits as an unsigned int, or unsigned long long for 64-bit types. Each
  // kernel parameter gets its own 8-byte slot; the driver reads the parameter's size from it.
  size_t num_slots = 0;
  for (const codegen::ParamSlot &slot : abi.params)
    num_slots += slot.kind == codegen::ParamSlot::Buffer ? 2 : slot.type.lanes();
  std::vector<uint64_t> storage(num_slots);
  std::vector<void *> params(num_slots);
  size_t n = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamSlot &slot = abi.params[i];
    const LaunchArg &a = args[i];
    if (slot.kind == codegen::ParamSlot::Value) {
      if (a.memory || a.bits.size() != slot.type.lanes())
        throw Error(fmt::format("cuda: launch of kernel '{}': parameter {} needs {} lane(s)",
                                abi.name, i, slot.type.lanes()));
      for (uint32_t lane = 0; lane < slot.type.lanes(); ++lane) {
        if (slot.lane_bytes == 8) {
          storage[n] = a.bits[lane];
        } else {
          uint32_t bits = static_cast<uint32_t>(a.bits[lane]);
          std::memcpy(&storage[n], &bits, 4);
        }
        params[n] = &storage[n];
        ++n;
      }
      continue;
    }
    if (!a.memory)
      throw Error(
          fmt::format("cuda: launch of kernel '{}': parameter {} needs a buffer", abi.name, i));
    check_range(*a.memory, a.offset, a.bytes, "launch");
    uint64_t element_bytes = std::max(1u, ir::scalar_bits(slot.type.element()) / 8);
    if (a.offset % element_bytes)
      throw Error(fmt::format("cuda: launch of kernel '{}': parameter {} starts at byte {}, not a "
                              "multiple of its element size {}",
                              abi.name, i, a.offset, element_bytes));
    storage[n] = pointer_of(*a.memory) + a.offset;
    params[n] = &storage[n];
    ++n;
    storage[n] = a.bytes / element_bytes;
    params[n] = &storage[n];
    ++n;
  }

  Impl::Scope scope(d);
  std::string what = fmt::format("the launch of kernel '{}'", abi.name);
  bool empty = num_workgroups[0] == 0 || num_workgroups[1] == 0 || num_workgroups[2] == 0;
  auto launch = [&] {
    // An empty grid runs nothing (the driver would refuse it).
    return empty ? CUDA_SUCCESS
                 : d.api->cuLaunchKernel(k->function, num_workgroups[0], num_workgroups[1],
                                         num_workgroups[2], abi.workgroup_size[0],
                                         abi.workgroup_size[1], abi.workgroup_size[2],
                                         k->dynamic_shared, d.stream, params.data(), nullptr);
  };
  if (!timed) { // a graph's capture: the parameters are copied into the graph's node
    if (CUresult r = launch(); r != CUDA_SUCCESS)
      throw Error(fmt::format("cuda: {} failed: cuLaunchKernel: {}", what, d.driver->describe(r)));
    return;
  }
  if (d.pending.size() >= Impl::kMaxPendingLaunches)
    d.wait("to collect launch times");
  EventPair events = d.take_events();
  CUresult r = d.api->cuEventRecord(events.start, d.stream);
  if (r == CUDA_SUCCESS)
    r = launch();
  if (r == CUDA_SUCCESS)
    r = d.api->cuEventRecord(events.end, d.stream);
  if (r != CUDA_SUCCESS) {
    d.free_events.push_back(events);
    throw Error(fmt::format("cuda: {} failed: cuLaunchKernel: {}", what, d.driver->describe(r)));
  }
  d.pending.push_back(events);
}

//===- Graphs ---------------------------------------------------------------------------------===//

namespace {

/// A CUDA graph: the recorded launches are captured on the device's (non-default, non-blocking)
/// stream with cuStreamBeginCapture (thread-local mode) and instantiated; replay is one
/// cuGraphLaunch between two events (one launch time per replay, for the whole graph). A
/// changed value re-captures and re-instantiates at the next replay.
class CudaGraph final : public RecordedGraph {
public:
  explicit CudaGraph(std::shared_ptr<CudaDevice::Impl> impl) : impl_(std::move(impl)) {}
  ~CudaGraph() override { destroy(); }

  void finish() override {
    RecordedGraph::finish();
    build();
  }
  void set_value(size_t launch, size_t param, std::span<const uint64_t> bits) override {
    RecordedGraph::set_value(launch, param, bits);
    dirty_ = true;
  }
  void replay(DeviceStream &) override {
    if (launches_.empty())
      return;
    CudaDevice::Impl &d = *impl_;
    if (dirty_)
      build();
    CudaDevice::Impl::Scope scope(d);
    if (d.pending.size() >= CudaDevice::Impl::kMaxPendingLaunches)
      d.wait("to collect launch times");
    EventPair events = d.take_events();
    CUresult r = d.api->cuEventRecord(events.start, d.stream);
    if (r == CUDA_SUCCESS)
      r = d.api->cuGraphLaunch(exec_, d.stream);
    if (r == CUDA_SUCCESS)
      r = d.api->cuEventRecord(events.end, d.stream);
    if (r != CUDA_SUCCESS) {
      d.free_events.push_back(events);
      throw Error(fmt::format("cuda: the replay of a graph of {} launches failed: cuGraphLaunch: "
                              "{}",
                              launches_.size(), d.driver->describe(r)));
    }
    d.pending.push_back(events);
  }

private:
  void build() {
    destroy();
    dirty_ = true; // until the graph is instantiated: a failed build is tried again at replay
    if (launches_.empty())
      return;
    CudaDevice::Impl &d = *impl_;
    const Api &a = *d.api;
    CudaDevice::Impl::Scope scope(d);
    d.check(a.cuStreamBeginCapture(d.stream, kCaptureModeThreadLocal), "cuStreamBeginCapture");
    try {
      for (const Launch &l : launches_)
        d.enqueue(*l.kernel, l.num_workgroups, l.args, false);
    } catch (...) {
      CUgraph abandoned = nullptr;
      if (a.cuStreamEndCapture(d.stream, &abandoned) == CUDA_SUCCESS && abandoned)
        a.cuGraphDestroy(abandoned);
      throw;
    }
    d.check(a.cuStreamEndCapture(d.stream, &graph_), "cuStreamEndCapture");
    d.check(a.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiateWithFlags");
    dirty_ = false;
  }
  void destroy() {
    const Api &a = *impl_->api;
    if (!exec_ && !graph_)
      return;
    if (a.cuCtxPushCurrent(impl_->context) != CUDA_SUCCESS)
      return;
    a.cuStreamSynchronize(impl_->stream); // a replay may still run it
    if (exec_)
      a.cuGraphExecDestroy(exec_);
    if (graph_)
      a.cuGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    CUcontext popped = nullptr;
    a.cuCtxPopCurrent(&popped);
  }

  std::shared_ptr<CudaDevice::Impl> impl_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  bool dirty_ = false;
};

} // namespace

std::unique_ptr<DeviceGraph> CudaDevice::create_graph() {
  if (!impl_->api->graphs)
    return Device::create_graph(); // an old driver: launches recorded and launched again
  return std::make_unique<CudaGraph>(impl_);
}

void CudaDevice::synchronize() {
  Impl &d = *impl_;
  Impl::Scope scope(d);
  d.wait("in synchronize()");
  d.last_times = std::move(d.completed_times);
  d.completed_times.clear();
}

std::vector<double> CudaDevice::last_launch_times_ns() const {
  return impl_->last_times;
}

const DeviceKind &cuda_device_kind() {
  static const DeviceKind kind{
      "cuda", DeviceClass::Gpu, [] { return std::unique_ptr<Device>(CudaDevice::open()); }, {}};
  return kind;
}

} // namespace cubecc::runtime
