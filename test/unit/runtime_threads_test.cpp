//===- runtime_threads_test.cpp - One Runtime, many threads, many streams --------------------===//
//
// A Runtime is a thread-safe context (runtime.h): any thread may call it; each thread may have
// its own Stream; Buffers may be destroyed on any thread at any time, their blocks waiting in
// the pool's deletion queue until no stream's queued work uses them (issue 16: on Vulkan a
// Buffer freed on another thread flushed and reset the command buffer a launch was recording,
// giving wrong results). Every test runs on interp and, where their devices open, on vulkan and
// cpu. The file also builds under ThreadSanitizer with the interpreter alone (test/tsan), which
// is why it needs nothing but the runtime, the IR parser and GoogleTest.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/parser.h"
#include "cubecc/runtime/runtime.h"

#include <gmock/gmock.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace cubecc;
using namespace cubecc::runtime;
using ::testing::HasSubstr;

namespace {

// acc[i] += 1 for i < n.
constexpr std::string_view kBumpKernel = R"(
module @m {
  kernel @bump(%acc: buffer<u32, readwrite>, %n: u32) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %v = load %acc, %i : u32
      %one = const 1 : u32
      %w = add %v, %one : u32
      store %acc, %i, %w
      yield
    }
    return
  }
}
)";

// out[i] = in[i] * 2 for i < n: a consumer that reads what another stream produced.
constexpr std::string_view kDoubleKernel = R"(
module @m {
  kernel @double(%in: buffer<u32, read>, %out: buffer<u32, readwrite>, %n: u32) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %v = load %in, %i : u32
      %w = add %v, %v : u32
      store %out, %i, %w
      yield
    }
    return
  }
}
)";

std::unique_ptr<ir::Module> parse(std::string_view text) {
  ir::ParseResult parsed = ir::parse_module(text, "runtime_threads_test.cir");
  EXPECT_TRUE(parsed.errors.empty()) << ir::to_string(parsed.errors);
  return std::move(parsed.module);
}

class RuntimeThreads : public ::testing::TestWithParam<const char *> {
protected:
  /// Opens the device of the test's parameter (skipping when it does not open) with `pool`.
  void open(PoolOptions pool = {}) {
    try {
      rt.emplace(Runtime::open(GetParam(), pool));
    } catch (const Error &e) {
      GTEST_SKIP() << "no " << GetParam() << " device: " << e.what();
    }
    bump_module = parse(kBumpKernel);
    double_module = parse(kDoubleKernel);
    ASSERT_TRUE(bump_module && double_module);
    bump = rt->load(*bump_module->kernels()[0]);
    twice = rt->load(*double_module->kernels()[0]);
    // The stress test's kernel: workgroups of 16, so that the interpreter spends its time on the
    // runtime more than on idle invocations.
    std::string small(kBumpKernel);
    small.replace(small.find("workgroup(64, 1, 1)"), 19, "workgroup(16, 1, 1)");
    small_module = parse(small);
    ASSERT_TRUE(small_module);
    small_bump = rt->load(*small_module->kernels()[0]);
  }

  std::optional<Runtime> rt;
  std::unique_ptr<ir::Module> bump_module, double_module, small_module;
  KernelHandle bump, twice, small_bump;
};

/// A one-shot signal between two threads.
class Signal {
public:
  void raise() {
    std::lock_guard lock(mutex_);
    raised_ = true;
    condition_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    condition_.wait(lock, [&] { return raised_; });
  }

private:
  std::mutex mutex_;
  std::condition_variable condition_;
  bool raised_ = false;
};

TEST_P(RuntimeThreads, a_second_thread_entering_a_stream_gets_an_error_naming_both_calls) {
  open();
  if (!rt)
    return;
  Stream stream = rt->create_stream();
  Signal inside, tried;
  std::string error;
  std::optional<ErrorKind> kind;
  std::thread other([&] {
    inside.wait();
    try {
      Buffer b = stream.allocate<float>(16);
      error = "<no error>";
    } catch (const Error &e) {
      error = e.what();
      kind = e.kind();
    }
    tried.raise();
  });
  // The trace runs inside Stream::kernel; the other thread calls allocate on the stream meanwhile.
  KernelHandle k = stream.kernel("threads.bump", [&]() -> const ir::Kernel & {
    inside.raise();
    tried.wait();
    return *bump_module->kernels()[0];
  });
  other.join();
  EXPECT_EQ(error, "Stream::allocate was called on one thread while another thread is inside "
                   "Stream::kernel of the same stream: a stream is used by one thread at a time; "
                   "give each thread its own stream (Runtime::create_stream)");
  EXPECT_EQ(kind, ErrorKind::InvalidArgument);
  // The first thread's call went on undisturbed, and the stream is free again afterwards.
  EXPECT_TRUE(k.valid());
  std::thread after([&] { EXPECT_EQ(stream.allocate<float>(16).size(), 16u); });
  after.join();
}

