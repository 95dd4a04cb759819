//===- gpu_core_test.cpp - The CUDA and HIP devices' shared implementation over a fake driver
//--===//
//
// runtime/gpu_common/gpu_device.h driven through a fake gpu::Driver (host counters, events that
// complete when the test says, result codes the test injects), so what the GPU-less machines
// cannot run is still checked here: the error kinds of the result codes, a sticky error losing
// every device on the context and the next open resetting it, tickets following their events,
// and free never touching a stream. The e2e suite (gpu_streams_test.cpp) runs the real drivers.
//
//===-----------------------------------------------------------------------------------------===//
#include "gpu_common/gpu_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>

namespace cubecc::runtime::gpu {
namespace {

using ::testing::HasSubstr;

const ResultCodes kFakeCodes{
    .not_ready = 600,
    .out_of_memory = {2},
    .no_device = {100},
    .over_limits = {701},
    .sticky = {700, 719},
};

struct FakeEvent {
  bool done = false;
};

/// A driver over host counters, allocating nothing (a lost device's handles are never destroyed,
/// as on a GPU). Events are done once recorded while `events_complete` holds, or whenever it
/// holds (the GPU caught up); `sync_result` and `launch_result` inject errors.
class FakeDriver final : public Driver {
public:
  std::atomic<bool> events_complete{true};
  std::atomic<Result> sync_result{kSuccess};
  std::atomic<Result> launch_result{kSuccess};
  mutable std::atomic<int> resets{0}, stream_syncs{0}, context_syncs{0}, frees{0},
      untimed_events{0}, destroyed_streams{0}, launches{0}, streams{0};
  mutable std::mutex events_mutex;
  mutable std::deque<FakeEvent> events;

