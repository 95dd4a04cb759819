//===- ops_test.cpp - Every op family, every element type, on every device ------------------===//
//
// Kernels built from templates (op_harness.h) cover each op family of ops.def with each element
// type its TypeClass admits, run on the devices "interp", "vulkan" (lavapipe) and "cpu" (where
// the LLVM backend is built), and on "cuda" and "hip" where they open (skipped elsewhere), and are
// compared with the reference interpreter (ir::interpret, the oracle for docs/ir.md's
// semantics): integers exactly, floats bit-exactly where the IR requires a correctly rounded or
// exact result and within a stated bound elsewhere. One test per (family, device); inside it one
// SCOPED_TRACE per kernel; a mismatch names the kernel, op, type, element, inputs, got and
// expected.
//
// Integer division by zero and MIN / -1 and shift amounts past the width are tested: docs/ir.md
// leaves them unspecified, but the legalize pass pins them to the interpreter's values on every
// backend (docs/passes.md, "Legal IR"). Other inputs stay inside what docs/ir.md specifies:
// shuffle sources past the subgroup (the caller's own value), no subnormal float inputs (lavapipe
// flushes them; a flushed ±0 is accepted where the reference result itself is subnormal),
// float atomics and subgroup float sums on dyadic values (exact in any order).
//
// Largest errors measured on lavapipe (llvmpipe, LLVM 15), all within the Vulkan bounds used:
// exp f32 46 ULP (at |x| near 80), exp f16 9, exp2 f32 2, log f32 11 ULP (absolute 2^-21 region
// near 1), log2 f32 22 ULP (same), pow f32 42 / f16 7 ULP, sin/cos f32 1 ULP, rsqrt f16 1 ULP,
// tanh f32/f16 1 ULP, erf f32 1 ULP; sqrt, div, floor, ceil, round and f32/f16 fma exact.
// CUBECC_OPS_VERBOSE=1 prints each kernel's time, CUBECC_OPS_KERNEL=<substring> runs only the
// matching kernels, CUBECC_OPS_MAX_MESSAGES=<n> shows more mismatches per range; the totals and
// the largest float errors per op are printed at exit.
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"
#include "op_harness.h"

#include "cubecc/ir/types.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <random>
#include <sstream>

namespace cubecc::test::ops {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

//===--- Types and inputs ------------------------------------------------------------------===//

const Scalar kAllScalars[] = {Scalar::Bool, Scalar::I8,  Scalar::I16, Scalar::I32, Scalar::I64,
                              Scalar::U8,   Scalar::U16, Scalar::U32, Scalar::U64, Scalar::F16,
                              Scalar::BF16, Scalar::F32, Scalar::F64};
/// Memory element types a device may support (no bool, no bf16).
const Scalar kMemoryScalars[] = {Scalar::I8,  Scalar::I16, Scalar::I32, Scalar::I64,
                                 Scalar::U8,  Scalar::U16, Scalar::U32, Scalar::U64,
                                 Scalar::F16, Scalar::F32, Scalar::F64};

std::string name(Scalar s) {
  return std::string(ir::scalar_name(s));
}
/// How values of `s` are held in memory: bool as u8.
Scalar memory_of(Scalar s) {
  return s == Scalar::Bool ? Scalar::U8 : s;
}
unsigned bits(Scalar s) {
  return ir::scalar_bits(s);
}
uint64_t mask(Scalar s) {
  return bits(s) == 64 ? ~uint64_t(0) : (uint64_t(1) << bits(s)) - 1;
}
bool is_int(Scalar s) {
  return ir::is_integer(s);
}

/// Replaces a subnormal by the smallest normal of its sign (lavapipe flushes subnormal inputs).
uint64_t normal_input(Scalar s, uint64_t b) {
  if (!is_subnormal(s, b))
    return b;
  int min_exponent = s == Scalar::F16 ? -14 : s == Scalar::F64 ? -1022 : -126;
  return from_double(s, std::copysign(std::ldexp(1.0, min_exponent), to_double(s, b)));
}

uint64_t fval(Scalar s, double v) {
  return normal_input(s, from_double(s, v));
}

/// Integers: 0, 1, -1, MIN, MAX and neighbours, alternating bits.
std::vector<uint64_t> int_specials(Scalar s) {
  uint64_t m = mask(s), top = uint64_t(1) << (bits(s) - 1);
  std::vector<uint64_t> v = {0, 1, m, 2, m - 1, 7, 0x5555555555555555 & m, 0xaaaaaaaaaaaaaaaa & m};
  if (ir::is_signed(s)) {
    v.push_back(top);     // MIN
    v.push_back(top - 1); // MAX
    v.push_back(top + 1); // MIN + 1
    v.push_back(top - 2); // MAX - 1
  } else {
    v.push_back(top);
    v.push_back(top - 1);
    v.push_back(m - 7);
    v.push_back(100);
  }
  return v;
}

double large_of(Scalar s) {
  switch (s) {
  case Scalar::F16:
    return 30000;
  case Scalar::F32:
  case Scalar::BF16:
    return 1e30;
  default:
    return 1e300;
  }
}
double small_of(Scalar s) { // a small normal
  return std::ldexp(3.0, s == Scalar::F16 ? -14 : s == Scalar::F64 ? -1022 : -126);
}

/// Floats: ±0, ±inf, NaN, ±1, 0.5, ±2.5, a large and a small normal, 3, -0.75.
std::vector<uint64_t> float_specials(Scalar s) {
  std::vector<uint64_t> v;
  for (double d : {0.0, -0.0, kInf, -kInf, kNaN, 1.0, -1.0, 0.5, 2.5, -2.5, large_of(s),
                   small_of(s), 3.0, -0.75})
    v.push_back(fval(s, d));
  return v;
}

uint64_t random_float(Scalar s, std::mt19937_64 &rng) {
  if (rng() % 2)
    return fval(s,
                std::ldexp(static_cast<double>(static_cast<int64_t>(rng() % 20001) - 10000), -6));
  uint64_t b = rng() & mask(s);
  return normal_input(s, b);
}

std::vector<uint64_t> specials(Scalar s) {
  if (s == Scalar::Bool)
    return {0, 1};
  return is_float(s) ? float_specials(s) : int_specials(s);
}
uint64_t random_value(Scalar s, std::mt19937_64 &rng) {
  if (s == Scalar::Bool)
    return rng() % 2;
  return is_float(s) ? random_float(s, rng) : rng() & mask(s);
}

std::string inputs_text(Scalar s, std::initializer_list<std::pair<const char *, uint64_t>> v) {
  std::string out;
  for (const auto &[n, b] : v)
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", n, show(s, b));
  return out;
}

Buffer input(const std::string &n, Scalar s, std::vector<uint64_t> values) {
  return Buffer{n, s, std::move(values), false, {}};
}
Buffer output(const std::string &n, Scalar s, size_t count, uint64_t fill = 0) {
  return Buffer{n, s, std::vector<uint64_t>(count, fill & mask(s)), true, {}};
}

/// Parameter text and args for the case's buffers, in order.
void bind_buffers(OpCase &c, std::string &params) {
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    const Buffer &b = c.buffers[i];
    params += fmt::format("{}%{}: buffer<{}, {}>", params.empty() ? "" : ", ", b.name,
                          name(b.element), b.output ? "readwrite" : "read");
    c.args.push_back(Arg{static_cast<int>(i), {}});
  }
}

/// The first lane of global_id as %i (u32).
std::string global_index(Body &body) {
  std::string g = body.op("global_id", "u32x3");
  return body.op("vec.extract " + g + " {lane = 0}", "u32");
}

std::string load_as(Body &body, const std::string &buffer, const std::string &index, Scalar s) {
  std::string v = body.op(fmt::format("load %{}, {}", buffer, index), name(memory_of(s)));
  return s == Scalar::Bool ? body.op("cast " + v, "bool") : v;
}
void store_as(Body &body, const std::string &buffer, const std::string &index, const std::string &v,
              Scalar s) {
  std::string m = s == Scalar::Bool ? body.op("cast " + v, "u8") : v;
  body.line(fmt::format("store %{}, {}, {}", buffer, index, m));
}
std::string offset_index(Body &body, const std::string &i, size_t offset) {
  if (offset == 0)
    return i;
  return body.op(fmt::format("add {}, {}", i, body.constant(std::to_string(offset), "u32")), "u32");
}

bool both_zero_signs(Scalar s, std::initializer_list<uint64_t> v) {
  bool plus = false, minus = false;
  for (uint64_t b : v)
    if (is_float(s) && to_double(s, b) == 0)
      (std::signbit(to_double(s, b)) ? minus : plus) = true;
  return plus && minus;
}
bool is_zero(Scalar s, uint64_t b) {
  return is_float(s) && to_double(s, b) == 0;
}

/// bf16 runs where the device emulates it (Vulkan: 16-bit storage and shaderInt16), else the
/// kernel must be refused with a message naming bf16.
std::vector<std::string> bf16_refusal(const codegen::TargetFeatures &f) {
  return f.bfloat16 ? std::vector<std::string>{} : std::vector<std::string>{"bf16"};
}

//===--- 1. Arithmetic, logic, comparison, select per scalar type -----------------------------===//

constexpr size_t kArithN = 256;

/// Float division: Vulkan requires 2.5 ULP for |b| in [2^-126, 2^126] (f16: [2^-14, 2^14]); the
/// reference is correctly rounded, so 3 representable steps. Outside that range Vulkan leaves it
/// undefined, but lavapipe divides exactly there, which the test keeps (as exact).
Check division_check(Scalar s, const std::vector<uint64_t> &b) {
  Check c;
  double lo = s == Scalar::F16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126);
  double hi = s == Scalar::F16 ? std::ldexp(1.0, 14) : std::ldexp(1.0, 126);
  c.tolerance = [s, b, lo, hi](size_t i) {
    double y = std::fabs(to_double(s, b[i]));
    return y >= lo && y <= hi ? Tolerance{3, 0} : Tolerance{0, 0};
  };
  c.bound = "Vulkan OpFDiv: 2.5 ULP for |b| in [2^-126, 2^126] (f16: [2^-14, 2^14]) + 0.5 "
            "(reference rounding)";
  return c;
}

OpCase arith_case(Scalar s) {
  OpCase c;
  c.name = "arith_" + name(s);
  std::mt19937_64 rng(0xa51f + static_cast<unsigned>(s));
  std::vector<uint64_t> sp = specials(s), a(kArithN), b(kArithN), t(kArithN), d(kArithN),
                        sh(kArithN), q(kArithN);
  for (size_t i = 0; i < kArithN; ++i) {
    if (i < sp.size() * sp.size()) {
      a[i] = sp[i / sp.size()];
      b[i] = sp[i % sp.size()];
    } else {
      a[i] = random_value(s, rng);
      b[i] = rng() % 4 == 0 ? sp[rng() % sp.size()] : random_value(s, rng);
    }
    t[i] = rng() % 3 == 0 ? sp[rng() % sp.size()] : random_value(s, rng);
    q[i] = std::array<uint64_t, 4>{0, 1, 2, 255}[rng() % 4];
    if (is_int(s)) { // zero and -1 divisors, amounts past the width: pinned by legalization
      d[i] = b[i];
      sh[i] = b[i];
    }
  }
  bool numeric = s != Scalar::Bool, signed_ = ir::is_signed(s) || is_float(s);
  bool logic = is_int(s) || s == Scalar::Bool;
  Scalar m = memory_of(s);
  c.buffers = {input("a", m, a), input("b", m, b), input("c", m, t), input("q", Scalar::U8, q)};
  if (is_int(s)) {
    c.buffers.push_back(input("d", m, d));
    c.buffers.push_back(input("sh", m, sh));
  }
  Body body;
  std::string i = global_index(body);
  std::string va = load_as(body, "a", i, s), vb = load_as(body, "b", i, s),
              vc = load_as(body, "c", i, s);
  std::string vq = body.op("cast " + load_as(body, "q", i, Scalar::U8), "bool");
  std::string vd = is_int(s) ? load_as(body, "d", i, s) : vb;
  std::string vs = is_int(s) ? load_as(body, "sh", i, s) : "";
  const std::vector<uint64_t> &divisor = is_int(s) ? d : b;

  struct Op {
    std::string op;
    std::vector<std::string> operands;
    std::function<std::string(size_t)> inputs;
    Check check;
    std::string label = {}; ///< the range's name, when not "<op> <type>"
  };
  std::string T = name(s);
  auto in2 = [&](const std::vector<uint64_t> &x, const std::vector<uint64_t> &y) {
    return [s, x, y](size_t k) { return inputs_text(s, {{"a", x[k]}, {"b", y[k]}}); };
  };
  auto in3 = [&](const std::vector<uint64_t> &x, const std::vector<uint64_t> &y,
                 const std::vector<uint64_t> &z) {
    return [s, x, y, z](size_t k) {
      return inputs_text(s, {{"a", x[k]}, {"b", y[k]}, {"c", z[k]}});
    };
  };
  // min/max of -0 and +0 may give either zero (docs/ir.md 4.2); so may clamp when its operands
  // hold both zeros.
  Check zero_either;
  zero_either.also_allowed = [s, a, b, t](size_t k, uint64_t got, uint64_t want) {
    return is_zero(s, got) && is_zero(s, want) && both_zero_signs(s, {a[k], b[k], t[k]});
  };
  std::vector<Op> ops;
  if (numeric) {
    ops.push_back({"add", {va, vb}, in2(a, b), {}});
    ops.push_back({"sub", {va, vb}, in2(a, b), {}});
    ops.push_back({"mul", {va, vb}, in2(a, b), {}});
    ops.push_back({"div", {va, vd}, in2(a, divisor), is_float(s) ? division_check(s, b) : Check{}});
    if (is_float(s)) // a constant zero reaches the driver as one (lavapipe folded x / 0.0 and
                     // 0.0 / y to +0)
      for (const char *zero : {"0.0", "-0.0"}) {
        ops.push_back({"div",
                       {va, body.constant(zero, T)},
                       in2(a, b),
                       {},
                       fmt::format("div {} by a constant {}", T, zero)});
        ops.push_back({"div",
                       {body.constant(zero, T), vb},
                       in2(a, b),
                       {},
                       fmt::format("div {}: a constant {} by b", T, zero)});
      }
    ops.push_back({"rem", {va, vd}, in2(a, divisor), {}});
    ops.push_back({"min", {va, vb}, in2(a, b), zero_either});
    ops.push_back({"max", {va, vb}, in2(a, b), zero_either});
    ops.push_back({"clamp", {va, vb, vc}, in3(a, b, t), zero_either});
  }
  if (signed_) {
    ops.push_back({"neg", {va}, in2(a, b), {}});
    ops.push_back({"abs", {va}, in2(a, b), {}});
  }
  if (logic) {
    ops.push_back({"and", {va, vb}, in2(a, b), {}});
    ops.push_back({"or", {va, vb}, in2(a, b), {}});
    ops.push_back({"xor", {va, vb}, in2(a, b), {}});
    ops.push_back({"not", {va}, in2(a, b), {}});
  }
  if (is_int(s)) {
    ops.push_back({"shl", {va, vs}, in2(a, sh), {}});
    ops.push_back({"shr", {va, vs}, in2(a, sh), {}});
    for (const char *op : {"popcount", "clz", "ctz", "ffs", "bitreverse"})
      ops.push_back({op, {va}, in2(a, b), {}});
    for (const char *op : {"mulhi", "add_sat", "sub_sat"})
      ops.push_back({op, {va, vb}, in2(a, b), {}});
  }
  if (is_float(s) && s != Scalar::F64) // f64 fma: math_f64_fma (refused where Fma is not fused)
    ops.push_back({"fma", {va, vb, vc}, in3(a, b, t), {}});
  ops.push_back({"select",
                 {vq, va, vb},
                 [s, a, b, q](size_t k) {
                   return fmt::format("q={}, ", q[k]) + inputs_text(s, {{"a", a[k]}, {"b", b[k]}});
                 },
                 {}});

  Buffer out = output("out", m, ops.size() * kArithN, 0x5a5a5a5a5a5a5a5a);
  for (size_t k = 0; k < ops.size(); ++k) {
    std::string operands;
    for (const std::string &o : ops[k].operands)
      operands += (operands.empty() ? " " : ", ") + o;
    std::string r = body.op(ops[k].op + operands, T);
    store_as(body, "out", offset_index(body, i, k * kArithN), r, s);
    out.ranges.push_back(Range{ops[k].label.empty() ? ops[k].op + " " + T : ops[k].label,
                               k * kArithN, kArithN, ops[k].check, ops[k].inputs});
  }
  std::vector<std::string> compares = {"eq", "ne"};
  if (numeric)
    compares.insert(compares.end(), {"lt", "le", "gt", "ge"});
  if (is_float(s)) // the classifications (one operand) over the same special values
    compares.insert(compares.end(), {"is_nan", "is_inf"});
  Buffer cmp = output("cmp", Scalar::U8, compares.size() * kArithN, 0x77);
  Buffer cmpw = output("cmpw", Scalar::U32, compares.size() * kArithN, 0x77777777);
  for (size_t k = 0; k < compares.size(); ++k) {
    bool classify = compares[k].rfind("is_", 0) == 0;
    std::string r = body.op(classify ? fmt::format("{} {}", compares[k], va)
                                     : fmt::format("{} {}, {}", compares[k], va, vb),
                            "bool");
    std::string idx = offset_index(body, i, k * kArithN);
    body.line(fmt::format("store %cmp, {}, {}", idx, body.op("cast " + r, "u8")));
    body.line(fmt::format("store %cmpw, {}, {}", idx, body.op("cast " + r, "u32")));
    for (Buffer *buf : {&cmp, &cmpw})
      buf->ranges.push_back(Range{compares[k] + " " + T + " as " + name(buf->element),
                                  k * kArithN,
                                  kArithN,
                                  {},
                                  in2(a, b)});
  }
  c.buffers.push_back(std::move(out));
  c.buffers.push_back(std::move(cmp));
  c.buffers.push_back(std::move(cmpw));
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {64, 1, 1});
  c.grid = {kArithN / 64, 1, 1};
  if (s == Scalar::BF16)
    c.refusal_for = bf16_refusal;
  return c;
}

