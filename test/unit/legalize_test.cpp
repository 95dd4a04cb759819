//===- legalize_test.cpp - The legalize pass: pinned values, the legal-IR contract, expansions
//--===//
//
// Legalized kernels run in the reference interpreter over edge inputs (zero and -1 divisors, MIN,
// shift amounts past the width, NaN, infinities, out-of-range floats) and are compared with values
// computed here on the host from docs/ir.md's rules: the pinned integer results, saturating
// casts, C's pow (std::pow) and erf (std::erf, within the bound of docs/passes.md). Every op of a
// legalized kernel meets passes::is_legal, and a second run changes nothing for the pins.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/float16.h"
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/legalize.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace cubecc {
namespace {

using ir::Scalar;

std::unique_ptr<ir::Module> parse_and_legalize(const std::string &text) {
  ir::ParseResult parsed = ir::parse_module(text, "legalize_test.cir");
  EXPECT_TRUE(parsed.module) << ir::to_string(parsed.errors) << text;
  if (!parsed.module)
    return nullptr;
  passes::legalize(*parsed.module, passes::LegalizeTarget::portable());
  auto problems = ir::verify(*parsed.module);
  EXPECT_TRUE(problems.empty()) << ir::to_string(problems) << ir::to_string(*parsed.module);
  parsed.module->kernels()[0]->walk([&](const ir::Operation *op) {
    EXPECT_TRUE(passes::is_legal(*op)) << op->name() << " in\n" << ir::to_string(*parsed.module);
  });
  return std::move(parsed.module);
}

template <class T> ir::HostBuffer buffer(Scalar s, const std::vector<T> &values) {
  ir::HostBuffer b{s, std::vector<uint8_t>(values.size() * sizeof(T))};
  std::memcpy(b.bytes.data(), values.data(), b.bytes.size());
  return b;
}

template <class T> std::vector<T> read(const ir::HostBuffer &b) {
  std::vector<T> out(b.bytes.size() / sizeof(T));
  std::memcpy(out.data(), b.bytes.data(), b.bytes.size());
  return out;
}

/// Runs a kernel of one invocation per element over buffers (in order), 64 per workgroup.
void run(const ir::Kernel &kernel, std::vector<ir::HostBuffer *> buffers, size_t n) {
  std::vector<ir::Argument> args;
  for (ir::HostBuffer *b : buffers)
    args.push_back({b, {}});
  ir::LaunchConfig config;
  config.num_workgroups = {static_cast<uint32_t>((n + 63) / 64), 1, 1};
  config.subgroup_size = 4;
  EXPECT_EQ(ir::to_string(ir::interpret(kernel, args, config)), "");
}

/// The kernel: out[4i + 0..3] = div, rem, shl, shr of a[i], b[i] (in bounds: n is a multiple of
/// 64).
std::string integer_kernel(const std::string &t) {
  return fmt::format(R"(module @m {{
  kernel @k(%a: buffer<{0}, read>, %b: buffer<{0}, read>, %out: buffer<{0}, readwrite>) workgroup(64, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
    %x = load %a, %i : {0}
    %y = load %b, %i : {0}
    %c4 = const 4 : u32
    %base = mul %i, %c4 : u32
    %c1 = const 1 : u32
    %c2 = const 2 : u32
    %c3 = const 3 : u32
    %o1 = add %base, %c1 : u32
    %o2 = add %base, %c2 : u32
    %o3 = add %base, %c3 : u32
    %d = div %x, %y : {0}
    %r = rem %x, %y : {0}
    %l = shl %x, %y : {0}
    %s = shr %x, %y : {0}
    store %out, %base, %d
    store %out, %o1, %r
    store %out, %o2, %l
    store %out, %o3, %s
    return
  }}
}}
)",
                     t);
}

