//===- example_cases.cpp - Every registered example kernel against a host reference ---------===//
//
// Each registered (kernel, configuration) of examples/kernels is traced, run in the reference
// interpreter on deterministic pseudo-random inputs, for subgroup widths 8 and 32, and compared
// with a straightforward host computation of what the kernel's header comment promises. Sizes
// are not multiples of the workgroup, tile or vector sizes, so the bounds checks matter; 2-D
// tensors have padded or transposed strides, and the elements of a buffer outside the tensor
// start as NaN sentinels: an output one must come back untouched, an input one read by mistake
// shows up as a NaN. A registered kernel without a case in `cases()` fails its test, so a new
// example cannot go untested.
//
// Comparisons. Integers (histogram, u32 prefix sum): bit-exact. Floats computed with the same
// operations in the same order as the host (axpy, transpose, matmul's fma chain, maxima): bit
// exact. Float sums whose order the kernel chooses (subgroup reductions, grid strides): within the
// error bound of a sum in any order, see sum_tolerance(); and again on "dyadic" inputs, whose
// every partial sum is exact in f32, bit-exact, which catches a lost or doubled element that the
// rounding bound is too loose to see.
//
//===-----------------------------------------------------------------------------------------===//
#include "example_cases.h"
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/verifier.h"
#include "cubecc/passes/pass_manager.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubecc::test::examples {
namespace {

using namespace cubecc::ir;

std::vector<Diagnostic> interpret_launch(const ir::Kernel &kernel,
                                         std::span<const ir::Argument> args,
                                         const ir::LaunchConfig &config) {
  return ir::interpret(kernel, args, config);
}

Launcher &launcher() {
  static Launcher current = interpret_launch;
  return current;
}

/// The unit roundoff of f32 (half an ulp of 1).
constexpr double kUnit = 0x1p-24;

/// The error bound of a float sum of `terms` terms added in any order and association (any binary
/// tree of additions, so subgroup reductions, grid strides and sequential loops alike):
/// |computed - exact| <= (terms - 1) * u * sum |x_i| + O(u^2) (Higham, "Accuracy and Stability
/// of Numerical Algorithms", §4.2). `terms * u * sum |x_i|` also covers the O(u^2) term. It is
/// rigorous, so it cannot fail spuriously; the dyadic inputs make up for its looseness.
double sum_tolerance(size_t terms, double abs_sum) {
  return static_cast<double>(terms) * kUnit * abs_sum;
}

uint32_t ceil_div(uint32_t a, uint32_t b) {
  return (a + b - 1) / b;
}

/// Pseudo-random values from a fixed seed; only mt19937's output (fixed by the standard) is used,
/// so the inputs are the same with every standard library.
class Inputs {
public:
  explicit Inputs(uint32_t seed) : rng_(seed) {}
  uint32_t u32() { return static_cast<uint32_t>(rng_()); }
  uint32_t below(uint32_t n) { return u32() % n; }
  /// In [lo, hi), with 24 random bits.
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * (static_cast<float>(u32() >> 8) * 0x1p-24f);
  }
  /// k / 1024 for an integer k in [-4096, 4096]: |x| <= 4, a multiple of 2^-10. A sum of up to
  /// 4096 of them (magnitude <= 16384 = 2^24 * 2^-10) is exact in f32 in any order.
  float dyadic() { return static_cast<float>(static_cast<int>(below(8193)) - 4096) * 0x1p-10f; }

private:
  std::mt19937 rng_;
};

/// Float sums are checked on both kinds of input (see the file comment).
enum class InputKind { Random, Dyadic };
constexpr InputKind kFloatInputKinds[] = {InputKind::Random, InputKind::Dyadic};
const char *name_of(InputKind k) {
  return k == InputKind::Random ? "random inputs" : "dyadic inputs (exact sums)";
}

template <class T> constexpr Scalar element_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint32_t>);
  return std::is_same_v<T, float> ? Scalar::F32 : Scalar::U32;
}

