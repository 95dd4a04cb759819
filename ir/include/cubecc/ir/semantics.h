//===- semantics.h - What the element-wise ops compute, one lane at a time --------------------===//
//
// Values are bit patterns zero-extended from their type's width (floats: their IEEE bits). These
// functions are the definition that the reference interpreter executes and constant folding
// applies (docs/ir.md, sections 4.2 to 4.6).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ops.h"
#include "cubecc/ir/types.h"

#include <cstdint>

namespace cubecc::ir {

/// The result of a unary, binary, ternary or comparison op on one lane of element type `s`
/// (operands past the op's count are ignored). Comparisons give 0 or 1.
uint64_t evaluate_lane(Opcode op, Scalar s, uint64_t a, uint64_t b = 0, uint64_t c = 0);
/// `cast` of one lane.
uint64_t convert_lane(Scalar from, Scalar to, uint64_t v);

uint64_t width_mask(unsigned bits);
int64_t sign_extend(uint64_t v, unsigned bits);
/// A float lane's value, and a value rounded (once) to a float type.
double to_double(Scalar s, uint64_t bits);
uint64_t from_double(Scalar s, double v);

} // namespace cubecc::ir