template <class T> void check_integer_pins(Scalar s) {
  using U = std::make_unsigned_t<T>;
  constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
  std::vector<T> specials = {0, 1, T(-1), 2, 7, kMin, kMax, T(kMin + 1), 3, T(-7)};
  std::vector<T> a, b;
  for (T x : specials)
    for (T y : specials)
      a.push_back(x), b.push_back(y);
  std::mt19937_64 rng(7);
  while (a.size() % 64 != 0 || a.size() < 256) {
    a.push_back(static_cast<T>(rng()));
    b.push_back(rng() % 3 == 0 ? static_cast<T>(rng() % 200) : static_cast<T>(rng()));
  }
  auto module = parse_and_legalize(integer_kernel(std::string(ir::scalar_name(s))));
  ASSERT_TRUE(module);
  ir::HostBuffer ba = buffer(s, a), bb = buffer(s, b),
                 out = buffer(s, std::vector<T>(4 * a.size()));
  run(*module->kernels()[0], {&ba, &bb, &out}, a.size());
  std::vector<T> got = read<T>(out);
  constexpr unsigned w = sizeof(T) * 8;
  for (size_t k = 0; k < a.size(); ++k) {
    T x = a[k], y = b[k];
    // docs/ir.md §4.2-4.3 with the pins of docs/passes.md: x/0 = 0, x%0 = 0, x/-1 = -x (MIN
    // wraps), x%-1 = 0, amounts modulo the width; computed in a wider type where C++ would trap.
    T div, rem;
    if (y == 0)
      div = 0, rem = 0;
    else if (std::is_signed_v<T> && y == T(-1))
      div = static_cast<T>(U(0) - U(x)), rem = 0;
    else
      div = static_cast<T>(x / y), rem = static_cast<T>(x % y);
    unsigned n = static_cast<unsigned>(U(y) % w);
    T shl = static_cast<T>(U(U(x) << n));
    T shr = std::is_signed_v<T> ? static_cast<T>(static_cast<int64_t>(x) >> n)
                                : static_cast<T>(U(x) >> n);
    SCOPED_TRACE(fmt::format("{} x={} y={}", ir::scalar_name(s), int64_t(x), int64_t(y)));
    EXPECT_EQ(got[4 * k + 0], div);
    EXPECT_EQ(got[4 * k + 1], rem);
    EXPECT_EQ(got[4 * k + 2], shl);
    EXPECT_EQ(got[4 * k + 3], shr);
  }
}

TEST(Legalize, integer_division_and_shifts_give_the_pinned_values) {
  check_integer_pins<int8_t>(Scalar::I8);
  check_integer_pins<int32_t>(Scalar::I32);
  check_integer_pins<int64_t>(Scalar::I64);
  check_integer_pins<uint8_t>(Scalar::U8);
  check_integer_pins<uint16_t>(Scalar::U16);
  check_integer_pins<uint32_t>(Scalar::U32);
  check_integer_pins<uint64_t>(Scalar::U64);
}

//===--- Bit counting, mulhi and saturating arithmetic --------------------------------------===//

/// The kernel: out[8i + 0..7] = popcount, clz, ctz, ffs, bitreverse of a[i] and mulhi, add_sat,
/// sub_sat of a[i], b[i].
std::string bit_kernel(const std::string &t) {
  return fmt::format(R"(module @m {{
  kernel @k(%a: buffer<{0}, read>, %b: buffer<{0}, read>, %out: buffer<{0}, readwrite>) workgroup(64, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
    %x = load %a, %i : {0}
    %y = load %b, %i : {0}
    %c8 = const 8 : u32
    %base = mul %i, %c8 : u32
    %r0 = popcount %x : {0}
    %r1 = clz %x : {0}
    %r2 = ctz %x : {0}
    %r3 = ffs %x : {0}
    %r4 = bitreverse %x : {0}
    %r5 = mulhi %x, %y : {0}
    %r6 = add_sat %x, %y : {0}
    %r7 = sub_sat %x, %y : {0}
{1}    return
  }}
}}
)",
                     t, [] {
                       std::string stores;
                       for (int k = 0; k < 8; ++k)
                         stores += fmt::format("    %c{0}_ = const {0} : u32\n    %o{0} = add "
                                               "%base, %c{0}_ : u32\n    store %out, %o{0}, "
                                               "%r{0}\n",
                                               k);
                       return stores;
                     }());
}

