//===- precision_test.cpp - The per-op precision table: every float math op on every device --===//
//
// For each float op whose accuracy is the target's (docs/ir.md §4.2: div, rem, fma, and the math
// ops of §4.5) and each float type (f32, f16, bf16, f64), one kernel runs the op over a sweep of
// inputs (special values, a dense sweep of the op's domain, random values in it) on every device
// that opens here (interp, vulkan, cpu; cuda and hip where present). Each result is compared with
// a host reference computed in long double and rounded once to the type: correctly rounded for
// f16, bf16 and f32 (long double keeps 64 bits, far more than twice theirs) except for a double
// rounding in rare halfway cases of div/fma; for f64 the reference itself may be off by one
// rounding in rare cases (64 bits are only 11 more than f64's), so f64 errors are good to ±1 ULP.
//
// The largest error per (op, type, device), in ULP of the type, goes into a markdown table
// (precision.md in the working directory, and docs/precision.md, which the test regenerates and
// compares when it runs on the devices the document lists: set CUBECC_UPDATE_DOCS=1 to rewrite
// it). Each device must stay within the bounds of docs/precision.md (kBounds below): an element
// passes if its error is within the ULP bound, or, for sin and cos, within the absolute bound
// Vulkan specifies. Special inputs (±0, ±inf, NaN, ±1 and their pairs) whose C result is NaN,
// ±inf, ±0 or ±1 are reported separately: the count of results that differ from C's <math.h>;
// they must match on interp and cpu, and on every device for pow (legalized: docs/passes.md).
//
//===-----------------------------------------------------------------------------------------===//
#include "device_launcher.h"

#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/verifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <random>
#include <sstream>

