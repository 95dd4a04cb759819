//===- test_support.h - Helpers shared by the unit tests --------------------------------------===//
#pragma once

#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace cubecc::test {

/// Sets (or, with null, unsets) an environment variable for the life of the object.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
  std::optional<std::string> old_;
};

/// Parses and verifies `text`, failing the current test with the diagnostics if either fails.
inline std::unique_ptr<ir::Module> parse_valid(std::string_view text) {
  ir::ParseResult r = ir::parse_module(text, "test.cir");
  EXPECT_TRUE(r.module) << ir::to_string(r.errors);
  if (!r.module)
    return nullptr;
  auto problems = ir::verify(*r.module, &r.source_map);
  EXPECT_TRUE(problems.empty()) << ir::to_string(problems);
  return std::move(r.module);
}

/// A kernel of 1024 invocations (one workgroup of them per 1024 elements of `out`) with a
/// barrier and a local<f32, elements> each (elements >= 1024: invocation i writes and reads back
/// its element i), so that it needs 4 KiB x elements of local memory per workgroup: out[i] = i.
inline std::string local_arrays_kernel(const std::string &name, unsigned elements) {
  return "module @m {\n  kernel @" + name +
         "(%out: buffer<f32, write>) workgroup(1024, 1, 1) {\n"
         "    %l = local.alloc : local<f32, " +
         std::to_string(elements) + R"(>
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %lid3 = local_id : u32x3
    %lid = vec.extract %lid3 {lane = 0} : u32
    %f = cast %i : f32
    store %l, %lid, %f
    barrier
    %v = load %l, %lid : f32
    store %out, %i, %v
    return
  }
}
)";
}

/// The first error message from parsing and verifying `text` (empty when it is valid).
inline std::string first_error(std::string_view text) {
  ir::ParseResult r = ir::parse_module(text, "test.cir");
  if (!r.module)
    return r.errors.empty() ? "<parse failed without a diagnostic>" : r.errors.front().str();
  auto problems = ir::verify(*r.module, &r.source_map);
  return problems.empty() ? "" : problems.front().str();
}

/// The bytes of the file at `path` ("" when it cannot be read).
inline std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

#ifdef CUBECC_SOURCE_DIR
/// examples/ir/<name>, parsed and verified (failing the current test if it is not).
inline std::unique_ptr<ir::Module> example_module(const char *name) {
  return parse_valid(read_file(std::string(CUBECC_SOURCE_DIR "/examples/ir/") + name));
}
#endif

/// A GEMM C(M x N) = A(M x K) * B(K x N) in matrix ops, A and C row-major, B row-major or
/// column-major (stored as B^T, N x K): each subgroup of a 64-invocation workgroup owns one
/// m x n tile of C, the workgroups cover the columns, and a for loop over K carries the
/// accumulator. Parameters: a, b, c, M, N, K.
inline std::string matrix_gemm_ir(const ir::MatrixShape &s, bool b_col_major) {
  return fmt::format(
      R"(module @m {{
  kernel @gemm(%a: buffer<{ina}, read>, %b: buffer<{inb}, read>, %c: buffer<{acc}, readwrite>,
               %m: u32, %n: u32, %k: u32) workgroup(64, 1, 1) {{
    %sg = subgroup_id : u32
    %wid = workgroup_id : u32x3
    %wx = vec.extract %wid {{lane = 0}} : u32
    %tm = const {tm} : u32
    %tn = const {tn} : u32
    %tk = const {tk} : u32
    %zero = const 0 : u32
    %row = mul %sg, %tm : u32
    %col = mul %wx, %tn : u32
    %fz = const 0 : {acc}
    %init = matrix.fill %fz : matrix<subgroup, acc, {acc}, {tm}, {tn}>
    %total = for %zero, %k, %tk, %init : matrix<subgroup, acc, {acc}, {tm}, {tn}> (%kk: u32, %sum: matrix<subgroup, acc, {acc}, {tm}, {tn}>) {{
      %arow = mul %row, %k : u32
      %ai = add %arow, %kk : u32
      %ma = matrix.load %a, %ai, %k : matrix<subgroup, a, {ina}, {tm}, {tk}>
      {b_index}
      %mb = matrix.load %b, %bi, {b_stride} {b_attr}: matrix<subgroup, b, {inb}, {tk}, {tn}>
      %next = matrix.mma %ma, %mb, %sum : matrix<subgroup, acc, {acc}, {tm}, {tn}>
      yield %next
    }}
    %crow = mul %row, %n : u32
    %ci = add %crow, %col : u32
    matrix.store %c, %ci, %n, %total
    return
  }}
}})",
      fmt::arg("ina", ir::scalar_name(s.a)), fmt::arg("inb", ir::scalar_name(s.b)),
      fmt::arg("acc", ir::scalar_name(s.accumulator)), fmt::arg("tm", s.m), fmt::arg("tn", s.n),
      fmt::arg("tk", s.k),
      // B row-major: (kk, col) at kk * n + col; column-major: at col * k + kk.
      fmt::arg("b_index", b_col_major
                              ? "%bcol = mul %col, %k : u32\n      %bi = add %bcol, %kk : u32"
                              : "%brow = mul %kk, %n : u32\n      %bi = add %brow, %col : u32"),
      fmt::arg("b_stride", b_col_major ? "%k" : "%n"),
      fmt::arg("b_attr", b_col_major ? "{col_major = 1} " : ""));
}

} // namespace cubecc::test