/// The eight results for (x, y), from C++20's <bit> and 128-bit arithmetic.
template <class T> std::array<T, 8> bit_reference(T x, T y) {
  using U = std::make_unsigned_t<T>;
  constexpr int w = sizeof(T) * 8;
  U ux = static_cast<U>(x);
  U reversed = 0;
  for (int k = 0; k < w; ++k)
    if ((ux >> k) & 1)
      reversed = static_cast<U>(reversed | U(U(1) << (w - 1 - k)));
  __int128 product; // exact for every width up to 64
  if constexpr (std::is_signed_v<T>)
    product = __int128(x) * __int128(y);
  else
    product = static_cast<__int128>(static_cast<unsigned __int128>(x) * y);
  auto saturated = [](__int128 v) {
    return static_cast<T>(
        std::clamp<__int128>(v, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  };
  return {static_cast<T>(std::popcount(ux)),
          static_cast<T>(std::countl_zero(ux)),
          static_cast<T>(std::countr_zero(ux)),
          static_cast<T>(ux == 0 ? 0 : std::countr_zero(ux) + 1),
          static_cast<T>(reversed),
          static_cast<T>(static_cast<U>(product >> w)),
          saturated(__int128(x) + __int128(y)),
          saturated(__int128(x) - __int128(y))};
}

/// Runs bit_kernel for T, original and legalized, over edge values, every 8-bit value and
/// random pairs; both must match the host.
template <class T> void check_bit_ops(Scalar s) {
  constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
  std::vector<T> specials = {0,    1,           T(-1),       2,     3,       7,      kMin,
                             kMax, T(kMin + 1), T(kMax - 1), T(-7), T(0x55), T(0x80)};
  std::vector<T> a, b;
  for (T x : specials)
    for (T y : specials)
      a.push_back(x), b.push_back(y);
  std::mt19937_64 rng(11);
  if constexpr (sizeof(T) == 1) // every value against random partners
    for (int v = 0; v < 256; ++v)
      for (int k = 0; k < 4; ++k)
        a.push_back(static_cast<T>(v)), b.push_back(static_cast<T>(rng()));
  while (a.size() % 64 != 0 || a.size() < 2048) {
    // Random values of every magnitude: a random number of low bits kept.
    auto value = [&] { return static_cast<T>(rng() >> (rng() % (sizeof(T) * 8))); };
    a.push_back(rng() % 2 ? value() : static_cast<T>(-value()));
    b.push_back(rng() % 2 ? value() : static_cast<T>(-value()));
  }
  std::string text = bit_kernel(std::string(ir::scalar_name(s)));
  ir::ParseResult original = ir::parse_module(text, "bit_ops.cir");
  ASSERT_TRUE(original.module) << ir::to_string(original.errors);
  auto legalized = parse_and_legalize(text);
  ASSERT_TRUE(legalized);
  for (const char *op :
       {"popcount", "clz", "ctz", "ffs", "bitreverse", "mulhi", "add_sat", "sub_sat"})
    EXPECT_EQ(ir::to_string(*legalized).find(std::string(" = ") + op + " "), std::string::npos)
        << op << " was not expanded";
  for (ir::Module *module : {original.module.get(), legalized.get()}) {
    ir::HostBuffer ba = buffer(s, a), bb = buffer(s, b),
                   out = buffer(s, std::vector<T>(8 * a.size()));
    run(*module->kernels()[0], {&ba, &bb, &out}, a.size());
    std::vector<T> got = read<T>(out);
    static const char *const kNames[] = {"popcount",   "clz",   "ctz",     "ffs",
                                         "bitreverse", "mulhi", "add_sat", "sub_sat"};
    int failures = 0;
    for (size_t k = 0; k < a.size() && failures < 20; ++k) {
      std::array<T, 8> want = bit_reference(a[k], b[k]);
      for (int r = 0; r < 8; ++r)
        if (got[8 * k + r] != want[r]) {
          ++failures;
          ADD_FAILURE() << (module == legalized.get() ? "legalized " : "original ") << kNames[r]
                        << " " << ir::scalar_name(s) << " x=" << int64_t(a[k])
                        << " y=" << int64_t(b[k]) << ": got " << int64_t(got[8 * k + r])
                        << ", want " << int64_t(want[r]);
        }
    }
  }
}

TEST(Legalize, bit_counting_mulhi_and_saturating_ops_match_the_host_before_and_after) {
  check_bit_ops<int8_t>(Scalar::I8);
  check_bit_ops<uint8_t>(Scalar::U8);
  check_bit_ops<int16_t>(Scalar::I16);
  check_bit_ops<uint16_t>(Scalar::U16);
  check_bit_ops<int32_t>(Scalar::I32);
  check_bit_ops<uint32_t>(Scalar::U32);
  check_bit_ops<int64_t>(Scalar::I64);
  check_bit_ops<uint64_t>(Scalar::U64);
}

/// The saturating conversion of docs/ir.md §4.6, computed on the host.
template <class T> T saturate(double x) {
  if (std::isnan(x))
    return 0;
  x = std::trunc(x);
  if (x <= static_cast<double>(std::numeric_limits<T>::min()))
    return std::numeric_limits<T>::min();
  if (x >= std::ldexp(1.0, std::numeric_limits<T>::digits))
    return std::numeric_limits<T>::max();
  return static_cast<T>(x);
}

template <class T> void check_float_to_int(Scalar from, Scalar to) {
  std::vector<double> values = {0.0,          -0.0,          1.5,          -1.5,   0.99,    -0.99,
                                127.5,        128.0,         -128.0,       -129.0, 255.9,   256.0,
                                65504.0,      -65504.0,      3e9,          -3e9,   1e19,    -1e19,
                                2147483648.0, -2147483648.0, 4294967296.0, 9.3e18, -9.3e18, 1.9e19};
  values.push_back(std::numeric_limits<double>::infinity());
  values.push_back(-std::numeric_limits<double>::infinity());
  values.push_back(std::numeric_limits<double>::quiet_NaN());
  while (values.size() % 64 != 0)
    values.push_back(static_cast<double>(values.size()) * -3.25);
  std::vector<uint64_t> bits;
  for (double v : values)
    bits.push_back(ir::from_double(from, v));
  std::string f(ir::scalar_name(from)), t(ir::scalar_name(to));
  auto module = parse_and_legalize(fmt::format(R"(module @m {{
  kernel @k(%a: buffer<{0}, read>, %out: buffer<{1}, readwrite>) workgroup(64, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
    %x = load %a, %i : {0}
    %c = cast %x : {1}
    store %out, %i, %c
    return
  }}
}}
)",
                                               f, t));
  ASSERT_TRUE(module);
  ir::HostBuffer in{from, {}};
  for (uint64_t b : bits)
    for (unsigned k = 0; k < ir::scalar_bits(from) / 8; ++k)
      in.bytes.push_back(static_cast<uint8_t>(b >> (8 * k)));
  ir::HostBuffer out = buffer(to, std::vector<T>(values.size()));
  run(*module->kernels()[0], {&in, &out}, values.size());
  std::vector<T> got = read<T>(out);
  for (size_t k = 0; k < values.size(); ++k) {
    double x = ir::to_double(from, bits[k]); // the value in the source type
    EXPECT_EQ(got[k], saturate<T>(x)) << f << " " << x << " -> " << t;
  }
}

