//===- runtime.cpp - The context, its streams, the kernel cache and checked launches ----------===//
#include "cubecc/runtime/runtime.h"

#include "cubecc/ir/clone.h"
#include "cubecc/ir/float16.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include "context.h"
#include "cubecc/runtime/log.h"
#include "kernel_cache.h"
#include "memory_pool.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
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
/// whose capture used it: when the last lets go, the pool's deletion queue lets the device forget
/// it and runs the caller's release callback once no stream's queued work can use it.
struct SharedBlock {
  SharedBlock(std::shared_ptr<MemoryPool> pool, DeviceMemory memory)
      : pool(std::move(pool)), memory(memory) {}
  SharedBlock(std::shared_ptr<MemoryPool> pool, DeviceMemory memory, std::function<void()> release)
      : pool(std::move(pool)), memory(memory), adopted(true), release(std::move(release)) {}
  SharedBlock(const SharedBlock &) = delete;
  SharedBlock &operator=(const SharedBlock &) = delete;
  ~SharedBlock() {
    if (adopted)
      pool->release_adopted(memory, std::move(release));
    else
      pool->release(memory);
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
std::span<const KernelParameter> KernelHandle::parameters() const {
  return kernel_->parameters;
}
std::string KernelHandle::signature() const {
  std::string s = kernel_->name + "(";
  for (size_t i = 0; i < kernel_->parameters.size(); ++i)
    s += (i ? ", " : "") + kernel_->parameters[i].describe();
  return s + ")";
}

//===- Kernels -------------------------------------------------------------------------------===//

namespace {

/// A binary compiled elsewhere must take the kernel's parameters, laid out the same way, and run
/// its workgroup shape (launches are sized by it).
void check_abi(const ir::Kernel &kernel, const codegen::KernelAbi &abi) {
  std::string why = codegen::launch_shape_difference(abi, "the compiled binary",
                                                     codegen::KernelAbi::of(kernel), "the kernel");
  if (!why.empty())
    throw Error(ErrorKind::Environment, fmt::format("kernel '{}': {}", kernel.name(), why));
}

std::shared_ptr<LoadedKernel> describe(const ir::Kernel &kernel, const ir::Hash128 &hash) {
  auto loaded = std::make_shared<LoadedKernel>();
  loaded->name = kernel.name();
  loaded->hash = hash;
  for (unsigned i = 0; i < kernel.num_parameters(); ++i)
    loaded->params.push_back({kernel.parameter(i)->name(), kernel.parameter(i)->type(),
                              kernel.parameter(i)->has_uses()});
  loaded->parameters = group_parameters(loaded->params);
  return loaded;
}

} // namespace

//===- The context ---------------------------------------------------------------------------===//

KernelHandle Context::load(const ir::Kernel &kernel, std::string_view key) {
  ir::Hash128 hash = ir::structural_hash(kernel);
  if (auto cached = find(hash)) {
    if (!key.empty())
      insert(cached, key);
    return KernelHandle(std::move(cached));
  }
  std::lock_guard compile(compile_mutex);
  return load_locked(kernel, key);
}

KernelHandle Context::load_locked(const ir::Kernel &kernel, std::string_view key) {
  ir::Hash128 hash = ir::structural_hash(kernel);
  if (auto cached = find(hash)) { // another thread loaded it while this one waited
    if (!key.empty())
      insert(cached, key);
    return KernelHandle(std::move(cached));
  }
  count(&KernelCacheStatistics::misses);
  if (environment) {
    struct Count { // into the statistics, also when the lookup throws (a miss without fallback)
      Context &context;
      EnvironmentStatistics counted;
      ~Count() { context.count_environment(counted); }
    } count{*this, {}};
    if (std::unique_ptr<CompiledKernel> compiled =
            load_from_environment(*environment, *device, kernel, hash, kRuntimeCompileOptions,
                                  environment_options, count.counted)) {
      auto loaded = describe(kernel, hash);
      check_abi(kernel, compiled->abi());
      loaded->compiled = std::move(compiled);
      insert(loaded, key);
      return KernelHandle(std::move(loaded));
    }
  }
  if (auto problems = ir::verify(kernel); !problems.empty())
    throw Error(
        ErrorKind::Compile,
        fmt::format("kernel '{}' does not verify:\n{}", kernel.name(), ir::to_string(problems)),
        problems);
  std::unique_ptr<ir::Module> module = ir::copy_kernel(kernel);
  std::vector<ir::Diagnostic> errors = passes::optimize(*module, 2);
  if (errors.empty())
    errors = ir::verify(*module);
  if (!errors.empty())
    throw Error(ErrorKind::Internal,
                fmt::format("kernel '{}': optimizing at -O2 failed (a bug in cubecc):\n{}",
                            kernel.name(), ir::to_string(errors)),
                errors);
  auto loaded = describe(kernel, hash);
  loaded->compiled = device->compile(*module->kernels().front());
  count(&KernelCacheStatistics::compiles);
  insert(loaded, key);
  return KernelHandle(std::move(loaded));
}

const ir::Kernel &only_kernel(std::string_view key, const std::unique_ptr<ir::Module> &module) {
  if (!module || module->kernels().size() != 1)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("kernel '{}': the trace must give a module with exactly one kernel "
                            "(it gave {})",
                            key, module ? module->kernels().size() : 0));
  return *module->kernels().front();
}

template <class Trace> KernelHandle Context::kernel(std::string_view key, Trace &&trace) {
  if (auto cached = find_keyed(key))
    return KernelHandle(std::move(cached));
  std::lock_guard compile(compile_mutex);
  if (auto cached = find_keyed(key)) // traced by another thread while this one waited
    return KernelHandle(std::move(cached));
  count(&KernelCacheStatistics::traces);
  if constexpr (std::is_same_v<decltype(trace()), const ir::Kernel &>) {
    return load_locked(trace(), key);
  } else {
    std::unique_ptr<ir::Module> module = trace();
    return load_locked(only_kernel(key, module), key);
  }
}

//===- Streams -------------------------------------------------------------------------------===//

/// One stream of a context: the device's stream, its registration with the pool's deletion
/// queue and its capture. A Stream holds one; so does a Runtime, for its default stream, with
/// `lock` held around each call.
struct StreamState {
  StreamState(std::shared_ptr<Context> c)
      : context(std::move(c)), stream(context->device->create_stream()),
        pool_id(context->pool->add_stream(*stream)) {}
  StreamState(const StreamState &) = delete;
  StreamState &operator=(const StreamState &) = delete;
  ~StreamState() {
    capture.reset(); // an unfinished capture is abandoned
    try {
      stream->synchronize();
    } catch (const Error &) {
      // A failed launch was the caller's to see at synchronize(); destruction must go on.
    }
    context->pool->remove_stream(pool_id); // its work is done: blocks waiting for it may go
    stream.reset();
  }

