//===- expr.h - Values and expression templates ----------------------------------------------===//
//
// Operators on kernel values build typed expression objects; nothing is emitted until a value is
// materialized: assigned to a Val, Var or tensor element, or passed to a DSL call. At that point
// the whole expression is emitted with the source location of the statement that materialized
// it (captured by a defaulted std::source_location on the converting constructor, which C++
// evaluates at the user's call site).
//
// Type rules are checked at C++ compile time with readable static_assert messages: operands of
// one operator have one type (convert with dsl::cast<T>), a plain C++ number adopts the type of
// the kernel value it meets (a C++ floating-point number may not meet an integer value), bitwise
// operators need integers, math functions need floats.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/detail.h"
#include "cubecc/dsl/types.h"

#include <concepts>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cubecc::dsl {

using detail::Loc;

template <class> inline constexpr bool dependent_false = false;

/// An expression node: has a value type and emits itself.
template <class E>
concept Expression = requires(const E &e, const Loc &loc) {
  typename E::dsl_value_type;
  { e.emit(loc) } -> std::same_as<ir::Value *>;
};

/// Something that stands for an expression in kernel code (a node, a Var, a tensor element).
template <class E>
concept ExprLike = requires(const E &e) {
  { e.dsl_node() } -> Expression;
};

template <class E>
using node_of = std::remove_cvref_t<decltype(std::declval<const E &>().dsl_node())>;
template <class E> using value_of = typename node_of<E>::dsl_value_type;

/// A plain C++ number (a comptime value) that may meet a kernel value.
template <class U>
concept Literal = std::is_arithmetic_v<std::remove_cvref_t<U>>;

// Expression nodes live in this namespace (not detail) so that argument-dependent lookup finds
// the operators below for any expression.

/// A comptime constant of kernel type T.
template <class T> struct ConstExpr {
  using dsl_value_type = T;
  double float_value = 0;
  int64_t int_value = 0;
  bool fits = true; ///< false for a C++ integer outside T's range (reported where it is used)
  ConstExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    if (!fits)
      throw TraceError("the C++ integer " +
                           (float_value < 0 ? std::to_string(int_value)
                                            : std::to_string(static_cast<uint64_t>(int_value))) +
                           " does not fit in the kernel value's type; convert explicitly",
                       loc);
    ir::Type scalar_type = ir_type<scalar_of<T>>();
    ir::Value *c = FloatType<T> ? detail::emit_float_constant(scalar_type, float_value, loc)
                                : detail::emit_int_constant(scalar_type, int_value, loc);
    if constexpr (lanes_of < T >> 1)
      return detail::emit(ir::Opcode::Splat, {c}, ir_type<T>(), loc);
    return c;
  }
};

template <ir::Opcode Op, class Result, class... Operands> struct OpExpr {
  using dsl_value_type = Result;
  std::tuple<Operands...> operands;
  OpExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    return std::apply(
        [&](const auto &...o) {
          return detail::emit(Op, {o.emit(loc)...}, ir_type<Result>(), loc);
        },
        operands);
  }
};

