//===- gpu_device.cpp - The CUDA and HIP devices' one implementation
//---------------------------===//
//
// Streams: each is a non-blocking driver stream. A launch is queued between two timing events
// (its launch time, collected at the stream's synchronize()); copies are queued on the stream and
// waited for before the call returns (so an upload's source may go and a download's data is
// there), which also orders them with the launches queued before. record() is a driver event
// without timing; wait(event) queues the driver's stream-waits-for-event, never blocking.
//
// Tickets (mark / reached, for the Runtime's deletion queue) cost a launch one atomic increment:
// mark() records a driver event only when no earlier mark's event covers the work queued so far,
// and reached() queries those events oldest first; synchronize() reaches everything queued before
// it without any event.
//
// Graphs are captured on a stream of their own (never a stream other threads may mark), so a
// capture is invisible to every DeviceStream, and replayed with one graph launch on the given
// stream between two timing events: one launch time per replay.
//
//===-----------------------------------------------------------------------------------------===//
#include "gpu_common/gpu_device.h"

#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>

namespace cubecc::runtime::gpu {

namespace {

bool contains(const std::vector<Result> &codes, Result r) {
  return std::find(codes.begin(), codes.end(), r) != codes.end();
}

Pointer pointer_of(const DeviceMemory &memory) {
  return static_cast<Pointer>(reinterpret_cast<uintptr_t>(memory.handle));
}

/// The Health of each (driver, ordinal) context in the process.
std::mutex health_mutex;
std::map<std::pair<const Driver *, int>, std::shared_ptr<Health>> healths;

} // namespace

//===- Core: errors and contexts --------------------------------------------------------------===//

void Core::fail(Result r, std::string_view what, ErrorKind otherwise) const {
  const ResultCodes &codes = driver().codes();
  std::string described = driver().describe(r);
  ErrorKind kind = otherwise;
  if (contains(codes.sticky, r)) {
    note(r);
    throw Error(ErrorKind::DeviceFailure,
                fmt::format("{}: {} failed: {}; the device's context is lost (a faulting kernel "
                            "poisons it for the rest of the process): open a new device (a new "
                            "Runtime) to go on",
                            driver().backend(), what, described));
  }
  if (contains(codes.out_of_memory, r))
    kind = ErrorKind::OutOfMemory;
  else if (contains(codes.no_device, r))
    kind = ErrorKind::NoDevice;
  else if (contains(codes.over_limits, r))
    kind = ErrorKind::Unsupported;
  throw Error(kind, fmt::format("{}: {} failed: {}", driver().backend(), what, described));
}

void Core::note(Result r) const {
  if (!contains(driver().codes().sticky, r))
    return;
  std::lock_guard lock(health_->mutex);
  if (!health_->lost.load(std::memory_order_relaxed)) {
    health_->why = driver().describe(r);
    health_->lost.store(true, std::memory_order_release);
  }
}

void Core::check_alive() const {
  if (!lost())
    return;
  std::lock_guard lock(health_->mutex);
  throw Error(ErrorKind::DeviceFailure,
              fmt::format("{}: the device's context was lost after {} (a faulting kernel poisons "
                          "it for the rest of the process): every call on this device fails; "
                          "open a new device (a new Runtime) to go on",
                          driver().backend(), health_->why));
}

Core::Scope::Scope(const Core &core) : core_(core) {
  const Setup &s = core.setup_;
  if (Result r = s.driver->enter(s.ordinal, core.context_, &saved_); r != kSuccess)
    core.fail(r, "making the device current on this thread");
}

Core::Scope::~Scope() {
  core_.setup_.driver->leave(core_.setup_.ordinal, saved_);
}

std::shared_ptr<Core> Core::open(Setup setup) {
  std::shared_ptr<Core> core(new Core(std::move(setup)));
  const Driver &d = core->driver();
  int ordinal = core->setup_.ordinal;
  {
    std::lock_guard lock(health_mutex);
    std::shared_ptr<Health> &health = healths[{&d, ordinal}];
    if (health && health->lost.load(std::memory_order_acquire)) {
      if (Result r = d.reset_context(ordinal); r != kSuccess)
        throw Error(ErrorKind::DeviceFailure,
                    fmt::format("{}: resetting device {}'s context, lost after {}, failed: {}",
                                d.backend(), ordinal, health->why, d.describe(r)));
      health.reset();
    }
    if (!health)
      health = std::make_shared<Health>();
    core->health_ = health;
  }
  if (Result r = d.retain_context(ordinal, &core->context_); r != kSuccess)
    throw Error(ErrorKind::NoDevice, fmt::format("no device: {}: retaining device {}'s context "
                                                 "failed: {}",
                                                 d.backend(), ordinal, d.describe(r)));
  core->retained_ = true;
  return core;
}

Core::~Core() {
  if (!retained_)
    return;
  const Driver &d = driver();
  if (!lost()) { // else the handles died with the context (or die at its reset)
    intptr_t saved = 0;
    if (d.enter(setup_.ordinal, context_, &saved) == kSuccess) {
      for (Pointer p : allocations_)
        d.free(p);
      d.leave(setup_.ordinal, saved);
    }
  }
  d.release_context(setup_.ordinal);
}

//===- Memory ---------------------------------------------------------------------------------===//

DeviceMemory Core::allocate(uint64_t bytes) {
  check_alive();
  Scope scope(*this);
  Pointer p = 0;
  check(driver().allocate(&p, std::max<uint64_t>(bytes, 1)),
        fmt::format("allocating {} bytes of device memory", bytes));
  std::lock_guard lock(allocations_mutex_);
  allocations_.insert(p);
  return DeviceMemory{reinterpret_cast<void *>(static_cast<uintptr_t>(p)), bytes};
}

void Core::free(DeviceMemory memory) {
  Pointer p = pointer_of(memory);
  {
    std::lock_guard lock(allocations_mutex_);
    if (!p || !allocations_.erase(p))
      return;
  }
  if (lost())
    return; // gone with the context
  // No queued work uses it (the Runtime's deletion queue): no stream is waited for here.
  intptr_t saved = 0;
  if (driver().enter(setup_.ordinal, context_, &saved) != kSuccess)
    return;
  driver().free(p);
  driver().leave(setup_.ordinal, saved);
}

DeviceMemory Core::adopt_memory(const ExternalMemory &memory) const {
  // Not in `allocations_`: free() never frees it.
  return DeviceMemory{reinterpret_cast<void *>(static_cast<uintptr_t>(memory.handle)),
                      memory.bytes};
}

//===- Kernels --------------------------------------------------------------------------------===//

namespace {

/// A loaded module and its kernel function. Keeps the Core alive: a kernel may outlive the Device.
class Kernel final : public CompiledKernel {
public:
  Kernel(std::shared_ptr<Core> core, codegen::KernelAbi abi) : core_(std::move(core)) {
    abi_ = std::move(abi);
  }
  ~Kernel() override {
    if (!module || core_->lost())
      return; // the module died with the context
    try {
      Core::Scope scope(*core_);
      core_->driver().synchronize_context(); // launches queued on any stream may use the module
      core_->driver().unload_module(module);
    } catch (const Error &) {
      // the device is unusable; the module goes with it
    }
  }
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;
  const Core *owner() const { return core_.get(); }