//===--- 2. Math -----------------------------------------------------------------------------===//

constexpr size_t kMathN = 128;

struct MathOp {
  std::string op;
  unsigned arity;
  /// Inputs (x, y, z) for element k.
  std::function<std::array<double, 3>(size_t k, std::mt19937_64 &)> input;
  /// The bound for element k, given the inputs and the expected value.
  std::function<Tolerance(std::array<double, 3> in, double expected)> tolerance;
  std::string bound;
};

double uniform(std::mt19937_64 &rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
double log_uniform(std::mt19937_64 &rng, double lo, double hi) { // positive lo < hi
  return std::exp(uniform(rng, std::log(lo), std::log(hi)));
}

std::vector<MathOp> math_ops(Scalar s) {
  bool h = s == Scalar::F16;
  double max = h ? 65504 : s == Scalar::F64 ? 1e300 : 3e38;
  double min_normal = h                  ? std::ldexp(1.0, -14)
                      : s == Scalar::F64 ? std::ldexp(1.0, -1022)
                                         : std::ldexp(1.0, -126);
  // Special inputs first, then random ones in the range where the bound applies.
  auto with = [](std::vector<double> special, std::function<double(std::mt19937_64 &)> random) {
    return [special, random](size_t k, std::mt19937_64 &rng) -> std::array<double, 3> {
      return {k < special.size() ? special[k] : random(rng), 0, 0};
    };
  };
  Tolerance exact{0, 0};
  auto ulps = [](double u) {
    return [u](std::array<double, 3>, double) { return Tolerance{u, 0}; };
  };
  double reference = 1; // the reference is itself within 1 ULP (glibc, correctly rounded to type)
  std::vector<MathOp> ops;
  ops.push_back({"sqrt", 1,
                 with({0.0, -0.0, kInf, -1.0, kNaN, 1, 4, 2, 0.25, min_normal, max},
                      [=](std::mt19937_64 &r) { return log_uniform(r, min_normal, max); }),
                 [exact](auto, double) { return exact; },
                 "exact (correctly rounded): lavapipe's sqrt is IEEE sqrt; Vulkan only promises "
                 "1/inversesqrt"});
  ops.push_back({"rsqrt", 1,
                 with({0.0, kInf, -1.0, kNaN, 1, 4, 0.25, 2},
                      [=](std::mt19937_64 &r) { return log_uniform(r, min_normal, max); }),
                 ulps(2 + reference), "Vulkan inversesqrt: 2 ULP, +1 for the reference"});
  double exp_hi = h ? 10.5 : 80, exp2_hi = h ? 15 : 126;
  double exp_ulps = h ? 1 : 3; // Vulkan: (3 + 2|x|) ULP; 16-bit table: (1 + 2|x|) ULP
  ops.push_back({"exp", 1,
                 with({0.0, -0.0, 1, -1, kNaN, kInf, -kInf},
                      [=](std::mt19937_64 &r) { return uniform(r, -(h ? 9.5 : 80), exp_hi); }),
                 [=](std::array<double, 3> in, double) {
                   return Tolerance{exp_ulps + 2 * std::fabs(in[0]) + reference, 0};
                 },
                 h ? "Vulkan 16-bit exp: (1 + 2|x|) ULP, +1 for the reference"
                   : "Vulkan exp: (3 + 2|x|) ULP, +1 for the reference"});
  ops.push_back({"exp2", 1,
                 with({0.0, -0.0, 1, -1, 10, kNaN, kInf, -kInf},
                      [=](std::mt19937_64 &r) { return uniform(r, -(h ? 14 : 125), exp2_hi); }),
                 [=](std::array<double, 3> in, double) {
                   return Tolerance{exp_ulps + 2 * std::fabs(in[0]) + reference, 0};
                 },
                 h ? "Vulkan 16-bit exp2: (1 + 2|x|) ULP, +1 for the reference"
                   : "Vulkan exp2: (3 + 2|x|) ULP, +1 for the reference"});
  // log, log2: 3 ULP outside [0.5, 2]; inside, absolute error 2^-21 (16-bit: 2^-7).
  double log_abs = h ? std::ldexp(1.0, -7) : std::ldexp(1.0, -21);
  auto log_tolerance = [=](std::array<double, 3> in, double) {
    return in[0] >= 0.5 && in[0] <= 2 ? Tolerance{0, log_abs} : Tolerance{3 + reference, 0};
  };
  for (const char *op : {"log", "log2"})
    ops.push_back({op, 1,
                   with({1, 0.0, -0.0, -1, kInf, kNaN, 0.5, 2, 0.75, 1.5, max, min_normal},
                        [=](std::mt19937_64 &r) {
                          return r() % 2 ? uniform(r, 0.5, 2) : log_uniform(r, min_normal, max);
                        }),
                   log_tolerance,
                   h ? "Vulkan 16-bit log: 3 ULP (+1 reference) outside [0.5, 2], absolute 2^-7 "
                       "inside"
                     : "Vulkan log: 3 ULP (+1 reference) outside [0.5, 2], absolute 2^-21 inside"});
  // sin, cos: absolute error 2^-11 in [-pi, pi] (16-bit: 2^-7).
  double trig_abs = h ? std::ldexp(1.0, -7) : std::ldexp(1.0, -11);
  for (const char *op : {"sin", "cos"})
    ops.push_back(
        {op, 1,
         with({0.0, -0.0, kNaN, 1, -1, std::numbers::pi / 2, -std::numbers::pi / 2, 3.14, -3.14},
              [](std::mt19937_64 &r) { return uniform(r, -std::numbers::pi, std::numbers::pi); }),
         [=](std::array<double, 3>, double) {
           return Tolerance{0, trig_abs};
         },
         h ? "Vulkan 16-bit sin/cos: absolute 2^-7 in [-pi, pi]"
           : "Vulkan sin/cos: absolute 2^-11 in [-pi, pi]"});
  // tanh and erf are the backend's own (Cephes tanhf, fdlibm erff) over Vulkan's exp: held to
  // the bounds measured on lavapipe with margin (see the report in the file header).
  ops.push_back({"tanh", 1,
                 with({0.0, -0.0, kNaN, kInf, -kInf, 0.625, -0.625, 0.6251, 1, -1, 20},
                      [](std::mt19937_64 &r) { return uniform(r, -10, 10); }),
                 ulps(4),
                 "4 ULP: Cephes tanh over Vulkan exp (1 ULP measured on lavapipe, f16 and f32)"});
  ops.push_back({"erf", 1,
                 with({0.0, -0.0, kNaN, kInf, -kInf, 0.84375, 1.25, -1.25, 6, -6, 1 / 0.35},
                      [](std::mt19937_64 &r) { return uniform(r, -5, 5); }),
                 ulps(4), "4 ULP: fdlibm erf over Vulkan exp (1 ULP measured on lavapipe, f32)"});
  for (const char *op : {"floor", "ceil", "round"})
    ops.push_back({op, 1,
                   with({0.0, -0.0, kNaN, kInf, -kInf, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -0.3,
                         0.49999997, 1e7 + 0.5, -1e7 - 0.5, 3e9, h ? 1000.5 : 8388609},
                        [](std::mt19937_64 &r) {
                          return r() % 2 ? std::ldexp(double(int(r() % 4001) - 2000), -1)
                                         : uniform(r, -1000, 1000);
                        }),
                   [exact](auto, double) { return exact; }, "exact"});
  // pow: inherited from exp2(y * log2(x)).
  ops.push_back(
      {"pow", 2,
       [=](size_t k, std::mt19937_64 &r) -> std::array<double, 3> {
         static const std::array<double, 3> special[] = {
             {0, 2, 0},   {-0.0, 3, 0}, {0, -1, 0},   {-0.0, -1, 0}, {-2, 3, 0},
             {-2, 2, 0},  {-2, 0.5, 0}, {1, kNaN, 0}, {kNaN, 0, 0},  {-1, kInf, 0},
             {2, 0.5, 0}, {4, -0.5, 0}, {10, 3, 0},   {kInf, 2, 0},  {-kInf, 3, 0},
             {2, -3, 0},  {0.5, 10, 0}, {kNaN, 1, 0}, {3, 0, 0},     {-3, -2, 0}};
         if (k < std::size(special))
           return special[k];
         double x = h ? log_uniform(r, 0.05, 20) : log_uniform(r, 1e-3, 1e3);
         double y = h ? uniform(r, -3, 3) : uniform(r, -10, 10);
         if (r() % 4 == 0) { // negative base, integral exponent
           x = -x;
           y = std::round(y);
         }
         return {x, y, 0};
       },
       [=](std::array<double, 3> in, double expected) {
         // t = y * log2|x| with log2's error (abs 2^-21 in [0.5, 2], else 3 ULP; 16-bit: 2^-7)
         // and the multiply's rounding; exp2(t) then adds (3 + 2|t|) ULP (16-bit: 1 + 2|t|),
         // and the error in t scales the result by 2^dt: relative ln2 * dt.
         double ax = std::fabs(in[0]), y = std::fabs(in[1]);
         double l = std::log2(ax);
         double unit = ulp_of(s, 1.0); // 2^-mantissa
         double log_err = ax >= 0.5 && ax <= 2 ? (h ? std::ldexp(1.0, -7) : std::ldexp(1.0, -21))
                                               : 3 * ulp_of(s, l);
         double t = y * std::fabs(l);
         double dt = y * log_err + ulp_of(s, t);
         double relative = std::log(2.0) * dt + (exp_ulps + 2 * t) * unit;
         double e = std::fabs(expected);
         return Tolerance{relative * e / ulp_of(s, e) + reference, 0};
       },
       "inherited from exp2(y * log2(x)): log2 error (2^-21 absolute in [0.5, 2] else 3 ULP), "
       "times |y|, plus exp2's (3 + 2|t|) ULP, +1 for the reference"});
  // The trigonometric, hyperbolic and C99 functions. Vulkan bounds them only by inheritance
  // from formulas (atan and atan2: 4096 ULP), and lavapipe's asin, acos and atan are off by 10^-4
  // and its sinh cancels near 0: on Vulkan all but tan are the legalize pass's expansions
  // (docs/passes.md, Cephes' f32 algorithms over exp, log, sqrt and division). Their error is
  // then inherited from Vulkan's exp ((3 + 2|x|) ULP, grown at most 3 times by the formula) or
  // log (2^-21 absolute near 1: 32 ULP); f16 and bf16 compute in f32 and round once. CUDA, HIP
  // and the CPU call their libraries (a few ULP).
  auto bounded = [&](const char *op, std::vector<double> special, double lo, double hi,
                     std::function<Tolerance(std::array<double, 3>, double)> tolerance,
                     std::string bound) {
    ops.push_back({op, 1, with(special, [=](std::mt19937_64 &r) { return uniform(r, lo, hi); }),
                   tolerance, bound});
  };
  double f16_ulps = 2; // an f32 result (a few f32 ULP) rounded to f16, +1 for the reference
  auto exp_based = [=](std::array<double, 3> in, double) {
    return Tolerance{h ? f16_ulps : 3 * (exp_ulps + 2 * std::fabs(in[0])) + reference, 0};
  };
  std::string exp_bound = h ? "2 ULP: computed in f32, rounded once (+1 for the reference)"
                            : "3 (3 + 2|x|) ULP: Vulkan's exp through the expansion, +1 for "
                              "the reference";
  std::string log_bound = h ? "2 ULP: computed in f32, rounded once (+1 for the reference)"
                            : "32 ULP: Vulkan's log (2^-21 absolute near 1) through the "
                              "expansion";
  std::string div_bound = h ? "2 ULP: computed in f32, rounded once (+1 for the reference)"
                            : "6 ULP: the expansion's 4 (division and sqrt are exact on "
                              "lavapipe), +1 for the reference, +1 margin";
  bounded("tan", {0.0, -0.0, kNaN, 1, -1, 0.785, -1.5}, -1.5, 1.5, ulps(h ? 4 : 8),
          h ? "4 ULP: the device's tan (Vulkan: inherited from sin / cos)"
            : "8 ULP: the device's tan (Vulkan: inherited from sin / cos)");
  bounded("asin", {0.0, -0.0, kNaN, 1, -1, 0.5, -0.5, 1.5}, -1, 1, ulps(h ? f16_ulps : 6),
          div_bound);
  bounded("acos", {0.0, -0.0, kNaN, 1, -1, 0.5, -0.5, 1.5}, -1, 1, ulps(h ? f16_ulps : 6),
          div_bound);
  bounded("atan", {0.0, -0.0, kNaN, kInf, -kInf, 1, -1, 1e4}, -100, 100, ulps(h ? f16_ulps : 6),
          div_bound);
  bounded("sinh", {0.0, -0.0, kNaN, kInf, -kInf, 1, -1, 0.01}, -10, 10, exp_based, exp_bound);
  bounded("cosh", {0.0, -0.0, kNaN, kInf, -kInf, 1, -1, 0.01}, -10, 10, exp_based, exp_bound);
  bounded("expm1", {0.0, -0.0, kNaN, kInf, -kInf, 1e-3, -1e-3, 0.5, -0.5}, -10, 10, exp_based,
          exp_bound);
  bounded("asinh", {0.0, -0.0, kNaN, kInf, -kInf, 1, -1, 0.01}, -100, 100, ulps(h ? f16_ulps : 32),
          log_bound);
  bounded("acosh", {1, kNaN, kInf, 0.5, 2, 1.5, 10}, 1, 100, ulps(h ? f16_ulps : 32), log_bound);
  bounded("atanh", {0.0, -0.0, kNaN, 1, -1, 0.5, -0.5, 0.01}, -0.99, 0.99, ulps(h ? f16_ulps : 32),
          log_bound);
  bounded("log1p", {0.0, -0.0, kNaN, kInf, -1, 1e-3, -1e-3, 0.5, -0.3, -2}, -0.9, 100,
          ulps(h ? f16_ulps : 32), log_bound);
  auto pairs = [=](std::vector<std::array<double, 3>> special, double lo, double hi) {
    return [=](size_t k, std::mt19937_64 &r) -> std::array<double, 3> {
      if (k < special.size())
        return special[k];
      return {uniform(r, lo, hi), uniform(r, lo, hi), 0};
    };
  };
  ops.push_back({"atan2", 2,
                 pairs({{0, 1, 0},
                        {-0.0, 1, 0},
                        {0, -1, 0},
                        {1, 0, 0},
                        {-1, -0.0, 0},
                        {kInf, kInf, 0},
                        {kNaN, 1, 0},
                        {1, -kInf, 0}},
                       -100, 100),
                 ulps(h ? f16_ulps : 6), div_bound});
  ops.push_back(
      {"hypot", 2,
       pairs({{3, 4, 0},
              {0, 0, 0},
              {-0.0, 0, 0},
              {kInf, kNaN, 0},
              {kNaN, -kInf, 0},
              {kNaN, 1, 0},
              {max, max, 0},
              {1e-3, 1e3, 0}},
             -1000, 1000),
       ulps(h ? 3 : 4),
       fmt::format("{} ULP: C's hypot, or max * sqrt(1 + (min / max)^2) (legalized)", h ? 3 : 4)});
  ops.push_back({"fma", 3,
                 [=](size_t k, std::mt19937_64 &r) -> std::array<double, 3> {
                   // Then sums within 2^-70 of a halfway point of f32 or f16, where rounding
                   // twice (to f64 or f32 first, then to the type) ties the wrong way. f32:
                   // (1 + 2^-23)(1 - 2^-24) + 2^-47 + 2^-70 is 1 + 2^-24 + 2^-70, so 1 + 2^-23;
                   // (1 + 2^-22)(1 - 2^-24) + 2^-46 - 2^-70 is 1 + 3 * 2^-24 - 2^-70, so
                   // 1 + 2^-23. f16: (32 + 2^-5)(32 - 2^-6) + 9 * 2^-14 is 2^10 (1 + 2^-11 +
                   // 2^-24), so 1025 (operands normal: the cases replace subnormal inputs). bf16:
                   // 1.578125 * 2^99 * 2.5 is halfway between two bf16 values and 122.5 tips it
                   // up, but not through f32 or f64. Exact in their own type; other types round
                   // them harmlessly (or overflow).
                   static const double p = std::ldexp(1.0, -70);
                   static const std::array<double, 3> special[] = {
                       {1, 1, -1},
                       {kInf, 0, 1},
                       {kNaN, 1, 1},
                       {-0.0, 1, 0},
                       {2, 3, 4},
                       {1e-3, 1e-3, -1e-6},
                       {1 + 0x1p-23, 1 - 0x1p-24, 0x1p-47 + p},
                       {-1 - 0x1p-23, 1 - 0x1p-24, -0x1p-47 - p},
                       {1 + 0x1p-22, 1 - 0x1p-24, 0x1p-46 - p},
                       {32 + 0x1p-5, 32 - 0x1p-6, 9 * 0x1p-14},
                       {-32 - 0x1p-5, 32 - 0x1p-6, -9 * 0x1p-14},
                       {0x1.94p99, 2.5, 122.5}};
                   if (k < std::size(special))
                     return special[k];
                   return {uniform(r, -100, 100), uniform(r, -100, 100), uniform(r, -1e4, 1e4)};
                 },
                 [exact](auto, double) { return exact; }, "exact (single rounding)"});
  return ops;
}

/// Ops that GLSL.std.450 lacks on f64; Vulkan refuses them with a message naming each.
const char *const kNoF64[] = {"exp",  "exp2", "log",   "log2",  "sin",   "cos",   "tanh",
                              "erf",  "pow",  "tan",   "asin",  "acos",  "atan",  "atan2",
                              "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "log1p"};

/// Which f64 math ops a case holds: those every Vulkan device runs, those GLSL.std.450 lacks
/// (always refused), or fma (refused where the device does not fuse Fma: a single rounding
/// cannot be had from a * b + c).
enum class F64Part { Supported, Transcendental, Fma };

OpCase math_case(Scalar s, F64Part part = F64Part::Supported) {
  OpCase c;
  c.name = s != Scalar::F64                  ? "math_" + name(s)
           : part == F64Part::Transcendental ? "math_f64_transcendental"
           : part == F64Part::Fma            ? "math_f64_fma"
                                             : "math_f64";
  bool refused_f64_ops = s == Scalar::F64 && part == F64Part::Transcendental;
  std::mt19937_64 rng(0x3a7 + static_cast<unsigned>(s));
  std::vector<MathOp> ops;
  for (MathOp &op : math_ops(s)) {
    bool transcendental =
        std::find(std::begin(kNoF64), std::end(kNoF64), op.op) != std::end(kNoF64);
    F64Part of = transcendental                     ? F64Part::Transcendental
                 : op.op == std::string_view("fma") ? F64Part::Fma
                                                    : F64Part::Supported;
    if (s != Scalar::F64 || of == part)
      ops.push_back(std::move(op));
  }
  size_t total = ops.size() * kMathN;
  std::vector<uint64_t> x(total), y(total), z(total);
  std::vector<std::array<double, 3>> values(total);
  for (size_t k = 0; k < ops.size(); ++k)
    for (size_t i = 0; i < kMathN; ++i) {
      auto in = ops[k].input(i, rng);
      size_t e = k * kMathN + i;
      x[e] = fval(s, in[0]);
      y[e] = fval(s, in[1]);
      z[e] = fval(s, in[2]);
      values[e] = {to_double(s, x[e]), to_double(s, y[e]), to_double(s, z[e])};
    }
  c.buffers = {input("x", s, x), input("y", s, y), input("z", s, z)};
  Buffer out = output("out", s, total, 0x5a5a5a5a5a5a5a5a);
  Body body;
  std::string i = global_index(body);
  std::string T = name(s);
  for (size_t k = 0; k < ops.size(); ++k) {
    std::string idx = offset_index(body, i, k * kMathN);
    std::string operands = " " + body.op("load %x, " + idx, T);
    if (ops[k].arity > 1)
      operands += ", " + body.op("load %y, " + idx, T);
    if (ops[k].arity > 2)
      operands += ", " + body.op("load %z, " + idx, T);
    body.line(fmt::format("store %out, {}, {}", idx, body.op(ops[k].op + operands, T)));
    // The expected value is the reference's result, known only after the run: the tolerance
    // function receives the inputs and computes the expected value's scale from the host math.
    Check check;
    auto tolerance = ops[k].tolerance;
    std::string op = ops[k].op;
    size_t base = k * kMathN;
    check.tolerance = [=](size_t e) {
      const auto &in = values[base + e];
      double expected = op == "pow" ? std::pow(in[0], in[1]) : 0;
      return tolerance(in, expected);
    };
    check.bound = ops[k].bound;
    unsigned arity = ops[k].arity;
    out.ranges.push_back(Range{op + " " + T, base, kMathN, check, [=](size_t e) {
                                 std::string text = "x=" + show(s, x[base + e]);
                                 if (arity > 1)
                                   text += ", y=" + show(s, y[base + e]);
                                 if (arity > 2)
                                   text += ", z=" + show(s, z[base + e]);
                                 return text;
                               }});
  }
  c.buffers.push_back(std::move(out));
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {64, 1, 1});
  c.grid = {static_cast<uint32_t>(kMathN / 64), 1, 1};
  if (s == Scalar::BF16)
    c.refusal_for = bf16_refusal;
  if (refused_f64_ops)
    for (const char *op : kNoF64)
      c.vulkan_refusal.push_back(fmt::format("'{}' on f64", op));
  if (s == Scalar::F64 && part == F64Part::Fma)
    c.refusal_for = [](const codegen::TargetFeatures &f) {
      return f.fused_fma ? std::vector<std::string>{}
                         : std::vector<std::string>{"single-rounding f64 fma"};
    };
  return c;
}

//===--- 3. Casts and bitcasts ---------------------------------------------------------------===//

constexpr size_t kCastN = 64;

std::vector<uint64_t> cast_inputs(Scalar s) {
  std::mt19937_64 rng(0xca57 + static_cast<unsigned>(s));
  std::vector<uint64_t> v;
  if (s == Scalar::Bool) {
    for (size_t i = 0; i < kCastN; ++i)
      v.push_back(i % 2);
    return v;
  }
  if (is_int(s)) {
    v = int_specials(s);
    for (uint64_t x : {127ull, 128ull, 255ull, 256ull, 32767ull, 32768ull, 65535ull, 65536ull,
                       (1ull << 24) + 1, (1ull << 31) - 1, (1ull << 53) + 1, 0xfffffff0ull,
                       ~0ull - 1000, ~0ull << 40, 65504ull, 65520ull,
                       // 1 above a bf16 halfway point, past f64's 53 bits: rounding to f64
                       // first lands on the halfway point and ties down (2^60, not 2^60 + 2^53)
                       (1ull << 60) + (1ull << 52) + 1})
      v.push_back(x & mask(s));
  } else {
    for (double d : {0.0,          -0.0,          kInf,         -kInf,
                     kNaN,         1.0,           -1.0,         0.5,
                     -0.5,         2.5,           -2.5,         0.49999997,
                     1.5,          127.5,         128.0,        -128.5,
                     -129.0,       255.5,         256.0,        32767.5,
                     -32769.0,     65504.0,       65520.0,      70000.0,
                     2147483648.0, -2147483904.0, 4294967296.0, 9.2233720368547758e18,
                     -9.3e18,      1.9e19,        1e20,         -1e20,
                     3e38,         1e-30,         1e-6,         16777217.0,
                     -7.75})
      v.push_back(fval(s, d));
  }
  while (v.size() < kCastN)
    v.push_back(rng() % 2 ? random_value(s, rng)
                          : (is_float(s) ? fval(s, uniform(rng, -300, 300)) : rng() % 300));
  v.resize(kCastN);
  return v;
}

/// Casts from each source in `from` to each destination in `to`; one output buffer per
/// destination type, one range per source.
OpCase cast_case(const std::string &case_name, std::vector<Scalar> from, std::vector<Scalar> to) {
  OpCase c;
  c.name = case_name;
  Body body;
  std::string i = global_index(body);
  std::vector<std::vector<uint64_t>> in;
  std::vector<std::string> loaded;
  for (Scalar s : from) {
    in.push_back(cast_inputs(s));
    c.buffers.push_back(input("in_" + name(s), memory_of(s), in.back()));
    loaded.push_back(load_as(body, "in_" + name(s), i, s));
  }
  for (Scalar d : to) {
    Buffer out = output("to_" + name(d), memory_of(d), from.size() * kCastN, 0x5a5a5a5a5a5a5a5a);
    for (size_t f = 0; f < from.size(); ++f) {
      Scalar s = from[f];
      std::string r = body.op("cast " + loaded[f], name(d));
      store_as(body, out.name, offset_index(body, i, f * kCastN), r, d);
      auto values = in[f];
      out.ranges.push_back(
          Range{fmt::format("cast {} -> {}", name(s), name(d)),
                f * kCastN,
                kCastN,
                {},
                [s, values](size_t k) { return "x=" + show(memory_of(s), values[k]); }});
    }
    c.buffers.push_back(std::move(out));
  }
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {kCastN, 1, 1});
  return c;
}

