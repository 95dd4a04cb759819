//===- runtime.h - A thread-safe context per device, streams, pools, the kernel cache ---------===//
//
// A Runtime is the context of one Device (device.h): what every application needs on top of it,
// shared by all its threads.
//   - Buffers: move-only handles to typed device memory from an adaptive pool, so that
//     allocating in a loop reuses blocks instead of calling the driver. A Buffer may be destroyed
//     on any thread at any time: its block waits in the pool's deletion queue until the work
//     queued before on every stream is done, and no free ever touches a stream's recording.
//   - load(): optimizes a kernel (-O2, verified), compiles it on the device and caches the result
//     by the kernel's structural hash, so loading an equal kernel again never re-lowers it;
//     kernel(key, trace): the same behind a caller's stable key, so a warm launch neither
//     re-traces nor re-lowers. One compile at a time per Runtime; lookups run in parallel.
//   - Streams (create_stream): in-order queues of copies and launches, several per device, each
//     used by one thread at a time (a second thread that enters a Stream another is inside gets
//     an Error, never a race); Events order work across streams and let the host wait. The
//     Runtime's own allocate/upload/download/launch/synchronize/capture members use its default
//     stream, locked around each call: any thread may call them.
//   - launch(): typed arguments checked against the kernel's IR signature; errors name the kernel
//     and the parameter.
// Every member of Runtime may be called from any thread at once; Stream members from the
// thread that uses the stream. Errors are runtime::Error, whose kind() says what failed.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/types.h"
#include "cubecc/runtime/device.h"
#include "cubecc/runtime/environment_source.h"
#include "cubecc/runtime/memory_pool.h"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubecc::ir {
class Kernel;
class Module;
} // namespace cubecc::ir

namespace cubecc::runtime {

class MemoryPool;
class KernelCache;
class Runtime;
class Stream;
struct LoadedKernel;
struct GraphState;
struct SharedBlock;
struct Context;
struct StreamState;

/// A non-owning reference to a callable, for callbacks that run only during the call.
template <class Signature> class FunctionRef;
template <class R> class FunctionRef<R()> {
public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F &>)
      FunctionRef(F &&f) // NOLINT(google-explicit-constructor): used like a function parameter
      : object_(const_cast<void *>(static_cast<const void *>(&f))), call_([](void *object) -> R {
          return (*static_cast<std::remove_reference_t<F> *>(object))();
        }) {}
  R operator()() const { return call_(object_); }

private:
  void *object_;
  R (*call_)(void *);
};

/// The IR element type of a C++ arithmetic type (bool excluded: buffers cannot hold bool).
template <class T>
inline constexpr bool is_element_type_v = (std::is_integral_v<T> && !std::is_same_v<T, bool>) ||
                                          std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T>
requires is_element_type_v<T>
constexpr ir::Scalar element_type_of() {
  if constexpr (std::is_same_v<T, float>)
    return ir::Scalar::F32;
  else if constexpr (std::is_same_v<T, double>)
    return ir::Scalar::F64;
  else if constexpr (std::is_signed_v<T>)
    return sizeof(T) == 1   ? ir::Scalar::I8
           : sizeof(T) == 2 ? ir::Scalar::I16
           : sizeof(T) == 4 ? ir::Scalar::I32
                            : ir::Scalar::I64;
  else
    return sizeof(T) == 1   ? ir::Scalar::U8
           : sizeof(T) == 2 ? ir::Scalar::U16
           : sizeof(T) == 4 ? ir::Scalar::U32
                            : ir::Scalar::U64;
}

