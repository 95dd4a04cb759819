//===- hip_device.cpp - AMD GPUs through the HIP runtime, opened with dlopen ------------------===//
//
// The HIP runtime is opened once per process (per library path) and never closed. Only the few
// types and constants used here are declared (from the HIP runtime API reference), so building
// cubecc needs neither ROCm headers nor a GPU. hipDeviceProp_t changed layout between ROCm 5 and
// 6, so the only field read from it, gcnArchName, is found by content: the properties are read
// into a large zeroed block and the first NUL-terminated "gfx..." string in it is the name.
//
// Per device: one non-blocking stream; the device is made current around each call (and the
// caller's current device restored). Launches are queued between two events; copies are queued on
// the stream and waited for. synchronize() waits and turns each event pair into a launch time.
// Kernel arguments are passed as one packed argument buffer (HIP_LAUNCH_PARAM_BUFFER_POINTER),
// laid out with the C alignment of each parameter, which is how AMD kernels read them.
//
// Graphs: hipGraph through stream capture on the device's stream (HipGraph below), when the
// runtime exports the graph entry points; otherwise the launches are recorded and launched again.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/hip_device.h"
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
#include <unordered_set>

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
constexpr int kFuncSharedSizeBytes = 1;
constexpr unsigned kStreamNonBlocking = 0x1;
// hipStreamCaptureMode: Global = 0, ThreadLocal = 1, Relaxed = 2
constexpr int kCaptureModeThreadLocal = 1;
void *const kLaunchParamBufferPointer = reinterpret_cast<void *>(0x1);
void *const kLaunchParamBufferSize = reinterpret_cast<void *>(0x2);
void *const kLaunchParamEnd = reinterpret_cast<void *>(0x3);

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
  hipError_t (*hipStreamCreateWithFlags)(hipStream_t *, unsigned);
  hipError_t (*hipStreamDestroy)(hipStream_t);
  hipError_t (*hipStreamSynchronize)(hipStream_t);
  hipError_t (*hipEventCreate)(hipEvent_t *);
  hipError_t (*hipEventDestroy)(hipEvent_t);
  hipError_t (*hipEventRecord)(hipEvent_t, hipStream_t);
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

struct HipLibrary {
  std::string path;
  std::string error; ///< non-empty: unusable ("no device: hip: ...")
  Api api{};

  std::string describe(hipError_t r) const {
    const char *name = api.hipGetErrorName ? api.hipGetErrorName(r) : nullptr;
    const char *text = api.hipGetErrorString ? api.hipGetErrorString(r) : nullptr;
    std::string out = name && *name ? std::string(name) : fmt::format("HIP error {}", r);
    if (text && *text && std::string_view(text) != out)
      out += fmt::format(" ({})", text);
    return out;
  }
};

HipLibrary load_runtime() {
  HipLibrary rt;
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
    return rt;
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
  need(a.hipStreamCreateWithFlags, {"hipStreamCreateWithFlags"});
  need(a.hipStreamDestroy, {"hipStreamDestroy"});
  need(a.hipStreamSynchronize, {"hipStreamSynchronize"});
  need(a.hipEventCreate, {"hipEventCreate"});
  need(a.hipEventDestroy, {"hipEventDestroy"});
  need(a.hipEventRecord, {"hipEventRecord"});
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
  return rt;
}

const HipLibrary &hip_runtime() {
  static std::mutex mutex;
  static std::map<std::string, HipLibrary> runtimes; // by CUBECC_HIP_LIBRARY ("" when unset)
  const char *env = std::getenv("CUBECC_HIP_LIBRARY");
  std::string key = env ? env : "";
  std::lock_guard lock(mutex);
  auto it = runtimes.find(key);
  if (it == runtimes.end())
    it = runtimes.emplace(key, load_runtime()).first;
  return it->second;
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

struct EventPair {
  hipEvent_t start = nullptr;
  hipEvent_t end = nullptr;
};

/// What a launch captured into a graph passed to hipModuleLaunchKernel: the packed arguments and
/// the `extra` array pointing at them. Kept as long as the graph built from the capture, so that
/// it does not matter whether the HIP runtime copies them at capture or reads them at replay.
struct CapturedArguments {
  std::vector<uint8_t> bytes;
  size_t size = 0;
  std::array<void *, 5> extra{};
};

} // namespace

struct HipDevice::Impl {
  static constexpr size_t kMaxPendingLaunches = 1024;

