//===- device.h - The one device interface every backend implements ---------------------------===//
//
// A Device runs compiled kernels on one piece of hardware (or the reference interpreter). The
// Runtime (runtime.h) owns one and adds memory pools, the kernel cache and typed helpers; backends
// implement only this interface. Errors are reported as cubecc::runtime::Error exceptions with a
// message that names what failed and what to do; no backend crashes on a missing driver.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/codegen/target.h"
#include "cubecc/ir/diagnostic.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {
class Kernel;
}

namespace cubecc::runtime {

/// What kind of failure an Error is. The C API's status, the CLI's exit code and the log level
/// are a switch on it; nothing classifies an error by its message.
enum class ErrorKind : uint8_t {
  NoDevice,        ///< no driver, no device, or the backend is not built in
  OutOfMemory,     ///< the device (or the host, for a host-memory device) has no memory left
  InvalidArgument, ///< the caller's mistake: a wrong argument, a call out of order
  NotFound,        ///< a kernel, entry or file that is not there
  Compile,         ///< a kernel that does not trace, verify or compile (diagnostics attached)
  Unsupported,     ///< valid, but this device or build cannot do it
  Environment,     ///< an environment bundle that does not open, is damaged or does not match
  DeviceFailure,   ///< the device failed while running work (a faulting kernel, a lost device)
  Internal,        ///< a bug in cubecc
};

/// "no device", "out of memory", "invalid argument", "not found", "compile", "unsupported",
/// "environment", "device failure", "internal".
const char *error_kind_name(ErrorKind kind);

/// A runtime failure: no device, a refused kernel, a failed launch. `what()` is the full message;
/// kind() says what kind of failure it is, diagnostics() the source locations when there are any.
class Error : public std::runtime_error {
public:
  Error(ErrorKind kind, const std::string &message, std::vector<ir::Diagnostic> diagnostics = {})
      : std::runtime_error(message), kind_(kind), diagnostics_(std::move(diagnostics)) {}
  ErrorKind kind() const { return kind_; }
  const std::vector<ir::Diagnostic> &diagnostics() const { return diagnostics_; }

private:
  ErrorKind kind_;
  std::vector<ir::Diagnostic> diagnostics_;
};

/// What runs a device's kernels: Runtime::open() prefers a GPU, then the host's CPU (native code),
/// then software that stands in for a GPU (a Vulkan driver that is a CPU implementation, such as
/// lavapipe, and the reference interpreter).
enum class DeviceClass : uint8_t { Gpu, Cpu, Software };

/// "GPU", "CPU", "software".
const char *device_class_name(DeviceClass c);

/// The host's physical memory in bytes (1 TiB where the system does not say): the largest buffer
/// a device that allocates host memory (interp, cpu) can hold.
uint64_t host_memory_bytes();

/// What a device can do, as reported by its driver.
struct DeviceInfo {
  std::string backend; ///< "vulkan", "interp", "cuda", "hip", "cpu"
  DeviceClass device_class = DeviceClass::Gpu;
  std::string name;   ///< the driver's device name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver; ///< driver name and version
  std::string vendor; ///< "NVIDIA", "AMD", "Intel", "Mesa", "cubecc", ...
  std::string arch;   ///< "sm_90", "gfx90a", "x86-64-v3"; Vulkan: "vendorid:deviceid" in hex
  uint32_t subgroup_size = 0;
  codegen::TargetFeatures features; ///< what codegen may emit for it (f16, int64, atomics, ...)
  uint64_t max_buffer_bytes = 0;
  double timestamp_period_ns = 0; ///< nanoseconds per timestamp tick (0: no device timestamps)
};

/// Device memory. Owned by the device that made it; freed through Device::free.
struct DeviceMemory {
  void *handle = nullptr; ///< backend-specific
  uint64_t bytes = 0;
};

/// Memory the caller owns, described for Device::adopt_memory (Runtime::adopt_memory), or a
/// device memory's native handle (Device::native_memory). Adopting never copies, and neither the
/// runtime nor the device ever frees adopted memory.
struct ExternalMemory {
  enum class Kind : uint8_t {
    Host,   ///< `handle` is a host pointer (the interp and cpu devices)
    Cuda,   ///< `handle` is a CUdeviceptr in the cuda device's context
    Hip,    ///< `handle` is a HIP device pointer on the hip device
    Vulkan, ///< `handle` is a VkBuffer made on the vulkan device's own VkDevice
  };
  Kind kind = Kind::Host;
  uint64_t handle = 0; ///< the pointer or the VkBuffer, as an integer
  uint64_t offset = 0; ///< Vulkan: where the memory starts in the VkBuffer, in bytes; else 0
  uint64_t bytes = 0;