/// What a buffer holds outside its tensor (and an output before the kernel writes it): NaNs with
/// recognisable payloads for floats.
template <class T> T output_sentinel() {
  if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<float>(0x7fc0deadu);
  else
    return 0xdeadbeefu;
}
float input_padding() {
  return std::bit_cast<float>(0x7fc00badu);
}

template <class T> uint32_t bits_of(T v) {
  return std::bit_cast<uint32_t>(v);
}

template <class T> std::string show(T v) {
  std::ostringstream s;
  if constexpr (std::is_same_v<T, float>)
    s << std::setprecision(9) << v << " (0x" << std::hex << bits_of(v) << ")";
  else
    s << v;
  return s.str();
}

/// Collects the mismatches of one comparison; reports the count and the first few.
class Mismatches {
public:
  void add(const std::string &what) {
    if (count_++ < 8)
      text_ += "  " + what + "\n";
  }
  /// Fails the test (non-fatally) when there was a mismatch.
  void expect_none(std::string_view what) const {
    EXPECT_EQ(count_, 0u) << what << ": " << count_ << " mismatch(es), the first:\n" << text_;
  }

private:
  size_t count_ = 0;
  std::string text_;
};

std::string at(std::string_view name, size_t i) {
  return std::string(name) + "(" + std::to_string(i) + ")";
}
std::string at(std::string_view name, size_t i, size_t j) {
  return std::string(name) + "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
}

template <class T> void expect_bits(Mismatches &m, const std::string &where, T got, T want) {
  if (bits_of(got) != bits_of(want))
    m.add(where + " = " + show(got) + ", expected " + show(want));
}

void expect_near(Mismatches &m, const std::string &where, float got, double want,
                 double tolerance) {
  if (!(std::abs(static_cast<double>(got) - want) <= tolerance)) // NaN fails
    m.add(where + " = " + show(got) + ", expected " + show(static_cast<float>(want)) + " within " +
          show(static_cast<float>(tolerance)));
}

/// A float sum the kernel computes in its own order: exact on dyadic inputs, within
/// sum_tolerance() otherwise. `exact` is the sum in double (exact for dyadic inputs).
void expect_sum(Mismatches &m, const std::string &where, float got, double exact, size_t terms,
                double abs_sum, InputKind kind) {
  if (kind == InputKind::Dyadic)
    expect_bits(m, where, got, static_cast<float>(exact));
  else
    expect_near(m, where, got, exact, sum_tolerance(terms, abs_sum));
}

/// The layout of a rows x cols tensor in its buffer.
struct Layout2 {
  uint32_t rows, cols, stride0, stride1;
  /// Elements of the buffer after the tensor's last one: a write there is seen as a changed
  /// sentinel (the interpreter itself catches writes past the buffer).
  static constexpr size_t kSlack = 5;
  size_t offset(uint32_t r, uint32_t c) const { return size_t{r} * stride0 + size_t{c} * stride1; }
  size_t buffer_size() const { return offset(rows - 1, cols - 1) + 1 + kSlack; }
  std::vector<bool> inside() const {
    std::vector<bool> in(buffer_size());
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c)
        in[offset(r, c)] = true;
    return in;
  }
  /// Row-major with `pad` elements after every row.
  static Layout2 padded_rows(uint32_t rows, uint32_t cols, uint32_t pad) {
    return {rows, cols, cols + pad, 1};
  }
  /// Column-major (element (r, c) at r + c * rows).
  static Layout2 column_major(uint32_t rows, uint32_t cols) { return {rows, cols, 1, rows}; }
  std::string str() const {
    return std::to_string(rows) + "x" + std::to_string(cols) + " strides {" +
           std::to_string(stride0) + ", " + std::to_string(stride1) + "}";
  }
};

