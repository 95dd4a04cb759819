//===- uniformity_test.cpp - Uniform, subgroup-uniform and varying values --------------------===//
#include "cubecc/ir/uniformity.h"
#include "test_support.h"

#include <map>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

/// The uniformity of every named result of the kernel's top level, by name.
std::map<std::string, Uniformity> classify(const std::string &text) {
  auto m = test::parse_valid(text);
  std::map<std::string, Uniformity> out;
  if (!m)
    return out;
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
