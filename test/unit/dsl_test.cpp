//===- dsl_test.cpp - Tracing kernels written with the DSL ------------------------------------===//
#include "cubecc/dsl.h"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <dlfcn.h>
#include <source_location>
#include <thread>

namespace dsl = cubecc::dsl;
using namespace cubecc;

namespace {

template <int kScale> void scale(dsl::Tensor<const float> in, dsl::Tensor<float> out) {
  auto i = dsl::global_id().x;
  dsl::if_(i < out.size(), [&] { out[i] = in[i] * static_cast<float>(kScale); });
}

int g_barrier_line = 0;
void divergent_barrier(dsl::Tensor<float> data) {
  auto i = dsl::global_id().x;
  dsl::if_(i < 16u, [&] {
    g_barrier_line = std::source_location::current().line() + 1;
    dsl::barrier();
  });
}

int g_unreachable_line = 0;
void code_after_break(dsl::Tensor<float> data) {
  dsl::for_(0u, data.size(), [&](dsl::Val<uint32_t> k) {
    dsl::break_();
    g_unreachable_line = std::source_location::current().line() + 1;
    data[k] = 0.0f;
  });
}

void break_outside_loop(dsl::Tensor<float>) {
  dsl::break_();
}

void control_flow(dsl::Tensor<int32_t> data, dsl::Scalar<int32_t> n) {
  dsl::Var<int32_t> acc = 0;
  dsl::Shared<int32_t, 64> tile;
  auto l = dsl::local_index();
  dsl::for_(
      0, n, 2,
      [&](dsl::Val<int32_t> k) {
        dsl::if_(k > 10, [&] { dsl::break_(); });
        acc += k;
      },
      dsl::Unroll{4});
  dsl::while_([&] { return acc > 100; }, [&] { acc = acc / 2; });
  dsl::if_(acc == 0, [&] { data[0u] = 1; }).else_([&] { data[0u] = acc; });
  tile[l] = acc;
  dsl::barrier();
  data[l] = tile[63u - l];
}

std::string first_error(const dsl::TraceResult &r) {
  return r.errors.empty() ? "" : r.errors.front().str();
}

} // namespace