  Module module = nullptr;
  Function function = nullptr;
  unsigned dynamic_shared = 0; ///< bytes of shared memory the kernel declares dynamically
  std::string loaded_from;

private:
  std::shared_ptr<Core> core_;
};

} // namespace

std::unique_ptr<CompiledKernel>
Core::load_module(const codegen::KernelAbi &abi, const std::string &entry, const std::string &image,
                  const std::string &loaded_from, ErrorKind refused) {
  check_alive();
  const std::string &name = abi.name;
  const std::string &target = info().features.target;
  const Setup &s = setup_;
  uint64_t invocations =
      uint64_t(abi.workgroup_size[0]) * abi.workgroup_size[1] * abi.workgroup_size[2];
  for (int i = 0; i < 3; ++i)
    if (abi.workgroup_size[i] == 0 || abi.workgroup_size[i] > uint32_t(s.max_block[i]))
      invocations = ~uint64_t(0);
  if (invocations > uint64_t(s.max_threads))
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: kernel '{}' has workgroup size ({}, {}, {}); the device allows "
                            "at most ({}, {}, {}) and {} threads per block",
                            target, name, abi.workgroup_size[0], abi.workgroup_size[1],
                            abi.workgroup_size[2], s.max_block[0], s.max_block[1], s.max_block[2],
                            s.max_threads));
  int max_shared = std::max(s.max_shared, s.max_shared_optin);
  if (abi.shared_bytes > uint32_t(max_shared))
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: kernel '{}' uses {} bytes of shared memory; the device has {}",
                            target, name, abi.shared_bytes, max_shared));

  const Driver &d = driver();
  auto compiled = std::make_unique<Kernel>(shared_from_this(), abi);
  compiled->loaded_from = loaded_from;
  Scope scope(*this);
  std::string log;
  if (Result r = d.load_module(&compiled->module, image, &log); r != kSuccess) {
    compiled->module = nullptr;
    fail(r,
         fmt::format("loading kernel '{}' ({}){}{}", name, loaded_from, log.empty() ? "" : "\n",
                     log),
         refused);
  }
  std::string symbol = entry.empty() ? name : entry;
  check(d.get_function(&compiled->function, compiled->module, symbol.c_str()),
        fmt::format("finding entry point '{}' of kernel '{}' ({})", symbol, name, loaded_from),
        refused);

  // Registers may limit a block below the device's maximum.
  int max_threads = 0, registers = 0;
  if (d.function_attribute(&max_threads, FunctionAttribute::MaxThreadsPerBlock,
                           compiled->function) == kSuccess &&
      invocations > uint64_t(max_threads)) {
    d.function_attribute(&registers, FunctionAttribute::NumRegisters, compiled->function);
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: kernel '{}' has {} invocations per workgroup, but with its {} "
                            "registers per thread the device runs at most {} per block",
                            target, name, invocations, registers, max_threads));
  }
  // Shared memory the emitter declared dynamically (extern __shared__) is passed at launch.
  int static_shared = 0;
  if (d.function_attribute(&static_shared, FunctionAttribute::StaticSharedBytes,
                           compiled->function) == kSuccess &&
      abi.shared_bytes > uint32_t(static_shared)) {
    compiled->dynamic_shared = abi.shared_bytes - uint32_t(static_shared);
    if (abi.shared_bytes > uint32_t(s.max_shared))
      check(d.set_max_dynamic_shared(compiled->function, int(compiled->dynamic_shared)),
            fmt::format("allowing kernel '{}' {} bytes of dynamic shared memory", name,
                        compiled->dynamic_shared),
            ErrorKind::Unsupported);
  }
  return compiled;
}

