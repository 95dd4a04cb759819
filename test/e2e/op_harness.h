//===- op_harness.h - Op-coverage cases: a kernel, its buffers and how each output is compared
//-===//
//
// An OpCase is one kernel (IR text built by the case generators in ops_test.cpp), the initial
// contents of its buffers and, for every writable buffer, how each range of its elements is
// compared with the reference interpreter's result. run_op_case() runs the kernel on a device
// (interp or vulkan), runs ir::interpret on copies of the same buffers with the device's subgroup
// size, and compares every writable buffer element by element. A mismatch names the kernel, the
// range (op and type), the element index, the inputs, the bits and values got and expected, and
// the bound that was applied.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/target.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/types.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cubecc::test::ops {

using ir::Scalar;

/// An allowed error for one element: in units in the last place of the result type (counted as
/// representable steps between got and expected) or absolute; either suffices.
struct Tolerance {
  double ulps = 0;
  double abs = 0;
};

/// How the elements of one range are compared. Integers (and bool-as-integer) are always exact.
/// Floats: equal bits; or both NaN (any payload); or got ±0 where expected is subnormal (the
/// device flushes subnormals: TOOLCHAIN.md, docs/ir.md 4.2); or, with a tolerance, within it.
struct Check {
  enum class Kind {
    Value, ///< integers exact; floats by the rules above with `tolerance` (0: bit-exact)
    Bits,  ///< every bit, NaN payloads and subnormals included (moves, bitcasts)
  };
  Kind kind = Kind::Value;
  std::function<Tolerance(size_t)> tolerance; ///< per element of the range; empty: exact
  std::string bound;                          ///< the bound and its reason, for messages
  /// Further results the IR allows for element i (e.g. either zero for min(-0, +0)).
  std::function<bool(size_t, uint64_t got, uint64_t want)> also_allowed;
};

/// A range of one output buffer: `count` elements from `begin`, produced by one op on one type.
struct Range {
  std::string what; ///< "div i32", "shuffle_xor u32 (divergent)", ...
  size_t begin = 0;
  size_t count = 0;
  Check check;
  std::function<std::string(size_t)> inputs; ///< the inputs of element i of the range
};

struct Buffer {
  std::string name; ///< the kernel parameter's name
  Scalar element = Scalar::U32;
  std::vector<uint64_t> init; ///< element bits
  bool output = false;        ///< compared with the reference after the launch
  std::vector<Range> ranges;  ///< for outputs; elements outside every range are compared exactly
};

/// One kernel parameter: a buffer (index into OpCase::buffers) or a value's lanes.
struct Arg {
  int buffer = -1;
  std::vector<uint64_t> bits;
};

struct OpCase {
  std::string name; ///< unique; the test's name
  std::string text; ///< a module with one kernel
  std::vector<Buffer> buffers;
  std::vector<Arg> args; ///< in parameter order
  std::array<uint32_t, 3> grid = {1, 1, 1};
  int opt_level = 0; ///< passes::optimization_pipeline(level) before compiling (0: none)
  /// Non-empty: vulkan must refuse the kernel with an error containing each of these (and the
  /// generic "does not support"); the interp device still runs and is compared.
  std::vector<std::string> vulkan_refusal;
  /// When set, decides the expected refusal from the device's features instead (empty: it must
  /// run); for features a Vulkan device may or may not have (f32 atomics).
  std::function<std::vector<std::string>(const codegen::TargetFeatures &)> refusal_for;
};

/// Totals over the process, printed at exit: kernels run and elements compared per device, and
/// the largest error seen per range (`what`) and device, in ULPs and absolute.
struct Stats {
  std::map<std::string, size_t> kernels, comparisons, refusals;
  std::map<std::string, std::pair<double, double>> max_error; ///< "device: what" -> (ulps, abs)
};
Stats &stats();

/// Runs `c` on the device named `device` and compares with the reference; reports failures
/// through GoogleTest.
void run_op_case(const OpCase &c, const std::string &device);

//===--- Helpers for writing cases ---------------------------------------------------------===//

using ir::from_double; // the float value of element bits, and a value rounded to a type
using ir::to_double;
bool is_subnormal(Scalar s, uint64_t bits);
bool is_nan(Scalar s, uint64_t bits);
/// Representable steps between two floats of type s (±0 count as one point).
double ulp_distance(Scalar s, uint64_t a, uint64_t b);
/// The value of one unit in the last place at `v` for type s (normal numbers).
double ulp_of(Scalar s, double v);
/// The value of element bits, for messages: "-2.5 (0xc020)", "-7 (0xf9)".
std::string show(Scalar s, uint64_t bits);

/// Writes a module with one kernel: `params` is the parameter list text, `body` the ops (each
/// line without indentation; the harness indents), `workgroup` its size.
std::string module_text(const std::string &kernel, const std::string &params,
                        const std::string &body, std::array<uint32_t, 3> workgroup);

/// Builds kernel bodies: fresh value names, one op per line.
class Body {
public:
  /// Emits `%tN = <op> : <type>` and returns `%tN`.
  std::string op(const std::string &op, const std::string &type);
  /// Emits a line as is (stores, barriers, region openers and closers).
  void line(const std::string &text);
  std::string constant(const std::string &literal, const std::string &type);
  const std::string &text() const { return text_; }

private:
  std::string text_;
  unsigned next_ = 0;
};

} // namespace cubecc::test::ops
