//===- cpu_no_memory_test.cpp - A compiled CPU kernel whose heap local arrays cannot be had
//----===//
//
// Local arrays too big for the stack come from malloc once per call of the kernel (docs/cpu.md).
// When malloc fails, the call must run no workgroup and the launch must fail with DeviceFailure
// naming the kernel and the bytes, never dereference NULL. Its own executable, because making
// malloc fail is process-wide: under AddressSanitizer its allocator returns NULL above 256 MiB
// (the options below); without it, the address space is capped once the kernels are compiled.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/cpu.h"
#include "cubecc/runtime/runtime.h"

#include "test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <fstream>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
extern "C" __attribute__((used)) const char *__asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=256";
}
#endif

namespace cubecc {
namespace {

/// Caps the address space at what the process maps now plus `headroom` bytes (not under ASan,
/// whose shadow memory is most of the address space).
void cap_address_space(uint64_t headroom) {
#if !defined(__SANITIZE_ADDRESS__)
  std::ifstream status("/proc/self/status");
  std::string line;
  uint64_t kib = 0;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0)
      kib = std::stoull(line.substr(7));
  ASSERT_GT(kib, 0u);
  rlimit limit{kib * 1024 + headroom, kib * 1024 + headroom};
  ASSERT_EQ(setrlimit(RLIMIT_AS, &limit), 0);
#else
  (void)headroom;
#endif
}

TEST(CpuDevice, a_kernel_whose_heap_local_arrays_cannot_be_allocated_fails_its_launch_cleanly) {
  if (std::string why; codegen::llvm_version(&why).empty())
    GTEST_SKIP() << "the LLVM backend is not available: " << why;
  auto huge =
      test::parse_valid(test::local_arrays_kernel("huge_local", 131072)); // 512 MiB per call
  auto fits = test::parse_valid(test::local_arrays_kernel("fits", 1024)); // 4 MiB per call
  runtime::Runtime rt = runtime::Runtime::open("cpu");
  runtime::KernelHandle big = rt.load(*huge->kernels().front());
  runtime::KernelHandle small = rt.load(*fits->kernels().front());
  runtime::Buffer out = rt.allocate<float>(1024);
  std::vector<float> canary(1024, -1.0f);
  rt.write(out, canary.data(), canary.size() * sizeof(float));
  cap_address_space(uint64_t(192) << 20);
  EXPECT_THAT(
      [&] {
        rt.launch(big, {1, 1, 1}, out);
      },
      ::testing::ThrowsMessage<runtime::Error>(::testing::HasSubstr(
          "cpu: kernel 'huge_local': its local arrays need 536870912 bytes of heap per call")));
  EXPECT_EQ(rt.download<float>(out), canary); // no workgroup ran
  // The device goes on: a kernel whose arrays fit runs.
  rt.launch(small, {1, 1, 1}, out);
  std::vector<float> got = rt.download<float>(out);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], float(i)) << "element " << i;
}

} // namespace
} // namespace cubecc