namespace {

//===- Launch arguments -----------------------------------------------------------------------===//

void check_range(const Core &core, const DeviceMemory &memory, uint64_t offset, uint64_t bytes,
                 const char *what) {
  if (!memory.handle || offset > memory.bytes || bytes > memory.bytes - offset)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: {}: the range [{}, {}) lies outside the {} bytes of the memory",
                            core.driver().backend(), what, offset, offset + bytes, memory.bytes));
}

/// Appends `bytes` of `value` at the next multiple of `bytes` (its C alignment).
void append_argument(PackedArguments &packed, const void *value, size_t bytes) {
  size_t offset = (packed.bytes.size() + bytes - 1) / bytes * bytes;
  packed.bytes.resize(offset + bytes);
  std::memcpy(packed.bytes.data() + offset, value, bytes);
  packed.offsets.push_back(offset);
}

/// The kernel `kernel` is, when this Core loaded it; else an Error.
const Kernel &kernel_of(const Core &core, const CompiledKernel &kernel) {
  const auto *k = dynamic_cast<const Kernel *>(&kernel);
  if (!k || k->owner() != &core)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: kernel '{}' was compiled for another device",
                            core.driver().backend(), kernel.abi().name));
  return *k;
}

/// Checks a launch against the kernel and the device, and packs its arguments. The launch ABI of
/// cuda.h: per buffer a device pointer and its element count (unsigned long long); per value
/// lane its bits as an unsigned int, or an unsigned long long for 64-bit types.
void pack(const Core &core, const Kernel &k, std::array<uint32_t, 3> num_workgroups,
          std::span<const LaunchArg> args, PackedArguments &packed) {
  const codegen::KernelAbi &abi = k.abi();
  const char *backend = core.driver().backend();
  const std::array<int, 3> &max_grid = core.setup().max_grid;
  for (int i = 0; i < 3; ++i)
    if (num_workgroups[i] > uint32_t(max_grid[i]))
      throw Error(ErrorKind::Unsupported,
                  fmt::format("{}: launch of kernel '{}': a grid of {}x{}x{} workgroups exceeds "
                              "the device's maximum of {}x{}x{}",
                              backend, abi.name, num_workgroups[0], num_workgroups[1],
                              num_workgroups[2], max_grid[0], max_grid[1], max_grid[2]));
  if (args.size() != abi.params.size())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: launch of kernel '{}': {} arguments for {} parameters", backend,
                            abi.name, args.size(), abi.params.size()));
  packed = PackedArguments{};
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamSlot &slot = abi.params[i];
    const LaunchArg &a = args[i];
    if (slot.kind == codegen::ParamSlot::Value) {
      if (a.memory || a.bits.size() != slot.type.lanes())
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("{}: launch of kernel '{}': parameter {} needs {} lane(s)", backend,
                                abi.name, i, slot.type.lanes()));
      for (uint32_t lane = 0; lane < slot.type.lanes(); ++lane) {
        if (slot.lane_bytes == 8) {
          uint64_t bits = a.bits[lane];
          append_argument(packed, &bits, 8);
        } else {
          uint32_t bits = static_cast<uint32_t>(a.bits[lane]);
          append_argument(packed, &bits, 4);
        }
      }
      continue;
    }
    if (!a.memory)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("{}: launch of kernel '{}': parameter {} needs a buffer", backend,
                              abi.name, i));
    check_range(core, *a.memory, a.offset, a.bytes, "launch");
    uint64_t element_bytes = std::max(1u, ir::scalar_bits(slot.type.element()) / 8);
    if (a.offset % element_bytes)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("{}: launch of kernel '{}': parameter {} starts at byte {}, not a "
                              "multiple of its element size {}",
                              backend, abi.name, i, a.offset, element_bytes));
    uint64_t pointer = pointer_of(*a.memory) + a.offset;
    uint64_t count = a.bytes / element_bytes;
    append_argument(packed, &pointer, 8);
    append_argument(packed, &count, 8);
  }
  packed.bytes.resize((packed.bytes.size() + 7) / 8 * 8);
  packed.size = packed.bytes.size();
}

