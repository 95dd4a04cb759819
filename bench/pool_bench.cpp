//===- pool_bench.cpp - The memory pool's policies on a transformer's allocation trace --------===//
//
// Replays the allocations of a GPT-style transformer forward pass (as an eager framework makes
// them: weights first, then per layer layernorm, QKV projection, per-head copies, attention
// scores and probabilities, MLP intermediates of 4 x hidden, residual adds, temporaries and GEMM
// workspaces, each freed after its last use) through the adaptive pool and through plain
// power-of-two buckets, over a device that only counts. One run; for each scenario and policy:
// peak reserved bytes, peak requested ("live") bytes and their ratio, hit rate, device
// allocations, size classes, and ns per allocation/free pair. JSON lines, then a table.
//
//   pool_bench [--passes N] [--repeat N]
//
//===-----------------------------------------------------------------------------------------===//
#include "memory_pool.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace cubecc::runtime;

namespace {

/// Hands out distinct handles and no memory: the trace's bytes never exist.
class CountingDevice final : public ImmediateDevice {
public:
  CountingDevice() { info_.backend = "counting"; }
  const DeviceInfo &info() const override { return info_; }
  DeviceMemory allocate(uint64_t bytes) override {
    return {reinterpret_cast<void *>(++next_ * 4096), bytes};
  }
  void free(DeviceMemory) override {}
  void copy_in(const DeviceMemory &, uint64_t, const void *, uint64_t) override {}
  void copy_out(const DeviceMemory &, uint64_t, void *, uint64_t) override {}
  std::unique_ptr<CompiledKernel> compile(const cubecc::ir::Kernel &) override {
    throw Error(ErrorKind::Unsupported, "counting device: no kernels");
  }
  std::vector<BinaryTarget> binary_targets() const override { return {}; }
  std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &) override {
    throw Error(ErrorKind::Unsupported, "counting device: no kernels");
  }
  void run_launch(const CompiledKernel &, std::array<uint32_t, 3>,
                  std::span<const LaunchArg>) override {
    throw Error(ErrorKind::Unsupported, "counting device: no kernels");
  }

private:
  DeviceInfo info_;
  uint64_t next_ = 0;
};

/// One allocation (bytes > 0) or free (bytes == 0) of trace slot `slot`.
struct Event {
  uint32_t slot;
  uint64_t bytes;
};

class TraceBuilder {
public:
  uint32_t alloc(uint64_t bytes) {
    uint32_t slot = slots_++;
    events_.push_back({slot, bytes});
    return slot;
  }
  void free(uint32_t slot) { events_.push_back({slot, 0}); }
  uint32_t slots() const { return slots_; }
  std::vector<Event> take() { return std::move(events_); }

private:
  std::vector<Event> events_;
  uint32_t slots_ = 0;
};

struct Model {
  uint64_t hidden = 1280, heads = 20, layers = 4, vocab = 50'257, max_seq = 1024;
  uint64_t half = 2, single = 4; ///< fp16 activations and weights, fp32 statistics
};

/// A GEMM's workspace as cuBLASLt-style split-K asks for it: fp32 partial tiles of the output.
uint64_t gemm_workspace(uint64_t m, uint64_t n) {
  return 2 * m * n * 4 + 4096;
}

/// One forward pass over `batch` sequences of `seq` tokens, weights already loaded.
void forward(TraceBuilder &t, const Model &model, uint64_t batch, uint64_t seq) {
  const uint64_t h = model.hidden, tokens = batch * seq, head_dim = h / model.heads;
  const uint64_t act = tokens * h * model.half;
  uint32_t ids = t.alloc(tokens * 8); // token ids (int64)
  uint32_t mask = t.alloc(batch * seq * seq);
  uint32_t x = t.alloc(act); // token + position embedding
  t.free(ids);
  auto layernorm = [&](uint32_t) {
    uint32_t stats = t.alloc(2 * tokens * model.single); // mean and rstd
    uint32_t out = t.alloc(act);
    t.free(stats);
    return out;
  };
  auto linear = [&](uint32_t in, uint64_t out_features, bool split_k) {
    uint32_t workspace = split_k ? t.alloc(gemm_workspace(tokens, out_features)) : 0;
    uint32_t out = t.alloc(tokens * out_features * model.half);
    if (split_k)
      t.free(workspace);
    t.free(in);
    return out;
  };
  for (uint64_t layer = 0; layer < model.layers; ++layer) {
    uint32_t qkv = linear(layernorm(x), 3 * h, false);
    uint32_t q = t.alloc(act), k = t.alloc(act), v = t.alloc(act); // per-head contiguous copies
    t.free(qkv);
    const uint64_t score_bytes = batch * model.heads * seq * seq * model.half;
    uint32_t scores = t.alloc(score_bytes);
    t.free(k);
    uint32_t max = t.alloc(batch * model.heads * seq * model.single); // softmax row maxima
    uint32_t probs = t.alloc(score_bytes);
    t.free(max);
    t.free(scores);
    uint32_t context = t.alloc(batch * model.heads * seq * head_dim * model.half);
    t.free(probs);
    t.free(v);
    t.free(q);
    uint32_t merged = t.alloc(act); // heads back to [batch, seq, hidden]
    t.free(context);
    uint32_t attention = linear(merged, h, true);
    uint32_t x1 = t.alloc(act); // residual
    t.free(attention);
    t.free(x);
    uint32_t up = linear(layernorm(x1), 4 * h, false);
    uint32_t gelu = t.alloc(tokens * 4 * h * model.half);
    t.free(up);
    uint32_t down = linear(gelu, h, true);
    x = t.alloc(act); // residual
    t.free(down);
    t.free(x1);
  }
  uint32_t last = t.alloc(batch * h * model.half); // final layernorm of the last tokens
  t.free(x);
  uint32_t logits = t.alloc(batch * model.vocab * model.single);
  t.free(last);
  t.free(logits);
  t.free(mask);
}

