//===- primitives.h - Cooperative building blocks: grid-stride loops, workgroup reduce and scan
//-===//
//
//   dsl::grid_stride_for(n, [&](dsl::Val<uint32_t> i) { y[i] = 2.0f * x[i]; });
//
//   dsl::WorkgroupOps<float, 256> wg;               // its shared memory: 256 floats
//   dsl::Val<float> total = wg.reduce(v, dsl::plus);
//   dsl::Val<float> before = wg.exclusive_scan(v, dsl::plus);
//   dsl::Val<float> first = wg.broadcast(v, 0u);
//
// The workgroup operations combine one value of every invocation of the workgroup, so every
// invocation must call them (like a barrier: not under a condition that varies); `N` is the
// kernel's workgroup size (all three dimensions multiplied), a power of two. They work in the
// shared memory their object declares, so one object serves any number of calls: each call but
// the first begins with a barrier (so does the first inside a loop), which keeps it from
// overwriting what the previous call's invocations are still reading.
//
// With plus, multiplies, minimum and maximum, reductions and scans go through the subgroup
// operations: each subgroup combines its lanes in registers, one lane of each writes the
// subgroup's total, and after one barrier every invocation folds the totals it needs. Other ops
// reduce as a tree, and scan Hillis-Steele, in shared memory: log2(N) steps, each a barrier.
//
#pragma once

#include "cubecc/dsl/control.h"
#include "cubecc/dsl/gpu.h"
#include "cubecc/dsl/memory.h"

#include <cstdint>
#include <limits>

namespace cubecc::dsl {

/// for (i = global_id().x; i < n; i += workgroup_size().x * num_workgroups().x) body(i): the
/// grid's invocations share 0 .. n - 1 between them, whatever the grid's size.
template <class N, class F>
void grid_stride_for(const N &n, F &&body, const Loc &loc = Loc::current()) {
  static_assert(std::invocable<F, Val<uint32_t>>,
                "cubecc: grid_stride_for's body takes the index: [&](dsl::Val<uint32_t> i)");
  Val<uint32_t> first(global_id(loc).x, loc);
  Val<uint32_t> stride(workgroup_size(loc).x * num_workgroups(loc).x, loc);
  for_(first, n, stride, std::forward<F>(body), Unroll{1}, loc);
}

/// Associative operations for the workgroup primitives, with their identity elements.
/// Each also names its subgroup reduction and scans, the fast paths of WorkgroupOps.
struct Plus {
  template <class A, class B> auto operator()(const A &a, const B &b) const { return a + b; }
  template <class T> static T identity() { return T(0); }
  template <class X> static auto subgroup(const X &x, const Loc &loc) {
    return subgroup_sum(x, loc);
  }
  template <class X> static auto subgroup_inclusive(const X &x, const Loc &loc) {
    return subgroup_inclusive_sum(x, loc);
  }
  template <class X> static auto subgroup_exclusive(const X &x, const Loc &loc) {
    return subgroup_exclusive_sum(x, loc);
  }
};
struct Multiplies {
  template <class A, class B> auto operator()(const A &a, const B &b) const { return a * b; }
  template <class T> static T identity() { return T(1); }
  template <class X> static auto subgroup(const X &x, const Loc &loc) {
    return subgroup_product(x, loc);
  }
  template <class X> static auto subgroup_inclusive(const X &x, const Loc &loc) {
    return subgroup_inclusive_product(x, loc);
  }
  template <class X> static auto subgroup_exclusive(const X &x, const Loc &loc) {
    return subgroup_exclusive_product(x, loc);
  }
};
struct Minimum {
  template <class A, class B> auto operator()(const A &a, const B &b) const { return min(a, b); }
  template <class X> static auto subgroup(const X &x, const Loc &loc) {
    return subgroup_min(x, loc);
  }
  template <class X> static auto subgroup_inclusive(const X &x, const Loc &loc) {
    return subgroup_inclusive_min(x, loc);
  }
  template <class X> static auto subgroup_exclusive(const X &x, const Loc &loc) {
    return subgroup_exclusive_min(x, loc);
  }
  template <class T> static T identity() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  }
};
struct Maximum {
  template <class A, class B> auto operator()(const A &a, const B &b) const { return max(a, b); }
  template <class X> static auto subgroup(const X &x, const Loc &loc) {
    return subgroup_max(x, loc);
  }
  template <class X> static auto subgroup_inclusive(const X &x, const Loc &loc) {
    return subgroup_inclusive_max(x, loc);
  }
  template <class X> static auto subgroup_exclusive(const X &x, const Loc &loc) {
    return subgroup_exclusive_max(x, loc);
  }
  template <class T> static T identity() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
};
inline constexpr Plus plus{};
inline constexpr Multiplies multiplies{};
inline constexpr Minimum minimum{};
inline constexpr Maximum maximum{};

