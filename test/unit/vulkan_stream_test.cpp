//===- vulkan_stream_test.cpp - The Vulkan device's streams, at the device level --------------===//
//
// VulkanDevice::create_stream on lavapipe (skipped without a Vulkan device): events ordering a
// producer on one stream before a consumer on another, memory freed while another stream is
// recording, eight threads with a stream each, graphs replayed on two streams, a kernel destroyed
// while launches of it are queued, copies through staging buffers ordered with the launches,
// tickets, and the kinds of the errors a stream throws. Expected values are computed here, on
// the host, from the inputs.
//
//===-----------------------------------------------------------------------------------------===//
#ifdef CUBECC_HAVE_VULKAN

#include "cubecc/ir/ir.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/vulkan_device.h"

#include "test_support.h"

#include <gmock/gmock.h>

#include <atomic>
#include <numeric>
#include <thread>

using namespace cubecc;
using namespace cubecc::runtime;

namespace {

// out[i] = in[i] + k over out's elements.
constexpr std::string_view kAddKernel = R"(
module @m {
  kernel @addk(%in: buffer<u32, read>, %out: buffer<u32, readwrite>, %k: u32) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %out : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %v = load %in, %i : u32
      %r = add %v, %k : u32
      store %out, %i, %r
      yield
    }
    return
  }
}
)";

/// A Vulkan device and the add kernel compiled for it; skips the test without a device.
class VulkanStreamTest : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      device = VulkanDevice::open();
    } catch (const Error &e) {
      GTEST_SKIP() << "no Vulkan device: " << e.what();
    }
    add = compile_add(*device);
  }
  void TearDown() override {
    add.reset();
    device.reset();
    EXPECT_THAT(VulkanDevice::teardown_messages(), ::testing::IsEmpty());
  }

  static std::unique_ptr<CompiledKernel> compile_add(VulkanDevice &d) {
    auto module = test::parse_valid(kAddKernel);
    EXPECT_TRUE(passes::optimize(*module, 2).empty());
    return d.compile(*module->kernels()[0]);
  }

  static LaunchArg buffer_arg(const DeviceMemory &memory) {
    LaunchArg a;
    a.memory = &memory;
    a.bytes = memory.bytes;
    return a;
  }

  /// Queues out = in + k on `stream` over all of out.
  void launch_add(DeviceStream &stream, const DeviceMemory &in, const DeviceMemory &out, uint32_t k,
                  const CompiledKernel *kernel = nullptr) {
    LaunchArg args[3] = {buffer_arg(in), buffer_arg(out), {}};
    args[2].bits = {k};
    uint32_t groups = static_cast<uint32_t>((out.bytes / 4 + 63) / 64);
    stream.launch(kernel ? *kernel : *add, {groups, 1, 1}, args);
  }

  static std::vector<uint32_t> iota(size_t n, uint32_t first) {
    std::vector<uint32_t> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
  }

  static void upload(DeviceStream &s, const DeviceMemory &m, const std::vector<uint32_t> &v) {
    s.upload(m, 0, v.data(), v.size() * 4);
  }
  static std::vector<uint32_t> download(DeviceStream &s, const DeviceMemory &m) {
    std::vector<uint32_t> v(m.bytes / 4);
    s.download(m, 0, v.data(), m.bytes);
    return v;
  }

  std::unique_ptr<VulkanDevice> device;
  std::unique_ptr<CompiledKernel> add;
};

} // namespace

TEST_F(VulkanStreamTest, an_event_orders_a_producer_on_one_stream_before_a_consumer_on_another) {
  const size_t n = 1 << 16; // a producer long enough for the consumer to overtake it unordered
  auto producer = device->create_stream(), consumer = device->create_stream();
  DeviceMemory x = device->allocate(n * 4), tmp = device->allocate(n * 4),
               y = device->allocate(n * 4);
  std::vector<uint32_t> input = iota(n, 0);
  upload(*producer, x, input);
  for (uint32_t it = 1; it <= 60; ++it) {
    launch_add(*producer, x, tmp, it); // tmp = x + it
    std::shared_ptr<DeviceEvent> produced = producer->record();
    consumer->wait(*produced);
    launch_add(*consumer, tmp, y, 1000); // y = tmp + 1000
    std::shared_ptr<DeviceEvent> consumed = consumer->record();
    producer->wait(*consumed); // the next iteration's producer overwrites tmp
    std::vector<uint32_t> out = download(*consumer, y);
    EXPECT_TRUE(produced->done());
    EXPECT_TRUE(consumed->done());
    for (size_t i = 0; i < n; i += 997)
      ASSERT_EQ(out[i], input[i] + it + 1000) << "iteration " << it << ", element " << i;
    ASSERT_EQ(out[n - 1], input[n - 1] + it + 1000) << "iteration " << it;
  }
  producer->synchronize();
  for (DeviceMemory m : {x, tmp, y})
    device->free(m);
}