  static ExternalMemory host(void *pointer, uint64_t bytes) {
    return {Kind::Host, reinterpret_cast<uintptr_t>(pointer), 0, bytes};
  }
  static ExternalMemory cuda(uint64_t device_pointer, uint64_t bytes) {
    return {Kind::Cuda, device_pointer, 0, bytes};
  }
  static ExternalMemory hip(void *device_pointer, uint64_t bytes) {
    return {Kind::Hip, reinterpret_cast<uintptr_t>(device_pointer), 0, bytes};
  }
  static ExternalMemory vulkan(uint64_t vk_buffer, uint64_t offset, uint64_t bytes) {
    return {Kind::Vulkan, vk_buffer, offset, bytes};
  }
};

/// "host memory", "a CUDA device pointer", "a HIP device pointer", "a VkBuffer".
const char *external_memory_kind_name(ExternalMemory::Kind kind);
/// The backends whose devices adopt memory of `kind`, for messages: "interp or cpu", "cuda",
/// "hip", "vulkan". Whether a device adopts it is Device::memory_kind().
const char *external_memory_backend(ExternalMemory::Kind kind);

/// One argument of a launch: a buffer (with the byte range the kernel sees) or a value's lanes.
struct LaunchArg {
  const DeviceMemory *memory = nullptr;
  uint64_t offset = 0; ///< bytes
  uint64_t bytes = 0;  ///< the range bound to the kernel; buffer.size is bytes / element size
  std::vector<uint64_t> bits; ///< values: one entry per lane, zero-extended
};

/// A kind of compiled kernel a device loads without compiling (environments/ store them).
struct BinaryTarget {
  std::string target;   ///< "vulkan", "interp", "cuda:sm_90", "cuda:compute_80", "hip:gfx90a"
  std::string format;   ///< "spirv", "ir", "cubin", "ptx", "hsaco"
  std::string features; ///< TargetFeatures::fingerprint() the code was generated for
  std::string toolkit;  ///< the backend compiler that made it ("NVRTC 12.0"); "" for none
};

/// A compiled kernel as stored outside the process (an environment bundle's entry).
struct KernelBinary {
  BinaryTarget target;
  std::string_view bytes; ///< the module: SPIR-V words, CUBIN, PTX, code object, IR text
  std::string entry;      ///< the entry point's symbol (C-family targets), else ""
  codegen::KernelAbi abi; ///< launch metadata: workgroup size, shared memory, parameter layout
};

/// A kernel compiled for one device: backend-specific, made by Device::compile.
class CompiledKernel {
public:
  virtual ~CompiledKernel() = default;
  const codegen::KernelAbi &abi() const { return abi_; }

protected:
  codegen::KernelAbi abi_;
};

class Device;
class DeviceStream;

/// A recorded sequence of launches, queued again as a whole by replay() (Runtime::begin_capture
/// and end_capture make one). Made by Device::create_graph: add_launch() records, finish() ends
/// the recording, then replay() queues the launches in order after everything queued before it,
/// and set_value() changes a value argument for the following replays. The kernels and the
/// memory it records must outlive the graph (the Runtime's Graph keeps the kernels and the blocks
/// allocated during its capture, and checks the other buffers). A graph copies what it needs
/// from the LaunchArgs and never keeps their `memory` pointers, which point into Buffers. Backends:
/// a native graph (Vulkan: one reusable command buffer; CUDA/HIP: a captured stream graph), or
/// RecordedGraph below, which launches each recorded launch again.
class DeviceGraph {
public:
  virtual ~DeviceGraph() = default;
  /// Records a launch; throws Error for what Device::launch would refuse (the device checks it
  /// here or, for RecordedGraph, at replay).
  virtual void add_launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                          std::span<const LaunchArg> args) = 0;
  /// Ends the recording (a native graph is built here).
  virtual void finish() = 0;
  /// Replaces the bits of value parameter `param` of launch `launch` (one entry per lane, as in
  /// LaunchArg::bits) for the following replays.
  virtual void set_value(size_t launch, size_t param, std::span<const uint64_t> bits) = 0;
  /// Queues every recorded launch on `stream` (a stream of the device that made the graph), in
  /// order, after the work queued on it before. Launch times: see the backend.
  virtual void replay(DeviceStream &stream) = 0;
  virtual size_t num_launches() const = 0;
};