/// The elements of `buffer` outside the tensor still hold the output sentinel.
void expect_untouched_outside(Mismatches &m, std::string_view name,
                              const std::vector<float> &buffer, const Layout2 &layout) {
  std::vector<bool> in = layout.inside();
  for (size_t i = 0; i < buffer.size(); ++i)
    if (!in[i] && bits_of(buffer[i]) != bits_of(output_sentinel<float>()))
      m.add(std::string(name) + " buffer element " + std::to_string(i) +
            " (outside the tensor) was written: " + show(buffer[i]));
}

/// The arguments of one launch, in the launch ABI of dsl/include/cubecc/dsl/memory.h.
class Launch {
public:
  /// Adds a Tensor<T, R> parameter whose buffer holds `data`; returns the buffer's handle.
  template <class T>
  size_t tensor(const std::vector<T> &data, const std::vector<uint32_t> &shape,
                const std::vector<uint32_t> &strides) {
    HostBuffer &b = buffers_.emplace_back(
        HostBuffer{element_of<T>(), std::vector<uint8_t>(data.size() * sizeof(T))});
    std::memcpy(b.bytes.data(), data.data(), b.bytes.size());
    args_.push_back(Argument{&b, {}});
    for (uint32_t s : shape)
      args_.push_back(Argument{nullptr, {s}});
    for (uint32_t s : strides)
      args_.push_back(Argument{nullptr, {s}});
    return buffers_.size() - 1;
  }
  /// A contiguous 1-D tensor.
  template <class T> size_t tensor(const std::vector<T> &data) {
    return tensor(data, {static_cast<uint32_t>(data.size())}, {1});
  }
  size_t tensor(const std::vector<float> &data, const Layout2 &l) {
    return tensor(data, {l.rows, l.cols}, {l.stride0, l.stride1});
  }
  void f32(float v) { args_.push_back(Argument{nullptr, {bits_of(v)}}); }

  /// Runs the launch; a diagnostic from the interpreter fails the test. Returns whether the
  /// launch completed.
  bool run(const Kernel &kernel, std::array<uint32_t, 3> grid, uint32_t subgroup_size) {
    LaunchConfig config;
    config.num_workgroups = grid;
    config.subgroup_size = subgroup_size;
    std::vector<Diagnostic> problems = launcher()(kernel, args_, config);
    EXPECT_TRUE(problems.empty()) << "the launch reports, for a grid of " << grid[0] << "x"
                                  << grid[1] << "x" << grid[2] << ":\n"
                                  << to_string(problems);
    return problems.empty();
  }

  template <class T> std::vector<T> buffer(size_t handle) const {
    const HostBuffer &b = buffers_[handle];
    std::vector<T> out(b.bytes.size() / sizeof(T));
    std::memcpy(out.data(), b.bytes.data(), b.bytes.size());
    return out;
  }

private:
  std::deque<HostBuffer> buffers_; // stable addresses for the arguments
  std::vector<Argument> args_;
};

//===- axpy: y = a * x + y -------------------------------------------------------------------===//

/// One invocation per `width` elements. Exact: the IR multiplies and then adds (two roundings, no
/// contraction, docs/ir.md §4.2), as the host does below.
void run_axpy(const Case &c, uint32_t width) {
  // None of these is a multiple of the workgroup's 256 * width elements; 3001 and 3003 are not
  // multiples of the vector width either (the kernel promises y = a * x + y for every element).
  for (uint32_t n : {3000u, 3001u, 3003u}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Inputs gen(n);
    std::vector<float> x(n), y(n);
    for (uint32_t i = 0; i < n; ++i) {
      x[i] = gen.uniform(-10, 10);
      y[i] = gen.uniform(-10, 10);
    }
    const float a = gen.uniform(-4, 4);
    Launch launch;
    launch.tensor(x);
    size_t y_out = launch.tensor(y);
    launch.f32(a);
    if (!launch.run(c.kernel, {ceil_div(n, c.workgroup(0) * width), 1, 1}, c.subgroup_size))
      continue;
    std::vector<float> got = launch.buffer<float>(y_out);
    Mismatches m;
    for (uint32_t i = 0; i < n; ++i) {
      volatile float product = a * x[i]; // rounded on its own, as the IR's mul
      expect_bits(m, at("y", i), got[i], product + y[i]);
    }
    m.expect_none("y = a * x + y");
  }
}