  std::shared_ptr<Context> context;
  std::unique_ptr<DeviceStream> stream;
  uint64_t pool_id = 0;
  std::unique_ptr<GraphState> capture;  ///< the graph being captured, or null
  std::mutex lock;                      ///< the Runtime's default stream: held around each call
  std::atomic<std::thread::id> owner{}; ///< a Stream: the thread inside, if any
  std::atomic<const char *> call{nullptr};

  Buffer allocate(ir::Scalar element, size_t count);
  void write(Buffer &buffer, const void *src, uint64_t bytes);
  void read(const Buffer &buffer, void *dst, uint64_t bytes);
  void launch_values(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                     std::span<const ArgumentValue> args);
  void launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
              std::span<const LaunchArg> args);
  void synchronize();
  void begin_capture();
  Graph end_capture();
  void replay(Graph &graph);
  void check_not_capturing(const char *what) const;
  void record(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
              std::span<const LaunchArg> args,
              std::vector<std::pair<size_t, std::weak_ptr<const bool>>> buffers);
};

namespace {

/// Held for the duration of one Stream call: claims the stream for this thread, or throws when
/// another thread is inside it (never a race).
class StreamUse {
public:
  StreamUse(const std::unique_ptr<StreamState> &state, const char *call) {
    if (!state)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("Stream::{}: the stream is empty (moved from or "
                              "default-constructed): make one with Runtime::create_stream()",
                              call));
    const std::thread::id self = std::this_thread::get_id();
    std::thread::id expected{};
    if (state->owner.compare_exchange_strong(expected, self)) {
      state_ = state.get();
      state_->call.store(call);
    } else if (expected != self) {
      const char *other = state->call.load();
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("Stream::{} was called on one thread while another thread is "
                              "inside Stream::{} of the same stream: a stream is used by one "
                              "thread at a time; give each thread its own stream "
                              "(Runtime::create_stream)",
                              call, other ? other : "(a call)"));
    }
  }
  StreamUse(const StreamUse &) = delete;
  StreamUse &operator=(const StreamUse &) = delete;
  ~StreamUse() {
    if (state_) {
      MemoryPool &pool = *state_->context->pool;
      state_->call.store(nullptr);
      state_->owner.store(std::thread::id{});
      pool.release_ready(); // release callbacks, with the stream free again
    }
  }