namespace cubecc::test {
namespace {

using ir::Scalar;

constexpr size_t kN = 2048; // inputs per (op, type); a multiple of the workgroup (64)

struct MathOp {
  const char *name;
  unsigned arity;
  long double (*reference)(long double, long double, long double);
  double lo, hi;      ///< the domain of the sweep (every operand)
  double half_lo = 0; ///< f16: a narrower domain where the results stay normal (0, 0: the same)
  double half_hi = 0;
  double skip_lo = 0; ///< an interval left out of the sweep (log near 1: absolute error there)
  double skip_hi = 0;
};

const MathOp kOps[] = {
    {"div", 2, [](long double a, long double b, long double) { return a / b; }, -100, 100},
    {"rem", 2, [](long double a, long double b, long double) { return std::fmod(a, b); }, -100,
     100},
    {"fma", 3, [](long double a, long double b, long double c) { return std::fma(a, b, c); }, -10,
     10},
    {"sqrt", 1, [](long double a, long double, long double) { return std::sqrt(a); }, 0, 1e4},
    {"rsqrt", 1, [](long double a, long double, long double) { return 1 / std::sqrt(a); }, 1e-2,
     1e4},
    {"exp", 1, [](long double a, long double, long double) { return std::exp(a); }, -20, 20, -9,
     11},
    {"exp2", 1, [](long double a, long double, long double) { return std::exp2(a); }, -30, 30, -14,
     15},
    {"log", 1, [](long double a, long double, long double) { return std::log(a); }, 1e-2, 1e4, 0, 0,
     0.5, 2},
    {"log2", 1, [](long double a, long double, long double) { return std::log2(a); }, 1e-2, 1e4, 0,
     0, 0.5, 2},
    {"sin", 1, [](long double a, long double, long double) { return std::sin(a); },
     -std::numbers::pi, std::numbers::pi},
    {"cos", 1, [](long double a, long double, long double) { return std::cos(a); },
     -std::numbers::pi, std::numbers::pi},
    {"tanh", 1, [](long double a, long double, long double) { return std::tanh(a); }, -5, 5},
    {"erf", 1, [](long double a, long double, long double) { return std::erf(a); }, -4, 4},
    {"pow", 2, [](long double a, long double b, long double) { return std::pow(a, b); }, 0.5, 4},
    {"tan", 1, [](long double a, long double, long double) { return std::tan(a); }, -1.5, 1.5},
    {"asin", 1, [](long double a, long double, long double) { return std::asin(a); }, -1, 1},
    {"acos", 1, [](long double a, long double, long double) { return std::acos(a); }, -1, 1},
    {"atan", 1, [](long double a, long double, long double) { return std::atan(a); }, -10, 10},
    {"atan2", 2, [](long double a, long double b, long double) { return std::atan2(a, b); }, -10,
     10},
    {"sinh", 1, [](long double a, long double, long double) { return std::sinh(a); }, -10, 10},
    {"cosh", 1, [](long double a, long double, long double) { return std::cosh(a); }, -10, 10},
    {"asinh", 1, [](long double a, long double, long double) { return std::asinh(a); }, -100, 100},
    {"acosh", 1, [](long double a, long double, long double) { return std::acosh(a); }, 1, 100},
    {"atanh", 1, [](long double a, long double, long double) { return std::atanh(a); }, -0.99,
     0.99},
    {"expm1", 1, [](long double a, long double, long double) { return std::expm1(a); }, -10, 10},
    {"log1p", 1, [](long double a, long double, long double) { return std::log1p(a); }, -0.9, 100},
    {"hypot", 2, [](long double a, long double b, long double) { return std::hypot(a, b); }, -100,
     100},
};

const Scalar kTypes[] = {Scalar::F32, Scalar::F16, Scalar::BF16, Scalar::F64};
const char *const kDevices[] = {"interp", "vulkan", "cpu", "cuda", "hip"};

/// The documented bounds (docs/precision.md), in ULP of the type: {op, f32/f16/bf16, f64}.
struct Bound {
  const char *op;
  unsigned ulp, ulp_f64;
  double absolute = 0; ///< sin, cos: Vulkan's absolute bound 2^-11 on [-pi, pi]
};
const Bound kBounds[] = {
    {"div", 3, 3},
    {"rem", 0, 0},
    {"fma", 1, 1},
    {"sqrt", 3, 3},
    {"rsqrt", 3, 3},
    {"exp", 64, 4},
    {"exp2", 64, 4},
    {"log", 4, 4},
    {"log2", 4, 4},
    {"sin", 4, 4, std::ldexp(1.0, -11)},
    {"cos", 4, 4, std::ldexp(1.0, -11)},
    {"tanh", 8, 4},
    {"erf", 4, 4},
    {"pow", 64, 4},
    {"tan", 8, 4},
    {"asin", 4, 4},
    {"acos", 4, 4},
    {"atan", 4, 4},
    {"atan2", 4, 4},
    {"sinh", 16, 4},
    {"cosh", 16, 4},
    {"asinh", 8, 4},
    {"acosh", 8, 4},
    {"atanh", 8, 4},
    {"expm1", 16, 4},
    {"log1p", 8, 4},
    {"hypot", 4, 4},
};

const Bound &bound_of(const std::string &op) {
  for (const Bound &b : kBounds)
    if (op == b.op)
      return b;
  throw std::logic_error("no bound for " + op);
}

std::string type_name(Scalar s) {
  return std::string(ir::scalar_name(s));
}
unsigned width(Scalar s) {
  return ir::scalar_bits(s);
}

/// The bits as an ordered integer: adjacent values differ by one, -0 and +0 are both 0.
int64_t ordered(Scalar s, uint64_t bits) {
  uint64_t sign = uint64_t{1} << (width(s) - 1);
  return (bits & sign) ? -static_cast<int64_t>(bits & ~sign) : static_cast<int64_t>(bits);
}

/// The correctly rounded reference bits of `v` in `s` (through double for f16/bf16).
uint64_t round_to(Scalar s, long double v) {
  if (s == Scalar::F32)
    return std::bit_cast<uint32_t>(static_cast<float>(v));
  if (s == Scalar::F64)
    return std::bit_cast<uint64_t>(static_cast<double>(v));
  return ir::from_double(s, static_cast<double>(v));
}

struct Inputs {
  std::vector<std::vector<uint64_t>> operands; ///< per operand, kN bits
  size_t specials = 0;                         ///< the first `specials` elements
};

Inputs make_inputs(const MathOp &op, Scalar s) {
  double lo = op.lo, hi = op.hi;
  if (s == Scalar::F16 && op.half_lo != op.half_hi)
    lo = op.half_lo, hi = op.half_hi;
  Inputs in;
  in.operands.assign(op.arity, {});
  const double inf = std::numeric_limits<double>::infinity();
  const double special[] = {0.0, -0.0, inf, -inf, std::nan(""), 1.0, -1.0};
  std::vector<std::vector<double>> values(op.arity);
  // Special values: every combination for one and two operands, the diagonal for three.
  if (op.arity == 1) {
    for (double x : special)
      values[0].push_back(x);
  } else {
    for (double x : special)
      for (double y : special) {
        values[0].push_back(x);
        values[1].push_back(y);
        if (op.arity == 3)
          values[2].push_back(x);
      }
  }
  in.specials = values[0].size();
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull ^ std::hash<std::string>{}(op.name) ^ unsigned(s));
  std::uniform_real_distribution<double> uniform(lo, hi);
  auto skipped = [&](double v) { return v > op.skip_lo && v < op.skip_hi; };
  size_t dense = (kN - in.specials) / 2;
  for (size_t k = 0; values[0].size() < kN; ++k) {
    for (unsigned a = 0; a < op.arity; ++a) {
      double v;
      bool first = true;
      do {
        v = first && k < dense && a == 0 ? lo + (hi - lo) * static_cast<double>(k) / dense
                                         : uniform(rng);
        first = false;
        // Inputs exactly representable in the type, so that every device sees the same value.
        v = ir::to_double(s, ir::from_double(s, v));
      } while (skipped(v) || (std::string(op.name) == "div" && a == 1 && std::fabs(v) < 1e-2) ||
               (std::string(op.name) == "rem" && a == 1 && std::fabs(v) < 1e-2));
      values[a].push_back(v);
    }
  }
  for (unsigned a = 0; a < op.arity; ++a)
    for (double v : values[a])
      in.operands[a].push_back(ir::from_double(s, v));
  return in;
}

/// The kernel: out[i] = op(a[i], b[i], c[i]). bf16 travels as u16 and is bitcast.
std::string kernel_text(const MathOp &op, Scalar s) {
  std::string t = type_name(s), m = s == Scalar::BF16 ? "u16" : t;
  std::string params, body;
  std::vector<std::string> names;
  for (unsigned a = 0; a < op.arity; ++a) {
    std::string p = std::string(1, static_cast<char>('a' + a));
    params += fmt::format("%{}: buffer<{}, read>, ", p, m);
    body += fmt::format("    %l{0} = load %{0}, %i : {1}\n", p, m);
    if (s == Scalar::BF16)
      body += fmt::format("    %x{0} = bitcast %l{0} : bf16\n", p);
    names.push_back((s == Scalar::BF16 ? "%x" : "%l") + p);
  }
  std::string operands;
  for (const std::string &n : names)
    operands += (operands.empty() ? "" : ", ") + n;
  body += fmt::format("    %r = {} {} : {}\n", op.name, operands, t);
  std::string stored = "%r";
  if (s == Scalar::BF16) {
    body += "    %rb = bitcast %r : u16\n";
    stored = "%rb";
  }
  return fmt::format(R"(module @precision {{
  kernel @{}_{}({}%out: buffer<{}, readwrite>) workgroup(64, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
{}    store %out, %i, {}
    return
  }}
}}
)",
                     op.name, t, params, m, body, stored);
}