namespace detail {

template <class T, class U> constexpr void check_literal() {
  using V = std::remove_cvref_t<U>;
  if constexpr (StorageFloatType<T>)
    static_assert(!StorageFloatType<T>,
                  "cubecc: a C++ number meets a storage float (e4m3, e5m2, e2m1, ue8m0); convert "
                  "a float value instead: dsl::cast<e4m3>(dsl::Val<float>(0.5f))");
  else if constexpr (std::is_same_v<V, bool>)
    static_assert(BoolType<T>, "cubecc: a C++ bool meets a kernel value that is not bool");
  else if constexpr (std::is_floating_point_v<V>)
    static_assert(FloatType<T>,
                  "cubecc: a C++ floating-point number meets an integer kernel value; "
                  "write an integer, or convert with dsl::cast<T>(...)");
  else
    static_assert(!BoolType<T>, "cubecc: a C++ integer meets a bool kernel value; write true or "
                                "false");
}

template <class T, class U> ConstExpr<T> make_const(const U &u) {
  check_literal<T, U>();
  ConstExpr<T> c;
  c.float_value = static_cast<double>(u);
  c.int_value = static_cast<int64_t>(u);
  using S = scalar_of<T>;
  using V = std::remove_cvref_t<U>;
  if constexpr (std::is_integral_v<S> && std::is_integral_v<V> && !std::is_same_v<S, bool> &&
                !std::is_same_v<V, bool>)
    c.fits = std::in_range<S>(u);
  return c;
}

/// The node for `x` where a value of type T is expected.
template <class T, class X> auto node_as(const X &x) {
  if constexpr (ExprLike<X>) {
    static_assert(std::is_same_v<value_of<X>, T>,
                  "cubecc: operands have different types (float and int32_t, or uint32_t and "
                  "int32_t: ids, sizes and 8u are uint32_t, 8 is int32_t, a for_ index has its "
                  "bounds' type); convert one with dsl::cast<T>(...)");
    return x.dsl_node();
  } else if constexpr (Literal<X>) {
    return make_const<T>(x);
  } else {
    static_assert(dependent_false<X>, "cubecc: this is not a kernel value or a C++ number");
  }
}

/// The kernel type of an operation on `a` and `b`, one of which is a kernel value.
template <class A, class B> struct OperandType { using type = value_of<B>; };
template <class A, class B>
requires ExprLike<A>
struct OperandType<A, B> {
  using type = value_of<A>;
};

template <ir::Opcode Op, class Result, class... Operands> auto make_node(const Operands &...o) {
  return OpExpr<Op, Result, Operands...>{std::tuple<Operands...>(o...)};
}

template <class A, class B>
concept BinaryOperands = (ExprLike<A> || ExprLike<B>)&&(ExprLike<A> || Literal<A>)&&(ExprLike<B> ||
                                                                                     Literal<B>);

enum class Need { Numeric, Integer, IntegerOrBool, Bool, Any, Float, Signed, Bits };

template <Need need, class T> constexpr void check_class() {
  if constexpr (StorageFloatType<T>)
    static_assert(!StorageFloatType<T>,
                  "cubecc: e4m3, e5m2, e2m1 and ue8m0 are storage formats: compute in float "
                  "(dsl::cast<float>(x)) and convert back to store (dsl::cast<e4m3>(y))");
  else if constexpr (need == Need::Numeric)
    static_assert(!BoolType<T>, "cubecc: arithmetic and ordering need numbers, not bool; use "
                                "&&, ||, ! or dsl::select");
  else if constexpr (need == Need::Integer)
    static_assert(IntegerType<T>, "cubecc: shifts and % on integers only; floats use dsl::fmod "
                                  "semantics through %, so cast first if you meant integers");
  else if constexpr (need == Need::IntegerOrBool)
    static_assert(!FloatType<T>, "cubecc: bitwise operators need integers or bool, not floats");
  else if constexpr (need == Need::Bool)
    static_assert(BoolType<T>, "cubecc: && and || need bool operands (compare first, e.g. x != 0)");
  else if constexpr (need == Need::Float)
    static_assert(FloatType<T>, "cubecc: this math function needs a float value; convert with "
                                "dsl::cast<float>(...)");
  else if constexpr (need == Need::Bits)
    static_assert(IntegerType<T>, "cubecc: bit counting, mulhi and saturating arithmetic need "
                                  "integers; to count the bits of a float, dsl::bitcast it to "
                                  "the unsigned type of its width first");
  else if constexpr (need == Need::Signed)
    static_assert(FloatType<T> || std::is_signed_v<scalar_of<T>>,
                  "cubecc: negation and abs need a signed integer or a float, not an unsigned one");
}

template <ir::Opcode Op, Need need, class A, class B> auto binary(const A &a, const B &b) {
  using T = typename OperandType<A, B>::type;
  check_class<need, T>();
  return make_node<Op, T>(node_as<T>(a), node_as<T>(b));
}

template <ir::Opcode Op, Need need, class A, class B> auto compare(const A &a, const B &b) {
  using T = typename OperandType<A, B>::type;
  check_class<need, T>();
  return make_node<Op, typename BoolLike<T>::type>(node_as<T>(a), node_as<T>(b));
}

template <ir::Opcode Op, Need need, class A> auto unary(const A &a) {
  static_assert(ExprLike<A>, "cubecc: expected a kernel value");
  using T = value_of<A>;
  check_class<need, T>();
  return make_node<Op, T>(a.dsl_node());
}

} // namespace detail