/// Queues the packed launch; an empty grid runs nothing (the driver would refuse it).
Result queue_launch(const Core &core, const Kernel &k, std::array<uint32_t, 3> num_workgroups,
                    Stream stream, PackedArguments &packed) {
  if (num_workgroups[0] == 0 || num_workgroups[1] == 0 || num_workgroups[2] == 0)
    return kSuccess;
  const std::array<uint32_t, 3> &block = k.abi().workgroup_size;
  return core.driver().launch(k.function, num_workgroups, block, k.dynamic_shared, stream, packed);
}

//===- Events ---------------------------------------------------------------------------------===//

class GpuEvent final : public DeviceEvent {
public:
  GpuEvent(std::shared_ptr<Core> core, Event event) : core_(std::move(core)), event_(event) {}
  ~GpuEvent() override {
    if (core_->lost())
      return;
    try {
      Core::Scope scope(*core_);
      core_->driver().destroy_event(event_);
    } catch (const Error &) {
      // the device is unusable; the event goes with it
    }
  }
  bool done() override {
    if (core_->lost())
      return true; // nothing runs any more; wait() says why
    try {
      Core::Scope scope(*core_);
      Result r = core_->driver().query_event(event_);
      if (r == core_->driver().codes().not_ready)
        return false;
      core_->note(r);
      return true;
    } catch (const Error &) {
      return true;
    }
  }
  void wait() override {
    core_->check_alive();
    Core::Scope scope(*core_);
    core_->check(core_->driver().synchronize_event(event_),
                 "waiting for an event (the work queued before it)");
  }
  const Core *owner() const { return core_.get(); }
  Event handle() const { return event_; }

private:
  std::shared_ptr<Core> core_;
  Event event_;
};

//===- Streams --------------------------------------------------------------------------------===//

class GpuStream final : public DeviceStream {
public:
  /// Launches whose timing events are kept before their times are collected (by waiting).
  static constexpr size_t kMaxPendingLaunches = 1024;

  GpuStream(std::shared_ptr<Core> core, Stream stream) : core_(std::move(core)), stream_(stream) {}
  ~GpuStream() override;

