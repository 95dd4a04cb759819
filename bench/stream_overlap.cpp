//===- stream_overlap.cpp - Do two streams' independent kernels run at the same time? ---------===//
//
// The same work queued two ways on one device: 2K launches on one stream, and K launches on
// each of two streams, each stream driven by its own thread. Each launch is one workgroup of 64
// invocations spinning `--iterations` steps of an LCG (compute, no memory traffic), so one launch
// cannot use more than one core: if the device ran the two streams' launches at the same time,
// the two-stream run would take about half the wall time of the one-stream run. Reported: host
// wall milliseconds (medians of --repetitions), the device time of the launches (the sum of
// DeviceStream::last_launch_times_ns, where the device has timestamps), the wall-time ratio
// one/two streams (about 1: no overlap; towards 2: overlap) and busy/wall for the two-stream run
// (the device time of both streams over the wall time: above 1 means the launches overlapped).
// Prints a table, then one JSON object. Usage:
//   stream_overlap [--device vulkan] [--launches K] [--iterations I] [--repetitions R]
//
//===-----------------------------------------------------------------------------------------===//
#include "bench_support.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/parser.h"
#include "cubecc/passes/pass_manager.h"
#include "cubecc/runtime/device.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

using namespace cubecc;
using namespace cubecc::runtime;

namespace {

// x[i] = `iters` steps of an LCG from x[i]: compute-bound, one workgroup per launch.
constexpr const char *kKernel = R"(
module @bench {
  kernel @spin(%x: buffer<u32, readwrite>, %iters: u32) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %x : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %x0 = load %x, %i : u32
      %c0 = const 0 : u32
      %c1 = const 1 : u32
      %a = const 1664525 : u32
      %b = const 1013904223 : u32
      %r = for %c0, %iters, %c1, %x0 : u32 (%k: u32, %acc: u32) {
        %m = mul %acc, %a : u32
        %next = add %m, %b : u32
        yield %next
      }
      store %x, %i, %r
      yield
    }
    return
  }
}
)";

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "stream_overlap: %s\n", message.c_str());
  std::exit(1);
}

/// `iters` LCG steps from `x`, as the kernel computes them.
uint32_t spin(uint32_t x, uint32_t iters) {
  for (uint32_t k = 0; k < iters; ++k)
    x = x * 1664525u + 1013904223u;
  return x;
}

struct Run {
  double wall_ms = 0;
  double device_ms = 0; ///< the device time of every launch of the run
};

} // namespace

