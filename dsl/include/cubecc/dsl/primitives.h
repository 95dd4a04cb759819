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
// shared memory their object declares and end with a barrier, so one object serves any number
// of calls. Reductions with plus, multiplies, minimum and maximum go through subgroup
// reductions and one exchange of the subgroups' partials (two barriers); other ops reduce as a
// tree, and scans Hillis-Steele, over that memory: log2(N) steps, each a barrier.
//
//===-----------------------------------------------------------------------------------------===//
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
  Val<uint32_t> first = global_id(loc).x;
  Val<uint32_t> stride = workgroup_size(loc).x * num_workgroups(loc).x;
  for_(first, n, stride, std::forward<F>(body), Unroll{1}, loc);
}

/// Associative operations for the workgroup primitives, with their identity elements.
/// Each also names its subgroup reduction, the fast path of WorkgroupOps::reduce.
struct Plus {
  template <class A, class B> auto operator()(const A &a, const B &b) const { return a + b; }
  template <class T> static T identity() { return T(0); }
  template <class X> static auto subgroup(const X &x, const Loc &loc) {
    return subgroup_sum(x, loc);
  }
};
struct Multiplies {
  template <class A, class B> auto operator()(const A &a, const B &b) const { return a * b; }
  template <class T> static T identity() { return T(1); }
  template <class X> static auto subgroup(const X &x, const Loc &loc) {
    return subgroup_product(x, loc);
  }
};
struct Minimum {
  template <class A, class B> auto operator()(const A &a, const B &b) const { return min(a, b); }
  template <class X> static auto subgroup(const X &x, const Loc &loc) {
    return subgroup_min(x, loc);
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
  template <class T> static T identity() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
};
inline constexpr Plus plus{};
inline constexpr Multiplies multiplies{};
inline constexpr Minimum minimum{};
inline constexpr Maximum maximum{};

/// Reduce, scan and broadcast over the `N` invocations of a workgroup, in `N` elements of
/// shared memory that the object declares.
template <KernelType T, int N> class WorkgroupOps {
  static_assert(N > 0 && (N & (N - 1)) == 0,
                "cubecc: WorkgroupOps<T, N> needs N, the workgroup size, to be a power of two");
  static_assert(lanes_of<T> == 1, "cubecc: WorkgroupOps<T, N> combines scalars");

public:
  explicit WorkgroupOps(const Loc &loc = Loc::current()) : scratch_(loc) {}

  /// `op` over every invocation's `x`, in every invocation.
  /// With an op that names a subgroup reduction (plus, multiplies, minimum, maximum): each
  /// subgroup reduces in registers, lane 0 of each writes its partial, and after one barrier
  /// every invocation folds the partials in subgroup order (two barriers in all, whatever N).
  /// Other ops: a tree in shared memory (log2(N) barriers).
  template <class X, class Op>
  Val<T> reduce(const X &x, const Op &op, const Loc &loc = Loc::current()) {
    if constexpr (requires(const Val<T> &v, const Loc &l) { Op::subgroup(v, l); }) {
      Val<T> mine = Op::subgroup(node_as_value(x), loc);
      Val<uint32_t> subgroup = subgroup_id(loc);
      if_(
          subgroup_lane(loc) == 0u, [&] { scratch_[subgroup] = mine; }, loc);
      barrier(loc);
      Var<T> total = scratch_[0u];
      for_(
          1u, num_subgroups(loc), 1u, [&](Val<uint32_t> s) { total = op(total, scratch_[s]); },
          Unroll{1}, loc);
      Val<T> result = total;
      barrier(loc); // the memory is free again
      return result;
    } else {
      Val<uint32_t> li = local_index(loc);
      scratch_[li] = node_as_value(x);
      barrier(loc);
      for (int s = N / 2; s > 0; s /= 2) { // a tree: each level halves the live elements
        if_(
            li < static_cast<uint32_t>(s),
            [&] {
              Val<T> a = scratch_[li], b = scratch_[li + static_cast<uint32_t>(s)];
              scratch_[li] = op(a, b);
            },
            loc);
        barrier(loc);
      }
      Val<T> result = scratch_[0u];
      barrier(loc); // the memory is free again
      return result;
    }
  }

  /// `op` over the `x` of invocations 0 .. local_index() (in local_index order).
  template <class X, class Op>
  Val<T> inclusive_scan(const X &x, const Op &op, const Loc &loc = Loc::current()) {
    Val<uint32_t> li = local_index(loc);
    scan_into_scratch(li, x, op, loc);
    Val<T> result = scratch_[li];
    barrier(loc);
    return result;
  }

  /// `op` over the `x` of invocations 0 .. local_index() - 1; the op's identity in invocation 0.
  template <class X, class Op>
  Val<T> exclusive_scan(const X &x, const Op &op, const Loc &loc = Loc::current()) {
    Val<uint32_t> li = local_index(loc);
    scan_into_scratch(li, x, op, loc);
    Var<T> result = Op::template identity<T>();
    if_(
        li > 0u, [&] { result = scratch_[li - 1u]; }, loc);
    Val<T> out = result;
    barrier(loc);
    return out;
  }

  /// Invocation `from`'s `x`, in every invocation (`from` must be below N and the same in all).
  template <class X, class L>
  Val<T> broadcast(const X &x, const L &from, const Loc &loc = Loc::current()) {
    Val<uint32_t> li = local_index(loc);
    if_(
        li == from, [&] { scratch_[0u] = node_as_value(x); }, loc);
    barrier(loc);
    Val<T> result = scratch_[0u];
    barrier(loc);
    return result;
  }

private:
  template <class X> static Val<T> node_as_value(const X &x) {
    static_assert(std::is_same_v<value_of<X>, T> || !ExprLike<X>,
                  "cubecc: the value's type differs from WorkgroupOps<T, N>'s T; convert with "
                  "dsl::cast<T>(...)");
    return Val<T>(x);
  }

  /// Hillis-Steele: after step d, element i holds op over i - 2d + 1 .. i.
  template <class X, class Op>
  void scan_into_scratch(const Val<uint32_t> &li, const X &x, const Op &op, const Loc &loc) {
    scratch_[li] = node_as_value(x);
    barrier(loc);
    for (int d = 1; d < N; d *= 2) {
      Var<T> sum = scratch_[li];
      if_(
          li >= static_cast<uint32_t>(d),
          [&] {
            Val<T> earlier = scratch_[li - static_cast<uint32_t>(d)];
            sum = op(earlier, sum);
          },
          loc);
      barrier(loc);
      scratch_[li] = sum;
      barrier(loc);
    }
  }

  Shared<T, N> scratch_;
};

} // namespace cubecc::dsl