  void upload(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) override {
    check_range(*core_, dst, offset, bytes, "upload");
    if (!bytes)
      return;
    core_->check_alive();
    Core::Scope scope(*core_);
    core_->check(core_->driver().copy_to_device(pointer_of(dst) + offset, src, bytes, stream_),
                 fmt::format("queueing an upload of {} bytes", bytes));
    queued_.fetch_add(1, std::memory_order_release);
    collect("after an upload"); // `src` may go when this returns
  }
  void download(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) override {
    check_range(*core_, src, offset, bytes, "download");
    if (!bytes)
      return;
    core_->check_alive();
    Core::Scope scope(*core_);
    core_->check(core_->driver().copy_to_host(dst, pointer_of(src) + offset, bytes, stream_),
                 fmt::format("queueing a download of {} bytes", bytes));
    queued_.fetch_add(1, std::memory_order_release);
    collect("after a download");
  }
  void launch(const CompiledKernel &kernel, std::array<uint32_t, 3> num_workgroups,
              std::span<const LaunchArg> args) override {
    core_->check_alive();
    const Kernel &k = kernel_of(*core_, kernel);
    PackedArguments packed;
    pack(*core_, k, num_workgroups, args, packed);
    Core::Scope scope(*core_);
    queue_timed([&] { return queue_launch(*core_, k, num_workgroups, stream_, packed); },
                [&] { return fmt::format("the launch of kernel '{}'", k.abi().name); });
  }
  void synchronize() override {
    core_->check_alive();
    Core::Scope scope(*core_);
    collect("in synchronize()");
    last_times_ = std::move(completed_times_);
    completed_times_.clear();
  }
  std::vector<double> last_launch_times_ns() const override { return last_times_; }
  std::shared_ptr<DeviceEvent> record() override {
    core_->check_alive();
    Core::Scope scope(*core_);
    const Driver &d = core_->driver();
    Event event = nullptr;
    core_->check(d.create_event(&event, false), "creating an event");
    auto wrapped = std::make_shared<GpuEvent>(core_, event);
    core_->check(d.record_event(event, stream_), "recording an event");
    return wrapped;
  }
  void wait(DeviceEvent &event) override {
    auto *e = dynamic_cast<GpuEvent *>(&event);
    if (!e || e->owner() != core_.get())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("{}: a stream can wait only for an event of its own device",
                              core_->driver().backend()));
    core_->check_alive();
    Core::Scope scope(*core_);
    core_->check(core_->driver().wait_event(stream_, e->handle()), "queueing a wait for an event");
    queued_.fetch_add(1, std::memory_order_release);
  }
  std::unique_ptr<DeviceGraph> create_graph() override;
  uint64_t mark() override;
  bool reached(uint64_t ticket) override;

  const Core *owner() const { return core_.get(); }
  Stream handle() const { return stream_; }
  /// Queues `launch` (a kernel or graph launch, in the device's context) between two timing
  /// events; `what` names it when it fails (formatted only then: this is the launch path).
  template <class F, class W> void queue_timed(F launch, W what);

private:
  struct EventPair {
    Event start = nullptr;
    Event end = nullptr;
  };
  /// Waits for the stream, then turns the pending event pairs into completed launch times.
  void collect(std::string_view why);
  EventPair take_events();

  std::shared_ptr<Core> core_;
  Stream stream_;
  // The stream's thread only.
  std::vector<EventPair> free_events_;
  std::vector<EventPair> pending_; ///< launches queued since their times were last collected
  std::vector<double> completed_times_;
  std::vector<double> last_times_;
  // Tickets: any thread.
  std::atomic<uint64_t> queued_{0}; ///< operations queued so far (a ticket covers a prefix)
  std::mutex tickets_mutex_;
  uint64_t reached_ = 0;                         ///< every ticket up to it has been reached
  std::deque<std::pair<uint64_t, Event>> marks_; ///< events recorded by mark(), oldest first
  std::vector<Event> spare_marks_;
};