namespace detail {
template <class Op, class T>
concept SubgroupReducible = requires(const Val<T> &v, const Loc &l) {
  Op::subgroup(v, l);
  Op::template identity<T>();
};
template <class Op, class T>
concept SubgroupScannable = requires(const Val<T> &v, const Loc &l) {
  Op::subgroup_inclusive(v, l);
  Op::subgroup_exclusive(v, l);
  Op::template identity<T>();
};
} // namespace detail

/// Reduce, scan and broadcast over the `N` invocations of a workgroup, in `N` elements of
/// shared memory that the object declares.
template <KernelType T, int N> class WorkgroupOps {
  static_assert(N > 0 && (N & (N - 1)) == 0,
                "cubecc: WorkgroupOps<T, N> needs N, the workgroup size, to be a power of two");
  static_assert(lanes_of<T> == 1, "cubecc: WorkgroupOps<T, N> combines scalars");

public:
  /// Throws TraceError unless the kernel's workgroup has exactly N invocations: the tree and the
  /// scans index the N elements by local_index().
  explicit WorkgroupOps(const Loc &loc = Loc::current()) : scratch_(loc) {
    if (uint32_t invocations = detail::workgroup_invocations(loc);
        invocations != static_cast<uint32_t>(N))
      throw TraceError("WorkgroupOps<T, " + std::to_string(N) + "> combines " + std::to_string(N) +
                           " invocations, but the kernel's workgroup has " +
                           std::to_string(invocations) +
                           ": make N the workgroup's size (x * y * z of its .workgroup)",
                       loc);
  }

  /// `op` over every invocation's `x`, in every invocation.
  /// With an op that names a subgroup reduction (plus, multiplies, minimum, maximum): each
  /// subgroup reduces in registers, lane 0 of each writes its partial, and after one barrier
  /// every subgroup folds the partials (lane j those j, j + subgroup_size, ...) and reduces
  /// them again. Other ops: a tree in shared memory (log2(N) barriers).
  template <class X, class Op>
  Val<T> reduce(const X &x, const Op &op, const Loc &loc = Loc::current()) {
    Val<T> value = node_as_value(x, loc);
    begin_call(loc);
    if constexpr (detail::SubgroupReducible<Op, T>) {
      Val<T> partial = Op::subgroup(value, loc);
      Val<uint32_t> lane = subgroup_lane(loc);
      if_(
          lane == 0u, [&] { scratch_[subgroup_id(loc)] = Stored<T>(partial, loc); }, loc);
      barrier(loc);
      Var<T> acc(Op::template identity<T>(), loc);
      for_(
          lane, num_subgroups(loc), subgroup_size(loc),
          [&](Val<uint32_t> s) { acc = Stored<T>(op(acc, scratch_[s]), loc); }, Unroll{}, loc);
      return Op::subgroup(acc, loc);
    } else {
      Val<uint32_t> li = local_index(loc);
      scratch_[li] = Stored<T>(value, loc);
      barrier(loc);
      for (int s = N / 2; s > 0; s /= 2) { // a tree: each level halves the live elements
        if_(
            li < static_cast<uint32_t>(s),
            [&] {
              Val<T> a(scratch_[li], loc), b(scratch_[li + static_cast<uint32_t>(s)], loc);
              scratch_[li] = Stored<T>(op(a, b), loc);
            },
            loc);
        barrier(loc);
      }
      return value_at(scratch_[0u], loc);
    }
  }

  /// `op` over the `x` of invocations 0 .. local_index() (in local_index order).
  template <class X, class Op>
  Val<T> inclusive_scan(const X &x, const Op &op, const Loc &loc = Loc::current()) {
    Val<T> value = node_as_value(x, loc);
    begin_call(loc);
    if constexpr (detail::SubgroupScannable<Op, T>) {
      Val<T> within = Op::subgroup_inclusive(value, loc);
      return value_at(op(subgroups_before(within, op, loc), within), loc);
    } else {
      Val<uint32_t> li = local_index(loc);
      scan_into_scratch(li, value, op, loc);
      return value_at(scratch_[li], loc);
    }
  }

  /// `op` over the `x` of invocations 0 .. local_index() - 1; the op's identity in invocation 0.
  template <class X, class Op>
  Val<T> exclusive_scan(const X &x, const Op &op, const Loc &loc = Loc::current()) {
    Val<T> value = node_as_value(x, loc);
    begin_call(loc);
    if constexpr (detail::SubgroupScannable<Op, T>) {
      Val<T> within = Op::subgroup_exclusive(value, loc);
      Val<T> through =
          value_at(op(within, value), loc); // the inclusive scan, for the last lane's total
      return value_at(op(subgroups_before(through, op, loc), within), loc);
    } else {
      Val<uint32_t> li = local_index(loc);
      scan_into_scratch(li, value, op, loc);
      Var<T> result(Op::template identity<T>(), loc);
      if_(
          li > 0u, [&] { result = Stored<T>(scratch_[li - 1u], loc); }, loc);
      return value_at(result, loc);
    }
  }

  /// Invocation `from`'s `x`, in every invocation (`from` must be below N and the same in all).
  template <class X, class L>
  Val<T> broadcast(const X &x, const L &from, const Loc &loc = Loc::current()) {
    Val<T> value = node_as_value(x, loc);
    begin_call(loc);
    if_(
        local_index(loc) == from, [&] { scratch_[0u] = Stored<T>(value, loc); }, loc);
    barrier(loc);
    return value_at(scratch_[0u], loc);
  }

private:
  template <class X> static Val<T> node_as_value(const X &x, const Loc &loc) {
    static_assert(std::is_same_v<value_of<X>, T> || !ExprLike<X>,
                  "cubecc: the value's type differs from WorkgroupOps<T, N>'s T; convert with "
                  "dsl::cast<T>(...)");
    return value_at(x, loc);
  }

  /// `x` as a value, computed at `loc` (the caller's line).
  template <class X> static Val<T> value_at(const X &x, const Loc &loc) {
    if constexpr (std::is_same_v<X, Val<T>>)
      return x;
    else
      return Val<T>(x, loc);
  }

  /// The barrier that separates this call's writes to the shared memory from the previous
  /// call's reads. Not needed at the object's first call, unless that call is in a loop (its
  /// next iteration follows the previous one's reads).
  void begin_call(const Loc &loc) {
    if (called_ || detail::inside_loop(loc))
      barrier(loc);
    called_ = true;
  }

  /// The op over the inclusive totals of the subgroups before this invocation's, given
  /// `through`: the subgroup's inclusive scan (in its last lane, the subgroup's total).
  template <class Op> Val<T> subgroups_before(const Val<T> &through, const Op &op, const Loc &loc) {
    Val<uint32_t> subgroup = subgroup_id(loc);
    // The workgroup's last invocation is a last lane too, where one subgroup is wider than N.
    Val<bool> last_lane(
        subgroup_lane(loc) == subgroup_size(loc) - 1u || local_index(loc) == uint32_t(N - 1), loc);
    if_(
        last_lane, [&] { scratch_[subgroup] = Stored<T>(through, loc); }, loc);
    barrier(loc);
    Var<T> before(Op::template identity<T>(), loc);
    for_(
        0u, subgroup, 1u,
        [&](Val<uint32_t> s) { before = Stored<T>(op(before, scratch_[s]), loc); }, Unroll{}, loc);
    return value_at(before, loc);
  }

  /// Hillis-Steele: after step d, element i holds op over i - 2d + 1 .. i.
  template <class Op>
  void scan_into_scratch(const Val<uint32_t> &li, const Val<T> &value, const Op &op,
                         const Loc &loc) {
    scratch_[li] = Stored<T>(value, loc);
    barrier(loc);
    for (int d = 1; d < N; d *= 2) {
      Var<T> sum(scratch_[li], loc);
      if_(
          li >= static_cast<uint32_t>(d),
          [&] {
            Val<T> earlier(scratch_[li - static_cast<uint32_t>(d)], loc);
            sum = Stored<T>(op(earlier, sum), loc);
          },
          loc);
      barrier(loc);
      scratch_[li] = Stored<T>(sum, loc);
      barrier(loc);
    }
  }

  Shared<T, N> scratch_;
  bool called_ = false; ///< a call has been traced: the next begins with a barrier
};

} // namespace cubecc::dsl