private:
  StreamState *state_ = nullptr; ///< set when this call claimed the stream (not nested)
};

} // namespace

Buffer StreamState::allocate(ir::Scalar element, size_t count) {
  if (element == ir::Scalar::Bool)
    throw Error(ErrorKind::InvalidArgument,
                "cannot allocate a buffer of bool: buffers hold numbers (use u8 or u32)");
  const uint64_t element_bytes = ir::scalar_bits(element) / 8;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(uint64_t(count), element_bytes, &bytes))
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("allocate: {} elements of {} are more than 2^64 bytes", count,
                            ir::scalar_name(element)));
  // Each device refuses what it cannot hold (OutOfMemory): a Vulkan buffer may be larger than
  // the largest range a shader binds (DeviceInfo::max_buffer_bytes), bound in parts. Past 2^62
  // bytes no device holds it, and the pool's size classes (powers of two) would overflow.
  if (bytes > uint64_t(1) << 62)
    throw Error(ErrorKind::OutOfMemory,
                fmt::format("allocate: out of memory: {} elements of {} ({} bytes) are more than "
                            "any device holds",
                            count, ir::scalar_name(element), bytes));
  Buffer b;
  b.memory_ = context->pool->acquire(bytes, pool_id);
  b.pool_ = context->pool;
  b.element_ = element;
  b.count_ = count;
  if (capture) {
    b.shared_block_ = std::make_shared<const SharedBlock>(context->pool, b.memory_);
    capture->allocations.insert(b.shared_block_);
  }
  return b;
}

void StreamState::write(Buffer &buffer, const void *src, uint64_t bytes) {
  check_not_capturing("upload");
  if (!buffer.valid() || bytes > buffer.bytes())
    throw Error(
        ErrorKind::InvalidArgument,
        fmt::format("upload: {} bytes do not fit a buffer of {} bytes", bytes, buffer.bytes()));
  if (bytes)
    stream->upload(buffer.memory_, 0, src, bytes);
}

void StreamState::read(const Buffer &buffer, void *dst, uint64_t bytes) {
  check_not_capturing("download");
  if (!buffer.valid() || bytes > buffer.bytes())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("download: {} bytes are more than a buffer of {} bytes", bytes,
                            buffer.bytes()));
  if (bytes)
    stream->download(buffer.memory_, 0, dst, bytes);
  context->pool->collect(); // the stream's work before the copy is done
}

void StreamState::synchronize() {
  check_not_capturing("synchronize");
  stream->synchronize();
  context->pool->collect();
}

void check_host_copy(const Buffer &buffer, ir::Scalar element, size_t count, const char *what) {
  if (!buffer.valid())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: the buffer is empty (moved from or default-constructed)", what));
  if (buffer.element() != element)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: the buffer holds {}, the host data is {}", what,
                            ir::scalar_name(buffer.element()), ir::scalar_name(element)));
  if (count > buffer.size())
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: {} elements do not fit a buffer of {}",
                                                        what, count, buffer.size()));
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
  throw Error(ErrorKind::InvalidArgument, fmt::format("launch of kernel '{}': {}: {}", k.name,
                                                      describe_parameter(k, i), problem));
}