  const HipLibrary *rt = nullptr;
  const Api *api = nullptr;
  DeviceInfo info;
  std::string arch; ///< "gfx90a"
  std::once_flag binary_targets_once;
  std::vector<BinaryTarget> binary_targets; ///< what load_binary takes, made on first need
  std::string arch_name; ///< gcnArchName, with target features: "gfx90a:sramecc+:xnack-"
  int device = 0;
  hipStream_t stream = nullptr;
  int max_grid[3] = {0, 0, 0};
  int max_block[3] = {0, 0, 0};
  int max_threads = 0;
  int max_shared = 0;

  std::unordered_set<void *> allocations;
  std::vector<EventPair> free_events;
  std::vector<EventPair> pending;
  std::vector<double> completed_times;
  std::vector<double> last_times;

  Impl() = default;
  Impl(const Impl &) = delete;
  Impl &operator=(const Impl &) = delete;
  ~Impl();

  void check(hipError_t r, std::string_view what) const {
    if (r != hipSuccess)
      throw Error(fmt::format("hip: {} failed: {}", what, rt->describe(r)));
  }

  /// Makes the device current on this thread for the scope of a call, then restores the old one.
  class Scope {
  public:
    explicit Scope(const Impl &d) : d_(d) {
      if (d.api->hipGetDevice(&previous_) != hipSuccess)
        previous_ = -1;
      if (previous_ != d.device)
        d.check(d.api->hipSetDevice(d.device), "hipSetDevice");
    }
    ~Scope() {
      if (previous_ >= 0 && previous_ != d_.device)
        d_.api->hipSetDevice(previous_);
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    const Impl &d_;
    int previous_ = -1;
  };