std::vector<Scalar> without_bf16() {
  std::vector<Scalar> v;
  for (Scalar s : kAllScalars)
    if (s != Scalar::BF16)
      v.push_back(s);
  return v;
}

struct VType {
  Scalar s;
  unsigned lanes;
  std::string str() const { return lanes == 1 ? name(s) : fmt::format("{}x{}", name(s), lanes); }
};

/// Bitcasts from `types[from]` to every other of `types`, value types of one total width (or one
/// x3 family). One kernel per source type: lavapipe's compile time grows faster than a kernel's
/// length (one kernel of every pair took it 10 s a width).
OpCase bitcast_case(const std::string &case_name, std::vector<VType> types, size_t from) {
  constexpr size_t G = 8; // invocations
  OpCase c;
  c.name = case_name;
  std::mt19937_64 rng(std::hash<std::string>{}(case_name));
  const VType &first = types[0];
  std::vector<uint64_t> raw(G * first.lanes);
  for (size_t k = 0; k < raw.size(); ++k) {
    raw[k] = rng() & mask(first.s);
    if (k % 5 == 0 && is_float(first.s)) // NaN payloads and subnormals must survive a bitcast
      raw[k] = k % 2 ? (mask(first.s) & ~uint64_t(0)) >> 1 : 1;
  }
  c.buffers.push_back(input("in", first.s, raw));
  Body body;
  std::string i = global_index(body);
  auto scaled = [&](unsigned lanes) {
    return lanes == 1
               ? i
               : body.op(fmt::format("mul {}, {}", i, body.constant(std::to_string(lanes), "u32")),
                         "u32");
  };
  std::string x0 = body.op("load %in, " + scaled(first.lanes), first.str());
  std::vector<std::string> as(types.size()); // the source, from the input's bits
  as[from] = from == 0 ? x0 : body.op("bitcast " + x0, types[from].str());
  // One output buffer per element type, one range per (source, destination) pair.
  std::map<Scalar, Buffer> outs;
  std::map<Scalar, size_t> used;
  for (size_t a = from; a == from; ++a)
    for (size_t b = 0; b < types.size(); ++b) {
      if (a == b)
        continue;
      const VType &d = types[b];
      size_t n = G * d.lanes, offset = used[d.s];
      used[d.s] += n;
      std::string r = body.op("bitcast " + as[a], d.str());
      std::string idx = offset_index(body, scaled(d.lanes), offset);
      body.line(fmt::format("store %out_{}, {}, {}", name(d.s), idx, r));
      Check bits_check;
      bits_check.kind = Check::Kind::Bits;
      auto &buf = outs[d.s];
      buf.ranges.push_back(Range{fmt::format("bitcast {} -> {}", types[a].str(), d.str()), offset,
                                 n, bits_check, [first, raw, d](size_t k) {
                                   size_t inv = k / d.lanes;
                                   std::string t;
                                   for (unsigned l = 0; l < first.lanes; ++l)
                                     t += fmt::format("{}{:#x}", l ? "," : "",
                                                      raw[inv * first.lanes + l]);
                                   return "invocation's input lanes " + t;
                                 }});
    }
  for (auto &[s, buf] : outs) {
    Buffer b = output("out_" + name(s), s, used[s], 0x5a5a5a5a5a5a5a5a);
    b.ranges = std::move(buf.ranges);
    c.buffers.push_back(std::move(b));
  }
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {G, 1, 1});
  return c;
}