/// A materialized kernel value of type T: an SSA value of the IR.
template <KernelType T> class Val {
public:
  using dsl_value_type = T;

  /// Materializes an expression (or a C++ number) of type T here, at the caller's line.
  template <class E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, Val>)
      Val(const E &e, const Loc &loc = Loc::current())
      : value_(detail::node_as<T>(e).emit(loc)) {}

  /// Wraps an IR value (for the DSL's own use).
  static Val from_ir(ir::Value *v) {
    Val out;
    out.value_ = v;
    return out;
  }

  ir::Value *ir() const { return value_; }
  ir::Value *emit(const Loc &) const { return value_; }
  Val dsl_node() const { return *this; }

  /// Lane `L` of a vector (L is comptime).
  template <int L> Val<scalar_of<T>> lane(const Loc &loc = Loc::current()) const {
    static_assert(lanes_of<T> > 1, "cubecc: lane<L>() needs a vector value");
    static_assert(L >= 0 && L < lanes_of<T>, "cubecc: vector lane out of range");
    return Val<scalar_of<T>>::from_ir(detail::emit_extract(value_, L, loc));
  }

private:
  Val() = default;
  ir::Value *value_ = nullptr;
};

// Arithmetic.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator+(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Add, detail::Need::Numeric>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator-(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Sub, detail::Need::Numeric>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator*(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Mul, detail::Need::Numeric>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator/(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Div, detail::Need::Numeric>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator%(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Rem, detail::Need::Numeric>(a, b);
}
template <ExprLike A> auto operator-(const A &a) {
  return detail::unary<ir::Opcode::Neg, detail::Need::Signed>(a);
}

