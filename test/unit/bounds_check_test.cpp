//===- bounds_check_test.cpp - Checked mode in the interpreter: proven accesses, kept guards
//---===//
//
// The bounds-check pass run on small kernels, which the reference interpreter then runs with
// more invocations than buffer elements: an access proven in bounds by a dominating `if` keeps
// no guard and the kernel runs clean; an access its condition does not prove (one past the end)
// keeps its guard, so the out-of-bounds store the interpreter reports without checked mode is
// dropped with it. The per-kernel counts come from --pass-statistics' counters.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/interpreter.h"
#include "cubecc/passes/pass_manager.h"
#include "test_support.h"

#include <cstring>
#include <sstream>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

// Each invocation stores its global index at out[i] under a condition on i; @off_by_one's
// condition lets i == size through. @var keeps i in a Var (a local array), as the DSL traces
// it before promotion to SSA.
constexpr const char *kKernels = R"(
module @m {
  kernel @guarded(%out: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %size = buffer.size %out : u32
    %ok = lt %i, %size : bool
    if %ok {
      store %out, %i, %i
      yield
    }
    return
  }
  kernel @off_by_one(%out: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %size = buffer.size %out : u32
    %ok = le %i, %size : bool
    if %ok {
      store %out, %i, %i
      yield
    }
    return
  }
  kernel @var(%out: buffer<u32, readwrite>) workgroup(64, 1, 1) {
    %var = local.alloc : local<u32, 1>
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %z0 = const 0 : u32
    store %var, %z0, %i
    %z1 = const 0 : u32
    %v1 = load %var, %z1 : u32
    %size = buffer.size %out : u32
    %ok = gt %size, %v1 : bool
    if %ok {
      %z2 = const 0 : u32
      %v2 = load %var, %z2 : u32
      store %out, %v2, %v2
      yield
    }
    return
  }
}
)";

constexpr uint32_t kElements = 100; // two workgroups of 64: 28 invocations past the end
constexpr uint32_t kWorkgroups = 2;

/// The count --pass-statistics printed for `what` ("  <n> <what> (bounds-check)"), or -1.
int64_t statistic(const std::string &report, const std::string &what) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find(" " + what + " (bounds-check)");
    if (at != std::string::npos)
      return std::stoll(line.substr(0, at));
  }
  return -1;
}

/// Runs bounds-check on `module` and returns its statistics report.
std::string run_bounds_check(Module &module) {
  passes::PassManagerOptions options;
  options.verify_each = true;
  options.statistics = true;
  passes::PassManager manager(options);
  EXPECT_FALSE(manager.add_pipeline("bounds-check"));
  std::ostringstream out, err;
  auto errors = manager.run(module, out, err);
  EXPECT_TRUE(errors.empty()) << to_string(errors);
  return err.str();
}

/// Runs `kernel` of `module` over kElements outputs with kWorkgroups x 64 invocations; returns
/// the interpreter's complaints (empty: it ran clean) and fills `out`.
std::string run(const Module &module, std::string_view kernel, std::vector<uint32_t> &out) {
  HostBuffer buffer{Scalar::U32, std::vector<uint8_t>(kElements * 4, 0xff)};
  Argument args[] = {{&buffer, {}}};
  LaunchConfig config;
  config.num_workgroups = {kWorkgroups, 1, 1};
  std::string errors = to_string(interpret(*module.find_kernel(kernel), args, config));
  out.resize(kElements);
  std::memcpy(out.data(), buffer.bytes.data(), buffer.bytes.size());
  return errors;
}

void expect_each_element_holds_its_index(const std::vector<uint32_t> &out) {
  for (uint32_t i = 0; i < kElements; ++i)
    ASSERT_EQ(out[i], i) << "element " << i;
}

} // namespace

TEST(BoundsCheck, an_access_proven_by_its_if_keeps_no_guard_and_runs_clean) {
  auto module = test::parse_valid(kKernels);
  ASSERT_TRUE(module);
  std::string report = run_bounds_check(*module);
  EXPECT_EQ(statistic(report, "@guarded: accesses guarded"), 0) << report;
  EXPECT_EQ(statistic(report, "@guarded: accesses proven in bounds by buffer.size facts"), 1)
      << report;
  std::vector<uint32_t> out;
  EXPECT_EQ(run(*module, "guarded", out), "");
  expect_each_element_holds_its_index(out);
}

TEST(BoundsCheck, checked_mode_drops_the_out_of_bounds_store_an_off_by_one_condition_lets_through) {
  auto module = test::parse_valid(kKernels);
  ASSERT_TRUE(module);
  std::vector<uint32_t> out;
  // Unchecked, the interpreter finds the store at index 100.
  EXPECT_NE(run(*module, "off_by_one", out).find("out of bounds"), std::string::npos);
  std::string report = run_bounds_check(*module);
  EXPECT_EQ(statistic(report, "@off_by_one: accesses guarded"), 1) << report;
  EXPECT_EQ(statistic(report, "@off_by_one: accesses proven in bounds by buffer.size facts"), 0)
      << report;
  EXPECT_EQ(run(*module, "off_by_one", out), "");
  expect_each_element_holds_its_index(out);
}

TEST(BoundsCheck, a_var_compared_then_reloaded_is_proven_and_runs_clean) {
  auto module = test::parse_valid(kKernels);
  ASSERT_TRUE(module);
  std::string report = run_bounds_check(*module);
  // The Var's own accesses (index 0 of one element) by ranges, the buffer store by the fact.
  EXPECT_EQ(statistic(report, "@var: accesses guarded"), 0) << report;
  EXPECT_EQ(statistic(report, "@var: accesses proven in bounds by ranges"), 3) << report;
  EXPECT_EQ(statistic(report, "@var: accesses proven in bounds by buffer.size facts"), 1) << report;
  std::vector<uint32_t> out;
  EXPECT_EQ(run(*module, "var", out), "");
  expect_each_element_holds_its_index(out);
}
