//===- graph_test.cpp - Graph capture and replay on every device ------------------------------===//
//
// A graph of three dependent kernels (scale -> add -> sum, each reading the previous one's
// output, integer arithmetic so results are exact in any order) replayed 100 times must leave the
// buffers exactly as 100 direct launches do; changed scalars take effect; temporaries allocated
// during the capture live as long as the graph; and every documented misuse is an Error with its
// message checked.
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/ir/ir.h"
#include "cubecc/ir/parser.h"
#include "cubecc/runtime/runtime.h"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>

namespace cubecc {
namespace {

using runtime::Buffer;
using runtime::Error;
using runtime::Graph;
using runtime::KernelHandle;
using runtime::Runtime;

constexpr const char *kKernels = R"(
module @graph {
  kernel @scale(%x: buffer<u32, read>, %y: buffer<u32, readwrite>, %k: u32) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %y : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %xi = load %x, %i : u32
      %yi = load %y, %i : u32
      %p = mul %xi, %k : u32
      %r = add %p, %yi : u32
      store %y, %i, %r
      yield
    }
    return
  }
  kernel @add(%y: buffer<u32, read>, %z: buffer<u32, readwrite>, %c: u32) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %z : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %yi = load %y, %i : u32
      %zi = load %z, %i : u32
      %s = add %yi, %zi : u32
      %r = add %s, %c : u32
      store %z, %i, %r
      yield
    }
    return
  }
  kernel @sum(%z: buffer<u32, read>, %out: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %z : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %zi = load %z, %i : u32
      %c0 = const 0 : u32
      %old = atomic.add %out, %c0, %zi : u32
      yield
    }
    return
  }
  kernel @fill(%b: buffer<u32, readwrite>, %v: u32) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %b : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      store %b, %i, %v
      yield
    }
    return
  }
}
)";

constexpr size_t kN = 300; // five workgroups, the last partly out of range

class GraphTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    CUBECC_SKIP_IF_DEVICE_ABSENT(GetParam());
    rt_ = std::make_unique<Runtime>(Runtime::open(GetParam()));
    parsed_ = ir::parse_module(kKernels, "graph.cir");
    ASSERT_TRUE(parsed_.module) << (parsed_.errors.empty() ? "" : parsed_.errors[0].message);
    for (const auto &k : parsed_.module->kernels())
      handles_.push_back(rt_->load(*k));
  }
  void TearDown() override {
    handles_.clear();
    rt_.reset();
  }

  /// Fresh buffers: x = 0..n-1, y = z = 0, out = 0.
  struct Buffers {
    Buffer x, y, z, out;
  };
  Buffers make_buffers(Runtime &rt) {
    std::vector<uint32_t> x(kN);
    std::iota(x.begin(), x.end(), 0u);
    return {rt.upload(x), rt.upload(std::vector<uint32_t>(kN)),
            rt.upload(std::vector<uint32_t>(kN)), rt.upload(std::vector<uint32_t>(1))};
  }
  void launch_step(Runtime &rt, Buffers &b, uint32_t k, uint32_t c) {
    rt.launch(scale(), runtime::grid_1d(kN, 64), b.x, b.y, k);
    rt.launch(add(), runtime::grid_1d(kN, 64), b.y, b.z, c);
    rt.launch(sum(), runtime::grid_1d(kN, 64), b.z, b.out);
  }
  const KernelHandle &scale() const { return handles_[0]; }
  const KernelHandle &add() const { return handles_[1]; }
  const KernelHandle &sum() const { return handles_[2]; }
  const KernelHandle &fill() const { return handles_[3]; }

  /// One step through two temporaries: t1 = 0, t1 = x*3 + t1, t2 = 0, t2 = t1 + t2 + 7, out += sum
  /// of t2.
  void launch_step_through(Runtime &rt, const Buffer &x, Buffer &t1, Buffer &t2,
                           const Buffer &out) {
    rt.launch(fill(), runtime::grid_1d(kN, 64), t1, 0u);
    rt.launch(scale(), runtime::grid_1d(kN, 64), x, t1, 3u);
    rt.launch(fill(), runtime::grid_1d(kN, 64), t2, 0u);
    rt.launch(add(), runtime::grid_1d(kN, 64), t1, t2, 7u);
    rt.launch(sum(), runtime::grid_1d(kN, 64), t2, out);
  }

  static std::string error_of(const std::function<void()> &f) {
    try {
      f();
    } catch (const Error &e) {
      return e.what();
    }
    return "(no error)";
  }

  std::unique_ptr<Runtime> rt_;
  ir::ParseResult parsed_;
  std::vector<KernelHandle> handles_;
};