TEST_P(RuntimeThreads, a_trace_may_call_the_runtime_again) {
  open();
  if (!rt)
    return;
  std::vector<uint32_t> seen;
  KernelHandle k = rt->kernel("threads.bump.nested", [&]() -> const ir::Kernel & {
    Buffer b = rt->upload(std::vector<uint32_t>{7, 8, 9}); // nested calls on the same thread
    seen = rt->download<uint32_t>(b);
    rt->load(*double_module->kernels()[0]);
    return *bump_module->kernels()[0];
  });
  EXPECT_TRUE(k.valid());
  EXPECT_EQ(seen, (std::vector<uint32_t>{7, 8, 9}));
}

TEST_P(RuntimeThreads, buffers_destroyed_on_another_thread_never_disturb_the_launching_thread) {
  // Nothing cached: every block whose work is done goes back to the device at once.
  open({.max_cached_bytes = 0});
  if (!rt)
    return;
  constexpr uint32_t kElements = 200;
  constexpr int kBuffers = 1500;
  std::deque<Buffer> doomed;
  for (int i = 0; i < kBuffers; ++i)
    doomed.push_back(rt->allocate<uint32_t>(1 + (i * 37) % 1500));
  Buffer acc = rt->upload(std::vector<uint32_t>(kElements, 0));

  std::mutex mutex;
  std::atomic<bool> started{false}, done{false};
  std::thread destroyer([&] {
    while (!started)
      std::this_thread::yield();
    for (;;) {
      Buffer victim;
      {
        std::lock_guard lock(mutex);
        if (doomed.empty())
          break;
        victim = std::move(doomed.front());
        doomed.pop_front();
      }
      // `victim` dies here, on this thread, while the main thread launches.
    }
    done = true;
  });
  // Launch for as long as the other thread destroys buffers (and at least 200 times).
  uint32_t launches = 0;
  started = true;
  while (!done || launches < 200) {
    rt->launch(bump, grid_1d(kElements, 64), acc, kElements);
    if (++launches % 64 == 0)
      rt->synchronize();
  }
  destroyer.join();
  rt->synchronize();
  EXPECT_EQ(rt->download<uint32_t>(acc), std::vector<uint32_t>(kElements, launches));
  EXPECT_EQ(rt->pool_statistics().bytes_live, acc.memory().bytes);
}

TEST_P(RuntimeThreads, threads_sharing_the_runtimes_default_stream_all_get_right_results) {
  open();
  if (!rt)
    return;
  constexpr uint32_t kElements = 64;
  constexpr int kIterations = 150;
  auto worker = [&](uint32_t seed, std::string &failure) {
    std::optional<Buffer> mine;
    for (int i = 0; i < kIterations && failure.empty(); ++i) {
      if (!mine)
        mine = rt->allocate<uint32_t>(kElements);
      uint32_t start = seed + uint32_t(i);
      rt->upload(*mine, std::span<const uint32_t>(std::vector<uint32_t>(kElements, start)));
      rt->launch(bump, grid_1d(kElements, 64), *mine, kElements);
      if (i % 3 == 0)
        rt->synchronize();
      std::vector<uint32_t> out = rt->download<uint32_t>(*mine);
      if (out != std::vector<uint32_t>(kElements, start + 1))
        failure = "iteration " + std::to_string(i) + ": " + std::to_string(out[0]) + " where " +
                  std::to_string(start + 1) + " was expected";
      if (i % 10 == 9)
        mine.reset(); // let go on this thread while the other is inside the runtime
    }
  };
  std::string failure_a, failure_b;
  std::thread a([&] { worker(1000, failure_a); });
  std::thread b([&] { worker(5000, failure_b); });
  a.join();
  b.join();
  EXPECT_EQ(failure_a, "");
  EXPECT_EQ(failure_b, "");
}

/// What one thread of the stress test does, counted in operations (allocations, copies,
/// launches, synchronizations, buffers destroyed).
struct StressWorker {
  static constexpr uint32_t kElements = 16;
  uint32_t id = 0;
  uint64_t operations = 0;
  std::string failure;
};

/// Buffers handed from one thread to another, which destroys them.
class Mailbox {
public:
  void post(Buffer buffer) {
    std::lock_guard lock(mutex_);
    buffers_.push_back(std::move(buffer));
  }
  std::vector<Buffer> take() {
    std::lock_guard lock(mutex_);
    std::vector<Buffer> taken;
    for (Buffer &b : buffers_)
      taken.push_back(std::move(b));
    buffers_.clear();
    return taken;
  }

private:
  std::mutex mutex_;
  std::deque<Buffer> buffers_;
};