/// Device memory holding `size()` elements of `element()`. Move-only; its block goes back to the
/// runtime's pool when the Buffer is destroyed (the pool outlives the Runtime if need be) or, for
/// a Buffer allocated during a graph capture, when both the Buffer and the graph are gone. A
/// Buffer from Runtime::adopt_memory uses memory the caller owns instead: never freed by cubecc,
/// it is let go (and the release callback called) when the Buffer and every graph that used it
/// are gone.
class Buffer {
public:
  Buffer() = default;
  Buffer(Buffer &&other) noexcept { swap(other); }
  Buffer &operator=(Buffer &&other) noexcept {
    Buffer(std::move(other)).swap(*this);
    return *this;
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer();

  bool valid() const { return pool_ != nullptr; }
  /// Whether the memory is the caller's (Runtime::adopt_memory) rather than the pool's.
  bool adopted() const;
  ir::Scalar element() const { return element_; }
  size_t size() const { return count_; } ///< elements
  uint64_t bytes() const { return count_ * (ir::scalar_bits(element_) / 8); }
  /// The pool block (its size is the bucket's, at least bytes()).
  const DeviceMemory &memory() const { return memory_; }
  /// The whole buffer as a launch argument (the kernel sees size() elements).
  LaunchArg arg() const;

private:
  friend class Runtime;
  friend struct StreamState;
  friend struct Context;
  void swap(Buffer &other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(memory_, other.memory_);
    std::swap(element_, other.element_);
    std::swap(count_, other.count_);
    std::swap(capture_token_, other.capture_token_);
    std::swap(shared_block_, other.shared_block_);
  }
  std::shared_ptr<MemoryPool> pool_;
  DeviceMemory memory_;
  ir::Scalar element_ = ir::Scalar::U8;
  size_t count_ = 0;
  /// Made when a capture first uses the Buffer: graphs hold it weakly, so a replay sees that the
  /// Buffer (and with it the block) is gone. Follows the block through moves.
  mutable std::shared_ptr<const bool> capture_token_;
  /// Set when the Buffer was allocated during a capture: the block is shared with that graph and
  /// goes back to the pool when the last of the two is destroyed (not by ~Buffer itself).
  std::shared_ptr<const SharedBlock> shared_block_;
};

/// What the kernel cache did.
struct KernelCacheStatistics {
  uint64_t hits = 0;     ///< load() or kernel() answered from the cache
  uint64_t misses = 0;   ///< loads that had to optimize and compile
  uint64_t compiles = 0; ///< device compilations (lowerings)
  uint64_t traces = 0;   ///< trace callbacks that kernel() called
};

/// One parameter of a kernel as its DSL function declares it, grouped from the IR parameters'
/// names (as traced, or as an environment bundle recorded them; dsl/memory.h):
///   Tensor  a dsl::Tensor<T, Rank> `x`: IR parameters x, x.shape0 .. x.shape<R-1>, x.stride0 ..
///           x.stride<R-1> (u32 each);
///   Array   a dsl::Array<T> `x`: its buffer alone;
///   Value   a scalar or a vector.
/// A kernel whose names are unknown has one Array or Value per IR parameter.
struct KernelParameter {
  enum class Kind : uint8_t { Tensor, Array, Value };
  Kind kind = Kind::Value;
  std::string name;   ///< "x"; "" when the kernel's names are unknown
  ir::Type type;      ///< the first IR parameter's type: a buffer (element()) or the value's type
  uint32_t rank = 0;  ///< Tensor: its dimensions; else 0
  uint32_t first = 0; ///< the index of its first IR parameter
  /// Tensor: whether the kernel reads any of its strides. A kernel that indexes the tensor by
  /// flat position alone (`x[i]`) takes only a contiguous tensor (the launch refuses another
  /// layout). True when unknown.
  bool reads_strides = true;
  /// "x: Tensor[f32, 2]", "x: Array[u8]", "a: f32", "v: f32x4", for messages and signatures.
  std::string describe() const;
};

/// A kernel compiled for this runtime's device. Cheap to copy; keeps the compiled kernel alive.
class KernelHandle {
public:
  KernelHandle() = default;
  bool valid() const { return kernel_ != nullptr; }
  const std::string &name() const;
  const codegen::KernelAbi &abi() const;
  /// The structural hash of the kernel as given (before optimization), 32 hex digits.
  std::string hash() const;
  const CompiledKernel &compiled() const;
  /// The kernel's parameters as the DSL function declares them (KernelParameter), in order.
  std::span<const KernelParameter> parameters() const;
  /// "axpy(x: Tensor[f32, 1], y: Tensor[f32, 1], a: f32)".
  std::string signature() const;

private:
  friend class Runtime;
  friend struct StreamState;
  friend struct Context;
  friend class Graph;
  explicit KernelHandle(std::shared_ptr<const LoadedKernel> kernel) : kernel_(std::move(kernel)) {}
  std::shared_ptr<const LoadedKernel> kernel_;
};

/// One argument of a typed launch: a buffer, a scalar, or a vector (std::array) of scalars. Made
/// implicitly from the arguments of Runtime::launch; checked against the parameter at launch.
struct ArgumentValue {
  enum Kind : uint8_t { BufferArg, Bool, Signed, Unsigned, Float } kind = BufferArg;
  const Buffer *buffer = nullptr;
  uint32_t lanes = 0;
  std::array<uint64_t, 16> bits{}; ///< Signed: int64 bits; Unsigned: uint64; Float: double bits
  /// BufferArg: the elements the kernel sees, [first, first + count); count = kWholeBuffer for
  /// the rest of the buffer.
  static constexpr uint64_t kWholeBuffer = ~uint64_t(0);
  uint64_t first = 0;
  uint64_t count = kWholeBuffer;