  const char *backend() const override { return "fake"; }
  std::string describe(Result r) const override { return "FAKE_ERROR_" + std::to_string(r); }
  const ResultCodes &codes() const override { return kFakeCodes; }
  bool has_graphs() const override { return false; }
  Result retain_context(int, void **context) const override {
    *context = nullptr;
    return kSuccess;
  }
  void release_context(int) const override {}
  Result reset_context(int) const override {
    ++resets;
    return kSuccess;
  }
  Result enter(int, void *, intptr_t *) const override { return kSuccess; }
  void leave(int, intptr_t) const override {}
  Result synchronize_context() const override {
    ++context_syncs;
    return kSuccess;
  }
  Result allocate(Pointer *pointer, size_t bytes) const override {
    if (bytes > (size_t(1) << 30))
      return 2;
    static std::atomic<Pointer> next{0x10000};
    *pointer = next.fetch_add(bytes + 256);
    return kSuccess;
  }
  Result free(Pointer) const override {
    ++frees;
    return kSuccess;
  }
  Result copy_to_device(Pointer, const void *, size_t, Stream) const override { return kSuccess; }
  Result copy_to_host(void *, Pointer, size_t, Stream) const override { return kSuccess; }
  Result create_stream(Stream *stream) const override {
    *stream = reinterpret_cast<Stream>(uintptr_t(0x1000 + ++streams));
    return kSuccess;
  }
  Result destroy_stream(Stream) const override {
    ++destroyed_streams;
    return kSuccess;
  }
  Result synchronize_stream(Stream) const override {
    ++stream_syncs;
    return sync_result.load();
  }
  Result wait_event(Stream, Event) const override { return kSuccess; }
  Result create_event(Event *event, bool timing) const override {
    if (!timing)
      ++untimed_events;
    std::lock_guard lock(events_mutex);
    *event = &events.emplace_back();
    return kSuccess;
  }
  Result destroy_event(Event) const override { return kSuccess; }
  Result record_event(Event event, Stream) const override {
    static_cast<FakeEvent *>(event)->done = events_complete.load();
    return kSuccess;
  }
  Result query_event(Event event) const override {
    return events_complete || static_cast<FakeEvent *>(event)->done ? kSuccess
                                                                    : kFakeCodes.not_ready;
  }
  Result synchronize_event(Event) const override { return kSuccess; }
  Result elapsed_ms(float *ms, Event, Event) const override {
    *ms = 0.5f;
    return kSuccess;
  }
  Result load_module(Module *module, const std::string &image, std::string *log) const override {
    if (image == "refused") {
      *log = "the fake JIT says no";
      return 200;
    }
    *module = reinterpret_cast<Module>(uintptr_t(0x2000));
    return kSuccess;
  }
  Result unload_module(Module) const override { return kSuccess; }
  Result get_function(Function *function, Module module, const char *) const override {
    *function = module;
    return kSuccess;
  }
  Result function_attribute(int *, FunctionAttribute, Function) const override { return 801; }
  Result set_max_dynamic_shared(Function, int) const override { return kSuccess; }
  Result launch(Function, std::array<uint32_t, 3>, std::array<uint32_t, 3>, unsigned, Stream,
                PackedArguments &) const override {
    ++launches;
    return launch_result.load();
  }
  Result begin_capture(Stream) const override { return 1; }
  Result end_capture(Stream, Graph *) const override { return 1; }
  Result instantiate_graph(GraphExec *, Graph) const override { return 1; }
  Result launch_graph(GraphExec, Stream) const override { return 1; }
  Result destroy_graph_exec(GraphExec) const override { return 1; }
  Result destroy_graph(Graph) const override { return 1; }
};

Setup fake_setup(const FakeDriver &driver) {
  Setup s;
  s.driver = &driver;
  s.info.backend = "fake";
  s.info.features.target = "fake:1";
  s.arch = "fake1";
  s.max_grid = {1024, 1024, 64};
  s.max_block = {1024, 1024, 64};
  s.max_threads = 1024;
  s.max_shared = 48 * 1024;
  s.max_shared_optin = 48 * 1024;
  return s;
}

codegen::KernelAbi abi_of(const char *name, uint32_t workgroup_x) {
  codegen::KernelAbi abi;
  abi.name = name;
  abi.workgroup_size = {workgroup_x, 1, 1};
  return abi;
}

template <class F> Error error_of(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e;
  }
  return Error(ErrorKind::Internal, "<no error>");
}

TEST(GpuCore, result_codes_become_error_kinds) {
  FakeDriver driver;
  std::shared_ptr<Core> core = Core::open(fake_setup(driver));
  EXPECT_EQ(error_of([&] { core->allocate(uint64_t(1) << 40); }).kind(), ErrorKind::OutOfMemory);
  Error too_wide = error_of(
      [&] { core->load_module(abi_of("wide", 2048), "", "image", "x", ErrorKind::Compile); });
  EXPECT_EQ(too_wide.kind(), ErrorKind::Unsupported);
  EXPECT_THAT(too_wide.what(), HasSubstr("kernel 'wide' has workgroup size (2048, 1, 1)"));
  Error refused = error_of([&] {
    core->load_module(abi_of("k", 64), "", "refused", "cubin x", ErrorKind::Environment);
  });
  EXPECT_EQ(refused.kind(), ErrorKind::Environment);
  EXPECT_THAT(refused.what(), HasSubstr("FAKE_ERROR_200"));
  EXPECT_THAT(refused.what(), HasSubstr("the fake JIT says no"));
  EXPECT_EQ(error_of([&] {
              core->load_module(abi_of("k", 64), "", "refused", "x", ErrorKind::Compile);
            }).kind(),
            ErrorKind::Compile);

  std::unique_ptr<CompiledKernel> kernel =
      core->load_module(abi_of("k", 64), "", "image", "x", ErrorKind::Compile);
  std::unique_ptr<DeviceStream> stream = core->create_stream();
  EXPECT_EQ(error_of([&] {
              stream->launch(*kernel, {1u << 20, 1, 1}, {});
            }).kind(),
            ErrorKind::Unsupported); // over the device's grid
  driver.launch_result = 701;
  EXPECT_EQ(error_of([&] {
              stream->launch(*kernel, {1, 1, 1}, {});
            }).kind(),
            ErrorKind::Unsupported);
  driver.launch_result = kSuccess;
  stream->launch(*kernel, {1, 1, 1}, {});
  stream->synchronize();
  EXPECT_EQ(stream->last_launch_times_ns(), std::vector<double>{0.5e6});
  EXPECT_FALSE(core->lost());
}

TEST(GpuCore, a_sticky_error_loses_every_device_on_the_context_and_the_next_open_resets_it) {
  FakeDriver driver;
  std::shared_ptr<Core> core = Core::open(fake_setup(driver));
  std::shared_ptr<Core> other = Core::open(fake_setup(driver)); // the same primary context
  std::unique_ptr<CompiledKernel> kernel =
      core->load_module(abi_of("k", 64), "", "image", "x", ErrorKind::Compile);
  std::unique_ptr<DeviceStream> stream = core->create_stream();
  stream->launch(*kernel, {1, 1, 1}, {});
  driver.sync_result = 700; // the launch stored through a bad pointer
  Error fault = error_of([&] { stream->synchronize(); });
  EXPECT_EQ(fault.kind(), ErrorKind::DeviceFailure);
  EXPECT_THAT(fault.what(), HasSubstr("FAKE_ERROR_700"));
  EXPECT_THAT(fault.what(), HasSubstr("context is lost"));
  driver.sync_result = kSuccess;
  for (Core *lost : {core.get(), other.get()}) {
    Error later = error_of([&] { lost->allocate(16); });
    EXPECT_EQ(later.kind(), ErrorKind::DeviceFailure);
    EXPECT_THAT(later.what(), HasSubstr("the device's context was lost after FAKE_ERROR_700"));
    EXPECT_THAT(later.what(), HasSubstr("open a new device"));
    EXPECT_EQ(error_of([&] { lost->create_stream(); }).kind(), ErrorKind::DeviceFailure);
  }
  EXPECT_EQ(error_of([&] {
              stream->launch(*kernel, {1, 1, 1}, {});
            }).kind(),
            ErrorKind::DeviceFailure);
  EXPECT_TRUE(stream->reached(stream->mark())); // nothing runs any more
  EXPECT_EQ(driver.resets, 0);

  std::shared_ptr<Core> fresh = Core::open(fake_setup(driver));
  EXPECT_EQ(driver.resets, 1);
  EXPECT_FALSE(fresh->lost());
  DeviceMemory memory = fresh->allocate(16);
  std::unique_ptr<DeviceStream> fresh_stream = fresh->create_stream();
  std::unique_ptr<CompiledKernel> fresh_kernel =
      fresh->load_module(abi_of("k", 64), "", "image", "x", ErrorKind::Compile);
  fresh_stream->launch(*fresh_kernel, {1, 1, 1}, {});
  fresh_stream->synchronize();
  fresh->free(memory);
  EXPECT_TRUE(core->lost()); // the old devices stay lost
  EXPECT_EQ(Core::open(fake_setup(driver)) != nullptr, true);
  EXPECT_EQ(driver.resets, 1); // a working context is not reset
  // The lost devices' handles died with the context: their destruction touches none.
  int destroyed = driver.destroyed_streams;
  stream.reset();
  EXPECT_EQ(driver.destroyed_streams, destroyed);
  kernel.reset();
}

TEST(GpuCore, tickets_follow_their_events_and_free_never_touches_a_stream) {
  FakeDriver driver;
  std::shared_ptr<Core> core = Core::open(fake_setup(driver));
  std::unique_ptr<CompiledKernel> kernel =
      core->load_module(abi_of("k", 64), "", "image", "x", ErrorKind::Compile);
  std::unique_ptr<DeviceStream> stream = core->create_stream();
  EXPECT_TRUE(stream->reached(stream->mark())); // nothing queued: no event
  EXPECT_EQ(driver.untimed_events, 0);

  driver.events_complete = false; // the GPU is busy
  for (int i = 0; i < 3; ++i)
    stream->launch(*kernel, {1, 1, 1}, {});
  EXPECT_EQ(driver.untimed_events, 0); // launches record no event for tickets
  uint64_t ticket = stream->mark();
  EXPECT_EQ(driver.untimed_events, 1);
  EXPECT_EQ(stream->mark(), ticket); // covered by the same event
  EXPECT_EQ(driver.untimed_events, 1);
  EXPECT_FALSE(stream->reached(ticket));

  DeviceMemory memory = core->allocate(64);
  int stream_syncs = driver.stream_syncs, context_syncs = driver.context_syncs;
  core->free(memory); // the deletion queue's job: no waiting here
  EXPECT_EQ(driver.frees, 1);
  EXPECT_EQ(driver.stream_syncs, stream_syncs);
  EXPECT_EQ(driver.context_syncs, context_syncs);

  stream->synchronize(); // reaches everything queued before it, without an event
  EXPECT_TRUE(stream->reached(ticket));
  stream->launch(*kernel, {1, 1, 1}, {});
  uint64_t later = stream->mark();
  EXPECT_GT(later, ticket);
  EXPECT_FALSE(stream->reached(later));
  driver.events_complete = true;
  stream->launch(*kernel, {1, 1, 1}, {});
  uint64_t last = stream->mark(); // recorded complete
  EXPECT_TRUE(stream->reached(last));
  EXPECT_TRUE(stream->reached(later)) << "an older ticket is covered by a newer event";
}

} // namespace
} // namespace cubecc::runtime::gpu