void check_count(const LoadedKernel &k, size_t given) {
  if (given == k.params.size())
    return;
  std::string signature;
  for (size_t i = 0; i < k.params.size(); ++i)
    signature += (i ? ", " : "") + describe_parameter(k, i);
  throw Error(ErrorKind::InvalidArgument,
              fmt::format("launch of kernel '{}': {} argument(s) given, the kernel has {} "
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
  case ir::ScalarClass::Float:
  case ir::ScalarClass::StorageFloat: {
    if (kind != ArgumentValue::Float)
      fail(k, i,
           fmt::format("needs a floating-point value, got {} (convert it explicitly)",
                       kind_name(kind)));
    double d = std::bit_cast<double>(bits);
    // A finite value past the type's largest finite one (by more than rounding reaches) would
    // become an infinity, silently: refused (infinities and NaNs themselves pass).
    const double overflow = s == ir::Scalar::F32    ? 0x1.ffffffp127 // FLT_MAX + half an ulp
                            : s == ir::Scalar::F16  ? 65520.0
                            : s == ir::Scalar::BF16 ? 0x1.fep127
                                                    : HUGE_VAL;
    if (std::isfinite(d) && std::fabs(d) >= overflow)
      fail(k, i,
           fmt::format("the value {} does not fit {} (it would become an infinity)", d,
                       ir::scalar_name(s)));
    switch (s) {
    case ir::Scalar::F64:
      return bits;
    case ir::Scalar::F32:
      return std::bit_cast<uint32_t>(static_cast<float>(d));
    case ir::Scalar::F16:
      return ir::float_to_f16_bits(static_cast<float>(d));
    case ir::Scalar::BF16:
      return ir::float_to_bf16_bits(static_cast<float>(d));
    default: // a storage float: rounded once from the double, as `cast` rounds
      return ir::from_double(s, d);
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

void StreamState::launch_values(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                                std::span<const ArgumentValue> args) {
  if (!kernel.valid())
    throw Error(ErrorKind::InvalidArgument, "launch: the kernel handle is empty");
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
        uint64_t count =
            a.count == ArgumentValue::kWholeBuffer && a.first <= size ? size - a.first : a.count;
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
      if (capture && a.buffer->adopted()) {
        capture->allocations.insert(a.buffer->shared_block_);
      } else if (capture && !capture->allocations.contains(a.buffer->shared_block_)) {
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
  if (capture)
    record(kernel, num_workgroups, launch_args, std::move(buffer_tokens));
  else
    stream->launch(*k.compiled, num_workgroups, launch_args);
}

void StreamState::launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                         std::span<const LaunchArg> args) {
  if (!kernel.valid())
    throw Error(ErrorKind::InvalidArgument, "launch: the kernel handle is empty");
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
  if (capture)
    record(kernel, num_workgroups, args, {});
  else
    stream->launch(*k.compiled, num_workgroups, args);
}

//===- Graphs --------------------------------------------------------------------------------===//

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
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("graph: no launch {} (the graph has {})", launch, num_launches()));
  return state_->launches[launch].kernel.name();
}

void Graph::set_value(size_t launch, size_t param, const ArgumentValue &value) {
  if (!state_ || launch >= state_->launches.size())
    throw Error(
        ErrorKind::InvalidArgument,
        fmt::format("graph: set_value: no launch {} (the graph has {})", launch, num_launches()));
  const LoadedKernel &k = *state_->launches[launch].kernel.kernel_;
  std::string where = fmt::format("graph launch {} (kernel '{}')", launch, k.name);
  if (param >= k.params.size())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: set_value: no parameter {} (the kernel has {})", where, param,
                            k.params.size()));
  ir::Type type = k.params[param].type;
  if (type.kind() == ir::TypeKind::Buffer || value.kind == ArgumentValue::BufferArg)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: set_value: {} is {}; only value parameters can be changed "
                            "(capture again to use other buffers)",
                            where, describe_parameter(k, param),
                            type.kind() == ir::TypeKind::Buffer ? "a buffer" : "given a buffer"));
  if (value.lanes != type.lanes())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: set_value: {}: needs {} lane(s), got {}", where,
                            describe_parameter(k, param), type.lanes(), value.lanes));
  std::vector<uint64_t> bits(value.lanes);
  try {
    for (uint32_t l = 0; l < value.lanes; ++l)
      bits[l] = convert_lane(k, param, type.element(), value.kind, value.bits[l]);
  } catch (const Error &e) {
    throw Error(e.kind(), fmt::format("graph launch {}: set_value: {}", launch, e.what()));
  }
  state_->graph->set_value(launch, param, bits);
}