TEST_P(GraphTest, a_graph_replayed_100_times_gives_what_100_direct_launches_give) {
  Runtime &rt = *rt_;
  Buffers direct = make_buffers(rt);
  for (int i = 0; i < 100; ++i)
    launch_step(rt, direct, 3, 7);
  rt.synchronize();

  Buffers replayed = make_buffers(rt);
  rt.begin_capture();
  launch_step(rt, replayed, 3, 7);
  Graph graph = rt.end_capture();
  ASSERT_EQ(graph.num_launches(), 3u);
  EXPECT_EQ(graph.kernel_name(2), "sum");
  // Nothing ran during the capture.
  EXPECT_EQ(rt.download<uint32_t>(replayed.out)[0], 0u);
  for (int i = 0; i < 100; ++i)
    rt.replay(graph);
  rt.synchronize();

  EXPECT_EQ(rt.download<uint32_t>(replayed.y), rt.download<uint32_t>(direct.y));
  EXPECT_EQ(rt.download<uint32_t>(replayed.z), rt.download<uint32_t>(direct.z));
  std::vector<uint32_t> out = rt.download<uint32_t>(replayed.out);
  EXPECT_EQ(out, rt.download<uint32_t>(direct.out));
  // And both are right: after step s, y = s*3*i, z = sum_{t<=s} (3*t*i + 7).
  uint64_t expected = 0;
  for (uint64_t s = 1; s <= 100; ++s)
    for (uint64_t i = 0; i < kN; ++i)
      expected += 3 * i * (s * (s + 1) / 2) + 7 * s;
  EXPECT_EQ(out[0], static_cast<uint32_t>(expected));
}

TEST_P(GraphTest, changed_scalars_take_effect_in_the_following_replays) {
  Runtime &rt = *rt_;
  Buffers direct = make_buffers(rt), replayed = make_buffers(rt);
  rt.begin_capture();
  launch_step(rt, replayed, 1, 0);
  Graph graph = rt.end_capture();
  for (uint32_t step = 0; step < 10; ++step) {
    uint32_t k = step + 2, c = 5 * step;
    launch_step(rt, direct, k, c);
    graph.set_scalar(0, 2, k);
    graph.set_scalar(1, 2, c);
    rt.replay(graph);
  }
  rt.synchronize();
  EXPECT_EQ(rt.download<uint32_t>(replayed.z), rt.download<uint32_t>(direct.z));
  EXPECT_EQ(rt.download<uint32_t>(replayed.out), rt.download<uint32_t>(direct.out));
}

TEST_P(GraphTest, changing_a_scalar_is_checked_like_a_launch_argument) {
  Runtime &rt = *rt_;
  Buffers b = make_buffers(rt);
  rt.begin_capture();
  launch_step(rt, b, 1, 0);
  Graph graph = rt.end_capture();
  EXPECT_EQ(error_of([&] { graph.set_scalar(0, 2, 1.5f); }),
            "graph launch 0: set_value: launch of kernel 'scale': parameter 2 (%k: u32): needs "
            "an integer, got a floating-point value");
  EXPECT_EQ(error_of([&] { graph.set_scalar(1, 0, 1u); }),
            "graph launch 1 (kernel 'add'): set_value: parameter 0 (%y: buffer<u32, read>) is a "
            "buffer; only value parameters can be changed (capture again to use other buffers)");
  EXPECT_EQ(error_of([&] { graph.set_scalar(3, 0, 1u); }),
            "graph: set_value: no launch 3 (the graph has 3)");
}

