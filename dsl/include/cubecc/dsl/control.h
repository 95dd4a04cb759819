//===- control.h - Structured control flow in kernels ----------------------------------------===//
//
//   dsl::if_(i < n, [&] { ... }).else_([&] { ... });
//   dsl::for_(0u, n, [&](dsl::Val<uint32_t> k) { ... });              // runtime bounds
//   dsl::for_(0u, n, 4u, [&](auto k) { ... }, dsl::Unroll{2});        // step and unroll hint
//   dsl::while_([&] { return x > 1u; }, [&] { ... });
//   auto s = dsl::for_carry(0u, n, init, [&](auto k, const auto &s) { return next; }); // carried
//   dsl::break_(); dsl::continue_(); dsl::break_(2);                  // leave two loops
//   dsl::return_();                                                    // end the kernel here
//   dsl::switch_(k, dsl::case_(0, [&] { ... }), dsl::default_([&] { ... }));
//
// A plain C++ `for` over comptime values is unrolled at trace time.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/expr.h"

#include <array>
#include <initializer_list>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cubecc::ir {
class Operation;
}

namespace cubecc::dsl {

namespace detail {
ir::Operation *current_if_for_else(const Loc &loc);
void begin_else_of(ir::Operation *if_op, const Loc &loc);
} // namespace detail

/// The handle returned by if_, for attaching an else branch.
class IfElse {
public:
  explicit IfElse(ir::Operation *op) : op_(op) {}
  /// Must directly follow its if_, once.
  template <class F> void else_(F &&body, const Loc &loc = Loc::current()) const {
    if (used_)
      throw TraceError("this if_ already has an else_", loc);
    used_ = true;
    detail::begin_else_of(op_, loc);
    std::forward<F>(body)();
    detail::end_if();
  }

private:
  ir::Operation *op_;
  mutable bool used_ = false;
};

template <class C, class F>
IfElse if_(const C &condition, F &&then, const Loc &loc = Loc::current()) {
  static_assert(ExprLike<C>, "cubecc: if_ needs a kernel bool condition (a comparison, say); a "
                             "C++ bool is comptime: use a plain C++ if");
  static_assert(std::is_same_v<value_of<C>, bool>, "cubecc: if_'s condition must be bool (compare "
                                                   "first, e.g. x != 0)");
  detail::begin_if(condition.dsl_node().emit(loc), loc);
  std::forward<F>(then)();
  detail::end_then();
  return IfElse(detail::current_if_for_else(loc));
}

/// An arm of switch_: runs `body` when the switched value equals one of `values`.
template <class F> struct CaseArm {
  std::vector<long long> values;
  F body;
  Loc loc;
};
/// The arm of switch_ that runs when no case_ matches (last, at most one).
template <class F> struct DefaultArm { F body; };
template <class F>
CaseArm<std::decay_t<F>> case_(long long value, F &&body, const Loc &loc = Loc::current()) {
  static_assert(std::invocable<F>, "cubecc: a case_'s body takes no arguments: [&] { ... }");
  return {{value}, std::forward<F>(body), loc};
}
/// An arm for several values (C's `case 1: case 2:`): `dsl::case_({1, 2}, [&] { ... })`.
template <class F>
CaseArm<std::decay_t<F>> case_(std::initializer_list<long long> values, F &&body,
                               const Loc &loc = Loc::current()) {
  static_assert(std::invocable<F>, "cubecc: a case_'s body takes no arguments: [&] { ... }");
  return {std::vector<long long>(values), std::forward<F>(body), loc};
}
template <class F> DefaultArm<std::decay_t<F>> default_(F &&body) {
  static_assert(std::invocable<F>, "cubecc: default_'s body takes no arguments: [&] { ... }");
  return {std::forward<F>(body)};
}

namespace detail {
template <class T> inline constexpr bool is_case_arm = false;
template <class F> inline constexpr bool is_case_arm<CaseArm<F>> = true;
template <class T> inline constexpr bool is_default_arm = false;
template <class F> inline constexpr bool is_default_arm<DefaultArm<F>> = true;

template <class V> void switch_arms(const V &, std::vector<long long> &) {}
template <class V, class F>
void switch_arms(const V &, std::vector<long long> &, const DefaultArm<F> &arm) {
  arm.body();
}
template <class V, class F, class... Rest>
void switch_arms(const V &v, std::vector<long long> &seen, const CaseArm<F> &arm,
                 const Rest &...rest) {
  if (arm.values.empty())
    throw TraceError("switch_ has a case_ with no values", arm.loc);
  for (long long value : arm.values) {
    for (long long earlier : seen)
      if (earlier == value)
        throw TraceError("switch_ has two case_ arms for " + std::to_string(value), arm.loc);
    seen.push_back(value);
  }
  Val<bool> matches(v == arm.values[0], arm.loc); // at the case_'s line
  for (size_t k = 1; k < arm.values.size(); ++k)
    matches = Val<bool>(matches || v == arm.values[k], arm.loc);
  IfElse chain = if_(matches, arm.body, arm.loc);
  if constexpr (sizeof...(Rest) > 0)
    chain.else_([&] { switch_arms(v, seen, rest...); }, arm.loc);
}
} // namespace detail

/// switch over a kernel integer: the first case_ whose value equals `x` runs (no fall-through),
/// else default_ if given. `x` is evaluated once; the arms become a chain of if_/else_.
///   dsl::switch_(k, dsl::case_(0, [&] { ... }), dsl::case_(1, [&] { ... }),
///                dsl::default_([&] { ... }));
template <class X, class... Arms> void switch_(const X &x, const Arms &...arms) {
  static_assert(ExprLike<X>, "cubecc: switch_ needs a kernel integer (a C++ integer is comptime: "
                             "use a plain C++ switch)");
  static_assert(IntegerType<value_of<X>> && lanes_of<value_of<X>> == 1,
                "cubecc: switch_ needs an integer scalar; compare floats with if_");
  static_assert(sizeof...(Arms) > 0, "cubecc: switch_ needs at least one case_ or default_");
  static_assert(((detail::is_case_arm<Arms> || detail::is_default_arm<Arms>)&&...),
                "cubecc: switch_'s arms are dsl::case_(value, body) and dsl::default_(body)");
  constexpr bool defaults[] = {detail::is_default_arm<Arms>...};
  constexpr size_t default_count = (size_t{0} + ... + (detail::is_default_arm<Arms> ? 1 : 0));
  static_assert(default_count == 0 || (default_count == 1 && defaults[sizeof...(Arms) - 1]),
                "cubecc: switch_ takes at most one default_, as its last arm");
  Val<value_of<X>> v = x;
  std::vector<long long> seen;
  detail::switch_arms(v, seen, arms...);
}

/// A loop unrolling hint: 0 leaves the choice to the compiler, 1 asks for no unrolling, N > 1
/// for unrolling by N.
struct Unroll {
  int factor = 0;
};

namespace detail {

template <class L, class H> struct LoopIndex {
  // Both bounds are C++ integers: their common type, so `for_(0u, 16u, ...)` counts in uint32_t.
  static_assert(std::is_integral_v<L> && std::is_integral_v<H> && !std::is_same_v<L, bool> &&
                    !std::is_same_v<H, bool>,
                "cubecc: for_ bounds must be integers");
  using type = KernelInteger<std::common_type_t<L, H>>;
};
template <class L, class H>
requires(ExprLike<H> && !ExprLike<L>) struct LoopIndex<L, H> {
  using type = value_of<H>;
};
template <class L, class H>
requires ExprLike<L>
struct LoopIndex<L, H> {
  using type = value_of<L>;
};

template <class I, class L, class H, class S, class F>
void for_impl(const L &lo, const H &hi, const S &step, F &&body, int unroll, const Loc &loc) {
  static_assert(IntegerType<I> && lanes_of<I> == 1, "cubecc: for_ bounds must be integers");
  // Emitted in source order (a function call's arguments are evaluated in an unspecified order,
  // which would make the IR, and so the structural hash, depend on the C++ compiler).
  ir::Value *lo_value = node_as<I>(lo).emit(loc);
  ir::Value *hi_value = node_as<I>(hi).emit(loc);
  ir::Value *step_value = node_as<I>(step).emit(loc);
  ir::Value *iv = begin_for(lo_value, hi_value, step_value, unroll, loc);
  std::forward<F>(body)(Val<I>::from_ir(iv));
  end_for();
}

} // namespace detail

/// for (i = lo; i < hi; i += 1) body(i). The bounds are evaluated once.
template <class L, class H, class F>
requires std::invocable<F>
void for_(const L &, const H &, F &&, const Loc & = Loc::current()) {
  static_assert(dependent_false<F>, "cubecc: for_'s body takes the loop index: write [&](auto i) "
                                    "or [&](dsl::Val<T> i) with T the type of the bounds");
}

/// for (i = lo; i < hi; i += 1) body(i). The bounds are evaluated once. The index has the type
/// of the kernel-value bound, or the common type of two C++ bounds (0u and 16u: uint32_t).
template <class L, class H, class F>
requires(!std::invocable<F>) void for_(const L &lo, const H &hi, F &&body,
                                       const Loc &loc = Loc::current()) {
  using I = typename detail::LoopIndex<L, H>::type;
  static_assert(std::invocable<F, Val<I>>,
                "cubecc: for_'s body must take the loop index as dsl::Val<T> with T the type of "
                "the bounds (the kernel value's, or int32_t / uint32_t for C++ int / unsigned "
                "bounds), or as auto");
  detail::for_impl<I>(lo, hi, 1, std::forward<F>(body), 0, loc);
}

/// for (i = lo; i < hi; i += step) body(i), with an optional unrolling hint.
template <class L, class H, class S, class F>
requires(!std::is_same_v<std::remove_cvref_t<F>, Loc>) void for_(const L &lo, const H &hi,
                                                                 const S &step, F &&body,
                                                                 Unroll unroll = {},
                                                                 const Loc &loc = Loc::current()) {
  using I = typename detail::LoopIndex<L, H>::type;
  static_assert(std::invocable<F, Val<I>>,
                "cubecc: for_'s body must take the loop index as dsl::Val<T> with T the type of "
                "the bounds (the kernel value's, or int32_t / uint32_t for C++ int / unsigned "
                "bounds), or as auto");
  detail::for_impl<I>(lo, hi, step, std::forward<F>(body), unroll.factor, loc);
}

namespace detail {

/// How a for_carry value is taken apart into IR values and put back together: Val<T>,
/// dsl::Matrix (matrix.h), and std::array and std::tuple of carried values.
template <class C> struct Carry { static constexpr bool known = false; };
template <KernelType T> struct Carry<Val<T>> {
  static constexpr bool known = true;
  static void flatten(const Val<T> &v, std::vector<ir::Value *> &out) { out.push_back(v.ir()); }
  static Val<T> rebuild(std::span<ir::Value *const> values, size_t &next) {
    return Val<T>::from_ir(values[next++]);
  }
};
template <class C, size_t N> struct Carry<std::array<C, N>> {
  static constexpr bool known = Carry<C>::known;
  static void flatten(const std::array<C, N> &a, std::vector<ir::Value *> &out) {
    for (const C &c : a)
      Carry<C>::flatten(c, out);
  }
  static std::array<C, N> rebuild(std::span<ir::Value *const> values, size_t &next) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      // A braced list evaluates left to right, as flatten wrote them.
      return std::array<C, N>{(static_cast<void>(I), Carry<C>::rebuild(values, next))...};
    }
    (std::make_index_sequence<N>{});
  }
};
template <class... C> struct Carry<std::tuple<C...>> {
  static constexpr bool known = (Carry<C>::known && ...);
  static void flatten(const std::tuple<C...> &t, std::vector<ir::Value *> &out) {
    std::apply([&](const C &...c) { (Carry<C>::flatten(c, out), ...); }, t);
  }
  static std::tuple<C...> rebuild(std::span<ir::Value *const> values, size_t &next) {
    return std::tuple<C...>{Carry<C>::rebuild(values, next)...};
  }
};