std::vector<OpCase> bitcast_cases() {
  std::vector<OpCase> cases;
  auto add = [&cases](const std::string &family, const std::vector<VType> &types) {
    for (size_t from = 0; from < types.size(); ++from)
      cases.push_back(
          bitcast_case(fmt::format("bitcast_{}_from_{}", family, types[from].str()), types, from));
  };
  const Scalar elems[] = {Scalar::I8,  Scalar::U8,  Scalar::I16, Scalar::U16,
                          Scalar::F16, Scalar::I32, Scalar::U32, Scalar::F32,
                          Scalar::I64, Scalar::U64, Scalar::F64};
  for (unsigned width : {16u, 32u, 64u, 128u, 256u, 512u, 1024u}) {
    std::vector<VType> types;
    for (auto it = std::rbegin(elems); it != std::rend(elems); ++it) {
      unsigned lanes = width / bits(*it);
      if (lanes == 1 || lanes == 2 || lanes == 4 || lanes == 8 || lanes == 16)
        types.push_back({*it, lanes});
    }
    add(fmt::format("{}bit", width), types);
  }
  // Three lanes: only to the same lane count.
  add("x3_32", {{Scalar::F32, 3}, {Scalar::I32, 3}, {Scalar::U32, 3}});
  add("x3_16", {{Scalar::U16, 3}, {Scalar::F16, 3}, {Scalar::I16, 3}});
  add("x3_8", {{Scalar::U8, 3}, {Scalar::I8, 3}});
  add("x3_64", {{Scalar::F64, 3}, {Scalar::U64, 3}, {Scalar::I64, 3}});
  size_t first_bf16 = cases.size();
  add("bf16", {{Scalar::U32, 1}, {Scalar::BF16, 2}, {Scalar::F16, 2}});
  for (size_t k = first_bf16; k < cases.size(); ++k)
    cases[k].refusal_for = bf16_refusal;
  return cases;
}

//===--- 4. Vectors
//----------------------------------------------------------------------------===//

/// The vector ops on `n` lanes of `s`: one kernel per lane count, as lavapipe's compile time
/// grows faster than a kernel's length (one kernel of every lane count took it 15 s a type).
OpCase vector_case(Scalar s, unsigned n) {
  constexpr size_t G = 8;
  OpCase c;
  c.name = fmt::format("vector_{}x{}", name(s), n);
  std::mt19937_64 rng(0x7ec + static_cast<unsigned>(s) * 17 + n);
  const size_t size = G * n;
  std::vector<uint64_t> a(size), b(size);
  for (size_t k = 0; k < size; ++k) {
    a[k] = random_value(s, rng);
    b[k] = random_value(s, rng);
    if (is_float(s) && k % 7 == 3)
      a[k] = fval(s, kNaN);
    if (is_float(s) && is_zero(s, a[k]))
      a[k] = fval(s, 1.0);
    if (is_float(s) && is_zero(s, b[k]))
      b[k] = fval(s, 2.0);
  }
  c.buffers = {input("a", s, a), input("b", s, b)};
  Body body;
  std::string i = global_index(body);
  std::string T = name(s);
  std::string odd =
      body.op(fmt::format("eq {}, {}",
                          body.op(fmt::format("and {}, {}", i, body.constant("1", "u32")), "u32"),
                          body.constant("1", "u32")),
              "bool");
  // Each result vector goes to its slot of out (element type) or out8 (u8 lanes).
  std::vector<std::string> ops = {"add",          "sub",   "mul",
                                  "min",          "max",   "select_lanes",
                                  "select_whole", "splat", "build_reversed",
                                  "insert"};
  if (is_int(s))
    ops.insert(ops.end(), {"xor", "shl"});
  else if (s != Scalar::F64) // f64 fma: math_f64_fma
    ops.push_back("fma");
  std::vector<std::string> ops8 = {"lt", "not_ge", "and_bool"};
  size_t slots = ops.size(), slots8 = ops8.size();
  Buffer out = output("out", s, slots * size, 0x5a5a5a5a5a5a5a5a);
  Buffer out8 = output("out8", Scalar::U8, slots8 * size, 0x5a);
  std::string V = fmt::format("{}x{}", T, n), B = fmt::format("boolx{}", n);
  std::string idx =
      body.op(fmt::format("mul {}, {}", i, body.constant(std::to_string(n), "u32")), "u32");
  std::string va = body.op("load %a, " + idx, V), vb = body.op("load %b, " + idx, V);
  std::string lt = body.op(fmt::format("lt {}, {}", va, vb), B);
  auto result = [&](const std::string &op) -> std::string {
    if (op == "select_lanes")
      return body.op(fmt::format("select {}, {}, {}", lt, va, vb), V);
    if (op == "select_whole")
      return body.op(fmt::format("select {}, {}, {}", odd, va, vb), V);
    if (op == "splat") {
      std::string last = body.op(fmt::format("vec.extract {} {{lane = {}}}", vb, n - 1), T);
      return body.op("splat " + last, V);
    }
    if (op == "build_reversed") {
      std::string lanes;
      for (unsigned l = n; l-- > 0;)
        lanes += (lanes.empty() ? " " : ", ") +
                 body.op(fmt::format("vec.extract {} {{lane = {}}}", va, l), T);
      return body.op("vec.build" + lanes, V);
    }
    if (op == "insert") {
      std::string x = body.op(fmt::format("vec.extract {} {{lane = 0}}", vb), T);
      return body.op(fmt::format("vec.insert {}, {} {{lane = {}}}", va, x, n / 2), V);
    }
    if (op == "shl") {
      std::string amount = body.op("splat " + body.constant(std::to_string(bits(s) - 1), T), V);
      return body.op(
          fmt::format("shl {}, {}", va, body.op(fmt::format("and {}, {}", vb, amount), V)), V);
    }
    if (op == "fma")
      return body.op(fmt::format("fma {}, {}, {}", va, vb, va), V);
    return body.op(fmt::format("{} {}, {}", op, va, vb), V);
  };
  for (size_t k = 0; k < slots; ++k) {
    size_t offset = k * size;
    body.line(fmt::format("store %out, {}, {}", offset_index(body, idx, offset), result(ops[k])));
    out.ranges.push_back(
        Range{fmt::format("{} {}", ops[k], V), offset, size, {}, [s, a, b](size_t e) {
                return inputs_text(s, {{"a", a[e]}, {"b", b[e]}});
              }});
  }
  for (size_t k = 0; k < slots8; ++k) {
    std::string m = lt;
    if (ops8[k] == "not_ge")
      m = body.op("not " + body.op(fmt::format("ge {}, {}", va, vb), B), B);
    else if (ops8[k] == "and_bool")
      m = body.op(fmt::format("and {}, {}", lt, body.op(fmt::format("ne {}, {}", va, vb), B)), B);
    std::string bytes = body.op("cast " + m, fmt::format("u8x{}", n));
    size_t offset = k * size;
    body.line(fmt::format("store %out8, {}, {}", offset_index(body, idx, offset), bytes));
    out8.ranges.push_back(
        Range{fmt::format("{} {} as u8x{}", ops8[k], V, n), offset, size, {}, {}});
  }
  c.buffers.push_back(std::move(out));
  c.buffers.push_back(std::move(out8));
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {G, 1, 1});
  return c;
}

//===--- 5. Memory
//-----------------------------------------------------------------------------===//

OpCase memory_copy_case() {
  constexpr size_t N = 64;
  OpCase c;
  c.name = "memory_load_store";
  std::mt19937_64 rng(0x3e3);
  Body body;
  std::string i = global_index(body);
  // Each type is loaded and stored with a different index type.
  const Scalar index_types[] = {Scalar::I32, Scalar::U64, Scalar::I64, Scalar::U16,
                                Scalar::I16, Scalar::U8,  Scalar::I8,  Scalar::U32};
  size_t k = 0;
  for (Scalar s : kMemoryScalars) {
    std::vector<uint64_t> v(N);
    for (uint64_t &x : v)
      x = rng() & mask(s); // any bits: a load and a store move them unchanged
    c.buffers.push_back(input("in_" + name(s), s, v));
    Buffer out = output("out_" + name(s), s, N, 0x5a5a5a5a5a5a5a5a);
    Check exact_bits;
    exact_bits.kind = Check::Kind::Bits;
    out.ranges.push_back(Range{"load/store " + name(s), 0, N, exact_bits, {}});
    c.buffers.push_back(std::move(out));
    Scalar load_index = index_types[k % std::size(index_types)];
    Scalar store_index = index_types[(k + 3) % std::size(index_types)];
    ++k;
    std::string li = body.op("cast " + i, name(load_index));
    std::string si = body.op("cast " + i, name(store_index));
    std::string x = body.op(fmt::format("load %in_{}, {}", name(s), li), name(s));
    body.line(fmt::format("store %out_{}, {}, {}", name(s), si, x));
  }
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {N, 1, 1});
  return c;
}

OpCase shared_reverse_case() {
  constexpr uint32_t W = 64;
  OpCase c;
  c.name = "memory_shared_reverse";
  std::mt19937_64 rng(0x54a);
  const Scalar types[] = {Scalar::U8,  Scalar::I16, Scalar::F16, Scalar::U32,
                          Scalar::F32, Scalar::I64, Scalar::F64};
  Body body;
  for (Scalar s : types)
    body.line(fmt::format("%sh_{0} = shared.alloc : shared<{0}, {1}>", name(s), W));
  body.line(fmt::format("%sh_vec = shared.alloc : shared<u32, {}>", W * 4));
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string rev =
      body.op(fmt::format("sub {}, {}", body.constant(std::to_string(W - 1), "u32"), li), "u32");
  for (Scalar s : types) {
    std::vector<uint64_t> v(2 * W);
    for (uint64_t &x : v)
      x = random_value(s, rng);
    c.buffers.push_back(input("in_" + name(s), s, v));
    Buffer out = output("out_" + name(s), s, 2 * W, 0x5a5a5a5a5a5a5a5a);
    out.ranges.push_back(Range{"shared reverse " + name(s), 0, 2 * W, {}, {}});
    c.buffers.push_back(std::move(out));
    body.line(fmt::format("store %sh_{}, {}, {}", name(s), li,
                          body.op(fmt::format("load %in_{}, {}", name(s), i), name(s))));
  }
  // Vector stores and loads on shared memory: u32x4 at 4 * li, read back rotated by one.
  std::vector<uint64_t> v(2 * W * 4);
  for (uint64_t &x : v)
    x = rng() & 0xffffffff;
  c.buffers.push_back(input("in_vec", Scalar::U32, v));
  Buffer out_vec = output("out_vec", Scalar::U32, 2 * W * 4, 0x5a5a5a5a);
  out_vec.ranges.push_back(Range{"shared u32x4 rotate", 0, 2 * W * 4, {}, {}});
  c.buffers.push_back(std::move(out_vec));
  std::string four = body.constant("4", "u32");
  std::string gi4 = body.op(fmt::format("mul {}, {}", i, four), "u32");
  std::string li4 = body.op(fmt::format("mul {}, {}", li, four), "u32");
  body.line(fmt::format("store %sh_vec, {}, {}", li4, body.op("load %in_vec, " + gi4, "u32x4")));
  body.line("barrier");
  for (Scalar s : types)
    body.line(fmt::format("store %out_{}, {}, {}", name(s), i,
                          body.op(fmt::format("load %sh_{}, {}", name(s), rev), name(s))));
  std::string next =
      body.op(fmt::format("and {}, {}",
                          body.op(fmt::format("add {}, {}", li, body.constant("1", "u32")), "u32"),
                          body.constant(std::to_string(W - 1), "u32")),
              "u32");
  std::string next4 = body.op(fmt::format("mul {}, {}", next, four), "u32");
  body.line(fmt::format("store %out_vec, {}, {}", gi4, body.op("load %sh_vec, " + next4, "u32x4")));
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  c.grid = {2, 1, 1};
  return c;
}