/// A point in a stream's work (DeviceStream::record): done once everything queued on the stream
/// before it has finished. Thread-safe; may outlive its stream.
class DeviceEvent {
public:
  virtual ~DeviceEvent() = default;
  /// Whether the work has finished; never blocks.
  virtual bool done() = 0;
  /// Blocks the calling thread until the work has finished. Throws Error (DeviceFailure) when
  /// the device failed while running it.
  virtual void wait() = 0;
};

/// An in-order queue of copies and launches on one device (Device::create_stream). Work on one
/// stream runs in the order it was queued; work on different streams may run concurrently and is
/// ordered only by events (record / wait). A stream is used by one thread at a time, except
/// mark(), reached() and the events it records, which any thread may call at any time. Destroying
/// a stream waits for its work (failures are then dropped: they were the caller's to see at
/// synchronize()).
///
/// Memory: a block may be freed (Device::free) or reused only once every stream has reached the
/// ticket mark() gave when the block was let go; the Runtime's memory pool keeps such blocks in
/// its deletion queue until then. So no free ever flushes, waits for or touches a stream's
/// recording.
class DeviceStream {
public:
  virtual ~DeviceStream() = default;
  /// Copies `bytes` from `src` into the memory, after the work queued before; `src` may be
  /// reused when the call returns.
  virtual void upload(const DeviceMemory &dst, uint64_t offset, const void *src,
                      uint64_t bytes) = 0;
  /// Waits for the work queued before, then copies the memory into `dst`.
  virtual void download(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) = 0;
  /// Queues a launch of `num_workgroups` workgroups (checked by the Runtime; the device checks
  /// its own limits).
  virtual void launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                      std::span<const LaunchArg> args) = 0;
  /// Waits for everything queued on this stream. Throws Error (DeviceFailure) when it failed.
  virtual void synchronize() = 0;
  /// Device time of the launches completed by the last synchronize(), in nanoseconds, one entry
  /// per launch in order (empty if the device has no timestamps).
  virtual std::vector<double> last_launch_times_ns() const = 0;
  /// An event that completes when the work queued so far has.
  virtual std::shared_ptr<DeviceEvent> record() = 0;
  /// Work queued on this stream from now on starts after `event` (recorded on any stream of the
  /// same device) completes. Does not block the calling thread where the device can order it.
  virtual void wait(DeviceEvent &event) = 0;
  /// An empty graph whose replays go to streams of this device. The default is a RecordedGraph.
  virtual std::unique_ptr<DeviceGraph> create_graph();
  /// A ticket covering the work queued so far (monotonic per stream). Thread-safe.
  virtual uint64_t mark() = 0;
  /// Whether the work a ticket covers has finished, never blocking. Thread-safe.
  virtual bool reached(uint64_t ticket) = 0;
};

class Device {
public:
  virtual ~Device() = default;
  virtual const DeviceInfo &info() const = 0;

  /// A new stream (DeviceStream). Devices are thread-safe: allocate, free, adopt_memory,
  /// release_adopted, compile, load_binary and create_stream may be called from any thread at
  /// any time.
  virtual std::unique_ptr<DeviceStream> create_stream() = 0;

  /// Throws Error (OutOfMemory) when the device has no memory left.
  virtual DeviceMemory allocate(uint64_t bytes) = 0;
  /// Frees memory no queued work uses any more (the memory pool's deletion queue makes sure):
  /// never waits for or flushes a stream.
  virtual void free(DeviceMemory memory) = 0;
  /// The kind of memory adopt_memory takes and native_memory gives (Host for interp and cpu,
  /// Cuda, Hip, Vulkan); nullopt when the device adopts none. Several devices may share a kind.
  virtual std::optional<ExternalMemory::Kind> memory_kind() const { return std::nullopt; }
  /// Wraps memory the caller owns (already checked by the Runtime: memory_kind(), not null,
  /// not empty) as DeviceMemory usable like allocated memory, without copying. Released with
  /// release_adopted, never with free. The default refuses: the backend cannot adopt memory.
  virtual DeviceMemory adopt_memory(const ExternalMemory &memory);
  /// Forgets adopted memory that no queued work uses any more (the memory pool's deletion queue
  /// makes sure); never frees the memory itself. Must not throw (called from destructors).
  virtual void release_adopted(DeviceMemory memory);
  /// The native handle of memory from allocate() or adopt_memory() (for sharing it, e.g. through
  /// DLPack): the pointer, or the VkBuffer and the offset where the memory starts in it.
  virtual ExternalMemory native_memory(const DeviceMemory &memory) const;