TEST_P(GraphTest, replaying_after_a_captured_buffer_was_destroyed_is_an_error) {
  Runtime &rt = *rt_;
  Buffers b = make_buffers(rt);
  rt.begin_capture();
  launch_step(rt, b, 1, 0);
  Graph graph = rt.end_capture();
  // Moving a Buffer keeps its block: the graph still replays.
  Buffer moved = std::move(b.z);
  rt.replay(graph);
  rt.synchronize();
  // Destroying it gives the block back to the pool, which may hand it out again.
  moved = Buffer();
  EXPECT_EQ(error_of([&] { rt.replay(graph); }),
            "replay: graph launch 1 (kernel 'add'): parameter 1 (%z: buffer<u32, readwrite>): "
            "its Buffer was destroyed after the capture (a graph owns only the Buffers allocated "
            "during its capture: keep the others alive while it is replayed)");
}

TEST_P(GraphTest, temporaries_allocated_during_capture_live_as_long_as_the_graph) {
  Runtime &rt = *rt_;
  Buffers direct = make_buffers(rt);
  for (int i = 0; i < 100; ++i) {
    Buffer t1 = rt.allocate<uint32_t>(kN), t2 = rt.allocate<uint32_t>(kN);
    launch_step_through(rt, direct.x, t1, t2, direct.out);
  }
  rt.synchronize();

  Buffers replayed = make_buffers(rt);
  std::vector<void *> temporaries;
  uint64_t temporary_bytes = 0;
  runtime::PoolStatistics captured;
  rt.begin_capture();
  Buffer t2 = rt.allocate<uint32_t>(kN);
  {
    Buffer t1 = rt.allocate<uint32_t>(kN);
    launch_step_through(rt, replayed.x, t1, t2, replayed.out);
    temporaries = {t1.memory().handle, t2.memory().handle};
    temporary_bytes = t1.memory().bytes + t2.memory().bytes;
    captured = rt.pool_statistics();
  } // t1 is destroyed during the capture, t2 after it
  auto graph = std::make_unique<Graph>(rt.end_capture());
  t2 = Buffer();

  // The graph holds both blocks: still live, not cached, and the pool hands them to nobody.
  runtime::PoolStatistics held = rt.pool_statistics();
  EXPECT_EQ(held.bytes_live, captured.bytes_live);
  EXPECT_EQ(held.bytes_cached, captured.bytes_cached);
  std::vector<Buffer> others;
  for (int i = 0; i < 4; ++i) {
    others.push_back(rt.allocate<uint32_t>(kN));
    for (void *handle : temporaries)
      EXPECT_NE(others.back().memory().handle, handle) << "allocation " << i;
  }
  for (int i = 0; i < 100; ++i)
    rt.replay(*graph);
  rt.synchronize();
  EXPECT_EQ(rt.download<uint32_t>(replayed.out), rt.download<uint32_t>(direct.out));
  uint64_t expected = 0;
  for (uint64_t i = 0; i < kN; ++i)
    expected += 100 * (3 * i + 7);
  EXPECT_EQ(rt.download<uint32_t>(replayed.out)[0], static_cast<uint32_t>(expected));

  // Destroying the graph gives both blocks back to the pool (cached or freed to the device).
  others.clear();
  runtime::PoolStatistics before = rt.pool_statistics();
  graph.reset();
  runtime::PoolStatistics after = rt.pool_statistics();
  EXPECT_EQ(after.bytes_live, before.bytes_live - temporary_bytes);
  EXPECT_EQ(after.bytes_requested, before.bytes_requested - 2 * kN * sizeof(uint32_t));
  EXPECT_TRUE(after.bytes_cached > before.bytes_cached || after.device_frees > before.device_frees);
}

TEST_P(GraphTest, a_buffer_from_an_earlier_capture_is_checked_like_any_other) {
  Runtime &rt = *rt_;
  Buffers b = make_buffers(rt);
  rt.begin_capture();
  Buffer temporary = rt.allocate<uint32_t>(kN);
  rt.launch(fill(), runtime::grid_1d(kN, 64), temporary, 1u);
  Graph first = rt.end_capture();
  rt.begin_capture();
  rt.launch(add(), runtime::grid_1d(kN, 64), temporary, b.z, 0u);
  Graph second = rt.end_capture();
  temporary = Buffer();
  rt.replay(first);
  EXPECT_EQ(error_of([&] { rt.replay(second); }),
            "replay: graph launch 0 (kernel 'add'): parameter 0 (%y: buffer<u32, read>): its "
            "Buffer was destroyed after the capture (a graph owns only the Buffers allocated "
            "during its capture: keep the others alive while it is replayed)");
}

