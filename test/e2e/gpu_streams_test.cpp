//===- gpu_streams_test.cpp - Streams, events and the lost context on the CUDA and HIP devices
//-===//
//
// The device contract (device.h) on a real GPU, below the Runtime: two streams ordered only by an
// event; four threads each with their own stream; tickets (mark / reached); and a faulting kernel
// (a store through a pointer that is no device memory), after which every call on the device
// throws Error (DeviceFailure) and a newly opened device runs kernels correctly. The fault runs
// in a child process (a death test re-executing this binary), since it poisons the context of
// every device of the process on that GPU. Skipped where the GPU is absent (scripts/gpu-check.sh
// runs them on an H200).
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/ir/parser.h"
#include "cubecc/passes/pass_manager.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace cubecc {
namespace {

using runtime::CompiledKernel;
using runtime::Device;
using runtime::DeviceMemory;
using runtime::DeviceStream;
using runtime::Error;
using runtime::ErrorKind;
using runtime::LaunchArg;

constexpr const char *kKernels = R"(
module @gpu_streams {
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
  kernel @plus_one(%src: buffer<u32, read>, %dst: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %n = buffer.size %dst : u32
    %in_range = lt %i, %n : bool
    if %in_range {
      %x = load %src, %i : u32
      %c1 = const 1 : u32
      %r = add %x, %c1 : u32
      store %dst, %i, %r
      yield
    }
    return
  }
}
)";

constexpr uint32_t kN = 1 << 20; // elements: long enough that an unordered read would see zeros

/// The kernels of kKernels compiled on `device`: [0] fill, [1] plus_one.
std::vector<std::unique_ptr<CompiledKernel>> compile_kernels(Device &device) {
  ir::ParseResult parsed = ir::parse_module(kKernels, "gpu_streams.cir");
  if (!parsed.module)
    throw std::runtime_error("gpu_streams.cir does not parse");
  if (!passes::optimize(*parsed.module, 2).empty())
    throw std::runtime_error("gpu_streams.cir does not optimize");
  std::vector<std::unique_ptr<CompiledKernel>> kernels;
  for (const auto &k : parsed.module->kernels())
    kernels.push_back(device.compile(*k));
  return kernels;
}

LaunchArg buffer(const DeviceMemory &memory) {
  LaunchArg a;
  a.memory = &memory;
  a.bytes = memory.bytes;
  return a;
}

LaunchArg value(uint32_t v) {
  LaunchArg a;
  a.bits = {v};
  return a;
}

std::array<uint32_t, 3> grid_for(uint64_t bytes) {
  return {uint32_t((bytes / 4 + 63) / 64), 1, 1};
}

void fill(DeviceStream &stream, const CompiledKernel &kernel, const DeviceMemory &memory,
          uint32_t v) {
  LaunchArg args[] = {buffer(memory), value(v)};
  stream.launch(kernel, grid_for(memory.bytes), args);
}

/// Whether every element of `memory` is `expected`, downloaded on `stream`.
::testing::AssertionResult holds(DeviceStream &stream, const DeviceMemory &memory,
                                 uint32_t expected) {
  std::vector<uint32_t> host(memory.bytes / 4, ~0u);
  stream.download(memory, 0, host.data(), memory.bytes);
  for (size_t i = 0; i < host.size(); ++i)
    if (host[i] != expected)
      return ::testing::AssertionFailure()
             << "element " << i << " is " << host[i] << ", expected " << expected;
  return ::testing::AssertionSuccess();
}

class GpuStreams : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override { CUBECC_SKIP_IF_DEVICE_ABSENT(GetParam()); }
};

TEST_P(GpuStreams, a_stream_waits_for_an_event_of_another_stream) {
  Device &device = test::shared_device(GetParam());
  auto kernels = compile_kernels(device);
  std::unique_ptr<DeviceStream> first = device.create_stream();
  std::unique_ptr<DeviceStream> second = device.create_stream();
  DeviceMemory a = device.allocate(kN * 4), b = device.allocate(kN * 4);
  std::vector<uint32_t> zeros(kN, 0);
  first->upload(a, 0, zeros.data(), kN * 4);
  second->upload(b, 0, zeros.data(), kN * 4);
  for (uint32_t round = 1; round <= 3; ++round) {
    fill(*first, *kernels[0], a, 10 * round);
    std::shared_ptr<runtime::DeviceEvent> filled = first->record();
    second->wait(*filled); // never blocks this thread; orders the launch below after the fill
    LaunchArg args[] = {buffer(a), buffer(b)};
    second->launch(*kernels[1], grid_for(a.bytes), args);
    second->synchronize();
    EXPECT_TRUE(filled->done());
    filled->wait();
    EXPECT_TRUE(holds(*second, b, 10 * round + 1)) << "round " << round;
    first->synchronize();
    EXPECT_EQ(first->last_launch_times_ns().size(), 1u);
    EXPECT_EQ(second->last_launch_times_ns().size(), 1u);
  }
  device.free(a);
  device.free(b);
}

