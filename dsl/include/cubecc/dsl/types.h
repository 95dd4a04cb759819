//===- types.h - C++ types that kernels compute with, and their IR types ---------------------===//
#pragma once

#include "cubecc/ir/types.h"

#include <cstdint>
#include <type_traits>

namespace cubecc::dsl {

/// IEEE binary16 and bfloat16 element types for tensors and values. On the host they only carry
/// a float; in kernels they are the IR's f16 and bf16.
struct f16 {
  float value = 0;
};
struct bf16 {
  float value = 0;
};

/// A vector of N lanes of T (N in 2, 3, 4, 8, 16) for vector loads, stores and arithmetic.
template <class T, int N> struct Vec {
  static_assert(N == 2 || N == 3 || N == 4 || N == 8 || N == 16,
                "cubecc: Vec<T, N> needs N = 2, 3, 4, 8 or 16 lanes");
};

namespace detail {

template <class T> struct ScalarTraits { static constexpr bool known = false; };
#define CUBECC_DSL_SCALAR(cpp, ir_scalar)                                                          \
  template <> struct ScalarTraits<cpp> {                                                           \
    static constexpr bool known = true;                                                            \
    static constexpr ir::Scalar scalar = ir::Scalar::ir_scalar;                                    \
  };
CUBECC_DSL_SCALAR(bool, Bool)
CUBECC_DSL_SCALAR(int8_t, I8)
CUBECC_DSL_SCALAR(int16_t, I16)
CUBECC_DSL_SCALAR(int32_t, I32)
CUBECC_DSL_SCALAR(int64_t, I64)
CUBECC_DSL_SCALAR(uint8_t, U8)
CUBECC_DSL_SCALAR(uint16_t, U16)
CUBECC_DSL_SCALAR(uint32_t, U32)
CUBECC_DSL_SCALAR(uint64_t, U64)
CUBECC_DSL_SCALAR(f16, F16)
CUBECC_DSL_SCALAR(bf16, BF16)
CUBECC_DSL_SCALAR(float, F32)
CUBECC_DSL_SCALAR(double, F64)
#undef CUBECC_DSL_SCALAR

template <class T> struct ValueTraits {
  using scalar = T;
  static constexpr int lanes = 1;
};
template <class T, int N> struct ValueTraits<Vec<T, N>> {
  static_assert(N == 2 || N == 3 || N == 4 || N == 8 || N == 16,
                "cubecc: Vec<T, N> needs N = 2, 3, 4, 8 or 16 lanes");
  using scalar = T;
  static constexpr int lanes = N;
};

} // namespace detail

/// The element type of a value type (T for T and for Vec<T, N>).
template <class T> using scalar_of = typename detail::ValueTraits<T>::scalar;
template <class T> inline constexpr int lanes_of = detail::ValueTraits<T>::lanes;

/// Types a kernel can compute with: the scalars above and vectors of them.
template <class T>
concept KernelType = detail::ScalarTraits<scalar_of<T>>::known;

template <class T>
concept FloatType = std::is_same_v < scalar_of<T>,
float > || std::is_same_v<scalar_of<T>, double> || std::is_same_v<scalar_of<T>, f16> ||
    std::is_same_v<scalar_of<T>, bf16>;
template <class T>
concept IntegerType =
    KernelType<T> && std::is_integral_v<scalar_of<T>> && !std::is_same_v<scalar_of<T>, bool>;
template <class T>
concept BoolType = std::is_same_v < scalar_of<T>,
bool > ;

/// The IR type of a kernel type.
template <KernelType T> ir::Type ir_type() {
  constexpr ir::Scalar s = detail::ScalarTraits<scalar_of<T>>::scalar;
  if constexpr (lanes_of<T> == 1)
    return ir::Type::scalar(s);
  else
    return ir::Type::vector(s, lanes_of<T>);
}

namespace detail {
/// The kernel integer type of a C++ integer type (int -> int32_t, unsigned -> uint32_t, long ->
/// int64_t, size_t -> uint64_t).
template <class C>
using KernelInteger =
    std::conditional_t<sizeof(C) <= 4, std::conditional_t<std::is_signed_v<C>, int32_t, uint32_t>,
                       std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>>;
/// The kernel type of a C++ number: float, double and bool as they are, integers as above.
template <class C>
using KernelTypeOf =
    std::conditional_t<std::is_floating_point_v<C> || std::is_same_v<C, bool>, C,
                       KernelInteger<std::conditional_t<std::is_integral_v<C>, C, int>>>;
} // namespace detail

/// T with its scalar replaced by bool: the result type of a comparison.
template <class T> struct BoolLike { using type = bool; };
template <class T, int N> struct BoolLike<Vec<T, N>> { using type = Vec<bool, N>; };

} // namespace cubecc::dsl