TEST_P(GraphTest, replaying_on_another_runtime_is_an_error) {
  Runtime &rt = *rt_;
  Buffers b = make_buffers(rt);
  rt.begin_capture();
  launch_step(rt, b, 1, 0);
  Graph graph = rt.end_capture();
  Runtime other = Runtime::open(GetParam());
  EXPECT_EQ(error_of([&] { other.replay(graph); }),
            "replay: the graph was captured on another runtime (device " + rt.info().backend +
                ": " + rt.info().name + "); replay it on the runtime that captured it");
}

TEST_P(GraphTest, a_bad_launch_during_capture_is_an_error_and_is_not_recorded) {
  Runtime &rt = *rt_;
  Buffers b = make_buffers(rt);
  rt.begin_capture();
  rt.launch(scale(), runtime::grid_1d(kN, 64), b.x, b.y, 2u);
  EXPECT_EQ(error_of([&] { rt.launch(add(), runtime::grid_1d(kN, 64), b.y, b.z, -1); }),
            "launch of kernel 'add': parameter 2 (%c: u32): the value -1 does not fit u32");
  EXPECT_EQ(error_of([&] { rt.launch(sum(), runtime::grid_1d(kN, 64), b.z); }),
            "launch of kernel 'sum': 1 argument(s) given, the kernel has 2 parameter(s): "
            "parameter 0 (%z: buffer<u32, read>), parameter 1 (%out: buffer<u32, readwrite>)");
  Graph graph = rt.end_capture();
  EXPECT_EQ(graph.num_launches(), 1u);
  rt.replay(graph);
  std::vector<uint32_t> y = rt.download<uint32_t>(b.y);
  EXPECT_EQ(y[10], 20u);
}

TEST_P(GraphTest, captures_do_not_nest_and_copies_and_waits_cannot_be_captured) {
  Runtime &rt = *rt_;
  Buffers b = make_buffers(rt);
  EXPECT_EQ(error_of([&] { rt.end_capture(); }),
            "end_capture: no capture in progress (call begin_capture() first)");
  rt.begin_capture();
  launch_step(rt, b, 1, 0);
  EXPECT_EQ(error_of([&] { rt.begin_capture(); }),
            "begin_capture: a capture is already in progress (3 launch(es) recorded); captures "
            "do not nest: call end_capture() first");
  EXPECT_EQ(error_of([&] { rt.synchronize(); }),
            "synchronize: a graph capture is in progress (3 launch(es) recorded); copies and "
            "waits cannot be captured: call end_capture() first");
  EXPECT_EQ(error_of([&] { rt.download<uint32_t>(b.out); }),
            "download: a graph capture is in progress (3 launch(es) recorded); copies and waits "
            "cannot be captured: call end_capture() first");
  EXPECT_EQ(
      error_of([&] { rt.upload(b.out, std::span<const uint32_t>(std::vector<uint32_t>{1})); }),
      "upload: a graph capture is in progress (3 launch(es) recorded); copies and waits "
      "cannot be captured: call end_capture() first");
  Buffer during = rt.allocate<uint32_t>(4); // allocating is fine
  EXPECT_TRUE(during.valid());
  Graph graph = rt.end_capture();
  rt.begin_capture();
  EXPECT_EQ(error_of([&] { rt.replay(graph); }),
            "replay: a graph capture is in progress (0 launch(es) recorded); copies and waits "
            "cannot be captured: call end_capture() first");
  rt.end_capture();
  Graph empty;
  EXPECT_EQ(error_of([&] { rt.replay(empty); }),
            "replay: the graph is empty (moved from or default-constructed)");
}

TEST_P(GraphTest, an_empty_graph_replays_as_nothing) {
  Runtime &rt = *rt_;
  rt.begin_capture();
  Graph graph = rt.end_capture();
  EXPECT_EQ(graph.num_launches(), 0u);
  rt.replay(graph);
  rt.synchronize();
}

INSTANTIATE_TEST_SUITE_P(Devices, GraphTest,
                         ::testing::Values("interp", "vulkan", "cpu", "cuda", "hip"),
                         [](const auto &info) { return info.param; });

} // namespace
} // namespace cubecc
