//===- runtime.cpp - Buffers, the kernel cache and checked launches over one device -----------===//
#include "cubecc/runtime/runtime.h"

#include "cubecc/ir/clone.h"
#include "cubecc/ir/float16.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include "cubecc/runtime/log.h"
#include "kernel_cache.h"
#include "memory_pool.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_set>

namespace cubecc::runtime {

//===- What a graph holds --------------------------------------------------------------------===//

/// The block of a Buffer allocated during a capture, shared by the Buffer and the graph: it goes
/// back to the pool when the last of them lets go, so the pool cannot hand it to another Buffer
/// while the graph may still replay launches that use it.
/// Adopted memory (Runtime::adopt_memory) is held the same way, by the Buffer and by every graph
/// whose capture used it: when the last lets go, the device forgets it (after the launches that
/// may use it) and the caller's release callback runs.
struct SharedBlock {
  SharedBlock(std::shared_ptr<MemoryPool> pool, DeviceMemory memory)
      : pool(std::move(pool)), memory(memory) {}
  SharedBlock(std::shared_ptr<MemoryPool> pool, DeviceMemory memory, std::function<void()> release)
      : pool(std::move(pool)), memory(memory), adopted(true), release(std::move(release)) {}
  SharedBlock(const SharedBlock &) = delete;
  SharedBlock &operator=(const SharedBlock &) = delete;
  ~SharedBlock() {
    if (!adopted) {
      pool->release(memory);
      return;
    }
    {
      std::lock_guard device_lock(pool->device().mutex());
      pool->device().release_adopted(memory);
    }
    if (release)
      release();
  }