TEST(Legalize, float_to_integer_casts_saturate_and_send_nan_to_zero) {
  check_float_to_int<int32_t>(Scalar::F32, Scalar::I32);
  check_float_to_int<uint32_t>(Scalar::F32, Scalar::U32);
  check_float_to_int<int8_t>(Scalar::F32, Scalar::I8);
  check_float_to_int<uint8_t>(Scalar::F64, Scalar::U8);
  check_float_to_int<int64_t>(Scalar::F64, Scalar::I64);
  check_float_to_int<uint64_t>(Scalar::F32, Scalar::U64);
  check_float_to_int<int64_t>(Scalar::F16, Scalar::I64);  // -2^63 is -inf in f16
  check_float_to_int<uint16_t>(Scalar::F16, Scalar::U16); // 2^16 is +inf in f16
  check_float_to_int<int16_t>(Scalar::BF16, Scalar::I16);
}

TEST(Legalize, a_second_run_leaves_the_integer_and_cast_rewrites_alone) {
  std::string text = integer_kernel("i32");
  auto once = parse_and_legalize(text);
  ASSERT_TRUE(once);
  std::string first = ir::to_string(*once);
  passes::legalize(*once, passes::LegalizeTarget::portable());
  EXPECT_EQ(ir::to_string(*once), first);
}