//===- reduce: one sum or maximum per workgroup ----------------------------------------------===//

/// Launches G workgroups (each folds the elements j with (j mod G * 256) / 256 == w, the grid
/// stride), checks the G partials, then reduces them with one more launch of one workgroup, as
/// the kernel's comment says, and checks the total. Maxima are exact (no rounding); sums as
/// expect_sum().
/// `width` > 1: groups of `width` elements per load where the tensor is contiguous (element j in
/// group j / width, the last n % width elements one per invocation of workgroup 0), one element
/// at a time where it is not (stride 2: the elements between are NaN sentinels).
void run_reduce(const Case &c, bool is_max, uint32_t width = 1) {
  const uint32_t wg = c.workgroup(0);
  const uint32_t n = 3001; // 11 workgroups' worth and a partial one
  std::vector<InputKind> kinds = {InputKind::Random};
  if (!is_max)
    kinds.push_back(InputKind::Dyadic);
  std::vector<uint32_t> strides = {1};
  if (width > 1)
    strides.push_back(2);
  for (InputKind kind : kinds)
    // G = 5: every invocation folds 2 or 3 elements; G = 13: 3328 invocations, some get none.
    for (uint32_t groups : {5u, 13u})
      for (uint32_t stride : strides) {
        SCOPED_TRACE(std::string(name_of(kind)) + ", n = " + std::to_string(n) + ", " +
                     std::to_string(groups) + " workgroups, stride " + std::to_string(stride));
        Inputs gen(n + groups);
        std::vector<float> in(n);
        for (float &v : in)
          // All negative for the maximum, so an identity of 0 instead of -inf would show.
          v = is_max                      ? gen.uniform(-100, -1)
              : kind == InputKind::Dyadic ? gen.dyadic()
                                          : gen.uniform(-10, 10);
        std::vector<float> strided(size_t{n} * stride, input_padding());
        for (uint32_t j = 0; j < n; ++j)
          strided[size_t{j} * stride] = in[j];
        Launch launch;
        launch.tensor(strided, {n}, {stride});
        size_t out = launch.tensor(std::vector<float>(groups, output_sentinel<float>()));
        if (!launch.run(c.kernel, {groups, 1, 1}, c.subgroup_size))
          continue;
        std::vector<float> partials = launch.buffer<float>(out);

        std::vector<double> sum(groups), abs_sum(groups);
        std::vector<float> max(groups, -std::numeric_limits<float>::infinity());
        std::vector<size_t> terms(groups);
        const uint32_t per_load = stride == 1 ? width : 1, whole = n / per_load * per_load;
        for (uint32_t j = 0; j < n; ++j) {
          uint32_t w = j < whole ? j / per_load % (groups * wg) / wg : (j - whole) / wg;
          sum[w] += in[j];
          abs_sum[w] += std::abs(in[j]);
          max[w] = std::max(max[w], in[j]);
          ++terms[w];
        }
        Mismatches m;
        for (uint32_t w = 0; w < groups; ++w)
          if (is_max)
            expect_bits(m, at("out", w), partials[w], max[w]);
          else
            expect_sum(m, at("out", w), partials[w], sum[w], terms[w], abs_sum[w], kind);
        m.expect_none("the per-workgroup partials");

        Launch second;
        second.tensor(partials);
        size_t total_out = second.tensor(std::vector<float>(1, output_sentinel<float>()));
        if (!second.run(c.kernel, {1, 1, 1}, c.subgroup_size))
          continue;
        float total = second.buffer<float>(total_out)[0];
        double exact = 0, abs_total = 0;
        for (float v : in) {
          exact += v;
          abs_total += std::abs(v);
        }
        Mismatches t;
        if (is_max)
          expect_bits(t, "total", total, *std::max_element(in.begin(), in.end()));
        else // the partials' errors plus those of adding the G partials
          expect_sum(t, "total", total, exact, n + groups, abs_total, kind);
        t.expect_none("the total, from a second launch on the partials");
      }
}