GpuStream::~GpuStream() {
  if (core_->lost())
    return; // the handles died with the context
  try {
    Core::Scope scope(*core_);
    const Driver &d = core_->driver();
    d.synchronize_stream(stream_); // failures were the caller's to see at synchronize()
    for (EventPair &e : pending_)
      free_events_.push_back(e);
    for (EventPair &e : free_events_) {
      d.destroy_event(e.start);
      d.destroy_event(e.end);
    }
    for (auto &[ticket, event] : marks_)
      d.destroy_event(event);
    for (Event event : spare_marks_)
      d.destroy_event(event);
    d.destroy_stream(stream_);
  } catch (const Error &) {
    // the device is unusable; the stream goes with it
  }
}

template <class F, class W> void GpuStream::queue_timed(F launch, W what) {
  const Driver &d = core_->driver();
  if (pending_.size() >= kMaxPendingLaunches)
    collect("to collect launch times");
  EventPair events = take_events();
  Result r = d.record_event(events.start, stream_);
  if (r == kSuccess)
    r = launch();
  if (r == kSuccess)
    r = d.record_event(events.end, stream_);
  if (r != kSuccess) {
    free_events_.push_back(events);
    core_->fail(r, what());
  }
  pending_.push_back(events);
  queued_.fetch_add(1, std::memory_order_release);
}

void GpuStream::collect(std::string_view why) {
  const Driver &d = core_->driver();
  uint64_t queued = queued_.load(std::memory_order_acquire);
  if (Result r = d.synchronize_stream(stream_); r != kSuccess) {
    // The launches' results are lost; their events go back to the pool.
    free_events_.insert(free_events_.end(), pending_.begin(), pending_.end());
    pending_.clear();
    core_->fail(r, fmt::format("a queued launch (found by waiting for the stream {})", why));
  }
  for (const EventPair &e : pending_) {
    float ms = 0;
    core_->check(d.elapsed_ms(&ms, e.start, e.end), "reading a launch's time");
    completed_times_.push_back(double(ms) * 1e6);
    free_events_.push_back(e);
  }
  pending_.clear();
  std::lock_guard lock(tickets_mutex_);
  reached_ = std::max(reached_, queued);
}