OpCase local_array_case() {
  constexpr uint32_t W = 16, L = 16;
  OpCase c;
  c.name = "memory_local_arrays";
  std::mt19937_64 rng(0x10c);
  const Scalar types[] = {Scalar::I32, Scalar::F32, Scalar::U8, Scalar::F64, Scalar::U16};
  Body body;
  for (Scalar s : types)
    body.line(fmt::format("%loc_{0} = local.alloc : local<{0}, {1}>", name(s), L));
  body.line(fmt::format("%lv = local.alloc : local<u16, {}>", L));
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string zero = body.constant("0", "u32"), one = body.constant("1", "u32"),
              len = body.constant(std::to_string(L), "u32"), seven = body.constant("7", "u32"),
              wrap = body.constant(std::to_string(L - 1), "u32");
  std::string row = body.op(fmt::format("mul {}, {}", i, len), "u32");
  for (Scalar s : types) {
    std::vector<uint64_t> v(W * L);
    for (uint64_t &x : v)
      x = random_value(s, rng);
    c.buffers.push_back(input("in_" + name(s), s, v));
    Buffer out = output("out_" + name(s), s, W * L, 0x5a5a5a5a5a5a5a5a);
    out.ranges.push_back(Range{"local array permute " + name(s), 0, W * L, {}, {}});
    c.buffers.push_back(std::move(out));
    // Fill loc[j] = in[row + j]; then out[row + j] = loc[(j * 7 + li) % L].
    std::string T = name(s);
    body.line(fmt::format("for {}, {}, {} (%j_{}: u32) {{", zero, len, one, T));
    std::string at = body.op(fmt::format("add {}, %j_{}", row, T), "u32");
    body.line(fmt::format("store %loc_{}, %j_{}, {}", T, T,
                          body.op(fmt::format("load %in_{}, {}", T, at), T)));
    body.line("yield");
    body.line("}");
    body.line(fmt::format("for {}, {}, {} (%k_{}: u32) {{", zero, len, one, T));
    std::string src = body.op(
        fmt::format("and {}, {}",
                    body.op(fmt::format("add {}, {}",
                                        body.op(fmt::format("mul %k_{}, {}", T, seven), "u32"), li),
                            "u32"),
                    wrap),
        "u32");
    std::string dst = body.op(fmt::format("add {}, %k_{}", row, T), "u32");
    body.line(fmt::format("store %out_{}, {}, {}", T, dst,
                          body.op(fmt::format("load %loc_{}, {}", T, src), T)));
    body.line("yield");
    body.line("}");
  }
  // Vector accesses on a local array: u16x4 stores, u16x8 loads (aligned).
  std::vector<uint64_t> v(W * L);
  for (uint64_t &x : v)
    x = rng() & 0xffff;
  c.buffers.push_back(input("in_v", Scalar::U16, v));
  Buffer out_v = output("out_v", Scalar::U16, W * L, 0x5a5a);
  out_v.ranges.push_back(Range{"local u16x4 store / u16x8 load", 0, W * L, {}, {}});
  c.buffers.push_back(std::move(out_v));
  for (unsigned q = 0; q < L; q += 4) {
    std::string at =
        body.op(fmt::format("add {}, {}", row, body.constant(std::to_string(q), "u32")), "u32");
    // stored in reverse quarter order
    body.line(fmt::format("store %lv, {}, {}", body.constant(std::to_string(L - 4 - q), "u32"),
                          body.op("load %in_v, " + at, "u16x4")));
  }
  for (unsigned q = 0; q < L; q += 8) {
    std::string at =
        body.op(fmt::format("add {}, {}", row, body.constant(std::to_string(q), "u32")), "u32");
    body.line(
        fmt::format("store %out_v, {}, {}", at,
                    body.op("load %lv, " + body.constant(std::to_string(q), "u32"), "u16x8")));
  }
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  return c;
}

OpCase buffer_size_case() {
  OpCase c;
  c.name = "memory_buffer_size";
  c.buffers = {input("b_u8", Scalar::U8, std::vector<uint64_t>(37)),
               input("b_f64", Scalar::F64, std::vector<uint64_t>(5)),
               input("b_i16", Scalar::I16, std::vector<uint64_t>(11)),
               input("b_u32", Scalar::U32, std::vector<uint64_t>(1))};
  const Scalar results[] = {Scalar::I32, Scalar::U32, Scalar::I64, Scalar::U64};
  Body body;
  std::string params;
  for (Scalar r : results) {
    Buffer out = output("size_" + name(r), r, 4, 0x5a5a5a5a5a5a5a5a);
    out.ranges.push_back(Range{"buffer.size : " + name(r), 0, 4, {}, {}});
    c.buffers.push_back(std::move(out));
  }
  for (Scalar r : results)
    for (unsigned k = 0; k < 4; ++k) {
      const char *buf[] = {"b_u8", "b_f64", "b_i16", "b_u32"};
      std::string n = body.op(fmt::format("buffer.size %{}", buf[k]), name(r));
      body.line(fmt::format("store %size_{}, {}, {}", name(r),
                            body.constant(std::to_string(k), "u32"), n));
    }
  bind_buffers(c, params);
  // One buffer is write-only: buffer.size works on every access mode.
  params.replace(params.find("%b_i16: buffer<i16, read>"), 25, "%b_i16: buffer<i16, write>");
  c.text = module_text(c.name, params, body.text(), {1, 1, 1});
  return c;
}

//===--- 6. Builtins
//---------------------------------------------------------------------------===//

/// `subgroups`: also the subgroup builtins. A device whose subgroups are not consecutive
/// local_index values for every shape (lavapipe forms them along x rows) must refuse those for a
/// workgroup of several rows whose x is not a multiple of the subgroup size (docs/ir.md §4.9).
OpCase builtins_case(const std::string &case_name, std::array<uint32_t, 3> wg,
                     std::array<uint32_t, 3> grid, bool subgroups) {
  OpCase c;
  c.name = case_name;
  c.grid = grid;
  size_t total = size_t(wg[0]) * wg[1] * wg[2] * grid[0] * grid[1] * grid[2];
  const char *vec_builtins[] = {"global_id", "local_id", "workgroup_id", "workgroup_size",
                                "num_workgroups"};
  std::vector<const char *> scalar_builtins = {"local_index"};
  if (subgroups) {
    scalar_builtins.insert(scalar_builtins.end(),
                           {"subgroup_size", "subgroup_id", "subgroup_lane", "num_subgroups"});
    c.refusal_for = [wg](const codegen::TargetFeatures &f) {
      bool rows = wg[1] * wg[2] > 1;
      bool refused =
          rows && !f.linear_subgroups && (f.subgroup_size == 0 || wg[0] % f.subgroup_size != 0);
      return refused ? std::vector<std::string>{"forms subgroups along x rows"}
                     : std::vector<std::string>{};
    };
  }
  size_t slots = 3 * std::size(vec_builtins) + scalar_builtins.size();
  Buffer out = output("out", Scalar::U32, slots * total, 0x5a5a5a5a);
  Body body;
  // The invocation's slot: (linear workgroup id) * invocations + local_index.
  std::string wid = body.op("workgroup_id", "u32x3"), nwg = body.op("num_workgroups", "u32x3");
  auto lane = [&](const std::string &v, int l) {
    return body.op(fmt::format("vec.extract {} {{lane = {}}}", v, l), "u32");
  };
  std::string lin = body.op(
      fmt::format(
          "add {}, {}", lane(wid, 0),
          body.op(fmt::format("mul {}, {}",
                              body.op(fmt::format("add {}, {}", lane(wid, 1),
                                                  body.op(fmt::format("mul {}, {}", lane(wid, 2),
                                                                      lane(nwg, 1)),
                                                          "u32")),
                                      "u32"),
                              lane(nwg, 0)),
                  "u32")),
      "u32");
  std::string slot = body.op(
      fmt::format("add {}, {}",
                  body.op(fmt::format("mul {}, {}", lin,
                                      body.constant(std::to_string(wg[0] * wg[1] * wg[2]), "u32")),
                          "u32"),
                  body.op("local_index", "u32")),
      "u32");
  size_t k = 0;
  for (const char *b : vec_builtins) {
    std::string v = body.op(b, "u32x3");
    for (int l = 0; l < 3; ++l, ++k) {
      body.line(fmt::format("store %out, {}, {}", offset_index(body, slot, k * total), lane(v, l)));
      out.ranges.push_back(Range{fmt::format("{}.{}", b, "xyz"[l]), k * total, total, {}, {}});
    }
  }
  for (const char *b : scalar_builtins) {
    body.line(
        fmt::format("store %out, {}, {}", offset_index(body, slot, k * total), body.op(b, "u32")));
    out.ranges.push_back(Range{b, k * total, total, {}, {}});
    ++k;
  }
  c.buffers.push_back(std::move(out));
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), wg);
  return c;
}

//===--- 7. Atomics
//----------------------------------------------------------------------------===//

/// 8- and 16-bit atomics (f16 and bf16 included) are refused where the target lacks them
/// (Vulkan: no API has them; lavapipe has no f16 atomics); none for wider types.
decltype(OpCase::refusal_for) narrow_atomics_refusal(Scalar s) {
  if (bits(s) >= 32)
    return {};
  std::string message = fmt::format("atomics on {}", name(s));
  return [message](const codegen::TargetFeatures &f) {
    return f.narrow_atomics ? std::vector<std::string>{} : std::vector<std::string>{message};
  };
}

/// Integer atomics on a buffer (shared = false) or a shared array: order-independent counters,
/// unique tickets from atomic.add, xchg and cmpxchg on each invocation's own element, and a
/// cmpxchg loop that increments one counter.
OpCase atomics_case(Scalar s, bool shared) {
  constexpr uint32_t W = 64, G = 4;
  constexpr size_t total = W * G;
  OpCase c;
  c.name = fmt::format("atomics_{}_{}", shared ? "shared" : "buffer", name(s));
  c.grid = {G, 1, 1};
  std::mt19937_64 rng(0xa70 + static_cast<unsigned>(s) + (shared ? 100 : 0));
  std::string T = name(s);
  uint64_t m = mask(s), top = uint64_t(1) << (bits(s) - 1);
  std::vector<uint64_t> v(total), own(total), w(total), e(total), des(total), inc(total);
  for (size_t k = 0; k < total; ++k) {
    v[k] = (rng() % 8 == 0 ? (rng() & m) : rng() % 1000) & m;
    own[k] = rng() & m;
    w[k] = rng() & m;
    e[k] = k % 2 ? own[k] : (own[k] + 1) & m; // odd invocations expect the right value
    des[k] = rng() & m;
    inc[k] = rng() % 7;
  }
  // Counters: add, sub, min, max, and, or, xor, ticket, cmpxchg-loop total.
  std::vector<uint64_t> init = {
      100, 1000 & m, ir::is_signed(s) ? top - 1 : m, ir::is_signed(s) ? top : 0, m, 0, 0x1234 & m,
      0,   5};
  const char *ops[] = {"add", "sub", "min", "max", "and", "or", "xor"};
  c.buffers = {input("v", s, v), input("w", s, w), input("e", s, e), input("des", s, des),
               input("inc", s, inc)};
  Buffer counters = output("counters", s, shared ? init.size() * G : init.size(), 0);
  for (size_t g = 0; g < (shared ? G : 1); ++g)
    for (size_t k = 0; k < init.size(); ++k)
      counters.init[g * init.size() + k] = init[k];
  const char *counter_names[] = {"atomic.add",
                                 "atomic.sub",
                                 "atomic.min",
                                 "atomic.max",
                                 "atomic.and",
                                 "atomic.or",
                                 "atomic.xor",
                                 "tickets (atomic.add 1)",
                                 "cmpxchg loop increments"};
  for (size_t g = 0; g < (shared ? G : 1); ++g)
    for (size_t k = 0; k < init.size(); ++k)
      counters.ranges.push_back(Range{fmt::format("{} {} counter{}", counter_names[k], T,
                                                  shared ? fmt::format(" (workgroup {})", g) : ""),
                                      g * init.size() + k,
                                      1,
                                      {},
                                      {}});
  Buffer own_buf = output("own", s, total);
  own_buf.init = own;
  own_buf.ranges.push_back(
      Range{"atomic.xchg " + T + " own element (new value)", 0, total, {}, {}});
  Buffer cas_buf = output("cas", s, total);
  cas_buf.init = own;
  cas_buf.ranges.push_back(
      Range{"atomic.cmpxchg " + T + " own element (new value)", 0, total, {}, {}});
  Buffer olds = output("olds", s, 2 * total, 0x5a5a5a5a5a5a5a5a);
  olds.ranges.push_back(Range{"atomic.xchg " + T + " old values", 0, total, {}, {}});
  olds.ranges.push_back(Range{"atomic.cmpxchg " + T + " old values", total, total, {}, {}});
  Buffer flags = output("flags", Scalar::U32, shared ? W * G : total, 0);
  flags.ranges.push_back(
      Range{"each ticket from atomic.add " + T + " returned once", 0, flags.init.size(), {}, {}});
  c.buffers.push_back(std::move(counters));
  c.buffers.push_back(std::move(own_buf));
  c.buffers.push_back(std::move(cas_buf));
  c.buffers.push_back(std::move(olds));
  c.buffers.push_back(std::move(flags));

  Body body;
  if (shared) {
    body.line(fmt::format("%sc = shared.alloc : shared<{}, {}>", T, init.size()));
    body.line(fmt::format("%sown = shared.alloc : shared<{}, {}>", T, W));
    body.line(fmt::format("%scas = shared.alloc : shared<{}, {}>", T, W));
  }
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string wid =
      body.op("vec.extract " + body.op("workgroup_id", "u32x3") + " {lane = 0}", "u32");
  std::string nc = body.constant(std::to_string(init.size()), "u32");
  std::string cbase = shared ? body.op(fmt::format("mul {}, {}", wid, nc), "u32") : "";
  std::string counter_mem = shared ? "%sc" : "%counters";
  std::string own_mem = shared ? "%sown" : "%own", cas_mem = shared ? "%scas" : "%cas";
  std::string own_idx = shared ? li : i;
  if (shared) {
    // Copy this workgroup's counters and elements in; barrier.
    std::string in_range = body.op(fmt::format("lt {}, {}", li, nc), "bool");
    body.line("if " + in_range + " {");
    body.line(fmt::format("store %sc, {}, {}", li,
                          body.op(fmt::format("load %counters, {}",
                                              body.op(fmt::format("add {}, {}", cbase, li), "u32")),
                                  T)));
    body.line("yield");
    body.line("}");
    body.line(fmt::format("store %sown, {}, {}", li, body.op("load %own, " + i, T)));
    body.line(fmt::format("store %scas, {}, {}", li, body.op("load %cas, " + i, T)));
    body.line("barrier");
  }
  std::string x = body.op("load %v, " + i, T);
  for (size_t k = 0; k < std::size(ops); ++k)
    body.op(fmt::format("atomic.{} {}, {}, {}", ops[k], counter_mem,
                        body.constant(std::to_string(k), "u32"), x),
            T);
  std::string one = body.constant("1", T);
  std::string ticket =
      body.op(fmt::format("atomic.add {}, {}, {}", counter_mem, body.constant("7", "u32"), one), T);
  std::string ticket_index = ticket;
  if (!shared && s == Scalar::I8) // 256 tickets wrap to negative i8: index by the u8 bits
    ticket_index = body.op("cast " + ticket, "u8");
  if (shared) // tickets count per workgroup: flags[wid * W + ticket]
    ticket_index = body.op(
        fmt::format("add {}, {}", body.op("cast " + ticket, "u32"),
                    body.op(fmt::format("mul {}, {}", wid, body.constant(std::to_string(W), "u32")),
                            "u32")),
        "u32");
  body.line(fmt::format("store %flags, {}, {}", ticket_index, body.constant("1", "u32")));
  std::string old1 = body.op(
      fmt::format("atomic.xchg {}, {}, {}", own_mem, own_idx, body.op("load %w, " + i, T)), T);
  body.line(fmt::format("store %olds, {}, {}", i, old1));
  std::string old2 =
      body.op(fmt::format("atomic.cmpxchg {}, {}, {}, {}", cas_mem, own_idx,
                          body.op("load %e, " + i, T), body.op("load %des, " + i, T)),
              T);
  body.line(fmt::format("store %olds, {}, {}", offset_index(body, i, total), old2));
  // Lock-free increment by inc[i]: read (atomic.or 0), cmpxchg, retry until it took.
  std::string zero = body.constant("0", T), slot8 = body.constant("8", "u32");
  std::string amount = body.op("load %inc, " + i, T);
  body.line(fmt::format("%done_{} = while {} : {} (%prev: {}) {{", T, zero, T, T));
  std::string cur = body.op(fmt::format("atomic.or {}, {}, {}", counter_mem, slot8, zero), T);
  std::string next = body.op(fmt::format("add {}, {}", cur, amount), T);
  std::string got =
      body.op(fmt::format("atomic.cmpxchg {}, {}, {}, {}", counter_mem, slot8, cur, next), T);
  std::string again = body.op(fmt::format("ne {}, {}", got, cur), "bool");
  body.line(fmt::format("condition {}, {}", again, got));
  body.line(fmt::format("}} do (%o: {}) {{", T));
  body.line("yield %o");
  body.line("}");
  if (shared) {
    body.line("barrier");
    std::string in_range = body.op(fmt::format("lt {}, {}", li, nc), "bool");
    body.line("if " + in_range + " {");
    body.line(fmt::format("store %counters, {}, {}",
                          body.op(fmt::format("add {}, {}", cbase, li), "u32"),
                          body.op("load %sc, " + li, T)));
    body.line("yield");
    body.line("}");
    body.line(fmt::format("store %own, {}, {}", i, body.op("load %sown, " + li, T)));
    body.line(fmt::format("store %cas, {}, {}", i, body.op("load %scas, " + li, T)));
  }
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  c.refusal_for = narrow_atomics_refusal(s);
  return c;
}