void StreamState::check_not_capturing(const char *what) const {
  if (capture)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: a graph capture is in progress ({} launch(es) recorded); "
                            "copies and waits cannot be captured: call end_capture() first",
                            what, capture->launches.size()));
}

void StreamState::begin_capture() {
  if (capture)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("begin_capture: a capture is already in progress ({} launch(es) "
                            "recorded); captures do not nest: call end_capture() first",
                            capture->launches.size()));
  auto state = std::make_unique<GraphState>();
  state->device = context->device;
  state->graph = stream->create_graph();
  capture = std::move(state);
}

Graph StreamState::end_capture() {
  if (!capture)
    throw Error(ErrorKind::InvalidArgument,
                "end_capture: no capture in progress (call begin_capture() first)");
  std::unique_ptr<GraphState> state = std::move(capture);
  state->graph->finish();
  Graph graph;
  graph.state_ = std::move(state);
  return graph;
}

void StreamState::record(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                         std::span<const LaunchArg> args,
                         std::vector<std::pair<size_t, std::weak_ptr<const bool>>> buffers) {
  capture->graph->add_launch(kernel.compiled(), num_workgroups, args);
  capture->launches.push_back({kernel, std::move(buffers)});
}

void StreamState::replay(Graph &graph) {
  if (!graph.valid())
    throw Error(ErrorKind::InvalidArgument,
                "replay: the graph is empty (moved from or default-constructed)");
  check_not_capturing("replay");
  GraphState &state = *graph.state_;
  if (state.device != context->device)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("replay: the graph was captured on another runtime (device {}: {}); "
                            "replay it on the runtime that captured it",
                            state.device->info().backend, state.device->info().name));
  for (size_t i = 0; i < state.launches.size(); ++i) {
    const CapturedLaunch &launch = state.launches[i];
    for (const auto &[param, token] : launch.buffers)
      if (token.expired())
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("replay: graph launch {} (kernel '{}'): {}: its Buffer was "
                                "destroyed after the capture (a graph owns only the Buffers "
                                "allocated during its capture: keep the others alive while it is "
                                "replayed)",
                                i, launch.kernel.name(),
                                describe_parameter(*launch.kernel.kernel_, param)));
  }
  state.graph->replay(*stream);
}

//===- Event and Stream ----------------------------------------------------------------------===//

bool Event::done() const {
  if (!event_)
    throw Error(ErrorKind::InvalidArgument,
                "Event::done: the event is empty (make one with Stream::record())");
  return event_->done();
}

void Event::synchronize() const {
  if (!event_)
    throw Error(ErrorKind::InvalidArgument,
                "Event::synchronize: the event is empty (make one with Stream::record())");
  event_->wait();
}

Stream::Stream() = default;
Stream::Stream(Stream &&) noexcept = default;
Stream &Stream::operator=(Stream &&) noexcept = default;
Stream::~Stream() = default;

const DeviceInfo &Stream::info() const {
  if (!state_)
    throw Error(ErrorKind::InvalidArgument, "Stream::info: the stream is empty");
  return state_->context->device->info();
}