  void open();
  void wait(std::string_view why);
  EventPair take_events();
  /// Checks and queues a launch on the stream between two events or, during a graph's capture
  /// (`captured` set), without events, with its arguments kept in `captured`.
  void enqueue(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
               std::span<const LaunchArg> args, CapturedArguments *captured);
};

//===- Opening --------------------------------------------------------------------------------===//

void HipDevice::Impl::open() {
  rt = &hip_runtime();
  if (!rt->error.empty())
    throw Error(rt->error);
  api = &rt->api;
  const Api &a = *api;
  auto fail = [&](hipError_t r, const char *call) {
    throw Error(fmt::format("no device: hip: {} failed: {}", call, rt->describe(r)));
  };

  // Without a GPU, hipInit fails (hipErrorInvalidDevice) before hipGetDeviceCount says why.
  hipError_t init = a.hipInit(0);
  int count = 0;
  hipError_t r = a.hipGetDeviceCount(&count);
  if (r != hipSuccess || count <= 0)
    throw Error(fmt::format("no device: hip: no AMD GPU (hipGetDeviceCount: {})",
                            r != hipSuccess ? rt->describe(r) : "0 devices"));
  if (init != hipSuccess)
    fail(init, "hipInit");

  int index = 0;
  if (const char *env = std::getenv("CUBECC_HIP_DEVICE"); env && *env) {
    char *end = nullptr;
    unsigned long value = std::strtoul(env, &end, 10);
    if (*end != '\0' || value >= static_cast<unsigned long>(count))
      throw Error(fmt::format("no device: hip: CUBECC_HIP_DEVICE={} is not a device index "
                              "(there are {} HIP devices)",
                              env, count));
    index = static_cast<int>(value);
  }
  device = index;

  char name[256] = {};
  if ((r = a.hipDeviceGetName(name, sizeof(name) - 1, device)) != hipSuccess)
    fail(r, "hipDeviceGetName");
  auto attribute = [&](int which, const char *what) {
    int value = 0;
    hipError_t ar = a.hipDeviceGetAttribute(&value, which, device);
    if (ar != hipSuccess)
      throw Error(fmt::format("no device: hip: hipDeviceGetAttribute({}) failed: {}", what,
                              rt->describe(ar)));
    return value;
  };
  int warp = attribute(kAttrWarpSize, "warp size");
  max_threads = attribute(kAttrMaxThreadsPerBlock, "max threads per block");
  max_shared = attribute(kAttrMaxSharedMemoryPerBlock, "max shared memory per block");
  for (int i = 0; i < 3; ++i) {
    max_block[i] = attribute(kAttrMaxBlockDimX + i, "max block dimension");
    max_grid[i] = attribute(kAttrMaxGridDimX + i, "max grid dimension");
  }
  if (warp != 32 && warp != 64)
    throw Error(fmt::format("no device: hip: {} reports a wavefront of {} (expected 32 or 64; "
                            "a HIP runtime cubecc does not know?)",
                            name, warp));
  // Far larger than hipDeviceProp_t of any ROCm release, zeroed, so a larger struct cannot
  // overrun it and the scan stops at real data.
  std::vector<char> properties(64 * 1024, '\0');
  if ((r = a.hipGetDeviceProperties(properties.data(), device)) != hipSuccess)
    fail(r, "hipGetDeviceProperties");
  arch_name = find_gcn_arch_name(properties);
  arch = arch_name.substr(0, arch_name.find(':'));
  if (arch.empty())
    throw Error(fmt::format("no device: hip: cannot find the gfx architecture of {} in "
                            "hipGetDeviceProperties",
                            name));
  int version = 0;
  a.hipRuntimeGetVersion(&version);
  size_t total_memory = 0;
  if ((r = a.hipDeviceTotalMem(&total_memory, device)) != hipSuccess)
    fail(r, "hipDeviceTotalMem");

  info.backend = "hip";
  info.name = name;
  info.vendor = "AMD";
  info.arch = arch;
  info.driver = fmt::format("HIP runtime {}.{}.{} ({})", version / 10000000, version / 100000 % 100,
                            version % 100000, rt->path);
  info.subgroup_size = static_cast<uint32_t>(warp);
  info.max_buffer_bytes = total_memory;
  info.timestamp_period_ns = 1000; // hipEventElapsedTime: about a microsecond
  codegen::TargetFeatures &f = info.features;
  f = codegen::hip_features(arch);
  f.target = "hip:" + arch;
  f.subgroup_size = static_cast<uint32_t>(warp);
  f.linear_subgroups = true;
  f.max_shared_bytes = std::min<uint32_t>(f.max_shared_bytes, static_cast<uint32_t>(max_shared));
  f.max_workgroup_invocations =
      std::min<uint32_t>(f.max_workgroup_invocations, static_cast<uint32_t>(max_threads));
  for (int i = 0; i < 3; ++i)
    f.max_workgroup_size[i] =
        std::min<uint32_t>(f.max_workgroup_size[i], static_cast<uint32_t>(max_block[i]));

  Scope scope(*this);
  if ((r = a.hipStreamCreateWithFlags(&stream, kStreamNonBlocking)) != hipSuccess) {
    stream = nullptr;
    fail(r, "hipStreamCreateWithFlags");
  }
}

HipDevice::Impl::~Impl() {
  if (!api || !stream)
    return;
  const Api &a = *api;
  int previous = -1;
  if (a.hipGetDevice(&previous) != hipSuccess)
    previous = -1;
  a.hipSetDevice(device);
  a.hipStreamSynchronize(stream);
  for (EventPair &e : pending)
    free_events.push_back(e);
  for (EventPair &e : free_events) {
    a.hipEventDestroy(e.start);
    a.hipEventDestroy(e.end);
  }
  for (void *p : allocations)
    a.hipFree(p);
  a.hipStreamDestroy(stream);
  if (previous >= 0 && previous != device)
    a.hipSetDevice(previous);
}

void HipDevice::Impl::wait(std::string_view why) {
  hipError_t r = api->hipStreamSynchronize(stream);
  if (r != hipSuccess) {
    free_events.insert(free_events.end(), pending.begin(), pending.end());
    pending.clear();
    throw Error(fmt::format("hip: a queued launch failed (found by hipStreamSynchronize {}): {}",
                            why, rt->describe(r)));
  }
  for (const EventPair &e : pending) {
    float ms = 0;
    check(api->hipEventElapsedTime(&ms, e.start, e.end), "hipEventElapsedTime");
    completed_times.push_back(double(ms) * 1e6);
    free_events.push_back(e);
  }
  pending.clear();
}

EventPair HipDevice::Impl::take_events() {
  if (!free_events.empty()) {
    EventPair e = free_events.back();
    free_events.pop_back();
    return e;
  }
  EventPair e;
  check(api->hipEventCreate(&e.start), "hipEventCreate");
  hipError_t r = api->hipEventCreate(&e.end);
  if (r != hipSuccess) {
    api->hipEventDestroy(e.start);
    check(r, "hipEventCreate");
  }
  return e;
}

namespace {

class HipKernel final : public CompiledKernel {
public:
  HipKernel(std::shared_ptr<HipDevice::Impl> impl, codegen::KernelAbi abi)
      : impl_(std::move(impl)) {
    abi_ = std::move(abi);
  }
  ~HipKernel() override {
    if (!module)
      return;
    try {
      HipDevice::Impl::Scope scope(*impl_);
      impl_->api->hipStreamSynchronize(impl_->stream); // queued launches may use the module
      impl_->api->hipModuleUnload(module);
    } catch (const Error &) {
      // the device is gone; nothing to unload into
    }
  }
  const HipDevice::Impl *owner() const { return impl_.get(); }