  std::shared_ptr<MemoryPool> pool;
  DeviceMemory memory;
  bool adopted = false;
  std::function<void()> release; ///< adopted memory: the caller's callback
};

/// One captured launch: the kernel (kept alive) and, for launches with Buffers from before the
/// capture, which parameter used which Buffer (held weakly: replay checks them).
struct CapturedLaunch {
  KernelHandle kernel;
  std::vector<std::pair<size_t, std::weak_ptr<const bool>>> buffers;
};

struct GraphState {
  std::shared_ptr<Device> device; ///< the runtime's: identifies it and outlives the graph below
  /// The blocks of the Buffers allocated during the capture, released after the device graph
  /// (which may still refer to them) is destroyed.
  std::unordered_set<std::shared_ptr<const SharedBlock>> allocations;
  std::vector<CapturedLaunch> launches;
  std::unique_ptr<DeviceGraph> graph; ///< last: destroyed before the kernels it uses
};

//===- Buffer and KernelHandle ---------------------------------------------------------------===//

Buffer::~Buffer() {
  if (pool_ && !shared_block_)
    pool_->release(memory_);
}

bool Buffer::adopted() const {
  return shared_block_ && shared_block_->adopted;
}

LaunchArg Buffer::arg() const {
  LaunchArg a;
  a.memory = &memory_;
  a.bytes = bytes();
  return a;
}

const std::string &KernelHandle::name() const {
  return kernel_->name;
}
const codegen::KernelAbi &KernelHandle::abi() const {
  return kernel_->compiled->abi();
}
std::string KernelHandle::hash() const {
  return kernel_->hash.hex();
}
const CompiledKernel &KernelHandle::compiled() const {
  return *kernel_->compiled;
}

//===- One thread at a time ------------------------------------------------------------------===//

/// Which thread is inside the Runtime, and in which call. A Runtime is not thread-safe: a second
/// thread that enters while a first is inside gets an Error instead of racing it.
struct RuntimeOccupancy {
  std::atomic<std::thread::id> owner{};
  std::atomic<const char *> call{nullptr};
  int depth = 0; ///< nested calls of the owner (touched only by the owner)
};

namespace {

/// Held for the duration of one public Runtime call: claims the Runtime for this thread (or
/// throws when another thread holds it) and locks the device against frees from other threads.
class RuntimeCall {
public:
  RuntimeCall(RuntimeOccupancy &occupancy, Device &device, const char *call)
      : occupancy_(occupancy) {
    const std::thread::id self = std::this_thread::get_id();
    std::thread::id expected{};
    if (!occupancy.owner.compare_exchange_strong(expected, self) && expected != self) {
      const char *other = occupancy.call.load();
      throw Error(fmt::format(
          "Runtime::{} was called on one thread while another thread is inside Runtime::{} of the "
          "same Runtime: a Runtime is not thread-safe; give each thread its own Runtime, or hold "
          "a lock around every call (Buffers may still be destroyed on any thread)",
          call, other ? other : "(a call)"));
    }
    if (occupancy.depth++ == 0)
      occupancy.call.store(call);
    lock_ = std::unique_lock(device.mutex());
  }
  RuntimeCall(const RuntimeCall &) = delete;
  RuntimeCall &operator=(const RuntimeCall &) = delete;
  ~RuntimeCall() {
    lock_.unlock();
    if (--occupancy_.depth == 0) {
      occupancy_.call.store(nullptr);
      occupancy_.owner.store(std::thread::id{});
    }
  }

private:
  RuntimeOccupancy &occupancy_;
  std::unique_lock<std::recursive_mutex> lock_;
};

} // namespace

//===- Runtime -------------------------------------------------------------------------------===//

Runtime Runtime::open(const std::string &name, PoolOptions pool) {
  log_level(); // reads CUBECC_LOG now, so that a value it does not know is warned about at start
  Runtime runtime(open_device(name), pool);
  if (const char *path = std::getenv("CUBECC_ENV"); path && *path)
    runtime.use_environment(path);
  return runtime;
}

Runtime::Runtime(std::unique_ptr<Device> device, PoolOptions pool)
    : device_(std::move(device)), pool_(std::make_shared<MemoryPool>(device_, pool)),
      cache_(std::make_unique<KernelCache>(device_->info().backend + ":" + device_->info().name)),
      stream_(device_->create_stream()), occupancy_(std::make_unique<RuntimeOccupancy>()) {}

Runtime::Runtime(Runtime &&) noexcept = default;
Runtime &Runtime::operator=(Runtime &&) noexcept = default;

Runtime::~Runtime() {
  if (!device_)
    return; // moved from
  std::lock_guard device_lock(device_->mutex());
  capture_.reset(); // an unfinished capture is abandoned
  try {
    stream_->synchronize();
  } catch (const Error &) {
    // A failed launch was the caller's to see at synchronize(); destruction must go on.
  }
  cache_.reset(); // compiled kernels before the memory and the device they belong to
  stream_.reset();
}

const DeviceInfo &Runtime::info() const {
  return device_->info();
}

Buffer Runtime::allocate(ir::Scalar element, size_t count) {
  RuntimeCall call(*occupancy_, *device_, "allocate");
  if (element == ir::Scalar::Bool)
    throw Error("cannot allocate a buffer of bool: buffers hold numbers (use u8 or u32)");
  uint64_t bytes = uint64_t(count) * (ir::scalar_bits(element) / 8);
  Buffer b;
  b.memory_ = pool_->acquire(bytes);
  b.pool_ = pool_;
  b.element_ = element;
  b.count_ = count;
  if (capture_) {
    b.shared_block_ = std::make_shared<const SharedBlock>(pool_, b.memory_);
    capture_->allocations.insert(b.shared_block_);
  }
  return b;
}

Buffer Runtime::adopt_memory(const ExternalMemory &memory, ir::Scalar element,
                             std::function<void()> release) {
  RuntimeCall call(*occupancy_, *device_, "adopt_memory");
  const char *what = external_memory_kind_name(memory.kind);
  const std::string &backend = device_->info().backend;
  if (device_->memory_kind() != memory.kind)
    throw Error(fmt::format("adopt_memory: {} can be adopted only by a runtime on the {} device; "
                            "this runtime's device is {} ({}): adopt memory of its own backend",
                            what, external_memory_backend(memory.kind), backend,
                            device_->info().name));
  if (memory.handle == 0)
    throw Error(fmt::format("adopt_memory: {} is null", what));
  if (element == ir::Scalar::Bool)
    throw Error("adopt_memory: buffers cannot hold bool (adopt the memory as u8 or u32)");
  uint64_t element_bytes = ir::scalar_bits(element) / 8;
  if (memory.bytes == 0)
    throw Error(fmt::format("adopt_memory: {} of 0 bytes: adopted memory must hold at least one "
                            "{} element",
                            what, ir::scalar_name(element)));
  if (memory.bytes % element_bytes)
    throw Error(fmt::format("adopt_memory: {} bytes of {} are not a whole number of {} elements "
                            "({} bytes each)",
                            memory.bytes, what, ir::scalar_name(element), element_bytes));
  bool is_pointer = memory.kind != ExternalMemory::Kind::Vulkan;
  if (is_pointer ? memory.handle % element_bytes : memory.offset % element_bytes)
    throw Error(fmt::format("adopt_memory: {} {:#x} is not aligned to the {} bytes of a {} "
                            "element",
                            is_pointer ? std::string(what) : std::string("the VkBuffer offset"),
                            is_pointer ? memory.handle : memory.offset, element_bytes,
                            ir::scalar_name(element)));
  Buffer b;
  b.memory_ = device_->adopt_memory(memory);
  b.pool_ = pool_;
  b.element_ = element;
  b.count_ = memory.bytes / element_bytes;
  b.shared_block_ = std::make_shared<const SharedBlock>(pool_, b.memory_, std::move(release));
  return b;
}

ExternalMemory Runtime::native_memory(const Buffer &buffer) const {
  RuntimeCall call(*occupancy_, *device_, "native_memory");
  if (!buffer.valid())
    throw Error("native_memory: the buffer is empty (moved from or default-constructed)");
  ExternalMemory memory = device_->native_memory(buffer.memory_);
  memory.bytes = buffer.bytes();
  return memory;
}

void Runtime::check_host_copy(const Buffer &buffer, ir::Scalar element, size_t count,
                              const char *what) const {
  if (!buffer.valid())
    throw Error(fmt::format("{}: the buffer is empty (moved from or default-constructed)", what));
  if (buffer.element() != element)
    throw Error(fmt::format("{}: the buffer holds {}, the host data is {}", what,
                            ir::scalar_name(buffer.element()), ir::scalar_name(element)));
  if (count > buffer.size())
    throw Error(
        fmt::format("{}: {} elements do not fit a buffer of {}", what, count, buffer.size()));
}

void Runtime::write(Buffer &buffer, const void *src, uint64_t bytes) {
  RuntimeCall call(*occupancy_, *device_, "write");
  check_not_capturing("upload");
  if (!buffer.valid() || bytes > buffer.bytes())
    throw Error(
        fmt::format("upload: {} bytes do not fit a buffer of {} bytes", bytes, buffer.bytes()));
  if (bytes)
    stream_->upload(buffer.memory_, 0, src, bytes);
}

void Runtime::read(const Buffer &buffer, void *dst, uint64_t bytes) {
  RuntimeCall call(*occupancy_, *device_, "read");
  check_not_capturing("download");
  if (!buffer.valid() || bytes > buffer.bytes())
    throw Error(fmt::format("download: {} bytes are more than a buffer of {} bytes", bytes,
                            buffer.bytes()));
  if (bytes)
    stream_->download(buffer.memory_, 0, dst, bytes);
}

PoolStatistics Runtime::pool_statistics() const {
  return pool_->statistics();
}

const PoolOptions &Runtime::pool_options() const {
  return pool_->options();
}

void Runtime::trim() {
  RuntimeCall call(*occupancy_, *device_, "trim");
  pool_->trim();
}

//===- Kernels -------------------------------------------------------------------------------===//

namespace {

/// A binary compiled elsewhere must take the kernel's parameters, laid out the same way, and run
/// its workgroup shape (launches are sized by it).
void check_abi(const ir::Kernel &kernel, const codegen::KernelAbi &abi) {
  std::string why = codegen::launch_shape_difference(abi, "the compiled binary",
                                                     codegen::KernelAbi::of(kernel), "the kernel");
  if (!why.empty())
    throw Error(fmt::format("kernel '{}': {}", kernel.name(), why));
}

std::shared_ptr<LoadedKernel> describe(const ir::Kernel &kernel, const ir::Hash128 &hash) {
  auto loaded = std::make_shared<LoadedKernel>();
  loaded->name = kernel.name();
  loaded->hash = hash;
  for (unsigned i = 0; i < kernel.num_parameters(); ++i)
    loaded->params.push_back({kernel.parameter(i)->name(), kernel.parameter(i)->type()});
  return loaded;
}

} // namespace

KernelHandle Runtime::load(const ir::Kernel &kernel) {
  RuntimeCall call(*occupancy_, *device_, "load");
  ir::Hash128 hash = ir::structural_hash(kernel);
  if (auto cached = cache_->find(hash)) {
    ++cache_->statistics.hits;
    return KernelHandle(std::move(cached));
  }
  ++cache_->statistics.misses;
  if (environment_) {
    if (std::unique_ptr<CompiledKernel> compiled =
            load_from_environment(*environment_, *device_, kernel, hash, kRuntimeCompileOptions,
                                  environment_options_, environment_statistics_)) {
      auto loaded = describe(kernel, hash);
      check_abi(kernel, compiled->abi());
      loaded->compiled = std::move(compiled);
      cache_->insert(loaded);
      return KernelHandle(std::move(loaded));
    }
  }
  if (auto problems = ir::verify(kernel); !problems.empty())
    throw Error(
        fmt::format("kernel '{}' does not verify:\n{}", kernel.name(), ir::to_string(problems)));
  std::unique_ptr<ir::Module> module = ir::copy_kernel(kernel);
  std::vector<ir::Diagnostic> errors = passes::optimize(*module, 2);
  if (errors.empty())
    errors = ir::verify(*module);
  if (!errors.empty())
    throw Error(fmt::format("kernel '{}': optimizing at -O2 failed (a bug in cubecc):\n{}",
                            kernel.name(), ir::to_string(errors)));
  auto loaded = describe(kernel, hash);
  loaded->compiled = device_->compile(*module->kernels().front());
  ++cache_->statistics.compiles;
  cache_->insert(loaded);
  return KernelHandle(std::move(loaded));
}

KernelHandle Runtime::load_keyed(std::string_view key, const ir::Kernel &kernel) {
  KernelHandle handle = load(kernel);
  cache_->insert_keyed(key, handle.kernel_);
  return handle;
}

KernelHandle Runtime::kernel(std::string_view key, FunctionRef<const ir::Kernel &()> trace) {
  RuntimeCall call(*occupancy_, *device_, "kernel");
  if (auto cached = cache_->find_keyed(key)) {
    ++cache_->statistics.hits;
    return KernelHandle(std::move(cached));
  }
  ++cache_->statistics.traces;
  return load_keyed(key, trace());
}

KernelHandle Runtime::kernel(std::string_view key,
                             FunctionRef<std::unique_ptr<ir::Module>()> trace) {
  RuntimeCall call(*occupancy_, *device_, "kernel");
  if (auto cached = cache_->find_keyed(key)) {
    ++cache_->statistics.hits;
    return KernelHandle(std::move(cached));
  }
  ++cache_->statistics.traces;
  std::unique_ptr<ir::Module> module = trace();
  if (!module || module->kernels().size() != 1)
    throw Error(fmt::format("kernel '{}': the trace must give a module with exactly one kernel "
                            "(it gave {})",
                            key, module ? module->kernels().size() : 0));
  return load_keyed(key, *module->kernels().front());
}

KernelHandle Runtime::adopt(const ir::Kernel &kernel, std::unique_ptr<CompiledKernel> compiled) {
  RuntimeCall call(*occupancy_, *device_, "adopt");
  check_abi(kernel, compiled->abi());
  auto loaded = describe(kernel, ir::structural_hash(kernel));
  loaded->compiled = std::move(compiled);
  cache_->insert(loaded);
  return KernelHandle(std::move(loaded));
}

void Runtime::use_environment(const std::string &path, EnvironmentOptions options) {
  RuntimeCall call(*occupancy_, *device_, "use_environment");
  std::shared_ptr<const EnvironmentSource> environment;
  try {
    environment = open_environment(path);
  } catch (const Error &e) {
    if (!options.fallback_to_jit)
      throw;
    // The application still runs, compiling what it needs: said loudly, once.
    log_warning("{}; running without it (kernels are compiled as they are needed)", e.what());
    environment_.reset();
    return;
  }
  use_environment(std::move(environment), options);
}

void Runtime::use_environment(std::shared_ptr<const EnvironmentSource> environment,
                              EnvironmentOptions options) {
  RuntimeCall call(*occupancy_, *device_, "use_environment");
  environment_ = std::move(environment);
  environment_options_ = options;
  if (environment_)
    log_debug("runtime: using environment {}", environment_->name());
}

std::optional<std::string> Runtime::find_tuning_record(std::string_view key) const {
  return environment_ ? environment_->find_tuning(key) : std::nullopt;
}

KernelCacheStatistics Runtime::cache_statistics() const {
  RuntimeCall call(*occupancy_, *device_, "cache_statistics");
  return cache_->statistics;
}

//===- Launch --------------------------------------------------------------------------------===//

namespace {

std::string describe_parameter(const LoadedKernel &k, size_t i) {
  const ParameterInfo &p = k.params[i];
  if (p.name.empty())
    return fmt::format("parameter {} ({})", i, p.type.str());
  return fmt::format("parameter {} (%{}: {})", i, p.name, p.type.str());
}

[[noreturn]] void fail(const LoadedKernel &k, size_t i, const std::string &problem) {
  throw Error(
      fmt::format("launch of kernel '{}': {}: {}", k.name, describe_parameter(k, i), problem));
}

void check_count(const LoadedKernel &k, size_t given) {
  if (given == k.params.size())
    return;
  std::string signature;
  for (size_t i = 0; i < k.params.size(); ++i)
    signature += (i ? ", " : "") + describe_parameter(k, i);
  throw Error(fmt::format("launch of kernel '{}': {} argument(s) given, the kernel has {} "
                          "parameter(s): {}",
                          k.name, given, k.params.size(), signature));
}

const char *kind_name(ArgumentValue::Kind kind) {
  switch (kind) {
  case ArgumentValue::BufferArg:
    return "a buffer";
  case ArgumentValue::Bool:
    return "a bool";
  case ArgumentValue::Signed:
  case ArgumentValue::Unsigned:
    return "an integer";
  case ArgumentValue::Float:
    return "a floating-point value";
  }
  return "?";
}

/// The bits of one lane for a parameter of element type `s`, or a description of the problem.
uint64_t convert_lane(const LoadedKernel &k, size_t i, ir::Scalar s, ArgumentValue::Kind kind,
                      uint64_t bits) {
  unsigned width = ir::scalar_bits(s);
  switch (ir::scalar_class(s)) {
  case ir::ScalarClass::Bool:
    if (kind != ArgumentValue::Bool)
      fail(k, i, fmt::format("needs a bool, got {}", kind_name(kind)));
    return bits;
  case ir::ScalarClass::Float: {
    if (kind != ArgumentValue::Float)
      fail(k, i,
           fmt::format("needs a floating-point value, got {} (convert it explicitly)",
                       kind_name(kind)));
    double d = std::bit_cast<double>(bits);
    switch (s) {
    case ir::Scalar::F64:
      return bits;
    case ir::Scalar::F32:
      return std::bit_cast<uint32_t>(static_cast<float>(d));
    case ir::Scalar::F16:
      return ir::float_to_f16_bits(static_cast<float>(d));
    default:
      return ir::float_to_bf16_bits(static_cast<float>(d));
    }
  }
  case ir::ScalarClass::Signed:
  case ir::ScalarClass::Unsigned: {
    if (kind != ArgumentValue::Signed && kind != ArgumentValue::Unsigned)
      fail(k, i, fmt::format("needs an integer, got {}", kind_name(kind)));
    bool param_signed = ir::scalar_class(s) == ir::ScalarClass::Signed;
    uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
    bool fits;
    std::string shown;
    if (kind == ArgumentValue::Signed) {
      auto v = static_cast<int64_t>(bits);
      shown = std::to_string(v);
      if (param_signed)
        fits =
            width == 64 || (v >= -(int64_t(1) << (width - 1)) && v < (int64_t(1) << (width - 1)));
      else
        fits = v >= 0 && static_cast<uint64_t>(v) <= mask;
    } else {
      shown = std::to_string(bits);
      fits = bits <= (param_signed ? mask >> 1 : mask);
    }
    if (!fits)
      fail(k, i, fmt::format("the value {} does not fit {}", shown, ir::scalar_name(s)));
    return bits & mask;
  }
  }
  return bits;
}

} // namespace

void Runtime::launch_values(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                            std::span<const ArgumentValue> args) {
  RuntimeCall call(*occupancy_, *device_, "launch");
  if (!kernel.valid())
    throw Error("launch: the kernel handle is empty");
  const LoadedKernel &k = *kernel.kernel_;
  check_count(k, args.size());
  std::vector<LaunchArg> launch_args(args.size());
  std::vector<std::pair<size_t, std::weak_ptr<const bool>>> buffer_tokens;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgumentValue &a = args[i];
    ir::Type type = k.params[i].type;
    if (type.kind() == ir::TypeKind::Buffer) {
      if (a.kind != ArgumentValue::BufferArg)
        fail(k, i, fmt::format("needs a buffer, got {}", kind_name(a.kind)));
      if (!a.buffer->valid())
        fail(k, i, "the buffer is empty (moved from or default-constructed)");
      if (a.buffer->element() != type.element())
        fail(k, i,
             fmt::format("needs a buffer of {}, got a buffer of {}",
                         ir::scalar_name(type.element()), ir::scalar_name(a.buffer->element())));
      launch_args[i] = a.buffer->arg();
      if (a.first != 0 || a.count != ArgumentValue::kWholeBuffer) {
        uint64_t size = a.buffer->size();
        uint64_t count = a.count == ArgumentValue::kWholeBuffer && a.first <= size ? size - a.first
                                                                                   : a.count;
        if (a.first > size || count > size - a.first)
          fail(k, i,
               fmt::format("the elements [{}, {}) lie outside the buffer of {}", a.first,
                           a.first + count, size));
        uint64_t element_bytes = ir::scalar_bits(a.buffer->element()) / 8;
        launch_args[i].offset = a.first * element_bytes;
        launch_args[i].bytes = count * element_bytes;
      }
      // The graph holds the blocks allocated during its capture and the adopted memory it uses;
      // it checks the others at replay.
      if (capture_ && a.buffer->adopted()) {
        capture_->allocations.insert(a.buffer->shared_block_);
      } else if (capture_ && !capture_->allocations.contains(a.buffer->shared_block_)) {
        if (!a.buffer->capture_token_)
          a.buffer->capture_token_ = std::make_shared<const bool>(true);
        buffer_tokens.emplace_back(i, a.buffer->capture_token_);
      }
      continue;
    }
    if (a.kind == ArgumentValue::BufferArg)
      fail(k, i, fmt::format("needs a value of type {}, got a buffer", type.str()));
    if (a.lanes != type.lanes())
      fail(k, i, fmt::format("needs {} lane(s), got {}", type.lanes(), a.lanes));
    launch_args[i].bits.resize(a.lanes);
    for (uint32_t l = 0; l < a.lanes; ++l)
      launch_args[i].bits[l] = convert_lane(k, i, type.element(), a.kind, a.bits[l]);
  }
  if (capture_)
    record(kernel, num_workgroups, launch_args, std::move(buffer_tokens));
  else
    stream_->launch(*k.compiled, num_workgroups, launch_args);
}