// Bitwise and logic. && and || on kernel values evaluate both sides (no short circuit).
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator&(const A &a, const B &b) {
  return detail::binary<ir::Opcode::And, detail::Need::IntegerOrBool>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator|(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Or, detail::Need::IntegerOrBool>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator^(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Xor, detail::Need::IntegerOrBool>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator<<(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Shl, detail::Need::Integer>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator>>(const A &a, const B &b) {
  return detail::binary<ir::Opcode::Shr, detail::Need::Integer>(a, b);
}
namespace detail {
/// Whether evaluating an expression node can neither read memory nor fail: constants, computed
/// values, builtins and arithmetic on them. Anything else (loads, masked loads, nodes this list
/// does not know) counts as not pure.
template <class N> inline constexpr bool is_pure_node = false;
template <class T> inline constexpr bool is_pure_node<ConstExpr<T>> = true;
template <KernelType T> inline constexpr bool is_pure_node<Val<T>> = true;
template <ir::Opcode Op, class R, class... Operands>
inline constexpr bool is_pure_node<OpExpr<Op, R, Operands...>> = (is_pure_node<Operands> && ...);
} // namespace detail

/// `a && b`, `a || b` on scalar kernel bools, short-circuiting as in C++: `b` is evaluated only
/// where it decides the result (an `if` with a result), so `i < n && x[i] > 0` never reads x[n].
/// When `b` is pure (no load; detail::is_pure_node) both sides are evaluated and combined with
/// `and`/`or`, which gives the same value without a branch. On bool vectors: lane-wise, both
/// sides evaluated.
template <bool IsAnd, class A, class B> struct ShortCircuitExpr {
  using dsl_value_type = bool;
  A a;
  B b;
  ShortCircuitExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    ir::Value *left = a.emit(loc);
    if constexpr (detail::is_pure_node<B>) {
      return detail::emit(IsAnd ? ir::Opcode::And : ir::Opcode::Or, {left, b.emit(loc)},
                          ir_type<bool>(), loc);
    } else {
      auto decided = [&] { return detail::emit_int_constant(ir_type<bool>(), IsAnd ? 0 : 1, loc); };
      auto right = [&] { return b.emit(loc); };
      return IsAnd ? detail::emit_if_value(left, ir_type<bool>(), right, decided, loc)
                   : detail::emit_if_value(left, ir_type<bool>(), decided, right, loc);
    }
  }
};

namespace detail {
template <bool IsAnd, class A, class B>
inline constexpr bool is_pure_node<ShortCircuitExpr<IsAnd, A, B>> =
    is_pure_node<A> &&is_pure_node<B>;

template <bool IsAnd, class A, class B> auto logical(const A &a, const B &b) {
  using T = typename OperandType<A, B>::type;
  check_class<Need::Bool, T>();
  if constexpr (lanes_of < T >> 1) {
    return make_node < IsAnd ? ir::Opcode::And : ir::Opcode::Or, T > (node_as<T>(a), node_as<T>(b));
  } else {
    using NA = decltype(node_as<T>(a));
    using NB = decltype(node_as<T>(b));
    return ShortCircuitExpr<IsAnd, NA, NB>{node_as<T>(a), node_as<T>(b)};
  }
}
} // namespace detail

template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator&&(const A &a, const B &b) {
  return detail::logical<true>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator||(const A &a, const B &b) {
  return detail::logical<false>(a, b);
}
template <ExprLike A> auto operator!(const A &a) {
  return detail::unary<ir::Opcode::Not, detail::Need::Bool>(a);
}
template <ExprLike A> auto operator~(const A &a) {
  return detail::unary<ir::Opcode::Not, detail::Need::Integer>(a);
}

// Comparison.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator==(const A &a, const B &b) {
  return detail::compare<ir::Opcode::Eq, detail::Need::Any>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator!=(const A &a, const B &b) {
  return detail::compare<ir::Opcode::Ne, detail::Need::Any>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator<(const A &a, const B &b) {
  return detail::compare<ir::Opcode::Lt, detail::Need::Numeric>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator<=(const A &a, const B &b) {
  return detail::compare<ir::Opcode::Le, detail::Need::Numeric>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator>(const A &a, const B &b) {
  return detail::compare<ir::Opcode::Gt, detail::Need::Numeric>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator>=(const A &a, const B &b) {
  return detail::compare<ir::Opcode::Ge, detail::Need::Numeric>(a, b);
}

// Math functions.
#define CUBECC_DSL_UNARY_MATH(name, opcode, need)                                                  \
  template <ExprLike A> auto name(const A &a) {                                                    \
    return detail::unary<ir::Opcode::opcode, detail::Need::need>(a);                               \
  }
CUBECC_DSL_UNARY_MATH(sqrt, Sqrt, Float)
CUBECC_DSL_UNARY_MATH(rsqrt, Rsqrt, Float)
CUBECC_DSL_UNARY_MATH(exp, Exp, Float)
CUBECC_DSL_UNARY_MATH(exp2, Exp2, Float)
CUBECC_DSL_UNARY_MATH(log, Log, Float)
CUBECC_DSL_UNARY_MATH(log2, Log2, Float)
CUBECC_DSL_UNARY_MATH(sin, Sin, Float)
CUBECC_DSL_UNARY_MATH(cos, Cos, Float)
CUBECC_DSL_UNARY_MATH(tanh, Tanh, Float)
CUBECC_DSL_UNARY_MATH(erf, Erf, Float)
CUBECC_DSL_UNARY_MATH(floor, Floor, Float)
CUBECC_DSL_UNARY_MATH(ceil, Ceil, Float)
CUBECC_DSL_UNARY_MATH(round, Round, Float)
CUBECC_DSL_UNARY_MATH(trunc, Trunc, Float)
CUBECC_DSL_UNARY_MATH(tan, Tan, Float)
CUBECC_DSL_UNARY_MATH(asin, Asin, Float)
CUBECC_DSL_UNARY_MATH(acos, Acos, Float)
CUBECC_DSL_UNARY_MATH(atan, Atan, Float)
CUBECC_DSL_UNARY_MATH(sinh, Sinh, Float)
CUBECC_DSL_UNARY_MATH(cosh, Cosh, Float)
CUBECC_DSL_UNARY_MATH(asinh, Asinh, Float)
CUBECC_DSL_UNARY_MATH(acosh, Acosh, Float)
CUBECC_DSL_UNARY_MATH(atanh, Atanh, Float)
CUBECC_DSL_UNARY_MATH(expm1, Expm1, Float)
CUBECC_DSL_UNARY_MATH(log1p, Log1p, Float)
CUBECC_DSL_UNARY_MATH(abs, Abs, Signed)
// Bit counting: the result has the operand's type.
CUBECC_DSL_UNARY_MATH(popcount, Popcount, Bits)     ///< the number of set bits
CUBECC_DSL_UNARY_MATH(clz, Clz, Bits)               ///< leading zero bits (the width for 0)
CUBECC_DSL_UNARY_MATH(ctz, Ctz, Bits)               ///< trailing zero bits (the width for 0)
CUBECC_DSL_UNARY_MATH(ffs, Ffs, Bits)               ///< 1 + the lowest set bit's index, 0 for 0
CUBECC_DSL_UNARY_MATH(bitreverse, BitReverse, Bits) ///< the bits in reverse order
#undef CUBECC_DSL_UNARY_MATH

// Functions of two operands of one type (a plain C++ number adopts the other's type).
#define CUBECC_DSL_BINARY_MATH(name, opcode, need)                                                 \
  template <class A, class B>                                                                      \
  requires detail::BinaryOperands<A, B>                                                            \
  auto name(const A &a, const B &b) {                                                              \
    return detail::binary<ir::Opcode::opcode, detail::Need::need>(a, b);                           \
  }
CUBECC_DSL_BINARY_MATH(min, Min, Numeric)
CUBECC_DSL_BINARY_MATH(max, Max, Numeric)
CUBECC_DSL_BINARY_MATH(pow, Pow, Float)
CUBECC_DSL_BINARY_MATH(atan2, Atan2, Float)   ///< atan2(y, x): the angle of (x, y), in (-pi, pi]
CUBECC_DSL_BINARY_MATH(hypot, Hypot, Float)   ///< sqrt(x * x + y * y), without overflow in between
CUBECC_DSL_BINARY_MATH(mulhi, MulHi, Bits)    ///< the high half of the exact product, by signedness
CUBECC_DSL_BINARY_MATH(add_sat, AddSat, Bits) ///< a + b clamped to the type's range
CUBECC_DSL_BINARY_MATH(sub_sat, SubSat, Bits) ///< a - b clamped (0 for unsigned a < b)
#undef CUBECC_DSL_BINARY_MATH

/// Whether `x` is a NaN (a bool, or a bool vector of x's lanes).
template <ExprLike A> auto is_nan(const A &x) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Float, T>();
  return detail::make_node<ir::Opcode::IsNan, typename BoolLike<T>::type>(x.dsl_node());
}
/// Whether `x` is +inf or -inf (a bool, or a bool vector of x's lanes).
template <ExprLike A> auto is_inf(const A &x) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Float, T>();
  return detail::make_node<ir::Opcode::IsInf, typename BoolLike<T>::type>(x.dsl_node());
}

/// a * b + c with one rounding.
template <ExprLike A, class B, class C> auto fma(const A &a, const B &b, const C &c) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Float, T>();
  return detail::make_node<ir::Opcode::Fma, T>(a.dsl_node(), detail::node_as<T>(b),
                                               detail::node_as<T>(c));
}

/// min(max(x, lo), hi).
template <ExprLike A, class B, class C> auto clamp(const A &x, const B &lo, const C &hi) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Numeric, T>();
  return detail::make_node<ir::Opcode::Clamp, T>(x.dsl_node(), detail::node_as<T>(lo),
                                                 detail::node_as<T>(hi));
}

/// `c ? a : b`, evaluating both.
template <class C, class A, class B> auto select(const C &c, const A &a, const B &b) {
  using T = typename detail::OperandType<A, B>::type;
  static_assert(ExprLike<C>, "cubecc: dsl::select needs a kernel bool as its condition");
  static_assert(std::is_same_v<value_of<C>, typename BoolLike<T>::type> ||
                    std::is_same_v<value_of<C>, bool>,
                "cubecc: dsl::select's condition must be bool (or a bool vector of the values' "
                "lanes)");
  return detail::make_node<ir::Opcode::Select, T>(c.dsl_node(), detail::node_as<T>(a),
                                                  detail::node_as<T>(b));
}

/// Numeric conversion (float to integer truncates toward zero and saturates).
template <KernelType To, ExprLike A> auto cast(const A &a) {
  static_assert(lanes_of<To> == lanes_of<value_of<A>>,
                "cubecc: dsl::cast keeps the lane count: cast a Vec<T, N> to a Vec<U, N>");
  static_assert(!(StorageFloatType<To> || StorageFloatType<value_of<A>>) ||
                    ((FloatType<To> || StorageFloatType<To>)&&(FloatType<value_of<A>> ||
                                                               StorageFloatType<value_of<A>>)),
                "cubecc: storage floats (e4m3, e5m2, e2m1, ue8m0) convert to and from float "
                "types only; cast through float");
  return detail::make_node<ir::Opcode::Cast, To>(a.dsl_node());
}

/// Reinterprets the bits (the sizes must match).
template <KernelType To, ExprLike A> auto bitcast(const A &a) {
  return detail::make_node<ir::Opcode::Bitcast, To>(a.dsl_node());
}

/// A vector with every lane equal to the C++ number `x`, of x's kernel type: splat<4>(0.5f) is
/// a Vec<float, 4>, splat<4>(1u) a Vec<uint32_t, 4>, splat<4>(1) a Vec<int32_t, 4>.
template <int N, class X>
requires Literal<X>
auto splat(const X &x) {
  return detail::make_const<Vec<detail::KernelTypeOf<std::remove_cvref_t<X>>, N>>(x);
}

/// A vector with every lane equal to `x`.
template <int N, ExprLike A> auto splat(const A &x) {
  using T = value_of<A>;
  static_assert(lanes_of<T> == 1, "cubecc: dsl::splat takes a scalar");
  return detail::make_node<ir::Opcode::Splat, Vec<T, N>>(x.dsl_node());
}

//===- Vectors from lanes, lanes by index, horizontal operations ------------------------------===//
//
// Like the operators, these build expression nodes: nothing is emitted until the expression is
// materialized, and then in a fixed order (operands left to right), whatever order the C++
// compiler evaluates function arguments in (the IR, and so the structural hash, must not depend
// on the compiler).

namespace detail {

template <class T, class... Lanes> struct VecBuildExpr {
  using dsl_value_type = Vec<T, sizeof...(Lanes)>;
  std::tuple<Lanes...> lanes;
  VecBuildExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    return std::apply(
        [&](const auto &...l) {
          ir::Value *values[] = {l.emit(loc)...}; // a braced list is evaluated left to right
          return emit_n(ir::Opcode::VecBuild, values, ir_type<dsl_value_type>(), loc);
        },
        lanes);
  }
};

template <int L, class V, class X> struct WithLaneExpr {
  using dsl_value_type = typename V::dsl_value_type;
  V vector;
  X value;
  WithLaneExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    ir::Value *v = vector.emit(loc);
    return emit_insert(v, value.emit(loc), L, loc);
  }
};

template <class V, class K> struct LaneExpr {
  using dsl_value_type = scalar_of<typename V::dsl_value_type>;
  V vector;
  K index;
  LaneExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    using I = typename K::dsl_value_type;
    ir::Value *v = vector.emit(loc);
    ir::Value *k = index.emit(loc);
    ir::Value *picked = emit_extract(v, 0, loc);
    for (int l = 1; l < lanes_of<typename V::dsl_value_type>; ++l) {
      ir::Value *is_l =
          detail::emit(ir::Opcode::Eq, {k, make_const<I>(l).emit(loc)}, ir_type<bool>(), loc);
      picked = detail::emit(ir::Opcode::Select,
                            {is_l, emit_extract(v, static_cast<uint32_t>(l), loc), picked},
                            ir_type<dsl_value_type>(), loc);
    }
    return picked;
  }
};

/// The lanes of a vector combined left to right by `Op`: ((v0 op v1) op v2) ...
template <ir::Opcode Op, class V> struct HorizontalExpr {
  using dsl_value_type = scalar_of<typename V::dsl_value_type>;
  V vector;
  HorizontalExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    ir::Value *v = vector.emit(loc);
    ir::Value *acc = emit_extract(v, 0, loc);
    for (int l = 1; l < lanes_of<typename V::dsl_value_type>; ++l)
      acc = detail::emit(Op, {acc, emit_extract(v, static_cast<uint32_t>(l), loc)},
                         ir_type<dsl_value_type>(), loc);
    return acc;
  }
};

template <ir::Opcode Op, Need need, class V> auto horizontal(const V &v) {
  static_assert(ExprLike<V>, "cubecc: a horizontal operation needs a kernel vector");
  using T = value_of<V>;
  static_assert(lanes_of<T> > 1, "cubecc: a horizontal operation needs a vector, not a scalar");
  check_class<need, T>();
  return HorizontalExpr<Op, node_of<V>>{v.dsl_node()};
}

} // namespace detail