template <class I, class L, class H, class C, class F>
C for_carry_impl(const L &lo, const H &hi, const C &init, F &&body, int unroll, const Loc &loc) {
  static_assert(IntegerType<I> && lanes_of<I> == 1, "cubecc: for_carry bounds must be integers");
  ir::Value *lo_value = node_as<I>(lo).emit(loc);
  ir::Value *hi_value = node_as<I>(hi).emit(loc);
  ir::Value *step_value = node_as<I>(1).emit(loc);
  std::vector<ir::Value *> inits;
  Carry<C>::flatten(init, inits);
  std::vector<ir::Value *> arguments =
      begin_for_carry(lo_value, hi_value, step_value, inits, unroll, loc);
  size_t next = 1; // after the induction variable
  C carried = Carry<C>::rebuild(arguments, next);
  // Materialized here, inside the body: an expression returned for a Val<T> is emitted in it.
  C updated = std::forward<F>(body)(Val<I>::from_ir(arguments[0]), carried);
  std::vector<ir::Value *> values;
  Carry<C>::flatten(updated, values);
  std::vector<ir::Value *> results = end_for_carry(values, loc);
  next = 0;
  return Carry<C>::rebuild(results, next);
}

} // namespace detail

/// A counted loop that carries values from one iteration to the next and returns the last:
///   auto sum = dsl::for_carry(0u, n, dsl::Val<float>(0.0f),
///                             [&](dsl::Val<uint32_t> i, const dsl::Val<float> &s) {
///                               return dsl::Val<float>(s + x[i]);
///                             });
/// `body(i, carried)` returns the next carried value; the loop returns the value after the last
/// iteration (`init` when it runs no iteration). Carried values are dsl::Val<T>, dsl::Matrix
/// fragments, and std::array or std::tuple of them. This is how a loop updates matrix fragments,
/// which cannot live in a dsl::Var. Inside the body, break_, continue_ and return_ are refused:
/// each iteration must produce the next values.
template <class L, class H, class C, class F>
C for_carry(const L &lo, const H &hi, const C &init, F &&body, Unroll unroll = {},
            const Loc &loc = Loc::current()) {
  static_assert(detail::Carry<C>::known,
                "cubecc: for_carry carries dsl::Val<T>, dsl::Matrix and std::array or std::tuple "
                "of them (wrap a number: dsl::Val<float>(0.0f))");
  using I = typename detail::LoopIndex<L, H>::type;
  static_assert(std::is_invocable_v<F, Val<I>, const C &>,
                "cubecc: for_carry's body takes the loop index (dsl::Val<T> with T the type of "
                "the bounds, or auto) and the carried value (const C &, C the type of init)");
  if constexpr (std::is_invocable_v<F, Val<I>, const C &>) {
    static_assert(std::is_convertible_v<std::invoke_result_t<F, Val<I>, const C &>, C>,
                  "cubecc: for_carry's body returns the next carried value, of init's type");
    return detail::for_carry_impl<I>(lo, hi, init, std::forward<F>(body), unroll.factor, loc);
  } else {
    return init;
  }
}

