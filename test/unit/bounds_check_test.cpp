//===- bounds_check_test.cpp - Checked mode in the interpreter: proven accesses, kept guards
//---===//
//
// The bounds-check pass run on small kernels, which the reference interpreter then runs with
// more invocations than buffer elements: an access proven in bounds by a dominating `if` keeps
// no guard and the kernel runs clean; an access its condition does not prove (one past the end)
// keeps its guard, so the out-of-bounds store the interpreter reports without checked mode is
// dropped with it. Random conditions check soundness: after bounds-check, the interpreter must
// never find an out-of-bounds store, whatever the buffer's size (a wrong proof fails it: making
// `i <= size` a proof, or letting an array index reach its size, does at once). The per-kernel
// counts come from --pass-statistics.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/interpreter.h"
#include "cubecc/passes/pass_manager.h"
#include "test_support.h"

#include <cstring>
#include <functional>
#include <random>
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

namespace {

/// A random kernel: each invocation stores to out[i] and to a local array of 40 elements at i (i
/// its global index, or for `is_signed` that index minus 64 as an i32) in the then- or
/// else-branch of a random condition: comparisons of i with 0, buffer.size, size -/+ c,
/// min(size, n), a scalar n, 40 -/+ c, joined by and/or/not.
std::string random_condition_kernel(std::mt19937 &rng, bool is_signed) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const char *t = is_signed ? "i32" : "u32";
  std::ostringstream k;
  k << "module @m {\n  kernel @k(%out: buffer<u32, readwrite>, %n: " << t
    << ") workgroup(64, 1, 1) {\n"
    << "    %arr = local.alloc : local<u32, 40>\n    %gid = global_id : u32x3\n    %gx = "
       "vec.extract %gid {lane = 0} : u32\n";
  if (is_signed)
    k << "    %gs = cast %gx : i32\n    %c64 = const 64 : i32\n    %i = sub %gs, %c64 : i32\n";
  else
    k << "    %z = const 0 : u32\n    %i = add %gx, %z : u32\n";
  k << "    %size = buffer.size %out : " << t << "\n    %zero = const 0 : " << t << "\n"
    << "    %cap = const 40 : " << t << "\n";
  int values = 0;
  auto bound = [&]() {
    std::string b = "%b" + std::to_string(values++);
    switch (pick(8)) {
    case 0:
    case 1:
      return std::string("%size");
    case 6:
      return std::string("%cap");
    case 7:
      k << "    " << b << "c = const " << pick(3) << " : " << t << "\n    " << b << " = "
        << (pick(2) ? "sub" : "add") << " %cap, " << b << "c : " << t << "\n";
      return b;
    case 2:
      return std::string("%n");
    case 3:
      k << "    " << b << " = min %size, %n : " << t << "\n";
      return b;
    default:
      k << "    " << b << "c = const " << pick(3) << " : " << t << "\n    " << b << " = "
        << (pick(2) ? "sub" : "add") << " %size, " << b << "c : " << t << "\n";
      return b;
    }
  };
  std::function<std::string(int)> condition = [&](int depth) {
    std::string c = "%p" + std::to_string(values++);
    int what = depth < 2 ? pick(8) : 3; // comparisons at the leaves
    if (what >= 3) {                    // a comparison with zero or a bound, either way round
      static const char *const ops[] = {"lt", "le", "gt", "ge", "eq", "ne"};
      std::string other = pick(4) ? bound() : "%zero";
      bool flip = pick(2);
      k << "    " << c << " = " << ops[pick(6)] << " " << (flip ? other : "%i") << ", "
        << (flip ? "%i" : other) << " : bool\n";
    } else if (what == 2) {
      std::string a = condition(depth + 1);
      k << "    " << c << " = not " << a << " : bool\n";
    } else {
      std::string a = condition(depth + 1), b = condition(depth + 1);
      k << "    " << c << " = " << (pick(2) ? "and" : "or") << " " << a << ", " << b << " : bool\n";
    }
    return c;
  };
  std::string cond = condition(0);
  if (pick(3) == 0) { // a third: the random condition and a proving one (i < size or 40, 0 <= i)
    k << "    %lt = lt %i, " << (pick(2) ? "%size" : "%cap")
      << " : bool\n    %nonneg = ge %i, %zero : bool\n"
      << "    %proving = and %lt, %nonneg : bool\n    %both = and %proving, " << cond
      << " : bool\n";
    cond = "%both";
  }
  const char *store = "      store %out, %i, %gx\n      store %arr, %i, %gx\n";
  bool in_then = pick(4) != 0;
  k << "    if " << cond << " {\n"
    << (in_then ? store : "") << "      yield\n    } else {\n"
    << (in_then ? "" : store) << "      yield\n    }\n    return\n  }\n}\n";
  return k.str();
}

} // namespace

TEST(BoundsCheck, random_conditions_never_let_an_out_of_bounds_store_through) {
  // Soundness against the interpreter: whatever bounds-check proves from the condition, no
  // store may be out of bounds for buffers of 0 to 130 elements (128 invocations) and any n.
  std::mt19937 rng(18);
  int proven = 0, proven_by_ranges = 0;
  for (int trial = 0; trial < 300; ++trial) {
    bool is_signed = trial % 2;
    std::string text = random_condition_kernel(rng, is_signed);
    auto module = test::parse_valid(text);
    ASSERT_TRUE(module) << text;
    std::string report = run_bounds_check(*module);
    proven += statistic(report, "@k: accesses proven in bounds by buffer.size facts");
    proven_by_ranges += statistic(report, "@k: accesses proven in bounds by ranges");
    for (uint32_t elements : {0u, 1u, 5u, 64u, 127u, 128u, 130u}) {
      uint64_t n = rng() % 200;
      HostBuffer buffer{Scalar::U32, std::vector<uint8_t>(elements * 4, 0)};
      Argument args[] = {{&buffer, {}}, {nullptr, {n}}};
      LaunchConfig config;
      config.num_workgroups = {2, 1, 1};
      ASSERT_EQ(to_string(interpret(*module->kernels()[0], args, config)), "")
          << "buffer of " << elements << " elements, n = " << n << "\n"
          << text << "after bounds-check:\n"
          << to_string(*module);
    }
  }
  // The generator must give the pass facts to use, or this test proves little.
  EXPECT_GT(proven, 30);
  EXPECT_GT(proven_by_ranges, 30);
}