  /// Lowers and compiles an optimized, verified kernel; throws Error when the device cannot run it.
  virtual std::unique_ptr<CompiledKernel> compile(const ir::Kernel &kernel) = 0;
  /// What load_binary accepts, best first (a CUBIN for the device's arch before PTX). `toolkit`
  /// names the compiler compile() would use, "" when it has none (a binary from any is loadable).
  virtual std::vector<BinaryTarget> binary_targets() const = 0;
  /// Loads a kernel compiled elsewhere for one of binary_targets(): no tracing, no passes, no
  /// code generation. The binary and `abi` come from outside the process (an environment
  /// bundle): a backend checks what it can before its driver sees them (vulkan: the SPIR-V
  /// validator, then the module's interface against `abi` and the device's limits; interp: the
  /// IR parsed, verified and of `abi`'s shape). Throws Error naming the kernel and why when the
  /// binary does not load.
  virtual std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &binary) = 0;
};

/// A device whose work is done when the call that queues it returns (the interpreter, the cpu
/// device): its streams need no queue, their events are done when recorded and every ticket is
/// reached at once. The device implements the run_ members, which its streams call (from several
/// threads at once, one per stream); launch times are the host's wall-clock times of run_launch.
class ImmediateDevice : public Device {
public:
  std::unique_ptr<DeviceStream> create_stream() final;
  /// Runs a launch to completion; throws Error as DeviceStream::launch would.
  virtual void run_launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                          std::span<const LaunchArg> args) = 0;
  virtual void copy_in(const DeviceMemory &dst, uint64_t offset, const void *src,
                       uint64_t bytes) = 0;
  virtual void copy_out(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) = 0;
};

/// The portable graph: keeps each launch (kernel, grid, memory handles and values copied) and
/// replays by calling DeviceStream::launch for each, in order. The interp device uses it; native
/// graphs reuse its bookkeeping.
class RecordedGraph : public DeviceGraph {
public:
  RecordedGraph() = default;
  void add_launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
                  std::span<const LaunchArg> args) override;
  void finish() override { finished_ = true; }
  void set_value(size_t launch, size_t param, std::span<const uint64_t> bits) override;
  void replay(DeviceStream &stream) override;
  size_t num_launches() const override { return launches_.size(); }

protected:
  /// One recorded launch; `args[i].memory` points into `memories` (its own copies).
  struct Launch {
    const CompiledKernel *kernel = nullptr;
    std::array<uint32_t, 3> num_workgroups{};
    std::vector<DeviceMemory> memories;
    std::vector<LaunchArg> args;
  };
  /// The launch and value parameter set_value() names; throws Error when there is none.
  LaunchArg &value_argument(size_t launch, size_t param, size_t lanes);
  std::vector<Launch> launches_;
  bool finished_ = false;
};

/// A kind of device, registered by its folder under runtime/ (runtime/CMakeLists.txt:
/// cubecc_add_device) with a function `const DeviceKind &<name>_device_kind()`.
struct DeviceKind {
  std::string_view name; ///< "cuda": what open_device() and CUBECC_DEVICE take
  /// The best class its devices can be (vulkan: Gpu, though lavapipe opens as Software):
  /// open_device("") does not open a kind that cannot beat the device it already has.
  DeviceClass best_class = DeviceClass::Gpu;
  /// Null when this cubecc was built without it; `why_not` says why.
  std::unique_ptr<Device> (*open)() = nullptr;
  std::string_view why_not;
};

/// Every device kind built in, in the order open_device("") tries them.
std::span<const DeviceKind *const> device_kinds();

/// Names of the backends built into this cubecc, and whether each has a device now.
struct DeviceEntry {
  std::string backend;
  bool built = true; ///< false: this cubecc was built without the backend
  bool available = false;
  std::string detail;             ///< the device name, or why there is none
  std::optional<DeviceInfo> info; ///< what the device offers, when available
};
std::vector<DeviceEntry> list_devices();

/// Opens a device: `name` is a device kind ("vulkan", "interp", "cuda", "hip", "cpu"), or empty
/// for CUBECC_DEVICE or, if unset, the best available: a GPU (cuda, hip, vulkan), else the host's
/// CPU (cpu), else software (lavapipe, then interp). Throws Error naming why none opened.
std::unique_ptr<Device> open_device(const std::string &name = {});

} // namespace cubecc::runtime