TEST_F(VulkanStreamTest, an_event_from_another_thread_orders_the_streams_of_two_threads) {
  const size_t n = 1 << 16;
  const uint32_t rounds = 200;
  DeviceMemory x = device->allocate(n * 4), tmp = device->allocate(n * 4),
               y = device->allocate(n * 4);
  auto producer = device->create_stream(), consumer = device->create_stream();
  upload(*producer, x, std::vector<uint32_t>(n, 7));
  producer->synchronize();
  // One slot per round: the producer thread publishes its event, the consumer waits on it on
  // the device (stream wait) and publishes its own, which the producer waits on before
  // overwriting tmp.
  std::vector<std::shared_ptr<DeviceEvent>> produced(rounds), consumed(rounds);
  std::vector<std::atomic<bool>> produced_ready(rounds), consumed_ready(rounds);
  std::thread producer_thread([&] {
    for (uint32_t r = 0; r < rounds; ++r) {
      if (r > 0) {
        while (!consumed_ready[r - 1].load())
          std::this_thread::yield();
        producer->wait(*consumed[r - 1]);
      }
      launch_add(*producer, x, tmp, r); // tmp = 7 + r
      produced[r] = producer->record();
      produced_ready[r].store(true);
    }
    producer->synchronize();
  });
  std::vector<uint32_t> results(rounds);
  for (uint32_t r = 0; r < rounds; ++r) {
    while (!produced_ready[r].load())
      std::this_thread::yield();
    consumer->wait(*produced[r]);
    launch_add(*consumer, tmp, y, 0); // y = tmp
    consumed[r] = consumer->record();
    consumed_ready[r].store(true);
    uint32_t last = 0;
    consumer->download(y, (n - 1) * 4, &last, 4);
    results[r] = last;
  }
  producer_thread.join();
  for (uint32_t r = 0; r < rounds; ++r)
    EXPECT_EQ(results[r], 7 + r) << "round " << r;
  for (DeviceMemory m : {x, tmp, y})
    device->free(m);
}

TEST_F(VulkanStreamTest, tickets_are_reached_once_the_work_they_cover_has_completed) {
  auto stream = device->create_stream();
  EXPECT_TRUE(stream->reached(stream->mark())); // nothing queued
  DeviceMemory x = device->allocate(256 * 4), y = device->allocate(256 * 4);
  upload(*stream, x, iota(256, 5));
  uint64_t before = stream->mark();
  launch_add(*stream, x, y, 1);
  uint64_t after = stream->mark();
  EXPECT_GT(after, before);
  // Recorded but not submitted: not reached, and asking never blocks or submits.
  EXPECT_FALSE(stream->reached(after));
  std::shared_ptr<DeviceEvent> event = stream->record(); // submits
  event->wait();
  EXPECT_TRUE(event->done());
  EXPECT_TRUE(stream->reached(after));
  stream->synchronize();
  EXPECT_EQ(download(*stream, y), iota(256, 6));
  device->free(x);
  device->free(y);
}

TEST_F(VulkanStreamTest, memory_freed_after_its_mark_leaves_another_streams_recording_intact) {
  const size_t n = 4096;
  auto a = device->create_stream(), b = device->create_stream();
  DeviceMemory bx = device->allocate(n * 4), by = device->allocate(n * 4);
  upload(*b, bx, iota(n, 0));
  b->synchronize();
  for (int round = 0; round < 20; ++round) {
    // Stream a uses a block, marks, completes.
    DeviceMemory ax = device->allocate(n * 4), ay = device->allocate(n * 4);
    upload(*a, ax, iota(n, 100));
    launch_add(*a, ax, ay, 1);
    uint64_t ticket = a->mark();
    // Stream b records launches (a batch that is not submitted yet)...
    for (uint32_t i = 0; i < 50; ++i)
      launch_add(*b, bx, by, i + 1u + uint32_t(round)); // the last one wins: by = bx + 50 + round
    EXPECT_FALSE(b->reached(b->mark()));
    // ...while another thread frees stream a's blocks once a has reached its ticket.
    a->record();
    std::thread freer([&] {
      while (!a->reached(ticket))
        std::this_thread::yield();
      device->free(ax);
      device->free(ay);
      // and allocates and frees a block of its own meanwhile
      device->free(device->allocate(n * 4));
    });
    freer.join();
    for (uint32_t i = 0; i < 10; ++i)
      launch_add(*b, bx, by, 50u + uint32_t(round)); // b goes on recording into the same batch
    b->synchronize();
    std::vector<uint32_t> out = download(*b, by);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], uint32_t(i) + 50 + round) << "round " << round << ", element " << i;
    EXPECT_EQ(b->last_launch_times_ns().size(), 60u);
  }
  device->free(bx);
  device->free(by);
}

