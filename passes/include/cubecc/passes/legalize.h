//===- legalize.h - The `legalize` pass: the IR's semantics pinned once, for every backend
//------===//
//
// The IR leaves some results unspecified (integer division by zero, shift amounts past the width)
// and defines some that targets do not offer natively (saturating float-to-integer casts, C's
// `erf` and `pow` on a target whose library lacks them). Legalization rewrites those ops into
// simpler IR ops from one table of patterns, so that every backend computes the same values and
// an emitter only prints what its target has. The contract an emitter may rely on afterwards is
// docs/passes.md, "Legal IR"; is_legal() checks it.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/passes/pass_manager.h"

#include <string>

namespace cubecc::passes {

/// What a target has natively, as far as legalization is concerned. Each backend states its
/// own; the integer and cast pins apply to every target (no target defines them the IR's way).
struct LegalizeTarget {
  std::string name = "portable"; ///< for statistics and errors
  /// `erf` from the target's math library (CUDA/HIP libdevice, the CPU's libm). Without it
  /// `erf` becomes fdlibm's erff in f32 ops (f16, bf16 and f32; f64 is refused by the backend).
  bool native_erf = false;
  /// `pow` with C's special cases (x < 0, x = ±0, NaN and infinite operands). GLSL's Pow is
  /// undefined there: without it `pow` becomes pow(|x|, y) plus C's sign and special cases.
  bool c_pow = false;
  /// The inverse trigonometric and hyperbolic functions and C99's `expm1`, `log1p` and `hypot`
  /// from the target's math library, to a few ULP. Without it (GLSL.std.450 either lacks them or
  /// computes asin, acos and atan to 10^-4 and sinh near 0 by cancellation): Cephes' f32
  /// algorithms over exp, log, sqrt and division (f16, bf16 and f32; f64 is refused by the
  /// backend), and `hypot` as max * sqrt(1 + (min / max)^2) with C's special cases (every type).
  bool native_libm = false;
  /// `popcount`, `clz`, `ctz`, `ffs`, `bitreverse` and `mulhi` as the target's instructions
  /// (CUDA/HIP intrinsics, LLVM's). Without them: shifts, masks and half-width multiplications
  /// in the operands' own width.
  bool native_bit_ops = false;
  /// `add_sat` and `sub_sat` as the target's instructions (LLVM). Without them: the wrapping
  /// result, or the type's limit where it overflowed.
  bool native_saturating = false;
  /// `async.copy` (global to shared memory, docs/ir.md §4.14) as the target's instruction (CUDA
  /// sm_80 and later: cp.async). Without it: a guarded load and a store where the copy is issued
  /// (it lands at once, which the IR allows), and async.commit and async.wait are dropped.
  bool async_copy = false;

  /// Every expansion on: what `cubecc-opt --passes=legalize` and the tests use.
  static LegalizeTarget portable() { return {}; }
};

/// Legalizes every kernel of `module` for `target`; counts each rewrite in `context` (by pattern
/// name) when given.
void legalize(ir::Module &module, const LegalizeTarget &target, PassContext *context = nullptr);

/// `legalize` as a registered pass: the portable target.
void legalize(ir::Module &module, PassContext &context);

/// Whether `op` meets the legal-IR contract (docs/passes.md): integer `div`/`rem` never see a
/// zero divisor (or -1 for signed types), shift amounts are below the width, float-to-integer
/// casts only see values that convert without saturating. Emitters assert it; cheap.
bool is_legal(const ir::Operation &op);

/// The error an emitter reports (as std::logic_error) when is_legal() fails: a bug in cubecc.
[[noreturn]] void throw_not_legalized(const ir::Operation &op, std::string_view backend);

} // namespace cubecc::passes
