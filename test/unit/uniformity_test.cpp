//===- uniformity_test.cpp - Uniform, subgroup-uniform and varying values --------------------===//
#include "cubecc/ir/uniformity.h"
#include "cubecc/passes/promote_locals.h"
#include "test_support.h"

#include <sstream>

#include <map>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

/// The uniformity of every named result of the kernel, by name (after promote-locals when
/// `promote` is set).
std::map<std::string, Uniformity> classify(const std::string &text, bool promote = false) {
  auto m = test::parse_valid(text);
  std::map<std::string, Uniformity> out;
  if (!m)
    return out;
  if (promote) {
    std::ostringstream report;
    passes::PassContext context{report, {}, {}};
    passes::promote_locals(*m, context);
    auto problems = verify(*m);
    EXPECT_TRUE(problems.empty()) << to_string(problems) << to_string(*m);
  }
  UniformityAnalysis analysis(*m->kernels()[0]);
  m->kernels()[0]->walk([&](Operation *op) {
    for (unsigned i = 0; i < op->num_results(); ++i)
      if (!op->result(i)->name().empty())
        out[op->result(i)->name()] = analysis.of(op->result(i));
  });
  return out;
}

} // namespace

TEST(Uniformity, values_are_classified_by_what_they_depend_on) {
  auto u = classify(R"(module @m {
  kernel @k(%n: u32, %buf: buffer<u32, read>) workgroup(64, 1, 1) {
    %local = local.alloc : local<u32, 1>
    %wg = workgroup_id : u32x3
    %wg_x = vec.extract %wg {lane = 0} : u32
    %param_sum = add %n, %wg_x : u32
    %z = const 0 : u32
    %uniform_load = load %buf, %z : u32
    %li = local_index : u32
    %lane = subgroup_lane : u32
    %sg = subgroup_id : u32
    %sg_sum = subgroup.sum %li : u32
    %sg_derived = add %sg_sum, %sg : u32
    %scan = subgroup.inclusive_sum %n : u32
    %shuffled = subgroup.shuffle_xor %n, %n : u32
    %private = load %local, %z : u32
    %varying_load = load %buf, %li : u32
    %c = lt %li, %n : bool
    %chosen = if %c : u32 {
      yield %n
    } else {
      yield %z
    }
    %sg_c = eq %sg, %z : bool
    %sg_chosen = if %sg_c : u32 {
      yield %n
    } else {
      yield %z
    }
    return
  }
})");
  EXPECT_EQ(u["param_sum"], Uniformity::Uniform);
  EXPECT_EQ(u["uniform_load"], Uniformity::Uniform);
  EXPECT_EQ(u["li"], Uniformity::Varying);
  EXPECT_EQ(u["lane"], Uniformity::Varying);
  EXPECT_EQ(u["sg"], Uniformity::SubgroupUniform);
  EXPECT_EQ(u["sg_sum"], Uniformity::SubgroupUniform);
  EXPECT_EQ(u["sg_derived"], Uniformity::SubgroupUniform);
  EXPECT_EQ(u["scan"], Uniformity::Varying);
  EXPECT_EQ(u["shuffled"], Uniformity::Varying);
  EXPECT_EQ(u["private"], Uniformity::Varying);
  EXPECT_EQ(u["varying_load"], Uniformity::Varying);
  // Chosen by control flow: varying where the condition is, subgroup-uniform where it is.
  EXPECT_EQ(u["chosen"], Uniformity::Varying);
  EXPECT_EQ(u["sg_chosen"], Uniformity::SubgroupUniform);
}

TEST(Uniformity, loop_carried_values_reach_a_fixed_point) {
  auto u = classify(R"(module @m {
  kernel @k(%n: u32) workgroup(64, 1, 1) {
    %z = const 0 : u32
    %one = const 1 : u32
    %li = local_index : u32
    %stays, %becomes = for %z, %n, %one, %z, %z : u32, u32 (%i: u32, %a: u32, %b: u32) {
      %a2 = add %a, %i : u32
      %b2 = add %b, %li : u32
      yield %a2, %b2
    }
    return
  }
})");
  EXPECT_EQ(u["stays"], Uniformity::Uniform);
  EXPECT_EQ(u["becomes"], Uniformity::Varying);
}

// Each Var (a local<u32, 1>) reaches `%*_final` through an if and loops. In memory every load of
// it is varying; promoted, its value is uniform wherever all its incoming values and the control
// that chooses between them are uniform, even inside a branch on a varying condition.
constexpr const char *kVarKernel = R"(module @m {
  kernel @k(%n: u32, %c: bool) workgroup(64, 1, 1) {
    %uniform = local.alloc : local<u32, 1>
    %private = local.alloc : local<u32, 1>
    %skipping = local.alloc : local<u32, 1>
    %z = const 0 : u32
    %one = const 1 : u32
    %li = local_index : u32
    %odd_lane = lt %li, %n : bool
    store %uniform, %z, %z
    store %private, %z, %z
    store %skipping, %z, %z
    if %odd_lane {
      for %z, %n, %one (%i: u32) {
        %u = load %uniform, %z : u32
        %u2 = add %u, %n : u32
        store %uniform, %z, %u2
        if %c {
          %u3 = load %uniform, %z : u32
          %u4 = mul %u3, %n : u32
          store %uniform, %z, %u4
          yield
        }
        %p = load %private, %z : u32
        %p2 = add %p, %li : u32
        store %private, %z, %p2
        %s = load %skipping, %z : u32
        %s2 = add %s, %one : u32
        store %skipping, %z, %s2
        %skip = lt %i, %li : bool
        if %skip {
          continue
        }
        %s3 = add %s2, %one : u32
        store %skipping, %z, %s3
        yield
      }
      %u_inside = load %uniform, %z : u32
      %uniform_final = add %u_inside, %z : u32
      %p_inside = load %private, %z : u32
      %private_final = add %p_inside, %z : u32
      %s_inside = load %skipping, %z : u32
      %skipping_final = add %s_inside, %z : u32
      yield
    }
    return
  }
})";

TEST(Uniformity, a_var_is_varying_in_memory) {
  auto u = classify(kVarKernel);
  EXPECT_EQ(u["uniform_final"], Uniformity::Varying);
}

TEST(Uniformity, a_promoted_var_holding_uniform_values_under_uniform_control_is_uniform) {
  auto u = classify(kVarKernel, true);
  EXPECT_EQ(u["uniform_final"], Uniformity::Uniform);
  EXPECT_EQ(u["private_final"], Uniformity::Varying);
  // Incremented on every iteration, again only by the invocations that do not continue (a
  // varying condition): the next iteration starts from different values.
  EXPECT_EQ(u["skipping_final"], Uniformity::Varying);
}
