//===- gpu_driver.h - The one seam between the shared GPU device and the CUDA or HIP API ------===//
//
// The CUDA and HIP devices are one implementation (gpu_device.h) over two driver APIs of the same
// shape. What differs is this table: the dlopen'd entry points, behind one virtual function per
// operation with the handles as opaque pointers, and which result codes mean what (ResultCodes).
// runtime/cuda/ and runtime/hip/ each implement it once, next to what else truly differs there:
// opening the driver, detecting the arch, the binary formats and the NVRTC / hipRTC hooks.
//
// Every function returns the driver's result code (0 is success in both APIs); the shared device
// turns a failure into an Error of the kind ResultCodes says.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cubecc::runtime::gpu {

using Result = int;
using Stream = void *;    ///< CUstream, hipStream_t
using Event = void *;     ///< CUevent, hipEvent_t
using Module = void *;    ///< CUmodule, hipModule_t
using Function = void *;  ///< CUfunction, hipFunction_t
using Graph = void *;     ///< CUgraph, hipGraph_t
using GraphExec = void *; ///< CUgraphExec, hipGraphExec_t
using Pointer = uint64_t; ///< CUdeviceptr, a HIP device pointer as an integer

constexpr Result kSuccess = 0;

/// Which result codes mean what, for the error kinds (device.h ErrorKind) and the lost context.
struct ResultCodes {
  Result not_ready = 0;              ///< an event or stream whose work has not finished
  std::vector<Result> out_of_memory; ///< -> ErrorKind::OutOfMemory
  std::vector<Result> no_device;     ///< -> ErrorKind::NoDevice
  std::vector<Result> over_limits;   ///< a launch over the device's resources -> Unsupported
  /// Errors after which the context is unusable for the rest of the process (a faulting kernel,
  /// ECC, a hardware exception): -> DeviceFailure, and the device is lost.
  std::vector<Result> sticky;
};

/// What the shared device reads of a loaded function.
enum class FunctionAttribute : uint8_t { MaxThreadsPerBlock, StaticSharedBytes, NumRegisters };

/// A launch's parameters: packed with their C alignment (how both APIs' kernels read them), with
/// where each starts. The driver's launch() fills in what it passes (`pointers` for CUDA's
/// kernelParams, `extra` and `size` for HIP's argument buffer); a captured launch's
/// PackedArguments live as long as its graph, so it does not matter whether the driver copies
/// them at capture or reads them at replay.
struct PackedArguments {
  std::vector<uint8_t> bytes;
  std::vector<size_t> offsets;
  std::vector<void *> pointers;
  std::array<void *, 5> extra{};
  size_t size = 0;
};

/// One driver library, loaded once per process. Implementations are thread-safe (they only call
/// the driver, which is).
class Driver {
public:
  virtual ~Driver() = default;

  /// "cuda" or "hip": the prefix of every message.
  virtual const char *backend() const = 0;
  /// The error's name and text, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access ...)".
  virtual std::string describe(Result r) const = 0;
  virtual const ResultCodes &codes() const = 0;
  /// Whether the graph entry points exist (else graphs are RecordedGraphs).
  virtual bool has_graphs() const = 0;

  //===- The context, per device ordinal ---------------------------------------------------===//
  /// Takes a reference on the device's primary context (HIP: none; `context` stays null).
  virtual Result retain_context(int ordinal, void **context) const = 0;
  virtual void release_context(int ordinal) const = 0;
  /// Destroys the primary context's allocations and state (after a sticky error), so the next
  /// retain gets a working one.
  virtual Result reset_context(int ordinal) const = 0;
  /// Makes the device current on the calling thread; `saved` receives what leave() restores.
  virtual Result enter(int ordinal, void *context, intptr_t *saved) const = 0;
  virtual void leave(int ordinal, intptr_t saved) const = 0;
  /// Waits for all work of the current context (used only before unloading a module or a graph).
  virtual Result synchronize_context() const = 0;

  //===- Memory -----------------------------------------------------------------------------===//
  virtual Result allocate(Pointer *pointer, size_t bytes) const = 0;
  virtual Result free(Pointer pointer) const = 0;
  virtual Result copy_to_device(Pointer dst, const void *src, size_t bytes, Stream s) const = 0;
  virtual Result copy_to_host(void *dst, Pointer src, size_t bytes, Stream s) const = 0;

  //===- Streams and events ------------------------------------------------------------------===//
  /// A stream that does not synchronize with the legacy default stream.
  virtual Result create_stream(Stream *stream) const = 0;
  virtual Result destroy_stream(Stream stream) const = 0;
  virtual Result synchronize_stream(Stream stream) const = 0;
  virtual Result wait_event(Stream stream, Event event) const = 0;
  /// `timing`: an event cuEventElapsedTime may read (else created without timing, cheaper).
  virtual Result create_event(Event *event, bool timing) const = 0;
  virtual Result destroy_event(Event event) const = 0;
  virtual Result record_event(Event event, Stream stream) const = 0;
  /// kSuccess, codes().not_ready, or the error of the work before it.
  virtual Result query_event(Event event) const = 0;
  virtual Result synchronize_event(Event event) const = 0;
  virtual Result elapsed_ms(float *ms, Event start, Event end) const = 0;

  //===- Modules and launches ----------------------------------------------------------------===//
  /// Loads a module image (CUBIN, NUL-terminated PTX, code object); `log` gets what the driver's
  /// JIT said, when it says anything.
  virtual Result load_module(Module *module, const std::string &image, std::string *log) const = 0;
  virtual Result unload_module(Module module) const = 0;
  virtual Result get_function(Function *function, Module module, const char *name) const = 0;
  /// Fails (any non-success code) when the driver does not report `which`.
  virtual Result function_attribute(int *value, FunctionAttribute which, Function f) const = 0;
  /// Allows `bytes` of dynamic shared memory beyond the default per-block limit.
  virtual Result set_max_dynamic_shared(Function f, int bytes) const = 0;
  /// Queues a launch of a non-empty grid.
  virtual Result launch(Function f, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
                        unsigned dynamic_shared, Stream stream,
                        PackedArguments &arguments) const = 0;

  //===- Graphs (when has_graphs()) ----------------------------------------------------------===//
  /// Starts capturing `stream` (thread-local mode: only this thread's unsafe calls are refused).
  virtual Result begin_capture(Stream stream) const = 0;
  virtual Result end_capture(Stream stream, Graph *graph) const = 0;
  virtual Result instantiate_graph(GraphExec *exec, Graph graph) const = 0;
  virtual Result launch_graph(GraphExec exec, Stream stream) const = 0;
  virtual Result destroy_graph_exec(GraphExec exec) const = 0;
  virtual Result destroy_graph(Graph graph) const = 0;
};

} // namespace cubecc::runtime::gpu
