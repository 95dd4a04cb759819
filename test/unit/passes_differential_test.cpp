//===- passes_differential_test.cpp - Every pass keeps every kernel's results ----------------===//
//
// Random kernels (random_ir.h) run in the reference interpreter before and after each pass and
// after the -O1, -O2 and -O3 pipelines; their outputs must be bit-identical (no pass may
// reassociate floats; `legalize` among them: its pinned values are the interpreter's).
// CUBECC_DIFFERENTIAL_KERNELS sets how many kernels (default 200); CUBECC_DIFFERENTIAL_SEED the
// first seed. A failure prints the seed, the pass and both IRs.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/interpreter.h"
#include "cubecc/passes/pass_manager.h"
#include "random_ir.h"
#include "test_support.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <random>
#include <sstream>

using namespace cubecc;
using namespace cubecc::ir;
using test::random_inputs;
using test::RandomInputs;

namespace {

uint64_t env_or(const char *name, uint64_t fallback) {
  const char *v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

/// Runs `kernel` on `in`; returns the output words, or the interpreter's complaint.
std::string run(const Kernel &kernel, const RandomInputs &in, std::vector<uint8_t> &out_bytes) {
  RandomInputs copy = in;
  const uint32_t workgroups = 2;
  HostBuffer out{Scalar::U32, std::vector<uint8_t>(
                                  workgroups * test::kRandomWorkgroup * test::kRandomSlots * 4, 0)};
  Argument args[] = {
      {&copy.ints, {}}, {&copy.floats, {}}, {&out, {}}, {nullptr, {static_cast<uint32_t>(copy.n)}}};
  LaunchConfig config;
  config.num_workgroups = {workgroups, 1, 1};
  config.subgroup_size = 4;
  std::string errors = to_string(interpret(kernel, args, config));
  out_bytes = out.bytes;
  return errors;
}

std::vector<std::vector<std::string_view>> pipelines() {
  std::vector<std::vector<std::string_view>> out;
  for (const passes::PassInfo &p : passes::registered_passes())
    if (p.name != "print-hash")
      out.push_back({p.name});
  out.push_back(passes::optimization_pipeline(1));
  out.push_back(passes::optimization_pipeline(2));
  out.push_back(passes::optimization_pipeline(3));
  return out;
}

std::string describe(const std::vector<std::string_view> &pipeline) {
  std::string s;
  for (std::string_view p : pipeline)
    s += (s.empty() ? "" : ",") + std::string(p);
  return s;
}

} // namespace

TEST(PassesDifferential, random_kernels_compute_the_same_before_and_after_every_pass) {
  uint64_t count = env_or("CUBECC_DIFFERENTIAL_KERNELS", 200);
  uint64_t first = env_or("CUBECC_DIFFERENTIAL_SEED", 1);
  auto all = pipelines();
  uint64_t changed = 0, promoted = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    std::string text = test::random_kernel(seed);
    ParseResult original = parse_module(text, "random.cir");
    ASSERT_TRUE(original.module) << "seed " << seed << ":\n" << to_string(original.errors) << text;
    auto problems = verify(*original.module, &original.source_map);
    ASSERT_TRUE(problems.empty()) << "seed " << seed << ":\n" << to_string(problems) << text;
    RandomInputs in = random_inputs(seed);
    std::vector<uint8_t> expected;
    std::string expected_errors = run(*original.module->kernels()[0], in, expected);
    ASSERT_EQ(expected_errors, "") << "seed " << seed << ":\n" << text;
    for (const auto &pipeline : all) {
      ParseResult copy = parse_module(text, "random.cir");
      passes::PassManagerOptions options;
      options.verify_each = true;
      passes::PassManager manager(options);
      for (std::string_view p : pipeline)
        manager.add(*passes::find_pass(p));
      std::ostringstream out, err;
      auto pass_errors = manager.run(*copy.module, out, err);
      ASSERT_TRUE(pass_errors.empty()) << "seed " << seed << ", " << describe(pipeline) << ":\n"
                                       << to_string(pass_errors) << "before:\n"
                                       << text << "after:\n"
                                       << to_string(*copy.module);
      std::vector<uint8_t> actual;
      std::string errors = run(*copy.module->kernels()[0], in, actual);
      std::string after = to_string(*copy.module);
      bool differs = after != to_string(*original.module);
      changed += differs;
      promoted += differs && pipeline.size() == 1 && pipeline[0] == "promote-locals";
      ASSERT_TRUE(errors.empty() && actual == expected)
          << "seed " << seed << ": '" << describe(pipeline) << "' changed the results\n"
          << errors << "before:\n"
          << text << "after:\n"
          << after;
    }
  }
  // The generator must give the passes work to do, or this test proves little.
  EXPECT_GT(changed, count) << "the passes changed too few of the random kernels";
  // Locals used like DSL Vars (random_ir.cpp) must reach promote-locals often enough.
  EXPECT_GT(promoted, count / 4) << "promote-locals changed too few of the random kernels";
}
