//===- launch_bench.cpp - Launch overhead: launches one by one against a replayed graph -------===//
//
// 1,000 launches of a tiny kernel (one workgroup adding 1 to 64 u32s) issued one by one and
// synchronized, against one captured graph of the same 1,000 launches replayed and synchronized.
// Host wall-clock microseconds per launch, medians of several repetitions, on vulkan (lavapipe
// here) and on cuda when a GPU is present (skipped with the reason otherwise). Prints a table,
// then one JSON object per device. With --threads 1,2,4: launches per second with that many
// threads, each launching on its own stream of one Runtime (bench "launch_threads"; interp by
// default, or --thread-devices). Usage: launch_bench [--repetitions N] [--devices a,b]
// [--threads 1,2,4] [--thread-devices interp].
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
#include <thread>
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

/// Launches per second with `threads` threads, each with its own stream of one Runtime, each
/// launching the kernel on its own buffer `per_thread` times, then synchronizing.
struct ThreadsResult {
  std::string device, skipped;
  int threads = 0;
  double launches_per_second = 0;
  bool correct = false;
};

ThreadsResult run_threads(const std::string &device, int threads, int repetitions) {
  constexpr int kPerThread = 2000;
  ThreadsResult result;
  result.device = device;
  result.threads = threads;
  std::optional<Runtime> opened;
  try {
    opened.emplace(Runtime::open(device));
  } catch (const Error &e) {
    result.skipped = e.what();
    return result;
  }
  Runtime &rt = *opened;
  ir::ParseResult parsed = ir::parse_module(kKernel, "launch_bench.cir");
  KernelHandle increment = rt.load(*parsed.module->kernels().front());
  std::vector<Stream> streams;
  std::vector<Buffer> buffers;
  for (int t = 0; t < threads; ++t) {
    streams.push_back(rt.create_stream());
    buffers.push_back(streams.back().upload(std::vector<uint32_t>(64)));
    streams.back().launch(increment, {1, 1, 1}, buffers.back()); // warm-up
    streams.back().synchronize();
  }
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r) {
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i)
          streams[t].launch(increment, {1, 1, 1}, buffers[t]);
        streams[t].synchronize();
      });
    for (std::thread &w : workers)
      w.join();
    rates.push_back(double(threads) * kPerThread / seconds_since(start));
  }
  result.launches_per_second = bench::median(rates);
  uint32_t expected = 1 + uint32_t(repetitions) * kPerThread;
  result.correct = true;
  for (int t = 0; t < threads; ++t) {
    std::vector<uint32_t> out = streams[t].download<uint32_t>(buffers[t]);
    result.correct = result.correct &&
                     std::all_of(out.begin(), out.end(), [&](uint32_t v) { return v == expected; });
  }
  return result;
}

} // namespace

int main(int argc, char **argv) {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  int repetitions = 7;
  std::vector<std::string> devices = {"vulkan", "cuda"};
  std::vector<int> thread_counts;
  std::vector<std::string> thread_devices = {"interp"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--repetitions" && i + 1 < argc) {
      repetitions = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--devices" && i + 1 < argc) {
      devices = bench::split_list(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      for (const std::string &n : bench::split_list(argv[++i]))
        thread_counts.push_back(std::max(1, std::atoi(n.c_str())));
    } else if (arg == "--thread-devices" && i + 1 < argc) {
      thread_devices = bench::split_list(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: launch_bench [--repetitions N] [--devices vulkan,cuda] "
                           "[--threads 1,2,4] [--thread-devices interp]\n");
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
  if (!thread_counts.empty()) {
    std::printf("launches per second, each thread on its own stream of one Runtime\n");
    std::printf("%-8s %8s %16s %8s %s\n", "device", "threads", "launches/s", "scaling", "correct");
  }
  for (const std::string &device : thread_devices) {
    double one = 0;
    for (int threads : thread_counts) {
      ThreadsResult r = run_threads(device, threads, repetitions);
      if (!r.skipped.empty()) {
        std::printf("%-8s skipped: %s\n", device.c_str(), r.skipped.c_str());
        break;
      }
      if (threads == 1)
        one = r.launches_per_second;
      ok = ok && r.correct;
      std::printf("%-8s %8d %16.0f %7.2fx %s\n", device.c_str(), threads, r.launches_per_second,
                  one ? r.launches_per_second / one : 0.0, r.correct ? "yes" : "NO");
      std::printf("%s\n", fmt::format("{{\"bench\":\"launch_threads\",\"device\":\"{}\","
                                      "\"threads\":{},\"launches_per_second\":{:.0f},"
                                      "\"correct\":{}}}",
                                      device, threads, r.launches_per_second, r.correct)
                              .c_str());
    }
  }
  return ok ? 0 : 1;
}