/// while (condition()) body(). `condition` returns a kernel bool and runs before each iteration.
template <class C, class F> void while_(C &&condition, F &&body, const Loc &loc = Loc::current()) {
  using Cond = decltype(condition());
  static_assert(ExprLike<Cond>, "cubecc: while_'s condition must be a function returning a "
                                "kernel bool (a C++ bool is comptime: use a plain C++ while)");
  if constexpr (ExprLike<Cond>)
    static_assert(std::is_same_v<value_of<Cond>, bool>,
                  "cubecc: while_'s condition must be a function returning a kernel bool");
  detail::begin_while(loc);
  detail::while_condition(condition().dsl_node().emit(loc), loc);
  std::forward<F>(body)();
  detail::end_while();
}

/// Leaves the innermost for_ or while_.
inline void break_(const Loc &loc = Loc::current()) {
  detail::emit_break(loc);
}
/// Starts the next iteration of the innermost for_ or while_.
/// Leaves `levels` enclosing for_/while_ loops at once (break_(1) is break_()); execution
/// resumes after the outermost of them. Each loop left checks a flag after its inner loop and
/// breaks in turn.
inline void break_(int levels, const Loc &loc = Loc::current()) {
  detail::emit_break_levels(levels, loc);
}
/// Ends this invocation's kernel here: whatever follows (in this block, after the enclosing
/// if_s and loops) is skipped. Inside loops it breaks out of each; a barrier after a return_
/// taken by only some invocations of a workgroup is refused, as any divergent barrier is.
inline void return_(const Loc &loc = Loc::current()) {
  detail::emit_return(loc);
}
inline void continue_(const Loc &loc = Loc::current()) {
  detail::emit_continue(loc);
}

} // namespace cubecc::dsl