  ArgumentValue(const Buffer &b) : kind(BufferArg), buffer(&b) {} // NOLINT
  /// Elements [first, first + count) of `b` (checked at launch against the buffer's size).
  static ArgumentValue range(const Buffer &b, uint64_t first, uint64_t count) {
    ArgumentValue v(b);
    v.first = first;
    v.count = count;
    return v;
  }
  template <class T>
  requires std::is_arithmetic_v<T> ArgumentValue(T value) { // NOLINT
    set_lane(0, value);
    lanes = 1;
  }
  template <class T, size_t N>
  requires(std::is_arithmetic_v<T> &&N <= 16)
      ArgumentValue(const std::array<T, N> &values) { // NOLINT
    for (size_t i = 0; i < N; ++i)
      set_lane(i, values[i]);
    lanes = N;
  }

private:
  template <class T> void set_lane(size_t i, T value) {
    if constexpr (std::is_same_v<T, bool>) {
      kind = Bool;
      bits[i] = value ? 1 : 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      kind = Float;
      double d = static_cast<double>(value);
      bits[i] = std::bit_cast<uint64_t>(d);
    } else if constexpr (std::is_signed_v<T>) {
      kind = Signed;
      bits[i] = static_cast<uint64_t>(static_cast<int64_t>(value));
    } else {
      kind = Unsigned;
      bits[i] = static_cast<uint64_t>(value);
    }
  }
};

/// A captured sequence of launches (Runtime::begin_capture / end_capture), replayed with
/// Runtime::replay on the runtime that captured it. Move-only. It keeps its kernels, its device
/// and the blocks of the Buffers allocated during its capture alive, not the other buffers:
/// replay checks that every Buffer from before the capture it uses still exists.
class Graph {
public:
  Graph();
  Graph(Graph &&) noexcept;
  Graph &operator=(Graph &&) noexcept;
  ~Graph();

  bool valid() const { return state_ != nullptr; }
  size_t num_launches() const;
  /// The kernel of launch `launch` (in capture order).
  const std::string &kernel_name(size_t launch) const;
  /// Changes value parameter `param` of launch `launch` for the following replays, checked as a
  /// launch argument is (type, lanes, range). E.g. `graph.set_scalar(2, 3, 0.5f)`.
  void set_value(size_t launch, size_t param, const ArgumentValue &value);
  template <class T> void set_scalar(size_t launch, size_t param, const T &value) {
    set_value(launch, param, ArgumentValue(value));
  }

private:
  friend class Runtime;
  friend struct StreamState;
  friend struct Context;
  std::unique_ptr<GraphState> state_;
};

/// A point in a stream's work (Stream::record): done once everything queued on the stream before
/// it has finished. Cheap to copy; any thread may wait on it.
class Event {
public:
  Event() = default;
  bool valid() const { return event_ != nullptr; }
  /// Whether the work has finished; never blocks.
  bool done() const;
  /// Blocks until the work has finished. Throws Error (DeviceFailure) when it failed.
  void synchronize() const;

private:
  friend class Stream;
  std::shared_ptr<DeviceEvent> event_;
  std::shared_ptr<const Context> context_; ///< whose device recorded it
};

void check_host_copy(const Buffer &buffer, ir::Scalar element, size_t count, const char *what);

/// The typed members a Runtime and a Stream share, over their allocate, write, read and
/// launch_values (CRTP: `Queue` is Runtime or Stream).
template <class Queue> class QueueOps {
public:
  template <class T>
  requires is_element_type_v<T> Buffer allocate(size_t count) {
    return self().allocate(element_type_of<T>(), count);
  }
  template <class T>
  requires is_element_type_v<T> Buffer upload(std::span<const T> host) {
    Buffer b = allocate<T>(host.size());
    self().write(b, host.data(), host.size_bytes());
    return b;
  }
  template <class T>
  requires is_element_type_v<T> Buffer upload(const std::vector<T> &host) {
    return upload(std::span<const T>(host));
  }
  /// Copies into `buffer` (whose element type must be T and size at least host.size()).
  template <class T>
  requires is_element_type_v<T>
  void upload(Buffer &buffer, std::span<const T> host) {
    check_host_copy(buffer, element_type_of<T>(), host.size(), "upload");
    self().write(buffer, host.data(), host.size_bytes());
  }
  /// Waits for the work queued before it, then copies the first host.size() elements out.
  template <class T>
  requires is_element_type_v<T>
  void download(const Buffer &buffer, std::span<T> host) {
    check_host_copy(buffer, element_type_of<T>(), host.size(), "download");
    self().read(buffer, host.data(), host.size_bytes());
  }
  template <class T>
  requires is_element_type_v<T> std::vector<T> download(const Buffer &buffer) {
    std::vector<T> host(buffer.size());
    download(buffer, std::span<T>(host));
    return host;
  }
  /// Queues a launch of `num_workgroups` workgroups. Arguments are Buffers (element type equal to
  /// the parameter's), arithmetic scalars or std::arrays for vector parameters; a float goes only
  /// to a float parameter, an integer only to an integer parameter whose range holds it.
  template <class... Args>
  void launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
              const Args &...args) {
    const std::array<ArgumentValue, sizeof...(Args)> values{ArgumentValue(args)...};
    self().launch_values(kernel, num_workgroups, values);
  }

private:
  Queue &self() { return static_cast<Queue &>(*this); }
};