/// A vector of kernel type T from 2 to 16 lanes, in order: vec<float>(a, b, 0.0f, 1.0f) is a
/// Vec<float, 4> (C++ numbers adopt T).
template <KernelType T, class... Lanes> auto vec(const Lanes &...lanes) {
  constexpr int N = sizeof...(Lanes);
  static_assert(N == 2 || N == 3 || N == 4 || N == 8 || N == 16,
                "cubecc: dsl::vec takes 2, 3, 4, 8 or 16 lanes");
  static_assert(lanes_of<T> == 1, "cubecc: dsl::vec<T>'s T is the lanes' scalar type");
  return detail::VecBuildExpr<T, decltype(detail::node_as<T>(lanes))...>{
      {detail::node_as<T>(lanes)...}};
}

/// A copy of `v` with lane L (comptime) replaced by `x`; `w = dsl::with_lane<1>(w, x)` writes a
/// lane of a Var in place.
template <int L, class V, class X> auto with_lane(const V &v, const X &x) {
  static_assert(ExprLike<V>, "cubecc: with_lane needs a kernel vector");
  using T = value_of<V>;
  static_assert(lanes_of<T> > 1, "cubecc: with_lane needs a vector, not a scalar");
  static_assert(L >= 0 && L < lanes_of<T>, "cubecc: vector lane out of range");
  auto value = detail::node_as<scalar_of<T>>(x);
  return detail::WithLaneExpr<L, node_of<V>, decltype(value)>{v.dsl_node(), value};
}