//===- softmax: one row per workgroup --------------------------------------------------------===//

/// Tolerance, relative to the exact softmax of the f32 inputs: in - max rounds with an absolute
/// error <= u * |in - max| <= 20u (the rows span 20; rows offset by +-1000 subtract exactly, by
/// Sterbenz), which exp turns into a relative error <= 20u; exp itself <= 1 ulp = 2u; the row's
/// sum of `cols` positive terms in the kernel's order <= (cols - 1) u relative; the division u.
/// So (cols + 32) u covers it.
///
/// `vector_rows`: also rows whose strides are multiples of 4 (softmax_w4's 128-bit sweeps; the
/// paddings of 5 and 3 take its one-column sweeps).
void run_softmax(const Case &c, bool vector_rows = false) {
  const uint32_t rows = 7;
  std::vector<std::pair<uint32_t, uint32_t>> paddings = {{5, 3}};
  if (vector_rows)
    paddings.push_back({0, 0}), paddings.push_back({8, 4});
  // 300 columns: the first 44 invocations visit two; 37: most invocations visit none.
  for (uint32_t cols : {300u, 37u})
    for (auto [in_pad, out_pad] : paddings) {
      auto to_multiple_of_4 = [&](uint32_t pad) { return pad + (4 - (cols + pad) % 4) % 4; };
      if (in_pad != 5) // the vector rows
        in_pad = to_multiple_of_4(in_pad), out_pad = to_multiple_of_4(out_pad);
      Layout2 in_layout = Layout2::padded_rows(rows, cols, in_pad);
      Layout2 out_layout = Layout2::padded_rows(rows, cols, out_pad);
      SCOPED_TRACE("in " + in_layout.str() + ", out " + out_layout.str());
      Inputs gen(cols);
      std::vector<float> in(in_layout.buffer_size(), input_padding());
      for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t col = 0; col < cols; ++col)
          // Row 0 is large and row 1 very negative: exp without subtracting the maximum would give
          // inf / inf and 0 / 0.
          in[in_layout.offset(r, col)] =
              gen.uniform(-10, 10) + (r == 0 ? 1000.0f : 0.0f) + (r == 1 ? -1000.0f : 0.0f);
      Launch launch;
      launch.tensor(in, in_layout);
      size_t out = launch.tensor(
          std::vector<float>(out_layout.buffer_size(), output_sentinel<float>()), out_layout);
      if (!launch.run(c.kernel, {rows, 1, 1}, c.subgroup_size))
        continue;
      std::vector<float> got = launch.buffer<float>(out);
      Mismatches m;
      const double tolerance = (cols + 32) * kUnit;
      for (uint32_t r = 0; r < rows; ++r) {
        double max = -INFINITY, sum = 0;
        for (uint32_t col = 0; col < cols; ++col)
          max = std::max(max, static_cast<double>(in[in_layout.offset(r, col)]));
        for (uint32_t col = 0; col < cols; ++col)
          sum += std::exp(in[in_layout.offset(r, col)] - max);
        for (uint32_t col = 0; col < cols; ++col) {
          double want = std::exp(in[in_layout.offset(r, col)] - max) / sum;
          expect_near(m, at("out", r, col), got[out_layout.offset(r, col)], want, tolerance * want);
        }
      }
      expect_untouched_outside(m, "out", got, out_layout);
      m.expect_none("softmax");
    }
}

//===- transpose -----------------------------------------------------------------------------===//