TEST_F(VulkanStreamTest, memory_freed_while_a_stream_still_uses_it_outlives_that_work) {
  // Against the contract (the memory pool frees only what every stream has reached), but the
  // device must not let queued work read freed memory: the free is deferred, not waited for.
  const size_t n = 1 << 16;
  auto a = device->create_stream(), b = device->create_stream();
  for (uint32_t round = 0; round < 10; ++round) {
    DeviceMemory x = device->allocate(n * 4), y = device->allocate(n * 4);
    upload(*a, x, iota(n, round));
    launch_add(*a, x, y, 1); // recorded, not submitted
    device->free(x);         // returns at once
    // New memory written meanwhile on another stream: it must not be x's.
    std::vector<DeviceMemory> others;
    for (int i = 0; i < 4; ++i) {
      others.push_back(device->allocate(n * 4));
      upload(*b, others.back(), std::vector<uint32_t>(n, 0xdeadbeef));
    }
    a->synchronize();
    std::vector<uint32_t> out = download(*a, y);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], uint32_t(i) + round + 1) << "round " << round << ", element " << i;
    device->free(y);
    for (DeviceMemory m : others)
      device->free(m);
  }
}

TEST_F(VulkanStreamTest, eight_threads_with_a_stream_each_get_their_own_results) {
  const int threads = 8, cycles = 2000;
  const size_t n = 256;
  std::atomic<int> failures{0};
  std::atomic<bool> running{true};
  std::vector<std::unique_ptr<DeviceStream>> streams;
  for (int t = 0; t < threads; ++t)
    streams.push_back(device->create_stream());
  // Another thread polls every stream's tickets all along (mark/reached are thread-safe).
  std::thread watcher([&] {
    while (running.load())
      for (auto &s : streams)
        s->reached(s->mark());
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      DeviceStream &s = *streams[t];
      DeviceMemory x = device->allocate(n * 4), y = device->allocate(n * 4);
      std::vector<uint32_t> in(n), out(n);
      for (int c = 0; c < cycles; ++c) {
        for (size_t i = 0; i < n; ++i)
          in[i] = uint32_t(t * 1000003 + c * 31 + int(i));
        s.upload(x, 0, in.data(), n * 4);
        launch_add(s, x, y, uint32_t(c));
        s.download(y, 0, out.data(), n * 4);
        s.synchronize();
        for (size_t i = 0; i < n; ++i)
          if (out[i] != in[i] + uint32_t(c)) {
            failures.fetch_add(1);
            break;
          }
      }
      device->free(x);
      device->free(y);
    });
  for (std::thread &w : workers)
    w.join();
  running.store(false);
  watcher.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(VulkanStreamTest, a_graph_replays_on_two_different_streams) {
  const size_t n = 1000;
  auto a = device->create_stream(), b = device->create_stream();
  DeviceMemory x = device->allocate(n * 4), y = device->allocate(n * 4),
               z = device->allocate(n * 4);
  upload(*a, x, iota(n, 10));
  std::unique_ptr<DeviceGraph> graph = a->create_graph();
  {
    LaunchArg first[3] = {buffer_arg(x), buffer_arg(y), {}},
              second[3] = {buffer_arg(y), buffer_arg(z), {}};
    first[2].bits = {3};
    second[2].bits = {4};
    graph->add_launch(*add, {(n + 63) / 64, 1, 1}, first);  // y = x + 3
    graph->add_launch(*add, {(n + 63) / 64, 1, 1}, second); // z = y + 4
  }
  graph->finish();
  ASSERT_EQ(graph->num_launches(), 2u);
  graph->replay(*a);
  a->synchronize();
  EXPECT_EQ(download(*a, z), iota(n, 17));
  EXPECT_EQ(a->last_launch_times_ns().size(), 1u); // one time per replay

  // On the other stream, after work queued there before, and with a changed value.
  upload(*b, x, iota(n, 1000));
  launch_add(*b, x, x, 1); // x = 1001.. (queued before the replay)
  graph->set_value(1, 2, std::vector<uint64_t>{100});
  graph->replay(*b);
  b->synchronize();
  EXPECT_EQ(download(*b, z), iota(n, 1001 + 3 + 100));
  EXPECT_EQ(download(*b, y), iota(n, 1001 + 3));
  graph.reset();
  for (DeviceMemory m : {x, y, z})
    device->free(m);
}

TEST_F(VulkanStreamTest, a_kernel_destroyed_while_its_launches_are_queued_still_runs_them) {
  auto stream = device->create_stream();
  DeviceMemory x = device->allocate(64 * 4), y = device->allocate(64 * 4);
  upload(*stream, x, iota(64, 0));
  std::unique_ptr<CompiledKernel> doomed = compile_add(*device);
  for (uint32_t i = 0; i < 10; ++i)
    launch_add(*stream, y, y, 1, i == 0 ? nullptr : doomed.get()); // y = garbage, then...
  launch_add(*stream, x, y, 0, doomed.get());                      // y = x
  launch_add(*stream, y, y, 5, doomed.get());                      // y = x + 5
  doomed.reset(); // no flush: the stream's batch holds the pipeline
  stream->synchronize();
  EXPECT_EQ(download(*stream, y), iota(64, 5));
  device->free(x);
  device->free(y);
}

TEST(VulkanStream, copies_through_staging_buffers_are_ordered_with_the_launches) {
  test::ScopedEnv env("CUBECC_VULKAN_FORCE_STAGING", "1");
  std::unique_ptr<VulkanDevice> device;
  try {
    device = VulkanDevice::open();
  } catch (const Error &e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
  auto module = test::parse_valid(kAddKernel);
  ASSERT_TRUE(passes::optimize(*module, 2).empty());
  std::unique_ptr<CompiledKernel> add = device->compile(*module->kernels()[0]);
  auto stream = device->create_stream();
  const size_t n = 300;
  const uint32_t rounds = 20;
  DeviceMemory x = device->allocate(n * 4);
  std::vector<DeviceMemory> ys;
  // Each round: upload x (a copy queued after the previous launch, no wait), then y[r] = x + r.
  // An upload overtaking an earlier launch would show in that launch's y.
  for (uint32_t r = 0; r < rounds; ++r) {
    ys.push_back(device->allocate(n * 4));
    std::vector<uint32_t> in(n, r * 7);
    stream->upload(x, 0, in.data(), n * 4);
    LaunchArg args[3] = {{&x, 0, n * 4, {}}, {&ys.back(), 0, n * 4, {}}, {nullptr, 0, 0, {r}}};
    stream->launch(*add, {(n + 63) / 64, 1, 1}, args);
  }
  std::vector<uint32_t> out(n);
  for (uint32_t r = 0; r < rounds; ++r) {
    stream->download(ys[r], 0, out.data(), n * 4);
    EXPECT_EQ(out, std::vector<uint32_t>(n, r * 7 + r)) << "round " << r;
  }
  stream->download(x, 0, out.data(), n * 4);
  EXPECT_EQ(out, std::vector<uint32_t>(n, (rounds - 1) * 7));
  device->free(x);
  for (DeviceMemory m : ys)
    device->free(m);
  add.reset();
  stream.reset();
  device.reset();
  EXPECT_THAT(VulkanDevice::teardown_messages(), ::testing::IsEmpty());
}

TEST_F(VulkanStreamTest, errors_state_their_kind) {
  auto stream = device->create_stream();
  DeviceMemory x = device->allocate(16);
  auto kind_of = [](auto &&f) {
    try {
      f();
    } catch (const Error &e) {
      return e.kind();
    }
    return ErrorKind::Internal; // no error: never the kind expected below
  };
  uint32_t word = 0;
  EXPECT_EQ(kind_of([&] { stream->upload(x, 8, &word, 16); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { stream->download(x, 17, &word, 4); }), ErrorKind::InvalidArgument);
  LaunchArg two[2] = {buffer_arg(x), buffer_arg(x)};
  EXPECT_EQ(kind_of([&] { stream->launch(*add, {1, 1, 1}, two); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] {
              LaunchArg args[3] = {buffer_arg(x), buffer_arg(x), {}};
              args[2].bits = {1};
              stream->launch(*add, {~0u, 1, 1}, args);
            }),
            ErrorKind::InvalidArgument);
  // A stream of another device: its events and kernels are refused.
  auto other = VulkanDevice::open();
  auto other_stream = other->create_stream();
  std::shared_ptr<DeviceEvent> foreign = other_stream->record();
  EXPECT_EQ(kind_of([&] { stream->wait(*foreign); }), ErrorKind::InvalidArgument);
  auto other_add = compile_add(*other);
  EXPECT_EQ(kind_of([&] { launch_add(*stream, x, x, 1, other_add.get()); }),
            ErrorKind::InvalidArgument);
  std::unique_ptr<DeviceGraph> graph = stream->create_graph();
  EXPECT_EQ(kind_of([&] { graph->replay(*stream); }), ErrorKind::InvalidArgument); // unfinished
  KernelBinary garbage;
  garbage.target = device->binary_targets().at(0);
  garbage.bytes = "not spirv!!!";
  garbage.abi.name = "garbage";
  EXPECT_EQ(kind_of([&] { device->load_binary(garbage); }), ErrorKind::Environment);
  stream->synchronize();
  device->free(x);
}

#endif // CUBECC_HAVE_VULKAN
