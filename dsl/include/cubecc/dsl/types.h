//===- types.h - C++ types that kernels compute with, and their IR types ---------------------===//
#pragma once

#include "cubecc/ir/semantics.h"
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

/// A storage float (docs/ir.md §2.1): one byte, its encoding. Kernels load, store, select and
/// convert them (dsl::cast<float>(x), dsl::cast<e4m3>(y)); they never compute with them. On the
/// host, from() and value() convert exactly as kernels do (round to nearest even, saturating
/// where the format has no infinity).
template <ir::Scalar S> struct StorageFloat {
  uint8_t bits = 0;
  static StorageFloat from(double v) { return {static_cast<uint8_t>(ir::from_double(S, v))}; }
  double value() const { return ir::to_double(S, bits); }
  friend bool operator==(StorageFloat, StorageFloat) = default;
};
/// OCP 8-bit floats: 4 exponent bits and 3 mantissa bits (no infinity, max 448), and 5 and 2
/// (IEEE-like, max 57344).
using e4m3 = StorageFloat<ir::Scalar::E4M3>;
using e5m2 = StorageFloat<ir::Scalar::E5M2>;
/// OCP MX 4-bit float, one per byte in its low four bits: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
using e2m1 = StorageFloat<ir::Scalar::E2M1>;
/// OCP MX scale: 2^(bits - 127), 0xFF is NaN; no sign, no zero.
using ue8m0 = StorageFloat<ir::Scalar::UE8M0>;

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
CUBECC_DSL_SCALAR(e4m3, E4M3)
CUBECC_DSL_SCALAR(e5m2, E5M2)
CUBECC_DSL_SCALAR(e2m1, E2M1)
CUBECC_DSL_SCALAR(ue8m0, UE8M0)
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
/// e4m3, e5m2, e2m1, ue8m0 and vectors of them.
namespace detail {
template <class T> inline constexpr bool is_storage_float_v = false;
template <ir::Scalar S> inline constexpr bool is_storage_float_v<StorageFloat<S>> = true;
} // namespace detail
template <class T>
concept StorageFloatType = detail::is_storage_float_v<scalar_of<T>>;
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