/// out(c, r) = in(r, c): copies, so exact. kTile is the workgroup's x size.
void run_transpose(const Case &c) {
  const uint32_t tile = c.workgroup(0);
  const uint32_t rows = 70, cols = 45; // neither a multiple of the 32 x 32 tile
  const std::pair<Layout2, Layout2> layouts[] = {
      {Layout2::padded_rows(rows, cols, 3), Layout2::padded_rows(cols, rows, 1)},
      {Layout2::column_major(rows, cols), Layout2::column_major(cols, rows)},
  };
  for (const auto &[in_layout, out_layout] : layouts) {
    SCOPED_TRACE("in " + in_layout.str() + ", out " + out_layout.str());
    Inputs gen(rows * cols + in_layout.stride0);
    std::vector<float> in(in_layout.buffer_size(), input_padding());
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t col = 0; col < cols; ++col)
        in[in_layout.offset(r, col)] = gen.uniform(-1000, 1000);
    Launch launch;
    launch.tensor(in, in_layout);
    size_t out = launch.tensor(
        std::vector<float>(out_layout.buffer_size(), output_sentinel<float>()), out_layout);
    if (!launch.run(c.kernel, {ceil_div(cols, tile), ceil_div(rows, tile), 1}, c.subgroup_size))
      continue;
    std::vector<float> got = launch.buffer<float>(out);
    Mismatches m;
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t col = 0; col < cols; ++col)
        expect_bits(m, at("out", col, r), got[out_layout.offset(col, r)],
                    in[in_layout.offset(r, col)]);
    expect_untouched_outside(m, "out", got, out_layout);
    m.expect_none("out = transpose(in)");
  }
}

//===- matmul --------------------------------------------------------------------------------===//

/// C = A * B. Exact: each invocation does acc = fma(A(i, k), B(k, j), acc) for k = 0, 1, ... in
/// order, starting from +0, as the host does below; the zeros loaded past K leave acc unchanged
/// (fma(0, 0, acc) = acc), and fma is correctly rounded (docs/ir.md §4.2). The workgroup is
/// kTN x kTM.
void run_matmul(const Case &c) {
  const uint32_t tn = c.workgroup(0), tm = c.workgroup(1);
  // No multiples of 16, 32 or 8, and more than one tile along each of M, N and K for both
  // configurations (the last one partial). Small: the interpreter runs matmul_32x32x8's 1024
  // invocations per workgroup slowly under ASan, and this is the file's longest case.
  const uint32_t m_size = 40, n_size = 35, k_size = 21;
  // A row-major with padded rows, B column-major, C row-major with padded rows.
  const Layout2 a_layout = Layout2::padded_rows(m_size, k_size, 2);
  const Layout2 b_layout = Layout2::column_major(k_size, n_size);
  const Layout2 c_layout = Layout2::padded_rows(m_size, n_size, 3);
  SCOPED_TRACE("A " + a_layout.str() + ", B " + b_layout.str() + ", C " + c_layout.str());
  Inputs gen(m_size * n_size * k_size);
  std::vector<float> a(a_layout.buffer_size(), input_padding());
  std::vector<float> b(b_layout.buffer_size(), input_padding());
  for (uint32_t i = 0; i < m_size; ++i)
    for (uint32_t k = 0; k < k_size; ++k)
      a[a_layout.offset(i, k)] = gen.uniform(-1, 1);
  for (uint32_t k = 0; k < k_size; ++k)
    for (uint32_t j = 0; j < n_size; ++j)
      b[b_layout.offset(k, j)] = gen.uniform(-1, 1);
  Launch launch;
  launch.tensor(a, a_layout);
  launch.tensor(b, b_layout);
  size_t out =
      launch.tensor(std::vector<float>(c_layout.buffer_size(), output_sentinel<float>()), c_layout);
  if (!launch.run(c.kernel, {ceil_div(n_size, tn), ceil_div(m_size, tm), 1}, c.subgroup_size))
    return;
  std::vector<float> got = launch.buffer<float>(out);
  Mismatches m;
  for (uint32_t i = 0; i < m_size; ++i)
    for (uint32_t j = 0; j < n_size; ++j) {
      float acc = 0.0f;
      for (uint32_t k = 0; k < k_size; ++k)
        acc = std::fma(a[a_layout.offset(i, k)], b[b_layout.offset(k, j)], acc);
      expect_bits(m, at("C", i, j), got[c_layout.offset(i, j)], acc);
    }
  expect_untouched_outside(m, "C", got, c_layout);
  m.expect_none("C = A * B");
}