/// f32, f16 or bf16 atomic.add on dyadic values (every partial sum exact: any order gives the
/// same result; -1, 0 and 1 for f16 and bf16, whose partial sums stay below 2^8) and atomic.xchg
/// on each invocation's own element; buffer and shared.
OpCase atomics_float_case(Scalar s) {
  constexpr uint32_t W = 64, G = 2;
  OpCase c;
  const std::string T = name(s);
  c.name = "atomics_" + T;
  c.grid = {G, 1, 1};
  std::vector<uint64_t> v(W * G), w(W * G), own(W * G);
  std::mt19937_64 rng(s == Scalar::F32 ? 0xf32 : 0xf16 + static_cast<unsigned>(s));
  for (size_t k = 0; k < v.size(); ++k) {
    v[k] = s == Scalar::F32 ? fval(s, std::ldexp(double(int(rng() % 64) - 32), -3))
                            : fval(s, double(int(rng() % 3) - 1));
    w[k] = random_float(s, rng);
    own[k] = random_float(s, rng);
  }
  c.buffers = {input("v", s, v), input("w", s, w)};
  Buffer sum = output("sum", s, 1 + G, 0);
  sum.init[0] = fval(s, s == Scalar::F32 ? 0.5 : 1.0);
  sum.ranges.push_back(
      Range{"atomic.add " + T + " buffer (dyadic: exact in any order)", 0, 1, {}, {}});
  sum.ranges.push_back(Range{"atomic.add " + T + " shared (dyadic)", 1, G, {}, {}});
  Buffer own_buf = output("own", s, W * G);
  own_buf.init = own;
  own_buf.ranges.push_back(Range{"atomic.xchg " + T + " own element", 0, W * G, {}, {}});
  Buffer olds = output("olds", s, W * G, 0);
  olds.ranges.push_back(Range{"atomic.xchg " + T + " old values", 0, W * G, {}, {}});
  c.buffers.push_back(std::move(sum));
  c.buffers.push_back(std::move(own_buf));
  c.buffers.push_back(std::move(olds));
  Body body;
  body.line(fmt::format("%ssum = shared.alloc : shared<{}, 1>", T));
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string zero_u = body.constant("0", "u32");
  std::string first = body.op(fmt::format("eq {}, {}", li, zero_u), "bool");
  body.line("if " + first + " {");
  body.line(fmt::format("store %ssum, {}, {}", zero_u, body.constant("0.0", T)));
  body.line("yield");
  body.line("}");
  body.line("barrier");
  std::string x = body.op("load %v, " + i, T);
  body.op(fmt::format("atomic.add %sum, {}, {}", zero_u, x), T);
  body.op(fmt::format("atomic.add %ssum, {}, {}", zero_u, x), T);
  body.line(fmt::format(
      "store %olds, {}, {}", i,
      body.op(fmt::format("atomic.xchg %own, {}, {}", i, body.op("load %w, " + i, T)), T)));
  body.line("barrier");
  body.line("if " + first + " {");
  std::string wid =
      body.op("vec.extract " + body.op("workgroup_id", "u32x3") + " {lane = 0}", "u32");
  body.line(fmt::format("store %sum, {}, {}",
                        body.op(fmt::format("add {}, {}", wid, body.constant("1", "u32")), "u32"),
                        body.op("load %ssum, " + zero_u, T)));
  body.line("yield");
  body.line("}");
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  if (s != Scalar::F32) {
    c.refusal_for = narrow_atomics_refusal(s);
    return c;
  }
  c.refusal_for = [](const codegen::TargetFeatures &f) -> std::vector<std::string> {
    if (!f.float32_atomic_add)
      return {"atomic add on f32"};
    if (!f.float32_atomics)
      return {"atomic exchange on f32"};
    return {};
  };
  return c;
}

/// atomic.store then atomic.load: of the invocation's own buffer element, and of the next
/// invocation's shared element after a barrier.
OpCase atomics_load_store_case(Scalar s) {
  constexpr uint32_t W = 64, G = 2;
  OpCase c;
  c.name = "atomics_load_store_" + name(s);
  c.grid = {G, 1, 1};
  std::string T = name(s);
  std::vector<uint64_t> v(W * G);
  std::mt19937_64 rng(0x10ad + static_cast<unsigned>(s));
  for (uint64_t &x : v)
    x = random_value(s, rng);
  c.buffers = {input("v", s, v)};
  Buffer cells = output("cells", s, W * G, 0);
  cells.ranges.push_back(Range{"atomic.store " + T + " buffer", 0, W * G, {}, {}});
  Buffer out = output("out", s, 2 * W * G, 0);
  out.ranges.push_back(Range{"atomic.load " + T + " buffer", 0, W * G, {}, {}});
  out.ranges.push_back(
      Range{"atomic.load " + T + " shared, the next lane's", W * G, W * G, {}, {}});
  c.buffers.push_back(std::move(cells));
  c.buffers.push_back(std::move(out));
  Body body;
  body.line(fmt::format("%sh = shared.alloc : shared<{}, {}>", T, W));
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string x = body.op("load %v, " + i, T);
  body.line(fmt::format("atomic.store %cells, {}, {}", i, x));
  body.line(fmt::format("store %out, {}, {}", i, body.op("atomic.load %cells, " + i, T)));
  body.line(fmt::format("atomic.store %sh, {}, {}", li, x));
  body.line("barrier");
  std::string next =
      body.op(fmt::format("and {}, {}",
                          body.op(fmt::format("add {}, {}", li, body.constant("1", "u32")), "u32"),
                          body.constant(std::to_string(W - 1), "u32")),
              "u32");
  body.line(fmt::format("store %out, {}, {}", offset_index(body, i, W * G),
                        body.op("atomic.load %sh, " + next, T)));
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  c.refusal_for = narrow_atomics_refusal(s);
  return c;
}

/// atomic.min and atomic.max on f32, f16 or bf16, on a buffer and in shared memory: the result is
/// the minimum or maximum of every value whatever the order (a NaN operand is skipped, docs/ir.md
/// §4.2).
OpCase atomics_float_min_max_case(Scalar s) {
  const std::string T = name(s);
  constexpr uint32_t W = 64, G = 2;
  OpCase c;
  c.name = "atomics_" + T + "_min_max";
  c.grid = {G, 1, 1};
  std::vector<uint64_t> v(W * G);
  std::mt19937_64 rng(0xf3232 + (s == Scalar::F32 ? 0 : static_cast<unsigned>(s)));
  for (uint64_t &x : v)
    x = random_float(s, rng);
  v[17] = fval(s, kNaN);
  c.buffers = {input("v", s, v)};
  Buffer mm = output("mm", s, 2 + 2 * G, 0);
  mm.init[0] = fval(s, kInf);
  mm.init[1] = fval(s, -kInf);
  mm.ranges.push_back(Range{"atomic.min " + T + " buffer", 0, 1, {}, {}});
  mm.ranges.push_back(Range{"atomic.max " + T + " buffer", 1, 1, {}, {}});
  mm.ranges.push_back(Range{"atomic.min/max " + T + " shared", 2, 2 * G, {}, {}});
  c.buffers.push_back(std::move(mm));
  Body body;
  body.line(fmt::format("%smm = shared.alloc : shared<{}, 2>", T));
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string zero = body.constant("0", "u32"), one = body.constant("1", "u32");
  std::string first = body.op(fmt::format("eq {}, {}", li, zero), "bool");
  body.line("if " + first + " {");
  body.line(fmt::format("store %smm, {}, {}", zero, body.constant("inf", T)));
  body.line(fmt::format("store %smm, {}, {}", one, body.constant("-inf", T)));
  body.line("yield");
  body.line("}");
  body.line("barrier");
  std::string x = body.op("load %v, " + i, T);
  body.op(fmt::format("atomic.min %mm, {}, {}", zero, x), T);
  body.op(fmt::format("atomic.max %mm, {}, {}", one, x), T);
  body.op(fmt::format("atomic.min %smm, {}, {}", zero, x), T);
  body.op(fmt::format("atomic.max %smm, {}, {}", one, x), T);
  body.line("barrier");
  body.line("if " + first + " {");
  std::string wid =
      body.op("vec.extract " + body.op("workgroup_id", "u32x3") + " {lane = 0}", "u32");
  std::string slot =
      body.op(fmt::format("add {}, {}",
                          body.op(fmt::format("mul {}, {}", wid, body.constant("2", "u32")), "u32"),
                          body.constant("2", "u32")),
              "u32");
  body.line(fmt::format("store %mm, {}, {}", slot, body.op("load %smm, " + zero, T)));
  body.line(fmt::format("store %mm, {}, {}", body.op(fmt::format("add {}, {}", slot, one), "u32"),
                        body.op("load %smm, " + one, T)));
  body.line("yield");
  body.line("}");
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  if (s != Scalar::F32) {
    c.refusal_for = narrow_atomics_refusal(s);
    return c;
  }
  c.refusal_for = [](const codegen::TargetFeatures &f) -> std::vector<std::string> {
    if (!f.float32_atomic_min_max)
      return {"atomic min/max on"};
    return {};
  };
  return c;
}

/// Vector atomics (docs/ir.md §4.11: one atomic per lane, lane k on element index + k): add,
/// sub, min and max into N-lane counters every invocation updates, add into a shared one, xchg
/// on each invocation's own N elements, and atomic.store then atomic.load of them.
OpCase atomics_vector_case(Scalar s, unsigned n) {
  constexpr uint32_t W = 64, G = 2;
  constexpr size_t total = W * G;
  OpCase c;
  const std::string T = name(s), V = fmt::format("{}x{}", T, n);
  c.name = "atomics_vector_" + V;
  c.grid = {G, 1, 1};
  std::mt19937_64 rng(0x7ec + static_cast<unsigned>(s) * 16 + n);
  std::vector<uint64_t> v(total * n), w(total * n), own(total * n);
  for (size_t k = 0; k < v.size(); ++k) {
    // floats -1, 0 and 1: every partial sum is exact in any order; integers wrap
    v[k] = is_float(s) ? fval(s, double(int(rng() % 3) - 1)) : rng() & mask(s);
    w[k] = random_value(s, rng);
    own[k] = random_value(s, rng);
  }
  c.buffers = {input("v", s, v), input("w", s, w)};
  Buffer acc = output("acc", s, n * (4 + G), 0);
  const char *slots[] = {"atomic.add", "atomic.sub", "atomic.min", "atomic.max"};
  for (size_t k = 0; k < std::size(slots); ++k)
    acc.ranges.push_back(Range{fmt::format("{} {} lanes", slots[k], V), k * n, n, {}, {}});
  acc.ranges.push_back(Range{"atomic.add " + V + " shared lanes", 4 * n, G * n, {}, {}});
  Buffer own_buf = output("own", s, total * n);
  own_buf.init = own;
  own_buf.ranges.push_back(Range{"atomic.xchg " + V + " own lanes", 0, total * n, {}, {}});
  Buffer olds = output("olds", s, total * n, 0);
  olds.ranges.push_back(Range{"atomic.xchg " + V + " old lanes", 0, total * n, {}, {}});
  Buffer cells = output("cells", s, total * n, 0);
  cells.ranges.push_back(Range{"atomic.store " + V, 0, total * n, {}, {}});
  Buffer loaded = output("loaded", s, total * n, 0);
  loaded.ranges.push_back(Range{"atomic.load " + V, 0, total * n, {}, {}});
  for (Buffer *b : {&acc, &own_buf, &olds, &cells, &loaded})
    c.buffers.push_back(std::move(*b));

  Body body;
  body.line(fmt::format("%sacc = shared.alloc : shared<{}, {}>", T, n));
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string nn = body.constant(std::to_string(n), "u32");
  std::string base = body.op(fmt::format("mul {}, {}", i, nn), "u32");
  std::string zero_u = body.constant("0", "u32");
  std::string first = body.op(fmt::format("eq {}, {}", li, zero_u), "bool");
  body.line("if " + first + " {");
  body.line(fmt::format("store %sacc, {}, {}", zero_u,
                        body.op("splat " + body.constant(is_float(s) ? "0.0" : "0", T), V)));
  body.line("yield");
  body.line("}");
  body.line("barrier");
  std::string x = body.op("load %v, " + base, V);
  for (size_t k = 0; k < std::size(slots); ++k)
    body.op(
        fmt::format("{} %acc, {}, {}", slots[k], body.constant(std::to_string(k * n), "u32"), x),
        V);
  body.op(fmt::format("atomic.add %sacc, {}, {}", zero_u, x), V);
  std::string old =
      body.op(fmt::format("atomic.xchg %own, {}, {}", base, body.op("load %w, " + base, V)), V);
  body.line(fmt::format("store %olds, {}, {}", base, old));
  body.line(fmt::format("atomic.store %cells, {}, {}", base, x));
  body.line(fmt::format("store %loaded, {}, {}", base, body.op("atomic.load %cells, " + base, V)));
  body.line("barrier");
  body.line("if " + first + " {");
  std::string wid =
      body.op("vec.extract " + body.op("workgroup_id", "u32x3") + " {lane = 0}", "u32");
  std::string slot = body.op(
      fmt::format("mul {}, {}",
                  body.op(fmt::format("add {}, {}", wid, body.constant("4", "u32")), "u32"), nn),
      "u32");
  body.line(fmt::format("store %acc, {}, {}", slot, body.op("load %sacc, " + zero_u, V)));
  body.line("yield");
  body.line("}");
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  if (bits(s) < 32) {
    c.refusal_for = narrow_atomics_refusal(s);
  } else if (s == Scalar::F32) {
    c.refusal_for = [](const codegen::TargetFeatures &f) -> std::vector<std::string> {
      if (!f.float32_atomic_add)
        return {"atomic add on f32"};
      if (!f.float32_atomic_min_max)
        return {"atomic min/max on"};
      if (!f.float32_atomics)
        return {"atomic exchange on f32"};
      return {};
    };
  }
  return c;
}