Buffer Stream::allocate(ir::Scalar element, size_t count) {
  StreamUse use(state_, "allocate");
  return state_->allocate(element, count);
}
void Stream::write(Buffer &buffer, const void *src, uint64_t bytes) {
  StreamUse use(state_, "write");
  state_->write(buffer, src, bytes);
}
void Stream::read(const Buffer &buffer, void *dst, uint64_t bytes) {
  StreamUse use(state_, "read");
  state_->read(buffer, dst, bytes);
}
void Stream::launch_values(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                           std::span<const ArgumentValue> args) {
  StreamUse use(state_, "launch");
  state_->launch_values(kernel, num_workgroups, args);
}
void Stream::launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                    std::span<const LaunchArg> args) {
  StreamUse use(state_, "launch");
  state_->launch(kernel, num_workgroups, args);
}
KernelHandle Stream::load(const ir::Kernel &kernel) {
  StreamUse use(state_, "load");
  return state_->context->load(kernel);
}
KernelHandle Stream::kernel(std::string_view key, FunctionRef<const ir::Kernel &()> trace) {
  StreamUse use(state_, "kernel");
  return state_->context->kernel(key, trace);
}
KernelHandle Stream::kernel(std::string_view key,
                            FunctionRef<std::unique_ptr<ir::Module>()> trace) {
  StreamUse use(state_, "kernel");
  return state_->context->kernel(key, trace);
}
void Stream::synchronize() {
  StreamUse use(state_, "synchronize");
  state_->synchronize();
}
Event Stream::record() {
  StreamUse use(state_, "record");
  state_->check_not_capturing("record");
  Event event;
  event.event_ = state_->stream->record();
  event.context_ = state_->context;
  return event;
}
void Stream::wait(const Event &event) {
  StreamUse use(state_, "wait");
  if (!event.valid())
    throw Error(ErrorKind::InvalidArgument,
                "Stream::wait: the event is empty (make one with Stream::record())");
  if (event.context_ != state_->context)
    throw Error(ErrorKind::InvalidArgument,
                "Stream::wait: the event was recorded on a stream of another Runtime: events "
                "order the streams of one Runtime");
  state_->check_not_capturing("wait");
  state_->stream->wait(*event.event_);
}
std::vector<double> Stream::last_launch_times_ns() const {
  StreamUse use(state_, "last_launch_times_ns");
  return state_->stream->last_launch_times_ns();
}
void Stream::begin_capture() {
  StreamUse use(state_, "begin_capture");
  state_->begin_capture();
}
Graph Stream::end_capture() {
  StreamUse use(state_, "end_capture");
  return state_->end_capture();
}
bool Stream::capturing() const {
  return state_ && state_->capture != nullptr;
}
void Stream::replay(Graph &graph) {
  StreamUse use(state_, "replay");
  state_->replay(graph);
}

//===- Runtime -------------------------------------------------------------------------------===//

Runtime Runtime::open(const std::string &name, PoolOptions pool) {
  log_level(); // reads CUBECC_LOG now, so that a value it does not know is warned about at start
  Runtime runtime(open_device(name), pool);
  if (const char *path = std::getenv("CUBECC_ENV"); path && *path)
    runtime.use_environment(path);
  return runtime;
}

Runtime::Runtime(std::unique_ptr<Device> device, PoolOptions pool)
    : context_(std::make_shared<Context>(std::move(device), pool)),
      default_(std::make_unique<StreamState>(context_)) {}

Runtime::Runtime(Runtime &&) noexcept = default;
Runtime &Runtime::operator=(Runtime &&) noexcept = default;
Runtime::~Runtime() = default; // the default stream waits for its work as it goes

namespace {

/// The Runtime's default stream, locked for one call.
class DefaultStream {
public:
  DefaultStream(const std::unique_ptr<StreamState> &state, const char *call) {
    if (!state)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("Runtime::{}: the runtime is empty (moved from)", call));
    lock_ = std::unique_lock(state->lock);
    state_ = state.get();
  }
  DefaultStream(const DefaultStream &) = delete;
  DefaultStream &operator=(const DefaultStream &) = delete;
  /// Unlocks, then lets go the adopted memory the call found done: a release callback is the
  /// caller's code, which may call the runtime or take a lock a thread calling it holds.
  ~DefaultStream() {
    MemoryPool &pool = *state_->context->pool;
    lock_.unlock();
    pool.release_ready();
  }
  StreamState *operator->() const { return state_; }

private:
  std::unique_lock<std::mutex> lock_;
  StreamState *state_ = nullptr;
};

} // namespace