void Runtime::launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                     std::span<const LaunchArg> args) {
  RuntimeCall call(*occupancy_, *device_, "launch");
  if (!kernel.valid())
    throw Error("launch: the kernel handle is empty");
  const LoadedKernel &k = *kernel.kernel_;
  check_count(k, args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const LaunchArg &a = args[i];
    ir::Type type = k.params[i].type;
    if (type.kind() == ir::TypeKind::Buffer) {
      if (!a.memory)
        fail(k, i, "needs a buffer, got a value");
      uint64_t element_bytes = ir::scalar_bits(type.element()) / 8;
      if (a.offset > a.memory->bytes || a.bytes > a.memory->bytes - a.offset)
        fail(k, i,
             fmt::format("the range [{}, {}) lies outside the {} bytes of the memory", a.offset,
                         a.offset + a.bytes, a.memory->bytes));
      if (a.bytes % element_bytes || a.offset % element_bytes)
        fail(k, i,
             fmt::format("the range [{}, {}) is not a whole number of {} elements", a.offset,
                         a.offset + a.bytes, ir::scalar_name(type.element())));
    } else {
      if (a.memory)
        fail(k, i, fmt::format("needs a value of type {}, got a buffer", type.str()));
      if (a.bits.size() != type.lanes())
        fail(k, i, fmt::format("needs {} lane(s), got {}", type.lanes(), a.bits.size()));
    }
  }
  if (capture_)
    record(kernel, num_workgroups, args, {});
  else
    stream_->launch(*k.compiled, num_workgroups, args);
}