ir::HostBuffer host_buffer(Scalar s, const std::vector<uint64_t> &bits) {
  Scalar m = s == Scalar::BF16 ? Scalar::U16 : s;
  ir::HostBuffer b{m, {}};
  for (uint64_t v : bits)
    for (unsigned k = 0; k < width(s) / 8; ++k)
      b.bytes.push_back(static_cast<uint8_t>(v >> (8 * k)));
  return b;
}

std::vector<uint64_t> read_bits(Scalar s, const ir::HostBuffer &b) {
  std::vector<uint64_t> out;
  unsigned bytes = width(s) / 8;
  for (size_t i = 0; i + bytes <= b.bytes.size(); i += bytes) {
    uint64_t v = 0;
    for (unsigned k = 0; k < bytes; ++k)
      v |= uint64_t{b.bytes[i + k]} << (8 * k);
    out.push_back(v);
  }
  return out;
}

/// One cell of the table.
struct Cell {
  std::string text; ///< the max ULP, "refused" or "-" (device absent)
  bool ran = false;
  int64_t max_ulp = 0;
  size_t specials_differ = 0;
  size_t beyond_bound = 0;
  std::string worst;         ///< the input with the largest error beyond the bound
  std::string first_special; ///< the first special input whose result differs from C
};

Cell measure(const MathOp &op, Scalar s, const std::string &device_name, const Inputs &in,
             const std::vector<uint64_t> &reference) {
  Cell cell;
  if (!why_device_absent(device_name).empty()) {
    cell.text = "-";
    return cell;
  }
  ir::ParseResult parsed = ir::parse_module(kernel_text(op, s), "precision.cir");
  if (!parsed.module || !ir::verify(*parsed.module).empty()) {
    ADD_FAILURE() << "a bad kernel: " << ir::to_string(parsed.errors) << kernel_text(op, s);
    return cell;
  }
  std::vector<ir::HostBuffer> buffers;
  for (const auto &operand : in.operands)
    buffers.push_back(host_buffer(s, operand));
  buffers.push_back(host_buffer(s, std::vector<uint64_t>(kN, 0)));
  std::vector<ir::Argument> args;
  for (ir::HostBuffer &b : buffers)
    args.push_back({&b, {}});
  runtime::Device &device = shared_device(device_name);
  ir::LaunchConfig config;
  config.num_workgroups = {static_cast<uint32_t>(kN / 64), 1, 1};
  config.subgroup_size = device.info().subgroup_size;
  auto problems = run_on_device(device, *parsed.module->kernels()[0], args, config);
  if (!problems.empty()) {
    bool refused = problems[0].message.find("does not support") != std::string::npos;
    EXPECT_TRUE(refused) << device_name << ": " << ir::to_string(problems);
    cell.text = refused ? "refused" : "error";
    return cell;
  }
  cell.ran = true;
  std::vector<uint64_t> got = read_bits(s, buffers.back());
  const Bound &bound = bound_of(op.name);
  unsigned ulp_bound = s == Scalar::F64 ? bound.ulp_f64 : bound.ulp;
  for (size_t k = 0; k < kN; ++k) {
    double g = ir::to_double(s, got[k]), w = ir::to_double(s, reference[k]);
    bool same_special = (std::isnan(g) && std::isnan(w)) || g == w;
    bool exact_in_c = std::isnan(w) || std::isinf(w) || w == 0 || std::fabs(w) == 1;
    if (k < in.specials && exact_in_c) {
      // C's special values: the same value (either zero sign for div/rem/fma aside: exact).
      if (!same_special || (!std::isnan(w) && std::signbit(g) != std::signbit(w))) {
        if (cell.specials_differ++ == 0) {
          std::string operands;
          for (const auto &operand : in.operands)
            operands +=
                fmt::format("{}{}", operands.empty() ? "" : ", ", ir::to_double(s, operand[k]));
          cell.first_special = fmt::format("{}({}) = {}, C: {}", op.name, operands, g, w);
        }
      }
      continue;
    }
    int64_t ulp =
        std::isnan(g) != std::isnan(w)
            ? std::numeric_limits<int64_t>::max()
            : (std::isnan(g) ? 0 : std::abs(ordered(s, got[k]) - ordered(s, reference[k])));
    cell.max_ulp = std::max(cell.max_ulp, ulp);
    bool within = ulp <= static_cast<int64_t>(ulp_bound) ||
                  (bound.absolute > 0 && std::fabs(g - w) <= bound.absolute);
    if (!within && cell.beyond_bound++ == 0) {
      std::string operands;
      for (const auto &operand : in.operands)
        operands += fmt::format("{}{}", operands.empty() ? "" : ", ", ir::to_double(s, operand[k]));
      cell.worst = fmt::format("{}({}) = {}, reference {} ({} ULP)", op.name, operands, g, w, ulp);
    }
  }
  cell.text =
      cell.max_ulp == std::numeric_limits<int64_t>::max() ? "NaN" : std::to_string(cell.max_ulp);
  if (cell.specials_differ)
    cell.text += fmt::format(" ({} special)", cell.specials_differ);
  return cell;
}