const DeviceInfo &Runtime::info() const {
  return context_->device->info();
}

Device &Runtime::device() {
  return *context_->device;
}

Stream Runtime::create_stream() {
  Stream stream;
  stream.state_ = std::make_unique<StreamState>(context_);
  return stream;
}

Buffer Runtime::allocate(ir::Scalar element, size_t count) {
  return DefaultStream(default_, "allocate")->allocate(element, count);
}

void Runtime::write(Buffer &buffer, const void *src, uint64_t bytes) {
  DefaultStream(default_, "write")->write(buffer, src, bytes);
}

void Runtime::read(const Buffer &buffer, void *dst, uint64_t bytes) {
  DefaultStream(default_, "read")->read(buffer, dst, bytes);
}

Buffer Runtime::adopt_memory(const ExternalMemory &memory, ir::Scalar element,
                             std::function<void()> release) {
  Device &device = *context_->device;
  const char *what = external_memory_kind_name(memory.kind);
  const std::string &backend = device.info().backend;
  if (device.memory_kind() != memory.kind)
    throw Error(ErrorKind::Unsupported,
                fmt::format("adopt_memory: {} can be adopted only by a runtime on the {} device; "
                            "this runtime's device is {} ({}): adopt memory of its own backend",
                            what, external_memory_backend(memory.kind), backend,
                            device.info().name));
  if (memory.handle == 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("adopt_memory: {} is null", what));
  if (element == ir::Scalar::Bool)
    throw Error(ErrorKind::InvalidArgument,
                "adopt_memory: buffers cannot hold bool (adopt the memory as u8 or u32)");
  uint64_t element_bytes = ir::scalar_bits(element) / 8;
  if (memory.bytes == 0)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("adopt_memory: {} of 0 bytes: adopted memory must hold at least one "
                            "{} element",
                            what, ir::scalar_name(element)));
  if (memory.bytes % element_bytes)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("adopt_memory: {} bytes of {} are not a whole number of {} elements "
                            "({} bytes each)",
                            memory.bytes, what, ir::scalar_name(element), element_bytes));
  bool is_pointer = memory.kind != ExternalMemory::Kind::Vulkan;
  if (uint64_t end = 0; __builtin_add_overflow(is_pointer ? uint64_t(memory.handle) : memory.offset,
                                               memory.bytes, &end))
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("adopt_memory: {} bytes at {} {:#x} wrap around the end of the "
                            "address space",
                            memory.bytes, is_pointer ? what : "the VkBuffer offset",
                            is_pointer ? memory.handle : memory.offset));
  if (is_pointer ? memory.handle % element_bytes : memory.offset % element_bytes)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("adopt_memory: {} {:#x} is not aligned to the {} bytes of a {} "
                            "element",
                            is_pointer ? std::string(what) : std::string("the VkBuffer offset"),
                            is_pointer ? memory.handle : memory.offset, element_bytes,
                            ir::scalar_name(element)));
  Buffer b;
  b.memory_ = device.adopt_memory(memory);
  b.pool_ = context_->pool;
  b.element_ = element;
  b.count_ = memory.bytes / element_bytes;
  b.shared_block_ =
      std::make_shared<const SharedBlock>(context_->pool, b.memory_, std::move(release));
  return b;
}

ExternalMemory Runtime::native_memory(const Buffer &buffer) const {
  if (!buffer.valid())
    throw Error(ErrorKind::InvalidArgument,
                "native_memory: the buffer is empty (moved from or default-constructed)");
  ExternalMemory memory = context_->device->native_memory(buffer.memory_);
  memory.bytes = buffer.bytes();
  return memory;
}

PoolStatistics Runtime::pool_statistics() const {
  return context_->pool->statistics();
}

const PoolOptions &Runtime::pool_options() const {
  return context_->pool->options();
}

void Runtime::trim() {
  context_->pool->trim();
}