/// Weights, allocated once and live for the whole trace (a framework loads them into its pool).
std::vector<uint32_t> load_weights(TraceBuilder &t, const Model &m) {
  const uint64_t h = m.hidden, w = m.half;
  std::vector<uint32_t> weights{t.alloc(m.vocab * h * w), t.alloc(m.max_seq * h * w)};
  for (uint64_t layer = 0; layer < m.layers; ++layer)
    for (uint64_t bytes : {2 * h * w, 3 * h * h * w, 3 * h * w, h * h * w, h * w, 2 * h * w,
                           4 * h * h * w, 4 * h * w, 4 * h * h * w, h * w})
      weights.push_back(t.alloc(bytes));
  weights.push_back(t.alloc(2 * h * w)); // final layernorm
  return weights;
}

struct Scenario {
  std::string name;
  std::vector<std::pair<uint64_t, uint64_t>> passes; ///< batch, sequence length
};

struct Result {
  PoolStatistics stats;
  double ns_per_pair = 0;
};

Result replay(const std::vector<Event> &events, uint32_t slots, PoolOptions options, int repeat) {
  Result result;
  std::vector<DeviceMemory> held(slots);
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    auto pool = std::make_shared<MemoryPool>(std::make_shared<CountingDevice>(), options);
    auto start = std::chrono::steady_clock::now();
    for (const Event &e : events) {
      if (e.bytes)
        held[e.slot] = pool->acquire(e.bytes);
      else
        pool->release(held[e.slot]);
    }
    double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (r == 0)
      result.stats = pool->statistics();
    best = std::min(best, ns);
  }
  result.ns_per_pair = best / double(result.stats.allocations);
  return result;
}

} // namespace

int main(int argc, char **argv) {
  int passes = 8, repeat = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--passes"))
      passes = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat"))
      repeat = std::atoi(argv[i + 1]);
    else {
      fmt::print(stderr, "usage: pool_bench [--passes N] [--repeat N]\n");
      return 2;
    }
  }
  Model model;
  std::vector<Scenario> scenarios{{"fixed: batch 4 x seq 500", {}},
                                  {"mixed: seq 500/371/448, batch 4/3", {}}};
  for (int p = 0; p < passes; ++p) {
    scenarios[0].passes.push_back({4, 500});
    const std::pair<uint64_t, uint64_t> mixed[] = {{4, 500}, {3, 371}, {4, 448}};
    scenarios[1].passes.push_back(mixed[p % 3]);
  }

  struct Row {
    std::string scenario, policy;
    Result result;
    uint64_t events;
  };
  std::vector<Row> rows;
  for (const Scenario &scenario : scenarios) {
    TraceBuilder trace;
    std::vector<uint32_t> weights = load_weights(trace, model);
    for (auto [batch, seq] : scenario.passes)
      forward(trace, model, batch, seq);
    for (uint32_t w : weights)
      trace.free(w);
    uint32_t slots = trace.slots();
    std::vector<Event> events = trace.take();
    for (PoolPolicy policy : {PoolPolicy::Adaptive, PoolPolicy::PowerOfTwo}) {
      Result r = replay(events, slots, PoolOptions{.policy = policy}, repeat);
      rows.push_back({scenario.name, std::string(pool_policy_name(policy)), r, events.size()});
      const PoolStatistics &s = r.stats;
      fmt::print(
          R"({{"bench": "pool", "scenario": "{}", "policy": "{}", "layers": {}, )"
          R"("hidden": {}, "passes": {}, "allocations": {}, "peak_bytes_reserved": {}, )"
          R"("peak_bytes_requested": {}, "peak_bytes_live": {}, "peak_reserved_ratio": {:.4f}, )"
          R"("hit_rate": {:.4f}, "device_allocations": {}, "device_frees": {}, )"
          R"("size_classes": {}, "ns_per_alloc_free": {:.1f}}})"
          "\n",
          scenario.name, pool_policy_name(policy), model.layers, model.hidden, passes,
          s.allocations, s.peak_bytes_reserved, s.peak_bytes_requested, s.peak_bytes_live,
          s.peak_reserved_ratio(), s.hit_rate(), s.device_allocations, s.device_frees,
          s.size_classes, r.ns_per_pair);
    }
  }
  fmt::print("\n{:<36} {:<13} {:>12} {:>12} {:>7} {:>8} {:>9} {:>8} {:>9}\n", "scenario", "policy",
             "peak rsv MiB", "peak req MiB", "ratio", "hit rate", "dev alloc", "classes",
             "ns/pair");
  for (const Row &row : rows) {
    const PoolStatistics &s = row.result.stats;
    fmt::print("{:<36} {:<13} {:>12.1f} {:>12.1f} {:>7.3f} {:>8.3f} {:>9} {:>8} {:>9.1f}\n",
               row.scenario, row.policy, s.peak_bytes_reserved / 1048576.0,
               s.peak_bytes_requested / 1048576.0, s.peak_reserved_ratio(), s.hit_rate(),
               s.device_allocations, s.size_classes, row.result.ns_per_pair);
  }
  return 0;
}