/// An in-order queue of copies and launches on a Runtime's device (Runtime::create_stream).
/// Move-only. Used by one thread at a time: a second thread that calls it while a first is inside
/// gets an Error. Work on different streams may run concurrently; order it with record() and
/// wait(). A Buffer allocated on a stream may be used at once on that stream; on another stream
/// after an event recorded after the allocation (its block may be one this stream's queued work
/// was still using). Destroying a Stream waits for its work. A Stream keeps its Runtime's context
/// (device, pool, kernel cache) alive.
class Stream : public QueueOps<Stream> {
public:
  Stream();
  Stream(Stream &&) noexcept;
  Stream &operator=(Stream &&) noexcept;
  ~Stream();

  bool valid() const { return state_ != nullptr; }
  const DeviceInfo &info() const;

  using QueueOps<Stream>::allocate;
  using QueueOps<Stream>::launch;
  /// An uninitialized buffer of `count` elements, ready for use on this stream.
  Buffer allocate(ir::Scalar element, size_t count);
  /// Raw byte copies (any element type, e.g. f16 bit patterns), ordered on this stream.
  void write(Buffer &buffer, const void *src, uint64_t bytes);
  void read(const Buffer &buffer, void *dst, uint64_t bytes);
  void launch_values(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                     std::span<const ArgumentValue> args);
  /// The lower-level launch: arguments already laid out (buffer ranges, value bits).
  void launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
              std::span<const LaunchArg> args);
  /// The context's kernels (Runtime::load, Runtime::kernel), for code that holds only a stream.
  KernelHandle load(const ir::Kernel &kernel);
  KernelHandle kernel(std::string_view key, FunctionRef<const ir::Kernel &()> trace);
  KernelHandle kernel(std::string_view key, FunctionRef<std::unique_ptr<ir::Module>()> trace);

  /// Waits for everything queued on this stream; throws Error (DeviceFailure) when it failed.
  void synchronize();
  /// An event that completes when the work queued so far on this stream has.
  Event record();
  /// Work queued on this stream from now on starts after `event` (of the same Runtime).
  void wait(const Event &event);
  /// Device time of each launch completed by the last synchronize(), in nanoseconds.
  std::vector<double> last_launch_times_ns() const;

  /// Graph capture on this stream (see Runtime::begin_capture).
  void begin_capture();
  Graph end_capture();
  bool capturing() const;
  /// Queues a graph captured on any stream of the same Runtime.
  void replay(Graph &graph);

private:
  friend class Runtime;
  std::unique_ptr<StreamState> state_;
};