TEST_P(RuntimeThreads, eight_threads_with_their_own_streams_stress_one_context) {
  // A small cache, so that freed blocks also go back to the device while other streams work.
  open({.max_cached_bytes = 64 * 1024});
  if (!rt)
    return;
  constexpr int kThreads = 8;
  constexpr uint64_t kOperations = 10000; // per thread, at least
  std::vector<StressWorker> workers(kThreads);
  std::vector<Mailbox> mailboxes(kThreads);
  auto run = [&](StressWorker &w) {
    constexpr uint32_t n = StressWorker::kElements;
    Stream stream = rt->create_stream();
    for (uint32_t i = 0; w.operations < kOperations && w.failure.empty(); ++i) {
      const uint32_t start = w.id * 1000003u + i * 7u;
      // A buffer this thread checks, and a scratch buffer that another thread destroys while
      // this stream's launch on it may still be queued: its block must not be reused before.
      Buffer checked = stream.upload(std::vector<uint32_t>(n, start));
      Buffer scratch = stream.upload(std::vector<uint32_t>(n + w.id, start));
      stream.launch(small_bump, grid_1d(n, 16), checked, n);
      stream.launch(small_bump, grid_1d(n + w.id, 16), scratch, n + w.id);
      mailboxes[(w.id + 1) % kThreads].post(std::move(scratch));
      stream.launch(small_bump, grid_1d(n, 16), checked, n);
      w.operations += 7;
      if (i % 5 == 0) {
        stream.synchronize();
        ++w.operations;
      }
      std::vector<uint32_t> out = stream.download<uint32_t>(checked);
      ++w.operations;
      if (out != std::vector<uint32_t>(n, start + 2)) {
        size_t bad = 0;
        while (bad < n && out[bad] == start + 2)
          ++bad;
        w.failure = "thread " + std::to_string(w.id) + ", iteration " + std::to_string(i) +
                    ": element " + std::to_string(bad) + " is " + std::to_string(out[bad]) +
                    " where " + std::to_string(start + 2) + " was expected";
      }
      // Buffers other threads made, destroyed here.
      w.operations += mailboxes[w.id].take().size();
    }
    stream.synchronize();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    workers[t].id = uint32_t(t);
    threads.emplace_back([&, t] { run(workers[t]); });
  }
  for (std::thread &t : threads)
    t.join();
  for (Mailbox &m : mailboxes)
    m.take();
  for (const StressWorker &w : workers) {
    EXPECT_EQ(w.failure, "");
    EXPECT_GE(w.operations, kOperations);
  }
  PoolStatistics stats = rt->pool_statistics();
  EXPECT_EQ(stats.bytes_live, 0u) << "every Buffer is gone";
  EXPECT_EQ(stats.bytes_requested, 0u);
}

TEST_P(RuntimeThreads, an_event_orders_a_consumer_stream_after_a_producer_stream) {
  open();
  if (!rt)
    return;
  constexpr uint32_t n = 1024;
  Stream producer = rt->create_stream(), consumer = rt->create_stream();
  for (uint32_t round = 0; round < 10; ++round) {
    Buffer data = producer.upload(std::vector<uint32_t>(n, round));
    for (int k = 0; k < 5; ++k)
      producer.launch(bump, grid_1d(n, 64), data, n);
    Event produced = producer.record();
    Buffer out = consumer.allocate<uint32_t>(n);
    consumer.wait(produced);
    consumer.launch(twice, grid_1d(n, 64), data, out, n);
    EXPECT_EQ(consumer.download<uint32_t>(out), std::vector<uint32_t>(n, 2 * (round + 5)))
        << "round " << round;
    EXPECT_TRUE(produced.done()); // the consumer's download waited for what it waited on
    produced.synchronize();
  }
}

TEST_P(RuntimeThreads, threads_asking_for_one_kernel_trace_and_compile_it_once) {
  open();
  if (!rt)
    return;
  constexpr int kThreads = 8;
  std::atomic<int> traces{0};
  std::vector<KernelHandle> handles(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      handles[t] = rt->kernel("threads.once", [&]() -> const ir::Kernel & {
        ++traces;
        return *double_module->kernels()[0];
      });
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(traces.load(), 1);
  for (const KernelHandle &h : handles)
    EXPECT_EQ(h.hash(), handles[0].hash());
}

TEST_P(RuntimeThreads, errors_of_streams_and_events_say_what_to_do) {
  open();
  if (!rt)
    return;
  Stream empty;
  EXPECT_THAT([&] { empty.synchronize(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("Runtime::create_stream()")));
  Event none;
  Stream stream = rt->create_stream();
  EXPECT_THAT([&] { stream.wait(none); },
              ::testing::ThrowsMessage<Error>(HasSubstr("the event is empty")));
  Runtime other = Runtime::open("interp");
  Stream foreign = other.create_stream();
  Event elsewhere = foreign.record();
  EXPECT_THAT([&] { stream.wait(elsewhere); },
              ::testing::ThrowsMessage<Error>(HasSubstr("another Runtime")));
}

INSTANTIATE_TEST_SUITE_P(Devices, RuntimeThreads, ::testing::Values("interp", "vulkan", "cpu"),
                         [](const auto &info) { return std::string(info.param); });

} // namespace