//===- histogram -----------------------------------------------------------------------------===//

/// hist(b) += the count of b in `in`, for b < bins: exact. `hist` starts with arbitrary counts,
/// since launches accumulate into it.
void run_histogram(const Case &c, uint32_t bins) {
  const uint32_t n = 5003;
  Inputs gen(bins);
  std::vector<uint32_t> in(n);
  for (uint32_t &v : in) {
    uint32_t kind = gen.below(20);
    v = kind < 2    ? bins + gen.below(100)       // just out of range: not counted
        : kind == 2 ? 0xffffffffu - gen.below(16) // far out of range
        : kind < 5  ? bins / 3                    // a hot bin: contended atomics
                    : gen.below(bins);
  }
  std::vector<uint32_t> expected_counts(bins);
  for (uint32_t v : in)
    if (v < bins)
      ++expected_counts[v];
  // 3 workgroups: every invocation visits 6 or 7 elements (grid stride); 32: 8192 invocations,
  // some visit none.
  for (uint32_t groups : {3u, 32u}) {
    SCOPED_TRACE("n = " + std::to_string(n) + ", " + std::to_string(groups) + " workgroups");
    std::vector<uint32_t> hist(bins);
    for (uint32_t &h : hist)
      h = gen.below(1000);
    Launch launch;
    launch.tensor(in);
    size_t out = launch.tensor(hist);
    if (!launch.run(c.kernel, {groups, 1, 1}, c.subgroup_size))
      continue;
    std::vector<uint32_t> got = launch.buffer<uint32_t>(out);
    Mismatches m;
    for (uint32_t b = 0; b < bins; ++b)
      expect_bits(m, at("hist", b), got[b], hist[b] + expected_counts[b]);
    m.expect_none("hist += counts");
  }
}

//===- prefix_sum: an inclusive scan within each workgroup's block ---------------------------===//