/// Distance in units in the last place between two floats (0 for equal values, both NaN).
int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  auto ordered = [](float f) {
    int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t(std::numeric_limits<int32_t>::min()) - i : int64_t(i);
  };
  return std::abs(ordered(a) - ordered(b));
}

TEST(Legalize, expanded_pow_follows_c_and_expanded_erf_stays_within_two_ulp) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f,  -0.5f,
                                3.0f, -3.0f, kInf, -kInf, kNaN, 1e-3f, 40.0f, -2.5f};
  std::vector<float> x, y;
  for (float p : special)
    for (float q : special)
      x.push_back(p), y.push_back(q);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> wide(-8.0f, 8.0f), positive(0.01f, 10.0f);
  while (x.size() % 64 != 0 || x.size() < 4096) {
    x.push_back(x.size() % 2 ? wide(rng) : positive(rng));
    y.push_back(wide(rng));
  }
  auto module = parse_and_legalize(R"(module @m {
  kernel @k(%a: buffer<f32, read>, %b: buffer<f32, read>, %p: buffer<f32, readwrite>, %e: buffer<f32, readwrite>) workgroup(64, 1, 1) {
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %x = load %a, %i : f32
    %y = load %b, %i : f32
    %pw = pow %x, %y : f32
    %er = erf %x : f32
    store %p, %i, %pw
    store %e, %i, %er
    return
  }
}
)");
  ASSERT_TRUE(module);
  ir::HostBuffer ba = buffer(Scalar::F32, x), bb = buffer(Scalar::F32, y);
  ir::HostBuffer bp = buffer(Scalar::F32, std::vector<float>(x.size()));
  ir::HostBuffer be = buffer(Scalar::F32, std::vector<float>(x.size()));
  run(*module->kernels()[0], {&ba, &bb, &bp, &be}, x.size());
  std::vector<float> pw = read<float>(bp), er = read<float>(be);
  int64_t worst_erf = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    // pow(|x|, y) is the interpreter's std::pow in float: the expansion adds only exact steps,
    // so it equals C's powf, computed here in double and rounded (ties aside: 1 ULP).
    float want = static_cast<float>(std::pow(static_cast<double>(x[k]), static_cast<double>(y[k])));
    EXPECT_LE(ulps(pw[k], want), 1)
        << "pow(" << x[k] << ", " << y[k] << ") = " << pw[k] << ", C: " << want;
    float erf_want = static_cast<float>(std::erf(static_cast<double>(x[k])));
    worst_erf = std::max(worst_erf, ulps(er[k], erf_want));
    EXPECT_LE(ulps(er[k], erf_want), 2)
        << "erf(" << x[k] << ") = " << er[k] << ", want " << erf_want;
  }
  RecordProperty("erf_f32_max_ulp", static_cast<int>(worst_erf));
}