TEST(Dsl, a_traced_kernel_verifies_and_reads_like_the_source) {
  auto r =
      dsl::trace<scale<2>>("scale", {.workgroup = {64, 1, 1}, .parameter_names = {"in", "out"}});
  ASSERT_TRUE(r.module) << ir::to_string(r.errors);
  std::string text = ir::to_string(*r.module, {.locations = false});
  EXPECT_NE(text.find("kernel @scale(%in: buffer<f32, read>, %in.shape0: u32, %in.stride0: u32, "
                      "%out: buffer<f32, readwrite>, %out.shape0: u32, %out.stride0: u32) "
                      "workgroup(64, 1, 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("const 2.0 : f32"), std::string::npos) << text;
  EXPECT_NE(text.find("store %out"), std::string::npos) << text;
}

TEST(Dsl, every_op_carries_the_location_of_the_users_source_line) {
  auto r = dsl::trace<scale<3>>("scale");
  ASSERT_TRUE(r.module);
  std::string this_file = std::source_location::current().file_name();
  int located = 0;
  r.module->kernels()[0]->walk([&](ir::Operation *op) {
    if (op->is_terminator() && !op->location().known())
      return; // closing yields and returns are implied by the structure
    EXPECT_EQ(r.module->file_name(op->location().file), this_file) << op->name();
    EXPECT_GT(op->location().line, 0u);
    ++located;
  });
  EXPECT_GE(located, 6);
}

TEST(Dsl, comptime_configurations_give_distinct_hashes_and_retracing_gives_the_same) {
  auto a = dsl::trace<scale<2>>("scale");
  auto b = dsl::trace<scale<2>>("scale");
  auto c = dsl::trace<scale<5>>("scale");
  ASSERT_TRUE(a.module && b.module && c.module);
  EXPECT_EQ(ir::structural_hash(*a.module), ir::structural_hash(*b.module));
  EXPECT_NE(ir::structural_hash(*a.module), ir::structural_hash(*c.module));
}

TEST(Dsl, a_verifier_error_names_the_users_file_and_line) {
  auto r = dsl::trace<divergent_barrier>("divergent", {.workgroup = {64, 1, 1}});
  EXPECT_FALSE(r.module);
  std::string expected = std::string(std::source_location::current().file_name()) + ":" +
                         std::to_string(g_barrier_line) + ":";
  EXPECT_EQ(first_error(r).rfind(expected, 0), 0u) << first_error(r);
  EXPECT_NE(first_error(r).find("'barrier' in kernel @divergent"), std::string::npos);
}

TEST(Dsl, a_statement_after_break_is_a_trace_error_at_that_statement) {
  auto r = dsl::trace<code_after_break>("k");
  EXPECT_FALSE(r.module);
  EXPECT_NE(first_error(r).find(":" + std::to_string(g_unreachable_line) + ":"), std::string::npos)
      << first_error(r);
  EXPECT_NE(first_error(r).find("follows a break_, continue_ or return_"), std::string::npos);
}

TEST(Dsl, break_outside_a_loop_is_a_trace_error) {
  auto r = dsl::trace<break_outside_loop>("k");
  EXPECT_FALSE(r.module);
  EXPECT_NE(first_error(r).find("break_ is outside any for_ or while_ body"), std::string::npos);
}

TEST(Dsl, control_flow_allocations_and_loops_trace_into_structured_ir) {
  auto r = dsl::trace<control_flow>("control", {.workgroup = {64, 1, 1}});
  ASSERT_TRUE(r.module) << ir::to_string(r.errors);
  std::string text = ir::to_string(*r.module, {.locations = false});
  // Allocations are hoisted to the top of the body, in declaration order.
  size_t body = text.find("{\n") + 2;
  EXPECT_EQ(text.find("local.alloc : local<i32, 1>"), text.find("=", body) + 2) << text;
  EXPECT_NE(text.find("shared.alloc : shared<i32, 64>"), std::string::npos);
  EXPECT_NE(text.find("{unroll = 4} (%"), std::string::npos) << text;
  EXPECT_NE(text.find("        break\n"), std::string::npos) << text;
  EXPECT_NE(text.find("condition %"), std::string::npos) << text;
  EXPECT_NE(text.find("} else {"), std::string::npos) << text;
  EXPECT_NE(text.find("barrier"), std::string::npos) << text;
}

TEST(Dsl, every_registered_example_traces_and_verifies) {
  ASSERT_FALSE(dsl::registered_kernels().empty());
  for (const dsl::RegisteredKernel &k : dsl::registered_kernels()) {
    ir::Module module;
    std::vector<ir::Diagnostic> errors;
    k.trace(module, k, errors);
    EXPECT_TRUE(errors.empty()) << k.name << ":\n" << ir::to_string(errors);
    ASSERT_EQ(module.kernels().size(), errors.empty() ? 1u : 0u);
    if (errors.empty()) {
      EXPECT_TRUE(ir::verify(module).empty());
    }
  }
}

TEST(KernelLibrary, the_example_library_lists_and_traces_its_kernels) {
  std::string error;
  auto library = dsl::KernelLibrary::open(CUBECC_EXAMPLES_LIBRARY, error);
  ASSERT_TRUE(library) << error;
  ASSERT_EQ(library->kernels().size(), dsl::registered_kernels().size());
  ir::Module module;
  std::vector<ir::Diagnostic> errors;
  for (size_t i = 0; i < library->kernels().size(); ++i)
    ASSERT_TRUE(library->trace(i, module, errors)) << ir::to_string(errors);
  EXPECT_TRUE(ir::verify(module).empty());
  // The library's kernels are the same kernels as the ones linked into this test.
  for (const dsl::RegisteredKernel &k : dsl::registered_kernels()) {
    ir::Module here;
    k.trace(here, k, errors);
    ir::Kernel *there = module.find_kernel(k.name);
    ASSERT_TRUE(there) << k.name;
    EXPECT_EQ(ir::structural_hash(*here.kernels()[0]), ir::structural_hash(*there));
  }
}

// A framework opens libraries from its worker threads: the probes (forks) run one at a time, a
// file that probed clean is not probed again, and every open succeeds (concurrent probes used to
// inherit each other's pipes, and a child could hang on a lock another thread held at the fork).
TEST(KernelLibrary, opens_from_many_threads_at_once) {
  std::atomic<int> opened = 0;
  std::vector<std::string> errors(6);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < errors.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        std::string error;
        auto library = dsl::KernelLibrary::open(CUBECC_EXAMPLES_LIBRARY, error);
        if (!library || library->kernels().empty()) {
          errors[t] = error;
          return;
        }
        ++opened;
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (const std::string &error : errors)
    EXPECT_EQ(error, "");
  EXPECT_EQ(opened, 60);
}

TEST(KernelLibrary, opening_something_else_says_what_is_wrong) {
  std::string error;
  EXPECT_FALSE(dsl::KernelLibrary::open("/nonexistent/lib.so", error));
  EXPECT_NE(error.find("/nonexistent/lib.so: error: cannot load the kernel library"),
            std::string::npos)
      << error;
  Dl_info libc;
  ASSERT_NE(dladdr(reinterpret_cast<void *>(&printf), &libc), 0);
  EXPECT_FALSE(dsl::KernelLibrary::open(libc.dli_fname, error));
  EXPECT_NE(error.find("not a cubecc kernel library"), std::string::npos) << error;
}

namespace {
void nested_ifs(dsl::Tensor<int32_t> data) {
  auto i = dsl::local_index();
  dsl::if_(i < 8u, [&] {
    dsl::if_(i < 4u, [&] { data[i] = 1; }).else_([&] { data[i] = 2; });
    data[i + 8u] = 3;
  }).else_([&] { data[i] = 4; });
}
} // namespace

TEST(Dsl, nested_ifs_with_elses_keep_their_own_branches) {
  auto r = dsl::trace<nested_ifs>("nested", {.workgroup = {16, 1, 1}});
  ASSERT_TRUE(r.module) << ir::to_string(r.errors);
  std::string text = ir::to_string(*r.module, {.locations = false});
  // Outer then: the inner if/else, then the store of 3; outer else: the store of 4.
  size_t inner_else = text.find("} else {");
  size_t store3 = text.find("const 3 : i32");
  size_t outer_else = text.find("} else {", inner_else + 1);
  size_t store4 = text.find("const 4 : i32");
  ASSERT_NE(outer_else, std::string::npos) << text;
  EXPECT_LT(inner_else, store3) << text;
  EXPECT_LT(store3, outer_else) << text;
  EXPECT_LT(outer_else, store4) << text;
}