/// Checks `out` (the scan within each block of kWorkgroup elements) and `block_sums`, then the
/// documented way to a scan of the whole tensor: scan block_sums with the kernel again (one
/// block here) and add its exclusive prefix to each block. u32: exact (sums wrap modulo 2^32 as
/// the host's do; the inputs use the full range). f32: expect_sum().
template <class T> void run_prefix_sum(const Case &c) {
  constexpr bool is_float = std::is_same_v<T, float>;
  const uint32_t wg = c.workgroup(0);
  const uint32_t n = 3001; // 11 full blocks of 256 and one of 185
  const uint32_t blocks = ceil_div(n, wg);
  std::vector<InputKind> kinds = {InputKind::Random};
  if (is_float)
    kinds.push_back(InputKind::Dyadic);
  // The exact sum: u32 wrapping, or double (exact for dyadic inputs).
  using Exact = std::conditional_t<is_float, double, uint32_t>;
  auto check = [](Mismatches &m, const std::string &where, T got, Exact exact, size_t terms,
                  double abs_sum, InputKind kind) {
    if constexpr (is_float)
      expect_sum(m, where, got, exact, terms, abs_sum, kind);
    else
      expect_bits(m, where, got, exact);
  };
  for (InputKind kind : kinds) {
    SCOPED_TRACE(std::string(is_float ? name_of(kind) : "random inputs") +
                 ", n = " + std::to_string(n));
    Inputs gen(n);
    std::vector<T> in(n);
    for (T &v : in)
      if constexpr (is_float)
        v = kind == InputKind::Dyadic ? gen.dyadic() : gen.uniform(-10, 10);
      else
        v = gen.u32();
    Launch launch;
    launch.tensor(in);
    size_t out_handle = launch.tensor(std::vector<T>(n, output_sentinel<T>()));
    size_t sums_handle = launch.tensor(std::vector<T>(blocks, output_sentinel<T>()));
    if (!launch.run(c.kernel, {blocks, 1, 1}, c.subgroup_size))
      continue;
    std::vector<T> out = launch.buffer<T>(out_handle);
    std::vector<T> block_sums = launch.buffer<T>(sums_handle);
    Mismatches m, s;
    for (uint32_t b = 0; b < blocks; ++b) {
      Exact exact = 0;
      double abs_sum = 0;
      size_t terms = 0;
      for (uint32_t i = b * wg; i < std::min(n, (b + 1) * wg); ++i) {
        exact += in[i];
        abs_sum += std::abs(static_cast<double>(in[i]));
        check(m, at("out", i), out[i], exact, ++terms, abs_sum, kind);
      }
      check(s, at("block_sums", b), block_sums[b], exact, terms, abs_sum, kind);
    }
    m.expect_none("out, the inclusive scan within each block");
    s.expect_none("block_sums");

    // The whole scan, as the kernel's comment describes.
    Launch second;
    second.tensor(block_sums);
    size_t scanned_handle = second.tensor(std::vector<T>(blocks, output_sentinel<T>()));
    second.tensor(std::vector<T>(1, output_sentinel<T>()));
    if (!second.run(c.kernel, {1, 1, 1}, c.subgroup_size))
      continue;
    std::vector<T> scanned = second.buffer<T>(scanned_handle);
    Mismatches f;
    Exact exact = 0;
    double abs_sum = 0;
    for (uint32_t i = 0; i < n; ++i) {
      exact += in[i];
      abs_sum += std::abs(static_cast<double>(in[i]));
      uint32_t b = i / wg;
      T full = b == 0 ? out[i] : static_cast<T>(out[i] + scanned[b - 1]);
      // Terms: the elements, plus the block sums and the final add as extra roundings.
      check(f, at("scan", i), full, exact, i + 1 + blocks + 1, abs_sum, kind);
    }
    f.expect_none("the whole scan (block_sums scanned again, exclusive prefix added)");
  }
}

//===- The cases -----------------------------------------------------------------------------===//

} // namespace

/// One entry per registered example kernel (configuration), by name.
const std::vector<std::pair<std::string_view, Runner>> &cases() {
  static const std::vector<std::pair<std::string_view, Runner>> table = {
      {"axpy", [](const Case &c) { run_axpy(c, 1); }},
      {"axpy_w4", [](const Case &c) { run_axpy(c, 4); }},
      {"reduce_sum", [](const Case &c) { run_reduce(c, false); }},
      {"reduce_max", [](const Case &c) { run_reduce(c, true); }},
      {"reduce_sum_w4", [](const Case &c) { run_reduce(c, false, 4); }},
      {"softmax", [](const Case &c) { run_softmax(c); }},
      {"softmax_w4", [](const Case &c) { run_softmax(c, true); }},
      {"transpose_32x8", run_transpose},
      {"histogram_256", [](const Case &c) { run_histogram(c, 256); }},
      {"histogram_1000", [](const Case &c) { run_histogram(c, 1000); }},
      {"prefix_sum_u32", run_prefix_sum<uint32_t>},
      {"prefix_sum_f32", run_prefix_sum<float>},
      {"matmul_16x16x16", run_matmul},
      {"matmul_32x32x8", run_matmul},
  };
  return table;
}

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const auto &k : dsl::registered_kernels())
    names.push_back(k.name);
  return names;
}
const Runner *find_case(std::string_view name) {
  for (const auto &[case_name, run] : cases())
    if (case_name == name)
      return &run;
  return nullptr;
}

void set_launcher(Launcher l) {
  launcher() = l ? std::move(l) : Launcher(interpret_launch);
}

} // namespace cubecc::test::examples
