//===- float16.h - IEEE binary16 and bfloat16 conversions with round-to-nearest-even ----------===//
#pragma once

#include <cstdint>

namespace cubecc::ir {

uint16_t float_to_f16_bits(float f);
float f16_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

} // namespace cubecc::ir
