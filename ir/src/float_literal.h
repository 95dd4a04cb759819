//===- float_literal.h - Decimal float literals, correctly rounded (internal to ir/) ----------===//
//
// The text form writes floats in decimal. Reading them must round once, to nearest-even, straight
// to the constant's type: rounding to float and then to f16 would get ties wrong. Printing writes
// the shortest decimal that reads back to the same bits.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cubecc::ir::detail {

enum class FloatLiteralError { Malformed, Overflow };

struct FloatLiteral {
  std::optional<FloatLiteralError> error;
  uint64_t bits = 0; ///< the value's bit pattern in the float type
};

/// Reads a decimal literal ("1.5", "-2e-3", "7") as the float type `s`, rounded to nearest-even.
/// A finite literal beyond the type's range is an Overflow; tiny ones round to zero or subnormals.
FloatLiteral parse_decimal_float(std::string_view text, Scalar s);

/// The shortest decimal that parse_decimal_float reads back as `bits` (a finite value of `s`).
std::string format_shortest_float(uint64_t bits, Scalar s);

} // namespace cubecc::ir::detail