void Runtime::synchronize() {
  RuntimeCall call(*occupancy_, *device_, "synchronize");
  check_not_capturing("synchronize");
  stream_->synchronize();
}

std::vector<double> Runtime::last_launch_times_ns() const {
  RuntimeCall call(*occupancy_, *device_, "last_launch_times_ns");
  return stream_->last_launch_times_ns();
}

//===- Graphs --------------------------------------------------------------------------------===//

Graph::Graph() = default;
Graph::Graph(Graph &&) noexcept = default;
Graph &Graph::operator=(Graph &&) noexcept = default;
Graph::~Graph() = default;

size_t Graph::num_launches() const {
  return state_ ? state_->launches.size() : 0;
}

const std::string &Graph::kernel_name(size_t launch) const {
  if (!state_ || launch >= state_->launches.size())
    throw Error(fmt::format("graph: no launch {} (the graph has {})", launch, num_launches()));
  return state_->launches[launch].kernel.name();
}

void Graph::set_value(size_t launch, size_t param, const ArgumentValue &value) {
  if (!state_ || launch >= state_->launches.size())
    throw Error(
        fmt::format("graph: set_value: no launch {} (the graph has {})", launch, num_launches()));
  const LoadedKernel &k = *state_->launches[launch].kernel.kernel_;
  std::string where = fmt::format("graph launch {} (kernel '{}')", launch, k.name);
  if (param >= k.params.size())
    throw Error(fmt::format("{}: set_value: no parameter {} (the kernel has {})", where, param,
                            k.params.size()));
  ir::Type type = k.params[param].type;
  if (type.kind() == ir::TypeKind::Buffer || value.kind == ArgumentValue::BufferArg)
    throw Error(fmt::format("{}: set_value: {} is {}; only value parameters can be changed "
                            "(capture again to use other buffers)",
                            where, describe_parameter(k, param),
                            type.kind() == ir::TypeKind::Buffer ? "a buffer" : "given a buffer"));
  if (value.lanes != type.lanes())
    throw Error(fmt::format("{}: set_value: {}: needs {} lane(s), got {}", where,
                            describe_parameter(k, param), type.lanes(), value.lanes));
  std::vector<uint64_t> bits(value.lanes);
  try {
    for (uint32_t l = 0; l < value.lanes; ++l)
      bits[l] = convert_lane(k, param, type.element(), value.kind, value.bits[l]);
  } catch (const Error &e) {
    throw Error(fmt::format("graph launch {}: set_value: {}", launch, e.what()));
  }
  state_->graph->set_value(launch, param, bits);
}