/// The expansions for targets without the C library's functions (docs/passes.md): run in the
/// interpreter (whose exp, log and sqrt are glibc's, within 1 ULP), each must stay within its
/// bound of C's function computed in double and rounded once.
TEST(Legalize, expanded_libm_functions_follow_c_within_a_few_ulp) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kMax = std::numeric_limits<float>::max();
  constexpr float kTiny = std::numeric_limits<float>::denorm_min();
  struct Function {
    const char *op;
    bool binary;
    double (*reference)(double, double);
    float lo, hi; ///< the random inputs' range (special ones are added to every function)
    int bound;    ///< ULP
  };
  const Function functions[] = {
      {"expm1", false, [](double x, double) { return std::expm1(x); }, -20, 20, 3},
      {"log1p", false, [](double x, double) { return std::log1p(x); }, -1, 50, 3},
      {"hypot", true, [](double x, double y) { return std::hypot(x, y); }, -1e3f, 1e3f, 3},
      {"atan", false, [](double x, double) { return std::atan(x); }, -50, 50, 3},
      {"atan2", true, [](double y, double x) { return std::atan2(y, x); }, -10, 10, 4},
      {"asin", false, [](double x, double) { return std::asin(x); }, -1, 1, 4},
      {"acos", false, [](double x, double) { return std::acos(x); }, -1, 1, 4},
      {"sinh", false, [](double x, double) { return std::sinh(x); }, -12, 12, 4},
      {"cosh", false, [](double x, double) { return std::cosh(x); }, -12, 12, 4},
      {"asinh", false, [](double x, double) { return std::asinh(x); }, -2000, 2000, 4},
      {"acosh", false, [](double x, double) { return std::acosh(x); }, 1, 2000, 4},
      {"atanh", false, [](double x, double) { return std::atanh(x); }, -1, 1, 4},
  };
  std::vector<float> special = {0.0f,   -0.0f,  1.0f,    -1.0f,   0.5f,    -0.5f,   0.49999997f,
                                -0.29f, 0.414f, 0.415f,  3.0f,    kInf,    -kInf,   kNaN,
                                1e-30f, -1e-7f, kTiny,   kMax,    88.5f,   -89.0f,  -1.5f,
                                1e20f,  1e-20f, 1.0001f, 0.9999f, 2.4142f, 1500.5f, 1e-3f};
  for (const Function &fn : functions) {
    std::vector<float> x, y;
    for (float p : special)
      for (float q : fn.binary ? special : std::vector<float>{1.0f})
        x.push_back(p), y.push_back(q);
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> range(fn.lo, fn.hi), unit(-1, 1);
    std::uniform_int_distribution<int> exponent(-30, 30);
    while (x.size() % 64 != 0 || x.size() < 4096) {
      x.push_back(x.size() % 4 == 0 ? std::ldexp(unit(rng), exponent(rng)) : range(rng));
      y.push_back(x.size() % 3 == 0 ? std::ldexp(unit(rng), exponent(rng)) : range(rng));
    }
    std::string call = fn.binary ? fmt::format("{} %x, %y", fn.op) : fmt::format("{} %x", fn.op);
    auto module = parse_and_legalize(fmt::format(R"(module @m {{
  kernel @k(%a: buffer<f32, read>, %b: buffer<f32, read>, %out: buffer<f32, readwrite>) workgroup(64, 1, 1) {{
    %gid = global_id : u32x3
    %i = vec.extract %gid {{lane = 0}} : u32
    %x = load %a, %i : f32
    %y = load %b, %i : f32
    %r = {} : f32
    store %out, %i, %r
    return
  }}
}}
)",
                                                 call));
    ASSERT_TRUE(module);
    EXPECT_EQ(ir::to_string(*module).find(std::string(" = ") + fn.op + " "), std::string::npos)
        << fn.op << " was not expanded";
    ir::HostBuffer ba = buffer(Scalar::F32, x), bb = buffer(Scalar::F32, y);
    ir::HostBuffer out = buffer(Scalar::F32, std::vector<float>(x.size()));
    run(*module->kernels()[0], {&ba, &bb, &out}, x.size());
    std::vector<float> got = read<float>(out);
    int64_t worst = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      float want = static_cast<float>(fn.reference(x[k], y[k]));
      worst = std::max(worst, ulps(got[k], want));
      EXPECT_LE(ulps(got[k], want), fn.bound)
          << fn.op << "(" << x[k] << (fn.binary ? fmt::format(", {}", y[k]) : "")
          << ") = " << got[k] << ", want " << want;
      if (got[k] == 0 && want == 0) { // the sign of a zero result is C's too
        EXPECT_EQ(std::signbit(got[k]), std::signbit(want)) << fn.op << "(" << x[k] << ")";
      }
    }
    RecordProperty(std::string(fn.op) + "_f32_max_ulp", static_cast<int>(worst));
  }
}

} // namespace
} // namespace cubecc