std::string table_markdown(const std::map<std::pair<std::string, Scalar>, std::vector<Cell>> &cells,
                           const std::vector<std::string> &present) {
  std::ostringstream md;
  md << "# Precision per op, type and device\n\n"
     << "Generated by `PrecisionTable.every_math_op_on_every_device_within_its_bound` "
        "(test/e2e/precision_test.cpp), which fails when this file is stale; "
        "`CUBECC_UPDATE_DOCS=1` rewrites it.\n\n"
     << "Largest error in ULP of the type over " << kN
     << " inputs per row (special values, a dense sweep of the domain, random values in it), "
        "against a long double reference rounded once (for f64 the reference keeps only 11 more "
        "bits, "
        "so f64 entries are good to ±1 ULP: `div` f64 shows 1 on every device for that reason). "
        "\"(n special)\": n of the special inputs "
        "(±0, ±inf, NaN, ±1, and their pairs) whose result in C's `<math.h>` is NaN, ±inf, ±0 or "
        "±1 and differs from it there (other special inputs count as ordinary ones). \"refused\": "
        "the target "
        "does not offer the op on that type (GLSL.std.450: transcendental functions on f64). "
        "\"-\": the device is not present where the table was made.\n\n"
     << "Devices measured: " << fmt::format("{}", fmt::join(present, ", ")) << ".\n\n"
     << "Where the backends differ, it is the target's own library: CUDA and HIP call the vendor's "
        "libdevice/ocml, the cpu device glibc's libm and libmvec (whose variants for AVX2 and "
        "AVX-512 differ in the last bits: the table names the x86-64 level it was made on, and "
        "the test compares it on that level only), Vulkan the driver's "
        "GLSL.std.450; `erf`, `asin`, `acos`, `atan`, `atan2`, `sinh`, `cosh`, `asinh`, `acosh`, "
        "`atanh`, `expm1`, `log1p`, `hypot` and C's `pow` special cases are the legalize pass's "
        "expansions on Vulkan (the same IR on "
        "every device that lacks them), "
        "`rem` and `fma` are exact on every backend.\n\n"
     << "| op | type | bound (ULP) |";
  for (const char *d : kDevices)
    md << " " << d << " |";
  md << "\n|---|---|---|";
  for (size_t i = 0; i < std::size(kDevices); ++i)
    md << "---|";
  md << "\n";
  for (const MathOp &op : kOps)
    for (Scalar s : kTypes) {
      const Bound &b = bound_of(op.name);
      md << "| `" << op.name << "` | " << type_name(s) << " | "
         << (s == Scalar::F64 ? b.ulp_f64 : b.ulp) << (b.absolute > 0 ? " or 2^-11 absolute" : "")
         << " |";
      for (const Cell &c : cells.at({op.name, s}))
        md << " " << c.text << " |";
      md << "\n";
    }
  return md.str();
}

