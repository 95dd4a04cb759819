//===- examples_on_devices_test.cpp - Every example kernel on every device --------------------===//
//
// The cases of example_cases.cpp (inputs, launches, comparison with a host reference) run on the
// `interp` and `vulkan` devices, and on `cuda` and `hip` where they open (skipped elsewhere): each
// registered example kernel is traced, optimized at -O2 as the runtime does, compiled by the
// device (the SPIR-V writer for vulkan, NVRTC for cuda, hipRTC for hip) and launched there.
// The Vulkan device runs under the Khronos validation layers (CUBECC_VULKAN_VALIDATION=1 from
// ctest), where any validation message fails the launch.
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"
#include "example_cases.h"

#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace cubecc;
using namespace cubecc::test::examples;

namespace {

struct Param {
  std::string device;
  std::string kernel;
  friend void PrintTo(const Param &p, std::ostream *os) { *os << p.kernel << " on " << p.device; }
};

class ExamplesOnDevices : public testing::TestWithParam<Param> {};

TEST_P(ExamplesOnDevices, match_the_host_reference) {
  const Param &p = GetParam();
  const dsl::RegisteredKernel *registered = nullptr;
  for (const auto &k : dsl::registered_kernels())
    if (k.name == p.kernel)
      registered = &k;
  ASSERT_TRUE(registered);
  const Runner *runner = find_case(p.kernel);
  ASSERT_TRUE(runner) << "no case for " << p.kernel << " in test/e2e/example_cases.cpp";

  CUBECC_SKIP_IF_DEVICE_ABSENT(p.device);
  runtime::Device *device = &test::shared_device(p.device);

  ir::Module module;
  std::vector<ir::Diagnostic> errors;
  registered->trace(module, *registered, errors);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);
  errors = passes::optimize(module, 2);
  ASSERT_TRUE(errors.empty()) << ir::to_string(errors);

  set_launcher([device](const ir::Kernel &kernel, std::span<const ir::Argument> args,
                        const ir::LaunchConfig &config) {
    return test::run_on_device(*device, kernel, args, config);
  });
  SCOPED_TRACE(p.kernel + " (" + registered->configuration + ") on " + device->info().name);
  (*runner)(Case{*registered, *module.kernels()[0], device->info().subgroup_size});
  set_launcher(nullptr);
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const char *device : {"interp", "vulkan", "cpu", "cuda", "hip"})
    for (const std::string &name : registered_names())
      out.push_back({device, name});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Examples, ExamplesOnDevices, testing::ValuesIn(params()),
                         [](const testing::TestParamInfo<Param> &info) {
                           return info.param.device + "_" + info.param.kernel;
                         });

} // namespace