TEST_P(GpuStreams, four_threads_each_with_a_stream_of_their_own) {
  Device &device = test::shared_device(GetParam());
  auto kernels = compile_kernels(device);
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        std::unique_ptr<DeviceStream> stream = device.create_stream();
        for (int round = 0; round < kRounds; ++round) {
          DeviceMemory memory = device.allocate(64 * 1024 * 4);
          uint32_t v = uint32_t(1000 * t + round);
          fill(*stream, *kernels[0], memory, v);
          uint64_t ticket = stream->mark();
          stream->synchronize();
          if (!stream->reached(ticket))
            failures[t] = "a ticket is not reached after synchronize()";
          if (auto result = holds(*stream, memory, v); !result)
            failures[t] = result.message();
          device.free(memory);
        }
      } catch (const std::exception &e) {
        failures[t] = e.what();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST_P(GpuStreams, a_ticket_is_reached_once_its_work_has_finished) {
  Device &device = test::shared_device(GetParam());
  auto kernels = compile_kernels(device);
  std::unique_ptr<DeviceStream> stream = device.create_stream();
  DeviceMemory memory = device.allocate(kN * 4);
  EXPECT_TRUE(stream->reached(stream->mark())); // nothing queued
  for (uint32_t v = 0; v < 20; ++v)
    fill(*stream, *kernels[0], memory, v);
  uint64_t ticket = stream->mark();
  EXPECT_EQ(stream->mark(), ticket); // one event covers both
  std::shared_ptr<runtime::DeviceEvent> done = stream->record();
  done->wait();
  EXPECT_TRUE(stream->reached(ticket));
  stream->synchronize();
  EXPECT_EQ(stream->last_launch_times_ns().size(), 20u);
  EXPECT_TRUE(holds(*stream, memory, 19));
  device.free(memory);
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuStreams, testing::Values("cuda", "hip"),
                         [](const auto &info) { return info.param; });

/// In the child process: a kernel storing through a pointer that is no device memory, then the
/// checks. Returns the exit code (0: as expected), saying on stderr what it saw.
int fault_then_open_a_new_device(const std::string &name) {
  std::unique_ptr<Device> device = runtime::open_device(name);
  auto kernels = compile_kernels(*device);
  std::unique_ptr<DeviceStream> stream = device->create_stream();
  // 4 MiB at address 64 KiB: never mapped on the device.
  DeviceMemory bogus{reinterpret_cast<void *>(uintptr_t(64 * 1024)), 4 << 20};
  try {
    fill(*stream, *kernels[0], bogus, 7);
    stream->synchronize();
    std::fprintf(stderr, "the faulting kernel reported no error\n");
    return 1;
  } catch (const Error &e) {
    std::fprintf(stderr, "fault: %s: %s\n", runtime::error_kind_name(e.kind()), e.what());
    if (e.kind() != ErrorKind::DeviceFailure)
      return 2;
  }
  for (auto call : {+[](Device &d, DeviceStream &) { d.allocate(16); },
                    +[](Device &d, DeviceStream &) { d.create_stream(); },
                    +[](Device &, DeviceStream &s) { s.synchronize(); }}) {
    try {
      call(*device, *stream);
      std::fprintf(stderr, "a call on the lost device succeeded\n");
      return 3;
    } catch (const Error &e) {
      std::fprintf(stderr, "afterwards: %s: %s\n", runtime::error_kind_name(e.kind()), e.what());
      if (e.kind() != ErrorKind::DeviceFailure)
        return 4;
    }
  }
  std::unique_ptr<Device> fresh = runtime::open_device(name);
  auto fresh_kernels = compile_kernels(*fresh);
  std::unique_ptr<DeviceStream> fresh_stream = fresh->create_stream();
  DeviceMemory memory = fresh->allocate(kN * 4);
  fill(*fresh_stream, *fresh_kernels[0], memory, 42);
  fresh_stream->synchronize();
  if (auto result = holds(*fresh_stream, memory, 42); !result) {
    std::fprintf(stderr, "the new device: %s\n", result.message());
    return 5;
  }
  fresh->free(memory);
  std::fprintf(stderr, "a new device ran the kernel correctly\n");
  return 0;
}

class GpuContextLoss : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override { CUBECC_SKIP_IF_DEVICE_ABSENT(GetParam()); }
};

TEST_P(GpuContextLoss, a_faulting_kernel_loses_the_device_and_a_new_one_works) {
  testing::FLAGS_gtest_death_test_style = "threadsafe"; // a fresh process: no driver state
  EXPECT_EXIT(std::exit(fault_then_open_a_new_device(GetParam())), testing::ExitedWithCode(0),
              "fault: device failure: .*context is lost.*afterwards: device failure: .*context "
              "was lost.*a new device ran the kernel correctly");
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuContextLoss, testing::Values("cuda", "hip"),
                         [](const auto &info) { return info.param; });

} // namespace
} // namespace cubecc
