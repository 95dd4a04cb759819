//===- gpu_device.h - The CUDA and HIP devices' one implementation
//-----------------------------===//
//
// CudaDevice and HipDevice are this Core over their own Driver (gpu_driver.h): memory, module
// loading and the device's limits, launches, streams, events, tickets, launch times, graphs and
// the mapping of driver errors to ErrorKinds are written once here. The vendor folders open the
// driver, detect the device and its arch (filling a Setup), pick the image to load from their
// binary formats and run NVRTC / hipRTC.
//
// Contexts. A device uses its ordinal's primary context (shared with every other user of the
// driver in the process, e.g. a CUDA runtime or PyTorch, so adopted device pointers work), made
// current on the calling thread around each call and then restored, so every member is callable
// from any thread. A sticky error (a faulting kernel, ECC, a hardware exception; the driver's
// ResultCodes::sticky) poisons the context for the rest of the process: the Core notes it in the
// context's Health, shared by every device open on that context, and from then on every call on
// those devices throws Error (DeviceFailure) saying the context is lost. The next Core::open on the
// ordinal resets the primary context (cuDevicePrimaryCtxReset, hipDevicePrimaryCtxReset) before
// retaining it, so a new device (a new Runtime) works; the old devices' handles died with the
// reset, so their destructors only release their reference. (A non-primary context, cuCtxCreate,
// would avoid the reset but could not run on memory the rest of the process allocated.)
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "gpu_common/gpu_driver.h"

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/runtime/device.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace cubecc::runtime::gpu {

/// What the vendor's open() found out about the device.
struct Setup {
  const Driver *driver = nullptr;
  int ordinal = 0; ///< the device's index in the driver's order
  DeviceInfo info;
  std::string arch; ///< "sm_90", "gfx90a"
  std::array<int, 3> max_grid{};
  std::array<int, 3> max_block{};
  int max_threads = 0;
  int max_shared = 0;       ///< bytes of shared memory a block gets without opting in
  int max_shared_optin = 0; ///< with opting in (CUDA); the same as max_shared where there is none
};

/// Whether a context is still usable, shared by every Core open on it (see the file comment).
struct Health {
  std::atomic<bool> lost{false};
  std::mutex mutex;
  std::string why; ///< the error that lost it
};

class Core : public std::enable_shared_from_this<Core> {
public:
  /// Resets the ordinal's primary context when a sticky error lost it, then retains it. Throws
  /// Error (NoDevice, or DeviceFailure when the reset fails).
  static std::shared_ptr<Core> open(Setup setup);
  ~Core();
  Core(const Core &) = delete;
  Core &operator=(const Core &) = delete;

  const Driver &driver() const { return *setup_.driver; }
  const Setup &setup() const { return setup_; }
  const DeviceInfo &info() const { return setup_.info; }
  const std::string &arch() const { return setup_.arch; }

  //===- The Device members, for CudaDevice and HipDevice
  //--------------------------------------===//
  DeviceMemory allocate(uint64_t bytes);
  void free(DeviceMemory memory);
  DeviceMemory adopt_memory(const ExternalMemory &memory) const;
  std::unique_ptr<DeviceStream> create_stream();
  /// Loads `image` (picked by the vendor from its binary) as kernel `abi.name` with entry point
  /// `entry` ("" for the kernel's name), after checking the workgroup size and shared memory
  /// against the device's limits (Unsupported). A driver that refuses the image or lacks the
  /// entry point is an Error of kind `refused` (Environment for a bundle's binary, Compile for
  /// one compiled here); `loaded_from` says which image it was, for messages.
  std::unique_ptr<CompiledKernel> load_module(const codegen::KernelAbi &abi,
                                              const std::string &entry, const std::string &image,
                                              const std::string &loaded_from, ErrorKind refused);

  //===- For the streams, events, kernels and graphs ------------------------------------------===//
  /// Throws Error (DeviceFailure) when the context is lost.
  void check_alive() const;
  bool lost() const { return health_->lost.load(std::memory_order_acquire); }
  /// Throws the Error for a failed driver call: its kind from ResultCodes, else `otherwise`. A
  /// sticky error loses the context first.
  [[noreturn]] void fail(Result r, std::string_view what,
                         ErrorKind otherwise = ErrorKind::DeviceFailure) const;
  void check(Result r, std::string_view what,
             ErrorKind otherwise = ErrorKind::DeviceFailure) const {
    if (r != kSuccess)
      fail(r, what, otherwise);
  }
  /// Notes a failure seen where nothing is thrown (an event's query): a sticky one loses the
  /// context.
  void note(Result r) const;

  /// Makes the device current on this thread for the scope of a call.
  class Scope {
  public:
    explicit Scope(const Core &core);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    const Core &core_;
    intptr_t saved_ = 0;
  };

private:
  explicit Core(Setup setup) : setup_(std::move(setup)) {}

  Setup setup_;
  void *context_ = nullptr;
  bool retained_ = false;
  std::shared_ptr<Health> health_;
  std::mutex allocations_mutex_;
  std::unordered_set<Pointer> allocations_;
};

} // namespace cubecc::runtime::gpu