/// Lane `k` of `v`, k a kernel integer (a runtime index): lane 0 when k is out of range.
template <class V, class K> auto lane(const V &v, const K &k) {
  static_assert(ExprLike<V> && lanes_of<value_of<V>> > 1, "cubecc: dsl::lane needs a vector");
  static_assert(ExprLike<K>, "cubecc: dsl::lane's index must be a kernel integer; a comptime "
                             "lane is v.lane<L>()");
  if constexpr (ExprLike<K>)
    static_assert(IntegerType<value_of<K>> && lanes_of<value_of<K>> == 1,
                  "cubecc: dsl::lane's index must be a kernel integer scalar");
  return detail::LaneExpr<node_of<V>, node_of<K>>{v.dsl_node(), k.dsl_node()};
}

/// The sum of v's lanes, left to right (floats: rounded at each step, in that order).
template <class V> auto hsum(const V &v) {
  return detail::horizontal<ir::Opcode::Add, detail::Need::Numeric>(v);
}
/// The smallest of v's lanes (floats: min's NaN rule, ir.md §4.2).
template <class V> auto hmin(const V &v) {
  return detail::horizontal<ir::Opcode::Min, detail::Need::Numeric>(v);
}
/// The largest of v's lanes.
template <class V> auto hmax(const V &v) {
  return detail::horizontal<ir::Opcode::Max, detail::Need::Numeric>(v);
}
/// The dot product hsum(a * b): lanes multiplied, then added left to right (no fma).
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto dot(const A &a, const B &b) {
  return hsum(a * b);
}