void Runtime::check_not_capturing(const char *what) const {
  if (capture_)
    throw Error(fmt::format("{}: a graph capture is in progress ({} launch(es) recorded); "
                            "copies and waits cannot be captured: call end_capture() first",
                            what, capture_->launches.size()));
}

void Runtime::begin_capture() {
  RuntimeCall call(*occupancy_, *device_, "begin_capture");
  if (capture_)
    throw Error(fmt::format("begin_capture: a capture is already in progress ({} launch(es) "
                            "recorded); captures do not nest: call end_capture() first",
                            capture_->launches.size()));
  auto state = std::make_unique<GraphState>();
  state->device = device_;
  state->graph = stream_->create_graph();
  capture_ = std::move(state);
}

Graph Runtime::end_capture() {
  RuntimeCall call(*occupancy_, *device_, "end_capture");
  if (!capture_)
    throw Error("end_capture: no capture in progress (call begin_capture() first)");
  std::unique_ptr<GraphState> state = std::move(capture_);
  state->graph->finish();
  Graph graph;
  graph.state_ = std::move(state);
  return graph;
}

void Runtime::record(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                     std::span<const LaunchArg> args,
                     std::vector<std::pair<size_t, std::weak_ptr<const bool>>> buffers) {
  capture_->graph->add_launch(kernel.compiled(), num_workgroups, args);
  capture_->launches.push_back({kernel, std::move(buffers)});
}

void Runtime::replay(Graph &graph) {
  RuntimeCall call(*occupancy_, *device_, "replay");
  if (!graph.valid())
    throw Error("replay: the graph is empty (moved from or default-constructed)");
  check_not_capturing("replay");
  GraphState &state = *graph.state_;
  if (state.device != device_)
    throw Error(fmt::format("replay: the graph was captured on another runtime (device {}: {}); "
                            "replay it on the runtime that captured it",
                            state.device->info().backend, state.device->info().name));
  for (size_t i = 0; i < state.launches.size(); ++i) {
    const CapturedLaunch &launch = state.launches[i];
    for (const auto &[param, token] : launch.buffers)
      if (token.expired())
        throw Error(fmt::format("replay: graph launch {} (kernel '{}'): {}: its Buffer was "
                                "destroyed after the capture (a graph owns only the Buffers "
                                "allocated during its capture: keep the others alive while it is "
                                "replayed)",
                                i, launch.kernel.name(),
                                describe_parameter(*launch.kernel.kernel_, param)));
  }
  state.graph->replay(*stream_);
}

} // namespace cubecc::runtime