TEST(PrecisionTable, every_math_op_on_every_device_within_its_bound) {
  // The devices here, as the table lists them. The cpu device's results are glibc's libmvec
  // variant for the host's x86-64 level (AVX2 and AVX-512 ones differ in the last bits), so the
  // level is part of its name: a machine of another level has another table.
  std::vector<std::string> listed_devices;
  for (const char *d : kDevices) {
    if (why_device_absent(d).empty()) {
      listed_devices.push_back(std::string(d) == "cpu"
                                   ? fmt::format("cpu ({})", shared_device(d).info().arch)
                                   : std::string(d));
    } else if (!device_is_optional(d)) {
      FAIL() << "cannot open the " << d << " device: " << why_device_absent(d);
    }
  }
  std::map<std::pair<std::string, Scalar>, std::vector<Cell>> cells;
  for (const MathOp &op : kOps)
    for (Scalar s : kTypes) {
      Inputs in = make_inputs(op, s);
      std::vector<uint64_t> reference(kN);
      for (size_t k = 0; k < kN; ++k) {
        long double x[3] = {0, 0, 0};
        for (unsigned a = 0; a < op.arity; ++a)
          x[a] = ir::to_double(s, in.operands[a][k]);
        reference[k] = round_to(s, op.reference(x[0], x[1], x[2]));
      }
      for (const char *d : kDevices) {
        SCOPED_TRACE(fmt::format("{} {} on {}", op.name, type_name(s), d));
        Cell c = measure(op, s, d, in, reference);
        std::string device = d;
        EXPECT_EQ(c.beyond_bound, 0u)
            << c.beyond_bound << " results beyond the bound; first: " << c.worst;
        bool specials_pinned =
            device == "interp" || device == "cpu" || std::string(op.name) == "pow";
        if (c.ran && specials_pinned) {
          EXPECT_EQ(c.specials_differ, 0u)
              << "special values differ from C; first: " << c.first_special;
        }
        cells[{op.name, s}].push_back(std::move(c));
      }
    }
  std::string md = table_markdown(cells, listed_devices);
  std::ofstream("precision.md") << md;
  std::string doc_path = std::string(CUBECC_SOURCE_DIR) + "/docs/precision.md";
  if (std::getenv("CUBECC_UPDATE_DOCS")) {
    std::ofstream(doc_path) << md;
    return;
  }
  std::ifstream doc(doc_path);
  std::stringstream documented;
  documented << doc.rdbuf();
  std::string listed = fmt::format("Devices measured: {}.", fmt::join(listed_devices, ", "));
  if (documented.str().find(listed) == std::string::npos)
    GTEST_SKIP() << "docs/precision.md lists other devices (or another x86-64 level for cpu) "
                    "than the ones here ("
                 << listed
                 << "); every result was within its bound, "
                    "and the table for this machine is precision.md in the working directory";
  EXPECT_EQ(documented.str(), md) << "docs/precision.md is stale: rerun with CUBECC_UPDATE_DOCS=1 "
                                     "and review the diff";
}

} // namespace
} // namespace cubecc::test