class Runtime : public QueueOps<Runtime> {
public:
  /// Opens `name` ("vulkan", "interp", ...), or when empty the CUBECC_DEVICE environment
  /// variable, or the best device present (cuda, hip, vulkan, then interp). Throws Error.
  /// When CUBECC_ENV names an environment bundle, uses it (use_environment). `pool` configures
  /// the memory pool (memory_pool.h).
  static Runtime open(const std::string &name = {}, PoolOptions pool = {});
  /// A runtime over a device the caller opened.
  explicit Runtime(std::unique_ptr<Device> device, PoolOptions pool = {});
  Runtime(Runtime &&) noexcept;
  Runtime &operator=(Runtime &&) noexcept;
  /// Waits for the work queued on the default stream. Streams made by create_stream keep the
  /// context (device, pool, kernels) alive until they are destroyed.
  ~Runtime();

  const DeviceInfo &info() const;
  Device &device();

  //===- Streams ---------------------------------------------------------------------------===//
  /// A new stream on this runtime's device.
  Stream create_stream();

  //===- Memory ----------------------------------------------------------------------------===//
  using QueueOps<Runtime>::allocate;
  using QueueOps<Runtime>::launch;
  /// An uninitialized buffer of `count` elements.
  Buffer allocate(ir::Scalar element, size_t count);
  /// Raw byte copies (any element type, e.g. f16 bit patterns), on the default stream.
  void write(Buffer &buffer, const void *src, uint64_t bytes);
  void read(const Buffer &buffer, void *dst, uint64_t bytes);
  /// A Buffer over memory the caller owns, without copying: `memory.bytes / element size`
  /// elements of `element`. Launches, copies and graphs use it like an allocated Buffer; neither
  /// the runtime nor the device ever frees it, and it is not counted by the pool. `release`, if
  /// given, is called exactly once when the last user is gone (the Buffer and every graph whose
  /// capture used it) and the work queued on every stream before that has finished — on the
  /// thread that lets go last if that work is done by then, else on a thread that later finds it
  /// done (a later allocation, free or synchronize), at the end of that call, with no lock of the
  /// runtime held (it may call the runtime); it must not throw. Throws Error (and does
  /// not call `release`: the memory stays the caller's) when the memory is not of this runtime's
  /// backend (a CUDA pointer on vulkan), the handle is null, the size is 0 or not a whole number
  /// of elements, or the pointer or offset is not aligned to the element size.
  Buffer adopt_memory(const ExternalMemory &memory, ir::Scalar element,
                      std::function<void()> release = {});
  /// The native handle of a Buffer's memory (allocated or adopted), with `bytes` = buffer.bytes():
  /// a host pointer (interp), a CUdeviceptr, a HIP pointer, or a VkBuffer and the offset where
  /// the Buffer starts in it. Valid while the Buffer lives.
  ExternalMemory native_memory(const Buffer &buffer) const;
  /// Exact at the moment of the call (the pool is shared with Buffers on other threads).
  PoolStatistics pool_statistics() const;
  /// The pool's policy and limits, as given at open().
  const PoolOptions &pool_options() const;
  /// Gives every cached (free) block back to the device.
  void trim();

  //===- Kernels ---------------------------------------------------------------------------===//
  /// Optimizes a copy of `kernel` (-O2, verified) and compiles it, or returns the cached handle
  /// of an equal kernel (same structural hash). Throws Error with the diagnostics on failure.
  KernelHandle load(const ir::Kernel &kernel);
  /// The handle cached under `key`; only on a miss is `trace` called, and its kernel loaded.
  /// The key must identify the kernel: its function and every option that changes it.
  KernelHandle kernel(std::string_view key, FunctionRef<const ir::Kernel &()> trace);
  /// As above, for a trace that returns a module holding exactly one kernel.
  KernelHandle kernel(std::string_view key, FunctionRef<std::unique_ptr<ir::Module>()> trace);
  /// Registers a binary compiled elsewhere (e.g. loaded from an environment bundle) for `kernel`,
  /// whose signature checks the launches; a later load() of an equal kernel returns it.
  KernelHandle adopt(const ir::Kernel &kernel, std::unique_ptr<CompiledKernel> compiled);
  KernelCacheStatistics cache_statistics() const;