/// Atomics a Vulkan device cannot have: 8/16-bit, f16 and f64. The interp device runs them.
std::vector<OpCase> refused_atomics_cases() {
  std::vector<OpCase> cases;
  struct R {
    Scalar s;
    const char *op;
    bool shared;
    std::string message;
  };
  const R list[] = {{Scalar::U8, "add", false, "atomics on u8"},
                    {Scalar::I16, "max", true, "atomics on i16"},
                    {Scalar::F64, "add", false, "atomic add on f64"},
                    {Scalar::F16, "xchg", false, "atomics on f16"}};
  for (const R &r : list) {
    OpCase c;
    c.name = fmt::format("atomics_refused_{}_{}", r.op, name(r.s));
    std::string T = name(r.s);
    Buffer counter = output("counter", r.s, 1, 0);
    counter.init[0] = is_float(r.s) ? fval(r.s, 1.0) : 3;
    counter.ranges.push_back(Range{"atomic." + std::string(r.op) + " " + T, 0, 1, {}, {}});
    c.buffers.push_back(std::move(counter));
    Body body;
    if (r.shared)
      body.line(fmt::format("%sh = shared.alloc : shared<{}, 1>", T));
    std::string zero = body.constant("0", "u32");
    std::string v = body.constant(is_float(r.s) ? "0.25" : "5", T);
    if (r.shared) {
      body.line(fmt::format("store %sh, {}, {}", zero, body.constant("1", T)));
      body.line("barrier");
      body.op(fmt::format("atomic.{} %sh, {}, {}", r.op, zero, v), T);
      body.line("barrier");
      body.line(fmt::format("store %counter, {}, {}", zero, body.op("load %sh, " + zero, T)));
    } else {
      body.op(fmt::format("atomic.{} %counter, {}, {}", r.op, zero, v), T);
    }
    std::string params;
    bind_buffers(c, params);
    c.text = module_text(c.name, params, body.text(), {16, 1, 1});
    // Refused by every GPU target (no 8/16-bit or f16 atomics in Vulkan, CUDA or HIP; f64 add
    // where the device lacks it); the interpreter runs them.
    Scalar s = r.s;
    std::string message = r.message;
    c.refusal_for = [s, message](const codegen::TargetFeatures &f) {
      bool refused = s == Scalar::F64 ? !f.float64_atomic_add : !f.narrow_atomics;
      return refused ? std::vector<std::string>{message} : std::vector<std::string>{};
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

//===--- 8. Subgroup operations
//----------------------------------------------------------------===//

OpCase subgroup_case(Scalar s) {
  constexpr uint32_t W = 32, G = 2;
  constexpr size_t total = W * G;
  OpCase c;
  c.name = "subgroup_" + name(s);
  c.grid = {G, 1, 1};
  std::mt19937_64 rng(0x5b + static_cast<unsigned>(s));
  std::string T = name(s);
  std::vector<uint64_t> x(total);
  for (size_t k = 0; k < total; ++k) {
    if (is_float(s)) // dyadic: sums and scans are exact in any order
      x[k] = fval(s, std::ldexp(double(int(rng() % 129) - 64), -2));
    else
      x[k] = rng() % 3 == 0 ? (rng() & mask(s)) : rng() % 50;
  }
  if (is_float(s))
    x[5] = fval(s, kNaN); // min/max skip a NaN (minNum, docs/ir.md 4.2); sums propagate it
  // Products: integers wrap (exact in any order); floats are ±1 with a few ±2 and ±0.5, so that
  // every partial product is exact in any order too.
  std::vector<uint64_t> p(total);
  for (size_t k = 0; k < total; ++k)
    p[k] = is_float(s) ? fval(s, (rng() % 2 ? -1.0 : 1.0) * (k % 8 == 3   ? 2.0
                                                             : k % 8 == 6 ? 0.5
                                                                          : 1))
                       : x[k];
  c.buffers = {input("x", s, x), input("p", s, p)};
  bool integer = is_int(s);
  std::vector<std::string> ops = {"sum",
                                  "min",
                                  "max",
                                  "inclusive_sum",
                                  "exclusive_sum",
                                  "inclusive_min",
                                  "exclusive_min",
                                  "inclusive_max",
                                  "exclusive_max",
                                  "broadcast",
                                  "shuffle",
                                  "shuffle_xor",
                                  "shuffle_up",
                                  "shuffle_down",
                                  "shuffle_far",
                                  "shuffle_xor_far",
                                  "shuffle_down_far",
                                  "product",
                                  "inclusive_product",
                                  "exclusive_product"};
  if (integer)
    ops.insert(ops.end(), {"and", "or", "xor"});
  std::vector<std::string> div_ops = {"sum",           "max",       "inclusive_sum",
                                      "exclusive_min", "broadcast", "shuffle",
                                      "shuffle_xor",   "product",   "exclusive_product"};
  if (integer)
    div_ops.push_back("or");
  const std::vector<std::string> bool_ops = {"ballot.x", "ballot.y", "ballot.z", "ballot.w", "all",
                                             "any",      "elect",    "and",      "or",       "xor"};
  Buffer out = output("out", s, (ops.size() + div_ops.size()) * total, 0x5a5a5a5a5a5a5a5a);
  Buffer votes = output("votes", Scalar::U32, 2 * bool_ops.size() * total, 0x5a5a5a5a);
  Body body;
  std::string i = global_index(body);
  std::string v = body.op("load %x, " + i, T), vp = body.op("load %p, " + i, T);
  std::string lane = body.op("subgroup_lane", "u32"), size = body.op("subgroup_size", "u32");
  std::string one = body.constant("1", "u32"), two = body.constant("2", "u32"),
              three = body.constant("3", "u32"), zero = body.constant("0", "u32");
  std::string size_mask = body.op(fmt::format("sub {}, {}", size, one), "u32");
  std::string half = body.op(fmt::format("shr {}, {}", size, one), "u32");
  // A source lane outside the subgroup gives the invocation's own value (docs/ir.md §4.12):
  // shuffle_up by 1 in lane 0, shuffle_down by 2 in the last two lanes, and the *_far ops, whose
  // source is past the subgroup in every lane (lane + size, lane ^ size, lane + 2^32 - 1, which
  // a 32-bit sum would wrap back into the subgroup).
  // In the divergent branch the active lanes are those with bit 1 clear ({0, 1, 4, 5, ...}):
  // every shuffle there reads an active lane (lane 1, lane ^ 1, lane & ~1).
  auto run_op = [&](const std::string &op, bool divergent) -> std::string {
    if (op == "broadcast")
      return body.op(fmt::format("subgroup.broadcast {}, {}", v, divergent ? one : half), T);
    if (op == "shuffle") {
      // Converged: lane (3 * own + 1) mod size; divergent: lane & ~1.
      std::string src =
          divergent
              ? body.op(fmt::format("and {}, {}", lane, body.constant("4294967294", "u32")), "u32")
              : body.op(
                    fmt::format(
                        "and {}, {}",
                        body.op(fmt::format("add {}, {}",
                                            body.op(fmt::format("mul {}, {}", lane, three), "u32"),
                                            one),
                                "u32"),
                        size_mask),
                    "u32");
      return body.op(fmt::format("subgroup.shuffle {}, {}", v, src), T);
    }
    if (op == "shuffle_xor")
      return body.op(fmt::format("subgroup.shuffle_xor {}, {}", v, one), T);
    if (op == "shuffle_up")
      return body.op(fmt::format("subgroup.shuffle_up {}, {}", v, one), T);
    if (op == "shuffle_down")
      return body.op(fmt::format("subgroup.shuffle_down {}, {}", v, two), T);
    if (op == "shuffle_far")
      return body.op(fmt::format("subgroup.shuffle {}, {}", v,
                                 body.op(fmt::format("add {}, {}", lane, size), "u32")),
                     T);
    if (op == "shuffle_xor_far")
      return body.op(fmt::format("subgroup.shuffle_xor {}, {}", v, size), T);
    if (op == "shuffle_down_far")
      return body.op(
          fmt::format("subgroup.shuffle_down {}, {}", v, body.constant("4294967295", "u32")), T);
    return body.op(
        fmt::format("subgroup.{} {}", op, op.find("product") != std::string::npos ? vp : v), T);
  };
  auto vote_results = [&](size_t base) {
    std::string odd = body.op(
        fmt::format("ne {}, {}",
                    body.op(fmt::format("and {}, {}", body.op("cast " + v, "u32"), one), "u32"),
                    zero),
        "bool");
    std::string small =
        body.op(fmt::format("lt {}, {}", v, body.constant(is_float(s) ? "14.0" : "40", T)), "bool");
    std::string ballot = body.op("subgroup.ballot " + odd, "u32x4");
    std::vector<std::string> r;
    for (int l = 0; l < 4; ++l)
      r.push_back(body.op(fmt::format("vec.extract {} {{lane = {}}}", ballot, l), "u32"));
    for (std::string b :
         {body.op("subgroup.all " + small, "bool"), body.op("subgroup.any " + odd, "bool"),
          body.op("subgroup.elect", "bool"), body.op("subgroup.and " + small, "bool"),
          body.op("subgroup.or " + odd, "bool"), body.op("subgroup.xor " + odd, "bool")})
      r.push_back(body.op("cast " + b, "u32"));
    for (size_t k = 0; k < r.size(); ++k)
      body.line(
          fmt::format("store %votes, {}, {}", offset_index(body, i, (base + k) * total), r[k]));
  };
  for (size_t k = 0; k < ops.size(); ++k) {
    body.line(
        fmt::format("store %out, {}, {}", offset_index(body, i, k * total), run_op(ops[k], false)));
    out.ranges.push_back(Range{fmt::format("subgroup.{} {}", ops[k], T), k * total, total, {}, {}});
  }
  vote_results(0);
  // The same in a divergent branch: lanes with bit 1 clear take part.
  std::string active = body.op(
      fmt::format("eq {}, {}", body.op(fmt::format("and {}, {}", lane, two), "u32"), zero), "bool");
  body.line("if " + active + " {");
  for (size_t k = 0; k < div_ops.size(); ++k) {
    size_t slot = ops.size() + k;
    body.line(fmt::format("store %out, {}, {}", offset_index(body, i, slot * total),
                          run_op(div_ops[k], true)));
    out.ranges.push_back(Range{
        fmt::format("subgroup.{} {} (divergent)", div_ops[k], T), slot * total, total, {}, {}});
  }
  vote_results(bool_ops.size());
  body.line("yield");
  body.line("}");
  for (size_t k = 0; k < 2 * bool_ops.size(); ++k)
    votes.ranges.push_back(
        Range{fmt::format("subgroup.{} on {}-derived bools{}", bool_ops[k % bool_ops.size()], T,
                          k >= bool_ops.size() ? " (divergent)" : ""),
              k * total,
              total,
              {},
              {}});
  for (Range &r : out.ranges) {
    bool product = r.what.find("product") != std::string::npos;
    r.inputs = [in = product ? p : x, product, s](size_t e) {
      std::string t;
      for (size_t k = e / 8 * 8; k < e / 8 * 8 + 8; ++k)
        t += (t.empty() ? "" : ",") + show(s, in[k]);
      return (product ? "p" : "x") + std::string(" of lanes ") + std::to_string(e / 8 * 8) + ".. " +
             t;
    };
  }
  c.buffers.push_back(std::move(out));
  c.buffers.push_back(std::move(votes));
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  return c;
}

//===--- 9. Barriers and fences
//----------------------------------------------------------------===//

/// A tree reduction in shared memory (barrier per level in a uniform loop), then the
/// last-arriver patterns: within a workgroup through fence.workgroup and a shared counter, and
/// across workgroups through fence.device and a buffer counter.
/// `for` loops whose last iv sits near the top of the iv type (docs/ir.md §5.3: the sequence
/// never wraps around): the SPIR-V writer drops its wrap guard where it proves the next iv
/// cannot wrap (a step of 1, a constant step below a constant hi with room) and keeps it
/// elsewhere (the iv clamped to max(hi, MIN + step) - step before the add: hi below MIN + step
/// too). Each loop stores its trip count and the sum of its ivs; the lower bounds are
/// parameters, so nothing folds. A missing guard would wrap to a small iv and run on.
OpCase loops_near_the_top_case() {
  struct Loop {
    const char *type, *lo, *hi,
        *step; // hi and step: a constant, or a parameter when it starts with %
  };
  const Loop loops[] = {
      {"u32", "4294967290", "4294967295", "1"},     // step 1 up to MAX: no guard
      {"u32", "4294967292", "%top_u32", "1"},       // hi MAX known at run time: no guard
      {"u32", "4294967000", "4294967295", "%step"}, // step known at run time: guard
      {"u32", "4294967280", "4294967293", "4"},     // 2^32 - 4 + 4 wraps: guard
      {"u32", "4294967280", "4294967292", "4"},     // hi - 1 + 4 = MAX: no guard
      {"u32", "0", "100", "4"},                     // far from the top: no guard
      {"i32", "2147483640", "2147483647", "1"},     // step 1 up to MAX: no guard
      {"i32", "2147483600", "2147483647", "16"},    // wraps to negative: guard
      {"i32", "-30", "-10", "5"},                   // negative hi: no guard
      {"i32", "-2147483648", "-2147483000", "300"}, // from MIN: no guard
      {"u32", "1", "3", "4294967295"},              // hi below the step: guard, limit 0
      {"i32", "2147483600", "%top_i32", "16"},      // hi MAX known at run time: guard
      {"i32", "-2147483648", "%low_i32", "16"},     // hi below MIN + step: guard, limit MIN
  };
  constexpr size_t N = std::size(loops);
  OpCase c;
  c.name = "loops_near_the_top_of_the_iv_type";
  std::string params =
      "%out: buffer<u32, write>, %top_u32: u32, %step: u32, %top_i32: i32, %low_i32: i32";
  std::string body;
  for (size_t k = 0; k < N; ++k)
    params += fmt::format(", %lo{}: {}", k, loops[k].type);
  for (size_t k = 0; k < N; ++k) {
    const Loop &l = loops[k];
    auto operand = [&](const char *v, const char *what) {
      if (v[0] == '%')
        return std::string(v);
      body += fmt::format("    %{}{} = const {} : {}\n", what, k, v, l.type);
      return fmt::format("%{}{}", what, k);
    };
    std::string hi = operand(l.hi, "hi"), step = operand(l.step, "st");
    body += fmt::format("    %z{0} = const 0 : u32\n    %one{0} = const 1 : u32\n", k);
    body += fmt::format("    %n{0}, %s{0} = for %lo{0}, {1}, {2}, %z{0}, %z{0} : u32, u32 "
                        "(%iv{0}: {3}, %nc{0}: u32, %sc{0}: u32) {{\n",
                        k, hi, step, l.type);
    if (std::string(l.type) != "u32")
      body += fmt::format("      %ivu{0} = bitcast %iv{0} : u32\n", k);
    body += fmt::format(
        "      %nn{0} = add %nc{0}, %one{0} : u32\n"
        "      %sn{0} = add %sc{0}, {1} : u32\n"
        "      yield %nn{0}, %sn{0}\n    }}\n",
        k, std::string(l.type) != "u32" ? fmt::format("%ivu{}", k) : fmt::format("%iv{}", k));
    body += fmt::format("    %at{0} = const {1} : u32\n    store %out, %at{0}, %n{0}\n"
                        "    %bt{0} = const {2} : u32\n    store %out, %bt{0}, %s{0}\n",
                        k, 2 * k, 2 * k + 1);
  }
  c.text = fmt::format("module @loops {{\n  kernel @{}({}) workgroup(1, 1, 1) {{\n{}    return\n  "
                       "}}\n}}\n",
                       c.name, params, body);
  Buffer out = output("out", Scalar::U32, 2 * N, 0);
  for (size_t k = 0; k < N; ++k)
    out.ranges.push_back(Range{fmt::format("for {} from {} below {} by {}: trips, sum of ivs",
                                           loops[k].type, loops[k].lo, loops[k].hi, loops[k].step),
                               2 * k,
                               2,
                               {},
                               {}});
  c.buffers.push_back(std::move(out));
  c.args.push_back(Arg{0, {}});
  c.args.push_back(Arg{-1, {4294967295u}});
  c.args.push_back(Arg{-1, {100}});
  c.args.push_back(Arg{-1, {static_cast<uint32_t>(INT32_MAX)}});
  c.args.push_back(Arg{-1, {static_cast<uint32_t>(-2147483640)}});
  for (const Loop &l : loops)
    c.args.push_back(Arg{-1, {static_cast<uint32_t>(std::stoll(l.lo))}});
  return c;
}

OpCase barrier_fence_case() {
  constexpr uint32_t W = 64, G = 4;
  OpCase c;
  c.name = "barriers_and_fences";
  c.grid = {G, 1, 1};
  std::mt19937_64 rng(0xba5);
  std::vector<uint64_t> x(W * G);
  for (uint64_t &v : x)
    v = rng() % 100000;
  c.buffers = {input("x", Scalar::U32, x)};
  Buffer tree = output("tree", Scalar::U32, G, 0);
  tree.ranges.push_back(Range{"tree reduction with barriers", 0, G, {}, {}});
  Buffer last = output("last", Scalar::U32, G, 0);
  last.ranges.push_back(Range{"last arriver in workgroup (fence.workgroup)", 0, G, {}, {}});
  Buffer partial = output("partial", Scalar::U32, G, 0);
  partial.ranges.push_back(Range{"partials", 0, G, {}, {}});
  Buffer total = output("total", Scalar::U32, 2, 0);
  total.ranges.push_back(Range{"last workgroup's total (fence.device)", 0, 1, {}, {}});
  total.ranges.push_back(Range{"workgroup ticket counter", 1, 1, {}, {}});
  c.buffers.push_back(std::move(tree));
  c.buffers.push_back(std::move(last));
  c.buffers.push_back(std::move(partial));
  c.buffers.push_back(std::move(total));
  Body body;
  body.line(fmt::format("%s = shared.alloc : shared<u32, {}>", W));
  body.line(fmt::format("%data = shared.alloc : shared<u32, {}>", W));
  body.line("%count = shared.alloc : shared<u32, 1>");
  std::string i = global_index(body);
  std::string li = body.op("local_index", "u32");
  std::string wid =
      body.op("vec.extract " + body.op("workgroup_id", "u32x3") + " {lane = 0}", "u32");
  std::string zero = body.constant("0", "u32"), one = body.constant("1", "u32"),
              six = body.constant("6", "u32"), half = body.constant(std::to_string(W / 2), "u32");
  std::string v = body.op("load %x, " + i, "u32");
  std::string first = body.op(fmt::format("eq {}, {}", li, zero), "bool");
  body.line(fmt::format("store %s, {}, {}", li, v));
  body.line("if " + first + " {");
  body.line(fmt::format("store %count, {}, {}", zero, zero));
  body.line("yield");
  body.line("}");
  body.line("barrier");
  body.line(fmt::format("for {}, {}, {} (%level: u32) {{", zero, six, one));
  std::string stride = body.op(fmt::format("shr {}, %level", half), "u32");
  std::string active = body.op(fmt::format("lt {}, {}", li, stride), "bool");
  body.line("if " + active + " {");
  std::string other = body.op(
      fmt::format("load %s, {}", body.op(fmt::format("add {}, {}", li, stride), "u32")), "u32");
  body.line(fmt::format(
      "store %s, {}, {}", li,
      body.op(fmt::format("add {}, {}", body.op("load %s, " + li, "u32"), other), "u32")));
  body.line("yield");
  body.line("}");
  body.line("barrier");
  body.line("yield");
  body.line("}");
  body.line("if " + first + " {");
  body.line(fmt::format("store %tree, {}, {}", wid, body.op("load %s, " + zero, "u32")));
  body.line("yield");
  body.line("}");
  // Last arriver within the workgroup: publish data, fence, take a ticket.
  body.line(fmt::format("store %data, {}, {}", li,
                        body.op(fmt::format("mul {}, {}", v, body.constant("3", "u32")), "u32")));
  body.line("fence.workgroup");
  std::string ticket = body.op(fmt::format("atomic.add %count, {}, {}", zero, one), "u32");
  std::string is_last = body.op(
      fmt::format("eq {}, {}", ticket, body.constant(std::to_string(W - 1), "u32")), "bool");
  body.line("if " + is_last + " {");
  body.line("fence.workgroup");
  std::string wl = body.constant(std::to_string(W), "u32");
  body.line(
      fmt::format("%wsum = for {}, {}, {}, {} : u32 (%k: u32, %acc: u32) {{", zero, wl, one, zero));
  body.line(fmt::format("%wsum_next = add %acc, {}", body.op("load %data, %k", "u32")) + " : u32");
  body.line("yield %wsum_next");
  body.line("}");
  body.line(fmt::format("store %last, {}, %wsum", wid));
  // Across workgroups: publish the partial, fence, count workgroups; the last sums.
  body.line(fmt::format("store %partial, {}, %wsum", wid));
  body.line("fence.device");
  std::string wticket = body.op(fmt::format("atomic.add %total, {}, {}", one, one), "u32");
  std::string last_wg = body.op(
      fmt::format("eq {}, {}", wticket, body.constant(std::to_string(G - 1), "u32")), "bool");
  body.line("if " + last_wg + " {");
  body.line("fence.device");
  std::string gl = body.constant(std::to_string(G), "u32");
  body.line(fmt::format("%gsum = for {}, {}, {}, {} : u32 (%g: u32, %gacc: u32) {{", zero, gl, one,
                        zero));
  // An atomic read (or 0) of each partial: ordered after the fence.
  body.line(fmt::format("%pg = atomic.or %partial, %g, {} : u32", zero));
  body.line("%gsum_next = add %gacc, %pg : u32");
  body.line("yield %gsum_next");
  body.line("}");
  body.line(fmt::format("store %total, {}, %gsum", zero));
  body.line("yield");
  body.line("}");
  body.line("yield");
  body.line("}");
  std::string params;
  bind_buffers(c, params);
  c.text = module_text(c.name, params, body.text(), {W, 1, 1});
  return c;
}

//===--- The tests
//-----------------------------------------------------------------------------===//

using Family = std::function<std::vector<OpCase>()>;

const std::vector<std::pair<std::string, Family>> &families() {
  static const std::vector<std::pair<std::string, Family>> list = {
      {"Arithmetic",
       [] {
         std::vector<OpCase> v;
         for (Scalar s : kAllScalars)
           v.push_back(arith_case(s));
         return v;
       }},
      {"Math",
       [] {
         return std::vector<OpCase>{math_case(Scalar::F16),
                                    math_case(Scalar::F32),
                                    math_case(Scalar::F64),
                                    math_case(Scalar::F64, F64Part::Transcendental),
                                    math_case(Scalar::F64, F64Part::Fma),
                                    math_case(Scalar::BF16)};
       }},
      {"Casts",
       [] {
         std::vector<OpCase> v;
         std::vector<Scalar> all = without_bf16();
         for (Scalar s : all)
           v.push_back(cast_case("cast_from_" + name(s), {s}, all));
         OpCase bf = cast_case("cast_bf16", without_bf16(), {Scalar::BF16});
         bf.refusal_for = bf16_refusal;
         v.push_back(std::move(bf));
         OpCase from_bf =
             cast_case("cast_from_bf16", {Scalar::BF16},
                       std::vector<Scalar>(std::begin(kAllScalars), std::end(kAllScalars)));
         from_bf.refusal_for = bf16_refusal;
         v.push_back(std::move(from_bf));
         return v;
       }},
      {"Bitcasts", bitcast_cases},
      {"Vectors",
       [] {
         std::vector<OpCase> v;
         for (Scalar s : kMemoryScalars)
           for (unsigned n : {2, 3, 4, 8, 16})
             v.push_back(vector_case(s, n));
         return v;
       }},
      {"Memory",
       [] {
         return std::vector<OpCase>{memory_copy_case(), shared_reverse_case(), local_array_case(),
                                    buffer_size_case()};
       }},
      {"Builtins",
       [] {
         return std::vector<OpCase>{
             builtins_case("builtins_3d", {4, 3, 2}, {2, 2, 2}, false),
             builtins_case("builtins_3d_subgroups", {4, 3, 2}, {2, 2, 2}, true),
             builtins_case("builtins_2d_partial_subgroup", {6, 2, 1}, {3, 2, 1}, true),
             builtins_case("builtins_rows_of_8_subgroups", {8, 2, 3}, {2, 1, 2}, true),
             builtins_case("builtins_1d_partial_subgroup", {12, 1, 1}, {3, 1, 1}, true)};
       }},
      {"Atomics",
       [] {
         std::vector<OpCase> v;
         for (Scalar s : {Scalar::I32, Scalar::U32, Scalar::I64, Scalar::U64})
           for (bool shared : {false, true})
             v.push_back(atomics_case(s, shared));
         for (Scalar s : {Scalar::U8, Scalar::I8, Scalar::U16, Scalar::I16})
           for (bool shared : {false, true})
             v.push_back(atomics_case(s, shared));
         for (Scalar s : {Scalar::F32, Scalar::F16, Scalar::BF16}) {
           v.push_back(atomics_float_case(s));
           v.push_back(atomics_float_min_max_case(s));
         }
         for (Scalar s : {Scalar::I32, Scalar::U64, Scalar::F32, Scalar::U8, Scalar::I16,
                          Scalar::F16, Scalar::BF16})
           v.push_back(atomics_load_store_case(s));
         for (auto [s, n] : {std::pair{Scalar::F32, 2u},
                             {Scalar::F32, 4u},
                             {Scalar::I32, 4u},
                             {Scalar::U64, 2u},
                             {Scalar::F16, 2u},
                             {Scalar::BF16, 2u},
                             {Scalar::U8, 4u}})
           v.push_back(atomics_vector_case(s, n));
         for (OpCase &c : refused_atomics_cases())
           v.push_back(std::move(c));
         return v;
       }},
      {"Subgroups",
       [] {
         std::vector<OpCase> v;
         for (Scalar s : {Scalar::I32, Scalar::U32, Scalar::I64, Scalar::U64, Scalar::U8,
                          Scalar::I16, Scalar::F32, Scalar::F16})
           v.push_back(subgroup_case(s));
         return v;
       }},
      {"BarriersAndFences", [] { return std::vector<OpCase>{barrier_fence_case()}; }},
      {"LoopsNearTheTop", [] { return std::vector<OpCase>{loops_near_the_top_case()}; }},
  };
  return list;
}

class OpCoverage : public testing::TestWithParam<std::tuple<std::string, std::string>> {
protected:
  void SetUp() override { CUBECC_SKIP_IF_DEVICE_ABSENT(std::get<1>(GetParam())); }
};

TEST_P(OpCoverage, MatchesTheReferenceInterpreter) {
  const auto &[family, device] = GetParam();
  for (const auto &[name, make] : families())
    if (name == family)
      for (const OpCase &c : make())
        run_op_case(c, device);
}

std::vector<std::string> family_names() {
  std::vector<std::string> v;
  for (const auto &f : families())
    v.push_back(f.first);
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Ops, OpCoverage,
    testing::Combine(testing::ValuesIn(family_names()),
                     testing::Values("interp", "vulkan", "cpu", "cuda", "hip")),
    [](const auto &info) { return std::get<0>(info.param) + "_on_" + std::get<1>(info.param); });

/// Prints the totals and the largest float errors seen, per device and op.
class StatsPrinter : public testing::Environment {
public:
  void TearDown() override {
    Stats &s = stats();
    for (const auto &[device, n] : s.kernels)
      std::printf("[ops] %s: %zu kernels run, %zu elements compared, %zu refusals checked\n",
                  device.c_str(), n, s.comparisons[device], s.refusals[device]);
    for (const auto &[what, e] : s.max_error)
      if (e.first > 0 || e.second > 0)
        std::printf("[ops] max error %s: %g ULP, %g absolute\n", what.c_str(), e.first, e.second);
  }
};
[[maybe_unused]] testing::Environment *const stats_printer =
    testing::AddGlobalTestEnvironment(new StatsPrinter);

} // namespace
} // namespace cubecc::test::ops

namespace cubecc::test::ops {
namespace {

/// CUBECC_OPS_CIR=<file.cir>: runs that file's first kernel, whose only parameter must be a
/// `buffer<u32, readwrite>` (64 words, zeroed), for one workgroup on interp and vulkan, and
/// compares with the reference. For checking reproducers of writer bugs; skipped without it.
TEST(OpReproducer, RunsTheKernelOfCubeccOpsCir) {
  const char *path = std::getenv("CUBECC_OPS_CIR");
  if (!path)
    GTEST_SKIP() << "set CUBECC_OPS_CIR to a .cir file to run";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  std::stringstream text;
  text << file.rdbuf();
  OpCase c;
  c.text = text.str();
  auto at = c.text.find("kernel @");
  ASSERT_NE(at, std::string::npos);
  c.name = c.text.substr(at + 8, c.text.find('(', at) - at - 8);
  c.buffers.push_back(output("out", Scalar::U32, 64, 0));
  c.args.push_back(Arg{0, {}});
  for (const char *device : {"interp", "vulkan"})
    run_op_case(c, device);
}

} // namespace
} // namespace cubecc::test::ops
