//===- examples_e2e_test.cpp - The example kernels in the interpreter, after every pass
//--------===//
//
// Each registered (kernel, configuration) of examples/kernels runs its case (test/e2e/
// example_cases.cpp: inputs, launches, comparison with a host reference) in the reference
// interpreter for subgroup widths 8 and 32, after -O3 and after each pass on its own. A registered
// kernel without a case fails its test, so a new example cannot go untested. The e2e suite runs
// the same cases on the devices.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"
#include "example_cases.h"
#include "test_support.h"

#include <algorithm>
#include <sstream>

using namespace cubecc;
using namespace cubecc::ir;
using namespace cubecc::test::examples;

namespace {

constexpr uint32_t kSubgroupSizes[] = {8, 32};

class ExamplesE2E : public testing::TestWithParam<std::string> {};

TEST_P(ExamplesE2E, matches_the_host_reference) {
  const std::string &name = GetParam();
  const dsl::RegisteredKernel *registered = nullptr;
  for (const auto &k : dsl::registered_kernels())
    if (k.name == name)
      registered = &k;
  ASSERT_TRUE(registered);
  const Runner *runner = find_case(name);
  ASSERT_TRUE(runner) << "the example kernel " << name << " (" << registered->configuration
                      << ") has no end-to-end case: add one to cases() in "
                         "test/unit/examples_e2e_test.cpp";

  Module module;
  std::vector<Diagnostic> errors;
  registered->trace(module, *registered, errors);
  ASSERT_TRUE(errors.empty()) << to_string(errors);
  ASSERT_EQ(module.kernels().size(), 1u);
  std::vector<Diagnostic> problems = verify(module);
  ASSERT_TRUE(problems.empty()) << to_string(problems);
  for (uint32_t width : kSubgroupSizes) {
    SCOPED_TRACE(name + " (" + registered->configuration + "), subgroup size " +
                 std::to_string(width));
    (*runner)(Case{*registered, *module.kernels()[0], width});
  }
  // The optimized kernel keeps its promise too (the -O3 pipeline, verified after each pass).
  passes::PassManagerOptions options;
  options.verify_each = true;
  passes::PassManager manager(options);
  for (std::string_view pass : passes::optimization_pipeline(3))
    manager.add(*passes::find_pass(pass));
  std::ostringstream out, err;
  std::vector<Diagnostic> pass_errors = manager.run(module, out, err);
  ASSERT_TRUE(pass_errors.empty()) << to_string(pass_errors);
  {
    SCOPED_TRACE(name + " after -O3, subgroup size " + std::to_string(kSubgroupSizes[0]));
    (*runner)(Case{*registered, *module.kernels()[0], kSubgroupSizes[0]});
  }
  // And after each pass on its own (on a fresh trace), so a pass that -O3 happens to mask is seen.
  for (const passes::PassInfo &pass : passes::registered_passes()) {
    if (pass.name == "print-hash")
      continue;
    Module single;
    registered->trace(single, *registered, errors);
    ASSERT_TRUE(errors.empty()) << to_string(errors);
    passes::PassManager one(options);
    one.add(pass);
    std::vector<Diagnostic> one_errors = one.run(single, out, err);
    ASSERT_TRUE(one_errors.empty()) << pass.name << ":\n" << to_string(one_errors);
    SCOPED_TRACE(name + " after the pass " + std::string(pass.name));
    (*runner)(Case{*registered, *single.kernels()[0], kSubgroupSizes[0]});
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ExamplesE2E, testing::ValuesIn(registered_names()),
                         [](const testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

TEST(ExamplesE2E, every_case_names_a_registered_kernel) {
  std::vector<std::string> names = registered_names();
  EXPECT_FALSE(names.empty()) << "no example kernels are registered (not linked in?)";
  for (const auto &[name, run] : cases())
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end())
        << "the case " << name << " names no registered example kernel";
}

} // namespace
