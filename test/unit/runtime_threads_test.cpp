//===- runtime_threads_test.cpp - A Runtime used from several threads ------------------------===//
//
// A Runtime is not thread-safe (runtime.h): a second thread that calls it while a first is inside
// must get an Error saying so, never a race; Buffers may be destroyed on any thread, and their
// memory must reach the device without disturbing the call in progress (issue 17, #13: on Vulkan
// a Buffer freed on another thread flushed and reset the command buffer a launch was recording).
// Every test runs on interp and, where their devices open, on vulkan and cpu.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/runtime/runtime.h"
#include "test_support.h"

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

const char kNotThreadSafe[] = "a Runtime is not thread-safe";

class RuntimeThreads : public ::testing::TestWithParam<const char *> {
protected:
  /// Opens the device of the test's parameter (skipping when it does not open) with `pool`.
  void open(PoolOptions pool = {}) {
    try {
      rt.emplace(Runtime::open(GetParam(), pool));
    } catch (const Error &e) {
      GTEST_SKIP() << "no " << GetParam() << " device: " << e.what();
    }
    module = test::parse_valid(kBumpKernel);
    ASSERT_TRUE(module);
    bump = rt->load(*module->kernels()[0]);
  }

  std::optional<Runtime> rt;
  std::unique_ptr<ir::Module> module;
  KernelHandle bump;
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

TEST_P(RuntimeThreads, a_second_thread_entering_a_runtime_call_gets_an_error_naming_both_calls) {
  open();
  if (!rt)
    return;
  Signal inside, tried;
  std::string error;
  std::thread other([&] {
    inside.wait();
    try {
      Buffer b = rt->allocate<float>(16);
      error = "<no error>";
    } catch (const Error &e) {
      error = e.what();
    }
    tried.raise();
  });
  // The trace runs inside Runtime::kernel; the other thread calls allocate meanwhile.
  KernelHandle k = rt->kernel("threads.bump", [&]() -> const ir::Kernel & {
    inside.raise();
    tried.wait();
    return *module->kernels()[0];
  });
  other.join();
  EXPECT_EQ(error, "Runtime::allocate was called on one thread while another thread is inside "
                   "Runtime::kernel of the same Runtime: a Runtime is not thread-safe; give each "
                   "thread its own Runtime, or hold a lock around every call (Buffers may still "
                   "be destroyed on any thread)");
  // The first thread's call went on undisturbed, and the Runtime is free again afterwards.
  EXPECT_TRUE(k.valid());
  std::thread after([&] { EXPECT_EQ(rt->allocate<float>(16).size(), 16u); });
  after.join();
}

TEST_P(RuntimeThreads, the_thread_inside_a_call_may_call_the_runtime_again) {
  open();
  if (!rt)
    return;
  std::vector<uint32_t> seen;
  KernelHandle k = rt->kernel("threads.bump.nested", [&]() -> const ir::Kernel & {
    Buffer b = rt->upload(std::vector<uint32_t>{7, 8, 9}); // a nested call on the same thread
    seen = rt->download<uint32_t>(b);
    return *module->kernels()[0];
  });
  EXPECT_TRUE(k.valid());
  EXPECT_EQ(seen, (std::vector<uint32_t>{7, 8, 9}));
}

TEST_P(RuntimeThreads, buffers_destroyed_on_another_thread_never_disturb_the_launching_thread) {
  // Nothing cached: every Buffer destroyed goes back to the device at once.
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

TEST_P(RuntimeThreads, two_threads_racing_on_one_runtime_get_errors_or_right_results) {
  open();
  if (!rt)
    return;
  constexpr uint32_t kElements = 64;
  constexpr int kIterations = 150;
  std::atomic<int> completed{0}, refused{0};
  auto worker = [&](std::string &failure) {
    std::optional<Buffer> mine;
    for (int i = 0; i < kIterations && failure.empty(); ++i) {
      try {
        if (!mine)
          mine = rt->allocate<uint32_t>(kElements);
        rt->upload(*mine, std::span<const uint32_t>(std::vector<uint32_t>(kElements, 41)));
        rt->launch(bump, grid_1d(kElements, 64), *mine, kElements);
        rt->synchronize();
        std::vector<uint32_t> out = rt->download<uint32_t>(*mine);
        if (out != std::vector<uint32_t>(kElements, 42))
          failure = "iteration " + std::to_string(i) + ": wrong result " + std::to_string(out[0]);
        ++completed;
      } catch (const Error &e) {
        if (std::string(e.what()).find(kNotThreadSafe) == std::string::npos)
          failure = std::string("an error other than the thread check: ") + e.what();
        ++refused;
      }
    }
    // Buffers are let go on this thread, possibly while the other is inside the Runtime.
    mine.reset();
  };
  std::string failure_a, failure_b;
  std::thread a([&] { worker(failure_a); });
  std::thread b([&] { worker(failure_b); });
  a.join();
  b.join();
  EXPECT_EQ(failure_a, "");
  EXPECT_EQ(failure_b, "");
  EXPECT_EQ(completed + refused, 2 * kIterations);
  EXPECT_GT(completed.load(), 0);
  RecordProperty("completed", completed.load());
  RecordProperty("refused", refused.load());
}

INSTANTIATE_TEST_SUITE_P(Devices, RuntimeThreads, ::testing::Values("interp", "vulkan", "cpu"),
                         [](const auto &info) { return std::string(info.param); });

} // namespace
