//===- launch_bench.cpp - Launch overhead: launches one by one against a replayed graph -------===//
//
// 1,000 launches of a tiny kernel (one workgroup adding 1 to 64 u32s) issued one by one and
// synchronized, against one captured graph of the same 1,000 launches replayed and synchronized.
// Host wall-clock microseconds per launch, medians of several repetitions, on vulkan (lavapipe
// here) and on cuda when a GPU is present (skipped with the reason otherwise). Prints a table,
// then one JSON object per device. Usage: launch_bench [--repetitions N] [--devices a,b].
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/parser.h"
#include "cubecc/runtime/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace cubecc;
using namespace cubecc::runtime;

namespace {

constexpr const char *kKernel = R"(
module @bench {
  kernel @increment(%x: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %x : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %xi = load %x, %i : u32
      %c1 = const 1 : u32
      %r = add %xi, %c1 : u32
      store %x, %i, %r
      yield
    }
    return
  }
}
)";

constexpr int kLaunches = 1000;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Result {
  std::string device, name, skipped;
  double direct_us = 0, replay_us = 0, capture_ms = 0;
  bool correct = false;
};

Result run(const std::string &device, int repetitions) {
  Result result;
  result.device = device;
  std::optional<Runtime> opened;
  try {
    opened.emplace(Runtime::open(device));
  } catch (const Error &e) {
    result.skipped = e.what();
    return result;
  }
  Runtime &rt = *opened;
  result.name = rt.info().name;
  ir::ParseResult parsed = ir::parse_module(kKernel, "launch_bench.cir");
  KernelHandle increment = rt.load(*parsed.module->kernels().front());
  Buffer x = rt.upload(std::vector<uint32_t>(64));

  // Warm-up: the first launch JIT-compiles the pipeline on lavapipe.
  rt.launch(increment, {1, 1, 1}, x);
  rt.synchronize();

  auto capture_start = std::chrono::steady_clock::now();
  rt.begin_capture();
  for (int i = 0; i < kLaunches; ++i)
    rt.launch(increment, {1, 1, 1}, x);
  Graph graph = rt.end_capture();
  result.capture_ms = seconds_since(capture_start) * 1e3;
  rt.replay(graph); // warm-up
  rt.synchronize();

  std::vector<double> direct, replayed;
  for (int r = 0; r < repetitions; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i)
      rt.launch(increment, {1, 1, 1}, x);
    rt.synchronize();
    direct.push_back(seconds_since(start) * 1e6 / kLaunches);
    start = std::chrono::steady_clock::now();
    rt.replay(graph);
    rt.synchronize();
    replayed.push_back(seconds_since(start) * 1e6 / kLaunches);
  }
  result.direct_us = bench::median(direct);
  result.replay_us = bench::median(replayed);
  // 1 + (1 + 2 * repetitions) * 1000 increments in all.
  uint32_t expected = 1 + (1 + 2 * uint32_t(repetitions)) * kLaunches;
  std::vector<uint32_t> out = rt.download<uint32_t>(x);
  result.correct = std::all_of(out.begin(), out.end(), [&](uint32_t v) { return v == expected; });
  return result;
}

} // namespace

int main(int argc, char **argv) {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  int repetitions = 7;
  std::vector<std::string> devices = {"vulkan", "cuda"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--repetitions" && i + 1 < argc) {
      repetitions = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--devices" && i + 1 < argc) {
      devices = bench::split_list(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: launch_bench [--repetitions N] [--devices vulkan,cuda]\n");
      return 2;
    }
  }

  std::vector<Result> results;
  for (const std::string &device : devices)
    results.push_back(run(device, repetitions));

  std::printf("%d launches of a 1-workgroup kernel, host time incl. synchronize, median of %d\n",
              kLaunches, repetitions);
  std::printf("%-8s %14s %14s %8s %12s %s\n", "device", "direct us/l", "replay us/l", "ratio",
              "capture ms", "correct");
  for (const Result &r : results) {
    if (!r.skipped.empty()) {
      std::printf("%-8s skipped: %s\n", r.device.c_str(), r.skipped.c_str());
      continue;
    }
    std::printf("%-8s %14.2f %14.2f %7.1fx %12.2f %s\n", r.device.c_str(), r.direct_us, r.replay_us,
                r.direct_us / r.replay_us, r.capture_ms, r.correct ? "yes" : "NO");
  }
  bool ok = true;
  for (const Result &r : results) {
    if (!r.skipped.empty()) {
      std::string why;
      for (char c : r.skipped)
        why += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
      std::printf("{\"bench\":\"launch\",\"device\":\"%s\",\"skipped\":\"%s\"}\n", r.device.c_str(),
                  why.c_str());
      continue;
    }
    ok = ok && r.correct;
    std::printf(
        "%s\n",
        fmt::format("{{\"bench\":\"launch\",\"device\":\"{}\",\"name\":\"{}\","
                    "\"launches\":{},\"repetitions\":{},\"direct_us_per_launch\":{:.3f},"
                    "\"replay_us_per_launch\":{:.3f},\"ratio\":{:.2f},\"capture_ms\":{:.3f},"
                    "\"correct\":{}}}",
                    r.device, r.name, kLaunches, repetitions, r.direct_us, r.replay_us,
                    r.direct_us / r.replay_us, r.capture_ms, r.correct)
            .c_str());
  }
  return ok ? 0 : 1;
}