int main(int argc, char **argv) {
  std::string device_name = "vulkan";
  int launches = 64, repetitions = 5;
  uint32_t iterations = 20000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc)
      device_name = argv[++i];
    else if (a == "--launches" && i + 1 < argc)
      launches = std::max(1, std::atoi(argv[++i]));
    else if (a == "--iterations" && i + 1 < argc)
      iterations = static_cast<uint32_t>(std::max(1, std::atoi(argv[++i])));
    else if (a == "--repetitions" && i + 1 < argc)
      repetitions = std::max(1, std::atoi(argv[++i]));
    else
      die("usage: stream_overlap [--device vulkan] [--launches K] [--iterations I] "
          "[--repetitions R]");
  }

  std::unique_ptr<Device> device;
  std::unique_ptr<CompiledKernel> kernel;
  try {
    device = open_device(device_name);
    ir::ParseResult parsed = ir::parse_module(kKernel, "stream_overlap.cir");
    if (!parsed.module)
      die("the benchmark kernel does not parse: " + ir::to_string(parsed.errors));
    if (auto errors = passes::optimize(*parsed.module, 2); !errors.empty())
      die("the benchmark kernel does not optimize: " + ir::to_string(errors));
    kernel = device->compile(*parsed.module->kernels().front());
  } catch (const Error &e) {
    die(e.what());
  }

  const size_t n = 64;
  DeviceMemory memory[2] = {device->allocate(n * 4), device->allocate(n * 4)};
  std::vector<uint32_t> start(n);
  std::iota(start.begin(), start.end(), 1u);
  auto launch = [&](DeviceStream &s, const DeviceMemory &m) {
    LaunchArg args[2];
    args[0].memory = &m;
    args[0].bytes = m.bytes;
    args[1].bits = {iterations};
    s.launch(*kernel, {1, 1, 1}, args);
  };
  auto device_ms = [](const DeviceStream &s) {
    std::vector<double> t = s.last_launch_times_ns();
    return std::accumulate(t.begin(), t.end(), 0.0) / 1e6;
  };
  // The result of `k` launches on memory that started as `start`.
  auto check = [&](DeviceStream &s, const DeviceMemory &m, int k) {
    std::vector<uint32_t> out(n);
    s.download(m, 0, out.data(), n * 4);
    for (size_t i = 0; i < n; ++i)
      if (out[i] != spin(start[i], iterations * uint32_t(k)))
        die(fmt::format("wrong result at element {}: {} (expected {})", i, out[i],
                        spin(start[i], iterations * uint32_t(k))));
  };

  auto one_stream = [&] {
    auto s = device->create_stream();
    for (const DeviceMemory &m : memory)
      s->upload(m, 0, start.data(), n * 4);
    s->synchronize();
    auto t0 = bench::Clock::now();
    for (int k = 0; k < launches; ++k)
      for (const DeviceMemory &m : memory)
        launch(*s, m);
    s->synchronize();
    Run run{bench::ms_since(t0), device_ms(*s)};
    for (const DeviceMemory &m : memory)
      check(*s, m, launches);
    return run;
  };
  auto two_streams = [&] {
    std::unique_ptr<DeviceStream> s[2] = {device->create_stream(), device->create_stream()};
    for (int j = 0; j < 2; ++j) {
      s[j]->upload(memory[j], 0, start.data(), n * 4);
      s[j]->synchronize();
    }
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    bench::Clock::time_point t0;
    std::vector<std::thread> threads;
    for (int j = 0; j < 2; ++j)
      threads.emplace_back([&, j] {
        ready.fetch_add(1);
        while (!go.load())
          std::this_thread::yield();
        for (int k = 0; k < launches; ++k)
          launch(*s[j], memory[j]);
        s[j]->synchronize();
      });
    while (ready.load() < 2)
      std::this_thread::yield();
    t0 = bench::Clock::now();
    go.store(true);
    for (std::thread &t : threads)
      t.join();
    Run run{bench::ms_since(t0), device_ms(*s[0]) + device_ms(*s[1])};
    for (int j = 0; j < 2; ++j)
      check(*s[j], memory[j], launches);
    return run;
  };

  one_stream(); // warm-up: pipelines, the driver's threads
  two_streams();
  std::vector<double> one_wall, one_device, two_wall, two_device, busy;
  for (int r = 0; r < repetitions; ++r) {
    Run a = one_stream(), b = two_streams();
    one_wall.push_back(a.wall_ms);
    one_device.push_back(a.device_ms);
    two_wall.push_back(b.wall_ms);
    two_device.push_back(b.device_ms);
    busy.push_back(b.wall_ms > 0 ? b.device_ms / b.wall_ms : NAN);
  }
  for (const DeviceMemory &m : memory)
    device->free(m);

  double ow = bench::median(one_wall), tw = bench::median(two_wall);
  double od = bench::median(one_device), td = bench::median(two_device);
  bool has_times = device->info().timestamp_period_ns > 0;
  std::printf("device: %s; %d launches per stream (%d on the one stream), 1 workgroup of 64 "
              "invocations x %u LCG steps each; medians of %d\n\n",
              device->info().name.c_str(), launches, 2 * launches, iterations, repetitions);
  std::printf("%-12s %12s %14s\n", "streams", "wall (ms)", "device (ms)");
  std::printf("%-12s %12.2f %14.2f\n", "one", ow, has_times ? od : NAN);
  std::printf("%-12s %12.2f %14.2f\n", "two", tw, has_times ? td : NAN);
  std::printf("\nwall one/two: %.3f (1: no overlap, 2: full overlap); two-stream device "
              "time / wall: %.3f (above 1: launches overlapped)\n\n",
              ow / tw, has_times ? bench::median(busy) : NAN);
  std::printf("%s\n",
              fmt::format(R"({{"device": "{}", "launches_per_stream": {}, "iterations": {}, )"
                          R"("one_stream_wall_ms": {}, "two_streams_wall_ms": {}, )"
                          R"("one_stream_device_ms": {}, "two_streams_device_ms": {}, )"
                          R"("wall_ratio_one_over_two": {}, "two_streams_busy_over_wall": {}}})",
                          device->info().name, launches, iterations, bench::json_number(ow),
                          bench::json_number(tw), bench::json_number(has_times ? od : NAN),
                          bench::json_number(has_times ? td : NAN), bench::json_number(ow / tw),
                          bench::json_number(has_times ? bench::median(busy) : NAN))
                  .c_str());
  return 0;
}