  hipModule_t module = nullptr;
  hipFunction_t function = nullptr;
  unsigned dynamic_shared = 0;

private:
  std::shared_ptr<HipDevice::Impl> impl_;
};

void check_range(const DeviceMemory &memory, uint64_t offset, uint64_t bytes, const char *what) {
  if (!memory.handle || offset > memory.bytes || bytes > memory.bytes - offset)
    throw Error(fmt::format("hip: {}: the range [{}, {}) lies outside the {} bytes of the "
                            "memory",
                            what, offset, offset + bytes, memory.bytes));
}

/// Appends `bytes` of `value` to a kernel argument buffer at the next multiple of `bytes`.
void append_argument(std::vector<uint8_t> &buffer, const void *value, size_t bytes) {
  size_t offset = (buffer.size() + bytes - 1) / bytes * bytes;
  buffer.resize(offset + bytes);
  std::memcpy(buffer.data() + offset, value, bytes);
}

} // namespace

//===- HipDevice ------------------------------------------------------------------------------===//

HipDevice::HipDevice(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<HipDevice> HipDevice::open() {
  auto impl = std::make_shared<Impl>();
  impl->open();
  return std::unique_ptr<HipDevice>(new HipDevice(std::move(impl)));
}

HipDevice::~HipDevice() = default;

const DeviceInfo &HipDevice::info() const {
  return impl_->info;
}

const std::string &HipDevice::arch() const {
  return impl_->arch;
}

DeviceMemory HipDevice::allocate(uint64_t bytes) {
  Impl &d = *impl_;
  Impl::Scope scope(d);
  void *p = nullptr;
  d.check(d.api->hipMalloc(&p, std::max<uint64_t>(bytes, 1)),
          fmt::format("hipMalloc of {} bytes", bytes));
  d.allocations.insert(p);
  return DeviceMemory{p, bytes};
}

void HipDevice::free(DeviceMemory memory) {
  Impl &d = *impl_;
  if (!memory.handle || !d.allocations.erase(memory.handle))
    return;
  try {
    Impl::Scope scope(d);
    d.api->hipStreamSynchronize(d.stream); // queued launches may still use it
    d.api->hipFree(memory.handle);
  } catch (const Error &) {
    // the device is unusable; the memory goes with it
  }
}

DeviceMemory HipDevice::adopt_memory(const ExternalMemory &memory) {
  if (memory.kind != ExternalMemory::Kind::Hip)
    return Device::adopt_memory(memory);
  // Not in `allocations`: free() never frees it.
  return DeviceMemory{reinterpret_cast<void *>(static_cast<uintptr_t>(memory.handle)),
                      memory.bytes};
}

void HipDevice::release_adopted(DeviceMemory) {
  Impl &d = *impl_;
  try {
    Impl::Scope scope(d);
    // Launches queued on the stream may still use the memory its owner is about to free.
    d.api->hipStreamSynchronize(d.stream);
  } catch (const Error &) {
    // the device is unusable; a failure is reported by the next synchronize()
  }
}

ExternalMemory HipDevice::native_memory(const DeviceMemory &memory) const {
  return ExternalMemory::hip(memory.handle, memory.bytes);
}

void HipDevice::upload(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) {
  check_range(dst, offset, bytes, "upload");
  if (!bytes)
    return;
  Impl &d = *impl_;
  Impl::Scope scope(d);
  d.check(
      d.api->hipMemcpyHtoDAsync(static_cast<uint8_t *>(dst.handle) + offset, src, bytes, d.stream),
      fmt::format("hipMemcpyHtoDAsync of {} bytes", bytes));
  d.wait("after an upload");
}

void HipDevice::download(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) {
  check_range(src, offset, bytes, "download");
  if (!bytes)
    return;
  Impl &d = *impl_;
  Impl::Scope scope(d);
  d.check(
      d.api->hipMemcpyDtoHAsync(dst, static_cast<uint8_t *>(src.handle) + offset, bytes, d.stream),
      fmt::format("hipMemcpyDtoHAsync of {} bytes", bytes));
  d.wait("after a download");
}

std::unique_ptr<CompiledKernel> HipDevice::compile(const ir::Kernel &kernel) {
  std::vector<ir::Diagnostic> errors;
  std::optional<codegen::HipBinary> binary = codegen::compile_hip(kernel, {impl_->arch}, errors);
  if (!binary)
    throw Error(fmt::format("{}: cannot compile kernel '{}':\n{}", impl_->info.features.target,
                            kernel.name(), ir::to_string(errors)));
  return compile_binary(*binary);
}

std::vector<BinaryTarget> HipDevice::binary_targets() const {
  // Made on the first environment lookup (hipRTC's version means loading comgr), then kept.
  Impl &d = *impl_;
  std::call_once(d.binary_targets_once, [&d] {
    d.binary_targets.push_back({"hip:" + d.arch, "hsaco", "", codegen::hip_toolkit()});
  });
  return d.binary_targets;
}

std::unique_ptr<CompiledKernel> HipDevice::load_binary(const KernelBinary &binary) {
  if (binary.target.format != "hsaco")
    throw Error(fmt::format("{}: kernel '{}': cannot load a {} binary", impl_->info.features.target,
                            binary.abi.name, binary.target.format));
  codegen::HipBinary hip;
  hip.source.abi = binary.abi;
  hip.source.entry = binary.entry;
  hip.code_objects.push_back({impl_->arch, std::string(binary.bytes)});
  return compile_binary(hip);
}

std::unique_ptr<CompiledKernel> HipDevice::compile_binary(const codegen::HipBinary &binary) {
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
  if (abi.shared_bytes > uint32_t(d.max_shared))
    throw Error(fmt::format("{}: kernel '{}' uses {} bytes of shared memory; the device has {}",
                            target, name, abi.shared_bytes, d.max_shared));

  const std::string *image = nullptr;
  std::string archs;
  for (const codegen::HipBinary::CodeObject &object : binary.code_objects) {
    archs += (archs.empty() ? "" : ", ") + object.arch;
    if (object.arch == d.arch && !object.bytes.empty())
      image = &object.bytes;
  }
  if (!image)
    throw Error(fmt::format("{}: kernel '{}': the binary has no code object for {} (it has: {})",
                            target, name, d.arch, archs.empty() ? "none" : archs));

  auto compiled = std::make_unique<HipKernel>(impl_, abi);
  Impl::Scope scope(d);
  hipError_t r = d.api->hipModuleLoadData(&compiled->module, image->data());
  if (r != hipSuccess) {
    compiled->module = nullptr;
    throw Error(fmt::format("{}: loading kernel '{}' failed: hipModuleLoadData: {}", target, name,
                            d.rt->describe(r)));
  }
  std::string entry = binary.source.entry.empty() ? name : binary.source.entry;
  d.check(d.api->hipModuleGetFunction(&compiled->function, compiled->module, entry.c_str()),
          fmt::format("hipModuleGetFunction('{}') for kernel '{}'", entry, name));
  // Shared memory the emitter declared dynamically (extern __shared__) is passed at launch.
  int static_shared = 0;
  if (d.api->hipFuncGetAttribute &&
      d.api->hipFuncGetAttribute(&static_shared, kFuncSharedSizeBytes, compiled->function) ==
          hipSuccess &&
      abi.shared_bytes > uint32_t(static_shared))
    compiled->dynamic_shared = abi.shared_bytes - uint32_t(static_shared);
  return compiled;
}

void HipDevice::launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                       std::span<const LaunchArg> args) {
  impl_->enqueue(kernel, num_workgroups, args, nullptr);
}

void HipDevice::Impl::enqueue(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                              std::span<const LaunchArg> args, CapturedArguments *captured) {
  Impl &d = *this;
  const auto *k = dynamic_cast<const HipKernel *>(&kernel);
  if (!k || k->owner() != this)
    throw Error(fmt::format("hip: kernel '{}' was compiled for another device", kernel.abi().name));
  const codegen::KernelAbi &abi = k->abi();
  for (int i = 0; i < 3; ++i)
    if (num_workgroups[i] > uint32_t(d.max_grid[i]))
      throw Error(fmt::format("hip: launch of kernel '{}': a grid of {}x{}x{} workgroups "
                              "exceeds the device's maximum of {}x{}x{}",
                              abi.name, num_workgroups[0], num_workgroups[1], num_workgroups[2],
                              d.max_grid[0], d.max_grid[1], d.max_grid[2]));
  if (args.size() != abi.params.size())
    throw Error(fmt::format("hip: launch of kernel '{}': {} arguments for {} parameters", abi.name,
                            args.size(), abi.params.size()));

  // The launch ABI of cuda.h, packed as the kernel reads its arguments: a buffer is a pointer
  // and an unsigned long long count; a value lane an unsigned int or unsigned long long.
  CapturedArguments local;
  CapturedArguments &packed = captured ? *captured : local;
  std::vector<uint8_t> &arguments = packed.bytes;
  arguments.clear();
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamSlot &slot = abi.params[i];
    const LaunchArg &a = args[i];
    if (slot.kind == codegen::ParamSlot::Value) {
      if (a.memory || a.bits.size() != slot.type.lanes())
        throw Error(fmt::format("hip: launch of kernel '{}': parameter {} needs {} lane(s)",
                                abi.name, i, slot.type.lanes()));
      for (uint32_t lane = 0; lane < slot.type.lanes(); ++lane) {
        if (slot.lane_bytes == 8) {
          uint64_t bits = a.bits[lane];
          append_argument(arguments, &bits, 8);
        } else {
          uint32_t bits = static_cast<uint32_t>(a.bits[lane]);
          append_argument(arguments, &bits, 4);
        }
      }
      continue;
    }
    if (!a.memory)
      throw Error(
          fmt::format("hip: launch of kernel '{}': parameter {} needs a buffer", abi.name, i));
    check_range(*a.memory, a.offset, a.bytes, "launch");
    uint64_t element_bytes = std::max(1u, ir::scalar_bits(slot.type.element()) / 8);
    if (a.offset % element_bytes)
      throw Error(fmt::format("hip: launch of kernel '{}': parameter {} starts at byte {}, not a "
                              "multiple of its element size {}",
                              abi.name, i, a.offset, element_bytes));
    void *pointer = static_cast<uint8_t *>(a.memory->handle) + a.offset;
    uint64_t count = a.bytes / element_bytes;
    append_argument(arguments, &pointer, sizeof(pointer));
    append_argument(arguments, &count, 8);
  }
  arguments.resize((arguments.size() + 7) / 8 * 8);
  packed.size = arguments.size();
  packed.extra = {kLaunchParamBufferPointer, arguments.data(), kLaunchParamBufferSize, &packed.size,
                  kLaunchParamEnd};