GpuStream::EventPair GpuStream::take_events() {
  if (!free_events_.empty()) {
    EventPair e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  const Driver &d = core_->driver();
  EventPair e;
  core_->check(d.create_event(&e.start, true), "creating a timing event");
  if (Result r = d.create_event(&e.end, true); r != kSuccess) {
    d.destroy_event(e.start);
    core_->fail(r, "creating a timing event");
  }
  return e;
}

uint64_t GpuStream::mark() {
  // The increment in queue_timed() follows the launch, so an event recorded now follows every
  // operation `ticket` counts.
  uint64_t ticket = queued_.load(std::memory_order_acquire);
  std::lock_guard lock(tickets_mutex_);
  if (ticket <= reached_ || (!marks_.empty() && marks_.back().first >= ticket) || core_->lost())
    return ticket;
  const Driver &d = core_->driver();
  try {
    Core::Scope scope(*core_);
    Event event = nullptr;
    if (!spare_marks_.empty()) {
      event = spare_marks_.back();
      spare_marks_.pop_back();
    } else if (Result r = d.create_event(&event, false); r != kSuccess) {
      core_->note(r);
      return ticket; // reached() answers once synchronize() has passed it
    }
    if (Result r = d.record_event(event, stream_); r != kSuccess) {
      core_->note(r);
      spare_marks_.push_back(event);
      return ticket;
    }
    marks_.emplace_back(ticket, event);
  } catch (const Error &) {
    // the context is unusable: reached() says so
  }
  return ticket;
}

bool GpuStream::reached(uint64_t ticket) {
  if (core_->lost())
    return true; // nothing runs any more
  std::lock_guard lock(tickets_mutex_);
  if (ticket <= reached_)
    return true;
  try {
    Core::Scope scope(*core_);
    const Driver &d = core_->driver();
    while (!marks_.empty()) {
      auto [covered, event] = marks_.front();
      Result r = d.query_event(event);
      if (r == d.codes().not_ready)
        break;
      core_->note(r); // a failure: the work is over either way
      reached_ = std::max(reached_, covered);
      spare_marks_.push_back(event);
      marks_.pop_front();
    }
  } catch (const Error &) {
    return core_->lost();
  }
  return ticket <= reached_ || core_->lost();
}

//===- Graphs ---------------------------------------------------------------------------------===//

/// A driver graph: the recorded launches are captured on a stream of the graph's own
/// (thread-local capture mode) and instantiated; replay is one graph launch between two timing
/// events on the given stream. A changed value re-captures at the next replay.
class GpuGraph final : public RecordedGraph {
public:
  explicit GpuGraph(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~GpuGraph() override { destroy(); }
  GpuGraph(const GpuGraph &) = delete;
  GpuGraph &operator=(const GpuGraph &) = delete;

  void finish() override {
    RecordedGraph::finish();
    build();
  }
  void set_value(size_t launch, size_t param, std::span<const uint64_t> bits) override {
    RecordedGraph::set_value(launch, param, bits);
    dirty_ = true;
  }
  void replay(DeviceStream &stream) override {
    auto *s = dynamic_cast<GpuStream *>(&stream);
    if (!s || s->owner() != core_.get())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("{}: a graph replays only on a stream of the device that made it",
                              core_->driver().backend()));
    if (launches_.empty())
      return;
    core_->check_alive();
    if (dirty_)
      build();
    Core::Scope scope(*core_);
    s->queue_timed(
        [&] { return core_->driver().launch_graph(exec_, s->handle()); },
        [&] { return fmt::format("the replay of a graph of {} launches", launches_.size()); });
  }

private:
  void build();
  void destroy();

  std::shared_ptr<Core> core_;
  std::vector<std::unique_ptr<PackedArguments>> arguments_; ///< what captured launches point at
  Graph graph_ = nullptr;
  GraphExec exec_ = nullptr;
  bool dirty_ = false;
};

void GpuGraph::build() {
  destroy();
  dirty_ = true; // until the graph is instantiated: a failed build is tried again at replay
  if (launches_.empty())
    return;
  core_->check_alive();
  const Driver &d = core_->driver();
  Core::Scope scope(*core_);
  Stream capture = nullptr;
  core_->check(d.create_stream(&capture), "creating a stream to capture a graph on");
  arguments_.clear();
  Result r = d.begin_capture(capture);
  if (r != kSuccess) {
    d.destroy_stream(capture);
    core_->fail(r, "beginning a graph's capture");
  }
  try {
    for (const Launch &l : launches_) {
      const Kernel &k = kernel_of(*core_, *l.kernel);
      PackedArguments &packed = *arguments_.emplace_back(std::make_unique<PackedArguments>());
      pack(*core_, k, l.num_workgroups, l.args, packed);
      core_->check(queue_launch(*core_, k, l.num_workgroups, capture, packed),
                   fmt::format("capturing the launch of kernel '{}'", k.abi().name));
    }
  } catch (...) {
    Graph abandoned = nullptr;
    if (d.end_capture(capture, &abandoned) == kSuccess && abandoned)
      d.destroy_graph(abandoned);
    d.destroy_stream(capture);
    throw;
  }
  r = d.end_capture(capture, &graph_);
  d.destroy_stream(capture);
  if (r != kSuccess) {
    graph_ = nullptr;
    core_->fail(r, "ending a graph's capture");
  }
  core_->check(d.instantiate_graph(&exec_, graph_), "instantiating a graph");
  dirty_ = false;
}

void GpuGraph::destroy() {
  if (!exec_ && !graph_)
    return;
  if (!core_->lost()) {
    try {
      Core::Scope scope(*core_);
      const Driver &d = core_->driver();
      d.synchronize_context(); // a replay on any stream may still run it
      if (exec_)
        d.destroy_graph_exec(exec_);
      if (graph_)
        d.destroy_graph(graph_);
    } catch (const Error &) {
      // the device is unusable; the graph goes with it
    }
  }
  exec_ = nullptr;
  graph_ = nullptr;
}

std::unique_ptr<DeviceGraph> GpuStream::create_graph() {
  if (!core_->driver().has_graphs())
    return DeviceStream::create_graph(); // an old driver: launches recorded and launched again
  return std::make_unique<GpuGraph>(core_);
}

} // namespace

std::unique_ptr<DeviceStream> Core::create_stream() {
  check_alive();
  Scope scope(*this);
  Stream stream = nullptr;
  check(driver().create_stream(&stream), "creating a stream");
  return std::make_unique<GpuStream>(shared_from_this(), stream);
}

} // namespace cubecc::runtime::gpu