KernelHandle Runtime::load(const ir::Kernel &kernel) {
  return context_->load(kernel);
}

KernelHandle Runtime::kernel(std::string_view key, FunctionRef<const ir::Kernel &()> trace) {
  return context_->kernel(key, trace);
}

KernelHandle Runtime::kernel(std::string_view key,
                             FunctionRef<std::unique_ptr<ir::Module>()> trace) {
  return context_->kernel(key, trace);
}

KernelHandle Runtime::adopt(const ir::Kernel &kernel, std::unique_ptr<CompiledKernel> compiled) {
  check_abi(kernel, compiled->abi());
  auto loaded = describe(kernel, ir::structural_hash(kernel));
  loaded->compiled = std::move(compiled);
  context_->insert(loaded);
  return KernelHandle(std::move(loaded));
}

KernelCacheStatistics Runtime::cache_statistics() const {
  std::lock_guard lock(context_->cache_mutex);
  return context_->cache.statistics;
}

void Runtime::use_environment(const std::string &path, EnvironmentOptions options) {
  std::shared_ptr<const EnvironmentSource> environment;
  try {
    environment = open_environment(path, options);
  } catch (const Error &e) {
    if (!options.fallback_to_jit)
      throw;
    // The application still runs, compiling what it needs: said loudly, once.
    log_warning("{}; running without it (kernels are compiled as they are needed)", e.what());
    std::scoped_lock lock(context_->compile_mutex, context_->environment_mutex);
    context_->environment.reset();
    return;
  }
  use_environment(std::move(environment), std::move(options));
}

void Runtime::use_environment(std::shared_ptr<const EnvironmentSource> environment,
                              EnvironmentOptions options) {
  // The signature policy, before anything of the environment is used: a refused one is not
  // used at all (not even its tuning records).
  if (environment && requires_signature(options)) {
    if (std::string why = environment->refusal(options); !why.empty()) {
      if (!options.fallback_to_jit)
        throw Error(ErrorKind::Environment, why);
      log_warning("{}; running without it (kernels are compiled as they are needed)", why);
      environment.reset();
    }
  }
  std::scoped_lock lock(context_->compile_mutex, context_->environment_mutex);
  context_->environment = std::move(environment);
  context_->environment_options = std::move(options);
  if (context_->environment)
    log_debug("runtime: using environment {}", context_->environment->name());
}

const EnvironmentSource *Runtime::environment() const {
  std::lock_guard lock(context_->environment_mutex);
  return context_->environment.get();
}

EnvironmentStatistics Runtime::environment_statistics() const {
  std::lock_guard lock(context_->environment_mutex); // not compile_mutex: no wait for a compile
  return context_->environment_statistics;
}

std::optional<std::string> Runtime::find_tuning_record(std::string_view key) const {
  std::shared_ptr<const EnvironmentSource> environment;
  {
    std::lock_guard lock(context_->environment_mutex);
    environment = context_->environment;
  }
  return environment ? environment->find_tuning(key) : std::nullopt;
}

void Runtime::launch_values(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                            std::span<const ArgumentValue> args) {
  DefaultStream(default_, "launch")->launch_values(kernel, num_workgroups, args);
}

void Runtime::launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                     std::span<const LaunchArg> args) {
  DefaultStream(default_, "launch")->launch(kernel, num_workgroups, args);
}

void Runtime::synchronize() {
  DefaultStream(default_, "synchronize")->synchronize();
}

std::vector<double> Runtime::last_launch_times_ns() const {
  return DefaultStream(default_, "last_launch_times_ns")->stream->last_launch_times_ns();
}

void Runtime::begin_capture() {
  DefaultStream(default_, "begin_capture")->begin_capture();
}

Graph Runtime::end_capture() {
  return DefaultStream(default_, "end_capture")->end_capture();
}

bool Runtime::capturing() const {
  return DefaultStream(default_, "capturing")->capture != nullptr;
}

void Runtime::replay(Graph &graph) {
  DefaultStream(default_, "replay")->replay(graph);
}

} // namespace cubecc::runtime