  Impl::Scope scope(d);
  bool empty = num_workgroups[0] == 0 || num_workgroups[1] == 0 || num_workgroups[2] == 0;
  auto launch = [&] {
    // An empty grid runs nothing (the runtime would refuse it).
    return empty ? hipSuccess
                 : d.api->hipModuleLaunchKernel(k->function, num_workgroups[0], num_workgroups[1],
                                                num_workgroups[2], abi.workgroup_size[0],
                                                abi.workgroup_size[1], abi.workgroup_size[2],
                                                k->dynamic_shared, d.stream, nullptr,
                                                arguments.empty() ? nullptr : packed.extra.data());
  };
  if (captured) { // a graph's capture: no events, no waiting (neither may be captured)
    if (hipError_t r = launch(); r != hipSuccess)
      throw Error(fmt::format("hip: the launch of kernel '{}' failed: hipModuleLaunchKernel: {}",
                              abi.name, d.rt->describe(r)));
    return;
  }
  if (d.pending.size() >= Impl::kMaxPendingLaunches)
    d.wait("to collect launch times");
  EventPair events = d.take_events();
  hipError_t r = d.api->hipEventRecord(events.start, d.stream);
  if (r == hipSuccess)
    r = launch();
  if (r == hipSuccess)
    r = d.api->hipEventRecord(events.end, d.stream);
  if (r != hipSuccess) {
    d.free_events.push_back(events);
    throw Error(fmt::format("hip: the launch of kernel '{}' failed: hipModuleLaunchKernel: {}",
                            abi.name, d.rt->describe(r)));
  }
  d.pending.push_back(events);
}