/// A copy of `v` with lane `k` replaced by `x`, k a kernel integer (a runtime index); `v`
/// unchanged when k is out of range. A select per lane: a comptime lane is with_lane<L>(v, x).
template <class V, class K, class X>
Val<value_of<V>> with_lane(const V &v, const K &k, const X &x, const Loc &loc = Loc::current()) {
  using T = value_of<V>;
  static_assert(lanes_of<T> > 1, "cubecc: with_lane needs a vector, not a scalar");
  static_assert(ExprLike<K>, "cubecc: with_lane's runtime lane must be a kernel integer; a "
                             "comptime lane is with_lane<L>(v, x)");
  if constexpr (ExprLike<K>)
    static_assert(IntegerType<value_of<K>> && lanes_of<value_of<K>> == 1,
                  "cubecc: with_lane's lane must be a kernel integer scalar");
  using S = scalar_of<T>;
  // Each materialized once (a Val already is).
  auto materialize = [&]<class U>(std::type_identity<U>, const auto &e) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(e)>, Val<U>>)
      return e;
    else
      return Val<U>(detail::node_as<U>(e), loc);
  };
  Val<T> in = materialize(std::type_identity<T>{}, v);
  Val<S> value = materialize(std::type_identity<S>{}, x);
  return [&]<int... L>(std::integer_sequence<int, L...>) {
    return Val<T>(vec<S>(select(k == L, value, in.template lane<L>(loc))...), loc);
  }
  (std::make_integer_sequence<int, lanes_of<T>>{});
}

