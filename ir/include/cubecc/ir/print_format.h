//===- print_format.h - The `print` op's format, split once for every backend -----------------===//
//
// `print` (docs/ir.md §4.15) carries a `format` attribute with one "{}" per operand lane ("{{" and
// "}}" print braces); a vector operand prints as "(x, y, z)". Each value prints as C's printf
// prints it after widening: signed integers as %lld, unsigned ones and bool (0 or 1) as %llu,
// floats (f16 and bf16 exactly) as the double %g. The verifier, the interpreter and the emitters
// all read the format through parse_print_format, so that every target prints the same text.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/types.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::ir {

class Operation;

/// How one printed value is widened before printf sees it.
enum class PrintClass : uint8_t {
  Signed,   ///< sign-extended to 64 bits, printed with %lld
  Unsigned, ///< zero-extended to 64 bits (bool: 0 or 1), printed with %llu
  Float,    ///< converted exactly to double, printed with %g
};

PrintClass print_class(Scalar s);

/// One value printed: an operand's lane.
struct PrintArgument {
  unsigned operand = 0;
  unsigned lane = 0;
  Scalar type = Scalar::U32;
};

/// A print op's output: texts[0], args[0], texts[1], ..., args[n-1], texts[n] (texts holds the
/// literal text with braces unescaped and a vector's parentheses and commas).
struct PrintFormat {
  std::vector<std::string> texts;
  std::vector<PrintArgument> args;

  /// The whole format as one printf format string: the texts with '%' doubled and each argument's
  /// conversion between them: for C's printf, the widening of print_class (%lld, %llu, %g); for
  /// SPIR-V's NonSemantic.DebugPrintf (`debug_printf`), integers of up to 32 bits as 32-bit %d
  /// and %u, 64-bit ones as %ld and %lu, and floats as f32 %g.
  std::string printf_string(bool debug_printf = false) const;
};

/// The most values (lanes) one print takes: CUDA's printf ignores arguments past 32.
inline constexpr size_t kMaxPrintValues = 32;

/// The lanes of the operands (of `types`, in order) placed into `format`; std::nullopt with
/// `error` set when the braces do not match the operand lanes, an operand is not a scalar or
/// vector of numbers or bool, or there are more than kMaxPrintValues lanes.
std::optional<PrintFormat> parse_print_format(std::string_view format, std::span<const Type> types,
                                              std::string &error);

/// The format of a verified `print` op (its `format` attribute and operand types). Throws
/// std::logic_error on an unverified one.
PrintFormat print_format_of(const Operation &op);

/// One value as printf prints it after the widening of print_class (`bits` as the IR holds it).
std::string format_print_value(Scalar s, uint64_t bits);

} // namespace cubecc::ir