//===- Graphs ---------------------------------------------------------------------------------===//

namespace {

/// A hipGraph: the recorded launches are captured on the device's (non-default, non-blocking)
/// stream with hipStreamBeginCapture (thread-local mode) and instantiated; replay is one
/// hipGraphLaunch between two events (one launch time per replay, for the whole graph). A
/// changed value re-captures and re-instantiates at the next replay.
class HipGraph final : public RecordedGraph {
public:
  explicit HipGraph(std::shared_ptr<HipDevice::Impl> impl) : impl_(std::move(impl)) {}
  ~HipGraph() override { destroy(); }

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
    HipDevice::Impl &d = *impl_;
    if (dirty_)
      build();
    HipDevice::Impl::Scope scope(d);
    if (d.pending.size() >= HipDevice::Impl::kMaxPendingLaunches)
      d.wait("to collect launch times");
    EventPair events = d.take_events();
    hipError_t r = d.api->hipEventRecord(events.start, d.stream);
    if (r == hipSuccess)
      r = d.api->hipGraphLaunch(exec_, d.stream);
    if (r == hipSuccess)
      r = d.api->hipEventRecord(events.end, d.stream);
    if (r != hipSuccess) {
      d.free_events.push_back(events);
      throw Error(fmt::format("hip: the replay of a graph of {} launches failed: hipGraphLaunch: "
                              "{}",
                              launches_.size(), d.rt->describe(r)));
    }
    d.pending.push_back(events);
  }

private:
  /// Captures and instantiates the launches; until it succeeds, the next replay tries again.
  void build() {
    destroy();
    dirty_ = true;
    if (launches_.empty())
      return;
    HipDevice::Impl &d = *impl_;
    const Api &a = *d.api;
    HipDevice::Impl::Scope scope(d);
    arguments_.clear();
    arguments_.reserve(launches_.size()); // their addresses are handed to the runtime
    d.check(a.hipStreamBeginCapture(d.stream, kCaptureModeThreadLocal), "hipStreamBeginCapture");
    try {
      for (const Launch &l : launches_)
        d.enqueue(*l.kernel, l.num_workgroups, l.args, &arguments_.emplace_back());
    } catch (...) {
      hipGraph_t abandoned = nullptr;
      if (a.hipStreamEndCapture(d.stream, &abandoned) == hipSuccess && abandoned)
        a.hipGraphDestroy(abandoned);
      throw;
    }
    d.check(a.hipStreamEndCapture(d.stream, &graph_), "hipStreamEndCapture");
    d.check(a.hipGraphInstantiateWithFlags(&exec_, graph_, 0), "hipGraphInstantiateWithFlags");
    dirty_ = false;
  }
  /// Destroys the graph and its executable form once no replay runs it. Never throws.
  void destroy() {
    if (!exec_ && !graph_)
      return;
    const HipDevice::Impl &d = *impl_;
    const Api &a = *d.api;
    try {
      HipDevice::Impl::Scope scope(d);
      a.hipStreamSynchronize(d.stream); // a replay may still run it
      if (exec_)
        a.hipGraphExecDestroy(exec_);
      if (graph_)
        a.hipGraphDestroy(graph_);
    } catch (const Error &) {
      // the device is unusable (hipSetDevice failed); the graph goes with it
    }
    exec_ = nullptr;
    graph_ = nullptr;
  }

  std::shared_ptr<HipDevice::Impl> impl_;
  std::vector<CapturedArguments> arguments_; ///< what the captured launches point at
  hipGraph_t graph_ = nullptr;
  hipGraphExec_t exec_ = nullptr;
  bool dirty_ = false;
};

} // namespace

std::unique_ptr<DeviceGraph> HipDevice::create_graph() {
  if (!impl_->api->graphs)
    return Device::create_graph(); // an old HIP runtime: launches recorded and launched again
  return std::make_unique<HipGraph>(impl_);
}

void HipDevice::synchronize() {
  Impl &d = *impl_;
  Impl::Scope scope(d);
  d.wait("in synchronize()");
  d.last_times = std::move(d.completed_times);
  d.completed_times.clear();
}

std::vector<double> HipDevice::last_launch_times_ns() const {
  return impl_->last_times;
}

const DeviceKind &hip_device_kind() {
  static const DeviceKind kind{
      "hip", DeviceClass::Gpu, [] { return std::unique_ptr<Device>(HipDevice::open()); }, {}};
  return kind;
}

} // namespace cubecc::runtime