//===- Conveniences written with the operations above (no ops of their own) ------------------===//

/// 1 / x, one rounded division (floats; vectors lane by lane).
template <ExprLike A> auto recip(const A &x) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Float, T>();
  return detail::make_node<ir::Opcode::Div, T>(detail::make_const<T>(1.0), x.dsl_node());
}
/// x radians in degrees: x * (180 / pi), one rounded product.
template <ExprLike A> auto degrees(const A &x) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Float, T>();
  return detail::make_node<ir::Opcode::Mul, T>(x.dsl_node(),
                                               detail::make_const<T>(57.295779513082320876798));
}
/// x degrees in radians: x * (pi / 180), one rounded product.
template <ExprLike A> auto radians(const A &x) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Float, T>();
  return detail::make_node<ir::Opcode::Mul, T>(x.dsl_node(),
                                               detail::make_const<T>(0.017453292519943295769237));
}
/// 1 / hypot(x, y) (two roundings: hypot's, then the division's).
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto rhypot(const A &x, const B &y) {
  return recip(hypot(x, y));
}
/// x to the integer power n (a kernel integer, or a C++ one): pow(x, n as x's type), so pow's
/// rules hold (a negative x to an odd n is negative, to an even n positive).
template <ExprLike A, class N> auto powi(const A &x, const N &n) {
  using T = value_of<A>;
  detail::check_class<detail::Need::Float, T>();
  if constexpr (ExprLike<N>) {
    static_assert(IntegerType<value_of<N>>, "cubecc: powi's exponent is an integer");
    return pow(x, cast<T>(n));
  } else {
    static_assert(std::is_integral_v<N>, "cubecc: powi's exponent is an integer");
    return pow(x, detail::make_const<T>(n));
  }
}
/// The length of float vector v: sqrt(dot(v, v)) (the dot's left-to-right sum, then sqrt).
template <ExprLike A> auto magnitude(const A &v) {
  static_assert(lanes_of<value_of<A>> > 1, "cubecc: magnitude takes a vector (abs for a scalar)");
  return sqrt(dot(v, v));
}
/// v scaled to length 1: v * rsqrt(dot(v, v)) (lanes of inf or NaN for a zero vector).
template <ExprLike A> auto normalize(const A &v) {
  using T = value_of<A>;
  static_assert(lanes_of<T> > 1, "cubecc: normalize takes a vector");
  return v * splat<lanes_of<T>>(rsqrt(dot(v, v)));
}

} // namespace cubecc::dsl