  //===- Environments ----------------------------------------------------------------------===//
  /// Loads kernels from the environment bundle at `path` before compiling them: load() of a
  /// kernel it holds (same structural hash, compiled at -O2 for this device) neither optimizes
  /// nor compiles. Needs cubecc::environments linked in. A file that does not open or is not a
  /// valid bundle is a logged warning and the runtime compiles as without one — or, with
  /// `options.fallback_to_jit` false, an Error naming the file and what is wrong. Where
  /// signatures are required (EnvironmentOptions::require_signature, trusted_keys,
  /// $CUBECC_TRUSTED_KEYS), a bundle not signed by a trusted key, or changed since it was
  /// signed, is refused the same way before any of it is used; both overloads check.
  void use_environment(const std::string &path, EnvironmentOptions options = {});
  void use_environment(std::shared_ptr<const EnvironmentSource> environment,
                       EnvironmentOptions options = {});
  /// The environment in use, or null.
  const EnvironmentSource *environment() const;
  EnvironmentStatistics environment_statistics() const;
  /// The tuning record stored in the environment under `key` (autotune/), if any.
  std::optional<std::string> find_tuning_record(std::string_view key) const;

  //===- Kernels by name from the environment (runtime/src/named_kernels.cpp) --------------===//
  /// The kernel `kernel` of kernel library `library` ("examples" for libexamples.so, as
  /// `cubecc env build` recorded it), registered with `configuration` ("" for none), from the
  /// environment in use — without the library and without the DSL: the launch metadata
  /// (workgroup size, parameter layout, names and types for the launch checks) is the bundle's.
  /// Never traces or compiles; cached under (library, kernel, configuration). Trusts that the
  /// bundle was built from the library the application means; an application that has the
  /// library and wants that checked uses kernel()/load() instead (trace, hash, compare: a stale
  /// bundle is a miss). Throws Error: InvalidArgument without an environment; NotFound when the
  /// bundle lacks the kernel (the message lists what the bundle has); Environment when the entry
  /// cannot serve this device (no binary for it, damage, another cubecc or toolkit, a binary the
  /// device refuses).
  KernelHandle kernel_from_environment(std::string_view library, std::string_view kernel,
                                       std::string_view configuration = {});
  /// Which build of `library` the environment's entry for `kernel` was made from (the
  /// library_build a bundle records), so that a program can compare it with its own.
  std::string environment_library_build(std::string_view library, std::string_view kernel,
                                        std::string_view configuration = {});
  //===- (end of kernels by name) -----------------------------------------------------------===//

  //===- Launch (default stream) -----------------------------------------------------------===//
  void launch_values(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
                     std::span<const ArgumentValue> args);
  /// The lower-level launch: arguments already laid out (buffer ranges, value bits); checked for
  /// count, kind, lanes and buffer ranges.
  void launch(const KernelHandle &kernel, std::array<uint32_t, 3> num_workgroups,
              std::span<const LaunchArg> args);
  /// Waits for the work queued on the default stream.
  void synchronize();
  /// Device time of each launch completed by the last synchronize(), in nanoseconds.
  std::vector<double> last_launch_times_ns() const;

  //===- Graphs (default stream) -----------------------------------------------------------===//
  /// Starts recording: launches on the default stream until end_capture() are checked as usual
  /// and recorded, not run (from any thread). Captures do not nest; synchronize(), uploads and
  /// downloads during a capture are Errors (allocating is fine: the graph keeps the block of a
  /// Buffer allocated during its capture until both are destroyed). A launch that fails its
  /// checks throws and is not recorded; the capture goes on.
  void begin_capture();
  /// Ends the recording and returns the graph (the device builds its native form here).
  Graph end_capture();
  bool capturing() const;
  /// Queues the graph's launches in order, after those queued before, with the buffers they
  /// were captured with and the values last set. Throws Error when the graph was captured on
  /// another runtime, a Buffer it uses from before the capture was destroyed, or a capture is in
  /// progress.
  void replay(Graph &graph);

private:
  std::shared_ptr<Context> context_;
  std::unique_ptr<StreamState> default_; ///< the default stream, locked around each call
};

/// The options under which Runtime::load compiles, as environment keys spell them.
inline constexpr std::string_view kRuntimeCompileOptions = "-O2";

/// Workgroups needed to cover `n` invocations in groups of `workgroup_size` (x only).
inline std::array<uint32_t, 3> grid_1d(uint64_t n, uint32_t workgroup_size) {
  return {static_cast<uint32_t>((n + workgroup_size - 1) / workgroup_size), 1, 1};
}

} // namespace cubecc::runtime
