//===- gpu.h - Builtins, synchronization, atomics and subgroup operations --------------------===//
#pragma once

#include "cubecc/dsl/memory.h"

namespace cubecc::dsl {

/// One component of a u32x3 builtin, extracted where it is used.
struct ComponentExpr {
  using dsl_value_type = uint32_t;
  ir::Value *vector;
  uint32_t lane;
  ComponentExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &) const { return detail::builtin_component(vector, lane); }
};

namespace detail {
template <> inline constexpr bool is_pure_node<ComponentExpr> = true;
} // namespace detail

/// The three u32 components of a launch builtin (x, y, z).
struct Dim3 {
  ComponentExpr x, y, z;
};

namespace detail {
inline Dim3 builtin3(ir::Opcode op, const Loc &loc) {
  ir::Value *v = emit_inferred(op, {}, loc);
  return Dim3{{v, 0}, {v, 1}, {v, 2}};
}
inline Val<uint32_t> builtin1(ir::Opcode op, const Loc &loc) {
  return Val<uint32_t>::from_ir(emit_inferred(op, {}, loc));
}
} // namespace detail

inline Dim3 global_id(const Loc &loc = Loc::current()) {
  return detail::builtin3(ir::Opcode::GlobalId, loc);
}
inline Dim3 local_id(const Loc &loc = Loc::current()) {
  return detail::builtin3(ir::Opcode::LocalId, loc);
}
inline Dim3 workgroup_id(const Loc &loc = Loc::current()) {
  return detail::builtin3(ir::Opcode::WorkgroupId, loc);
}
inline Dim3 workgroup_size(const Loc &loc = Loc::current()) {
  return detail::builtin3(ir::Opcode::WorkgroupSize, loc);
}
inline Dim3 num_workgroups(const Loc &loc = Loc::current()) {
  return detail::builtin3(ir::Opcode::NumWorkgroups, loc);
}
/// The invocation's flat index within its workgroup.
inline Val<uint32_t> local_index(const Loc &loc = Loc::current()) {
  return detail::builtin1(ir::Opcode::LocalIndex, loc);
}
/// The invocation's flat index in the whole launch: the workgroup's flat index (x fastest) times
/// the invocations per workgroup, plus local_index() (CubeCL's ABSOLUTE_POS). Wraps past 2^32.
inline Val<uint32_t> global_index(const Loc &loc = Loc::current()) {
  Dim3 group = workgroup_id(loc), groups = num_workgroups(loc), size = workgroup_size(loc);
  Val<uint32_t> flat_group(group.x + (group.y + group.z * groups.y) * groups.x, loc);
  return Val<uint32_t>(flat_group * (size.x * size.y * size.z) + local_index(loc), loc);
}
inline Val<uint32_t> subgroup_id(const Loc &loc = Loc::current()) {
  return detail::builtin1(ir::Opcode::SubgroupId, loc);
}
inline Val<uint32_t> subgroup_size(const Loc &loc = Loc::current()) {
  return detail::builtin1(ir::Opcode::SubgroupSize, loc);
}
inline Val<uint32_t> subgroup_lane(const Loc &loc = Loc::current()) {
  return detail::builtin1(ir::Opcode::SubgroupLane, loc);
}
inline Val<uint32_t> num_subgroups(const Loc &loc = Loc::current()) {
  return detail::builtin1(ir::Opcode::NumSubgroups, loc);
}

/// Every invocation of the workgroup waits here; shared and global memory writes before it are
/// visible after it. Must be reached by all invocations (not under a condition that varies).
inline void barrier(const Loc &loc = Loc::current()) {
  detail::emit_void(ir::Opcode::Barrier, {}, loc);
}
/// The same for the invocation's subgroup only (CUDA __syncwarp, CubeCL's sync_plane): its
/// invocations wait for each other, and shared and global memory writes before it are visible to
/// the subgroup after it. Must be reached by every invocation of the subgroup.
inline void subgroup_barrier(const Loc &loc = Loc::current()) {
  detail::emit_void(ir::Opcode::SubgroupBarrier, {}, loc);
}
/// WGSL's workgroupUniformLoad: barrier(), the element read, barrier() again; every invocation
/// of the workgroup gets the same value (the index must be uniform), which may then decide a
/// barrier. For a Shared element written by some invocations (plainly or atomically) before it.
template <class T, class Index>
auto workgroup_uniform_load(const ElementRef<T, Index> &element, const Loc &loc = Loc::current()) {
  using V = std::remove_const_t<T>;
  barrier(loc);
  Val<V> value(element, loc);
  barrier(loc);
  return value;
}
/// print's format text, with the location of the call that wrote it.
struct PrintFormat {
  std::string_view text;
  Loc loc;
  template <class S>
  requires std::is_convertible_v<const S &, std::string_view>
  PrintFormat(const S &format, const Loc &where = Loc::current()) : text(format), loc(where) {}
};

namespace detail {
template <class X> ir::Value *print_operand(const X &x, const Loc &loc) {
  if constexpr (ExprLike<X>)
    return x.dsl_node().emit(loc);
  else if constexpr (Literal<X>)
    return node_as<std::remove_cvref_t<X>>(x).emit(loc);
  else
    static_assert(dependent_false<X>, "cubecc: print takes kernel values and C++ numbers");
}
} // namespace detail

/// Prints `format` with each "{}" replaced by the next value ("{{" and "}}" print braces), once
/// per invocation that reaches it: print("i = {}, x = {}\n", i, x). Integers print in decimal,
/// bool as 0 or 1, floats as printf's %g, vectors as "(x, y, z)"; no newline is added. Output
/// goes to standard output: at once on `interp` and `cpu`, when the launch's stream synchronizes
/// on `cuda` and `hip`, and through the Vulkan debug-printf layer only on `vulkan` (docs/dsl.md).
/// The order between invocations is unspecified (the interpreter's is invocation order).
template <class... Args> void print(PrintFormat format, const Args &...args) {
  std::array<ir::Value *, sizeof...(Args)> values = {detail::print_operand(args, format.loc)...};
  detail::emit_print(format.text, values, format.loc);
}

inline void fence_workgroup(const Loc &loc = Loc::current()) {
  detail::emit_void(ir::Opcode::FenceWorkgroup, {}, loc);
}
inline void fence_device(const Loc &loc = Loc::current()) {
  detail::emit_void(ir::Opcode::FenceDevice, {}, loc);
}

namespace detail {
/// The type an atomic on an element of `V` works on, given its first value operand `X`: a
/// `Vec<V, N>` expression makes it N atomics (elements i .. i+N-1); anything else is one `V`.
template <class V, class X> struct AtomicValue { using type = V; };
template <class V, class X>
requires ExprLike<X> &&(lanes_of<value_of<X>> > 1) struct AtomicValue<V, X> {
  using type = value_of<X>;
  static_assert(std::is_same_v<scalar_of<type>, V>,
                "cubecc: a vector atomic's lanes must have the memory's element type");
};

template <ir::Opcode Op, class T, class Index, class X, class... Rest>
auto atomic(const ElementRef<T, Index> &element, const Loc &loc, const X &value,
            const Rest &...rest) {
  using V = typename AtomicValue<std::remove_const_t<T>, X>::type;
  static_assert(!std::is_const_v<T>, "cubecc: atomics write memory: the tensor must not be const");
  return Val<V>::from_ir(emit(Op,
                              {element.memory(), element.index().emit(loc),
                               node_as<V>(value).emit(loc), node_as<V>(rest).emit(loc)...},
                              ir_type<V>(), loc));
}
} // namespace detail

#define CUBECC_DSL_ATOMIC(name, opcode)                                                            \
  template <class T, class Index, class X>                                                         \
  auto name(const ElementRef<T, Index> &element, const X &value,                                   \
            const Loc &loc = Loc::current()) {                                                     \
    return detail::atomic<ir::Opcode::opcode>(element, loc, value);                                \
  }
/// Atomic read-modify-write of a buffer or shared element; returns the old value. With a
/// `Vec<T, N>` value: N atomics on elements i .. i+N-1 (i a multiple of N), one per lane (another
/// invocation may see some lanes updated and not yet the others); returns the old lanes.
CUBECC_DSL_ATOMIC(atomic_add, AtomicAdd)
CUBECC_DSL_ATOMIC(atomic_sub, AtomicSub)
CUBECC_DSL_ATOMIC(atomic_min, AtomicMin)
CUBECC_DSL_ATOMIC(atomic_max, AtomicMax)
CUBECC_DSL_ATOMIC(atomic_and, AtomicAnd)
CUBECC_DSL_ATOMIC(atomic_or, AtomicOr)
CUBECC_DSL_ATOMIC(atomic_xor, AtomicXor)
CUBECC_DSL_ATOMIC(atomic_exchange, AtomicXchg)
#undef CUBECC_DSL_ATOMIC

/// Reads the element atomically (never torn; relaxed order: add a fence to order it).
/// `atomic_load<N>(t[i])` reads elements i .. i+N-1 into a `Vec<T, N>`, each lane untorn.
template <int N = 1, class T, class Index>
auto atomic_load(const ElementRef<T, Index> &element, const Loc &loc = Loc::current()) {
  using S = std::remove_const_t<T>;
  using V = std::conditional_t<N == 1, S, Vec<S, N>>;
  return Val<V>::from_ir(detail::emit(
      ir::Opcode::AtomicLoad, {element.memory(), element.index().emit(loc)}, ir_type<V>(), loc));
}
/// Writes the element atomically (never torn; relaxed order: add a fence to order it). A
/// `Vec<T, N>` value writes elements i .. i+N-1, each lane untorn.
template <class T, class Index, class X>
void atomic_store(const ElementRef<T, Index> &element, const X &value,
                  const Loc &loc = Loc::current()) {
  using V = typename detail::AtomicValue<std::remove_const_t<T>, X>::type;
  static_assert(!std::is_const_v<T>, "cubecc: atomic_store writes memory: the tensor must not "
                                     "be const");
  detail::emit_void(
      ir::Opcode::AtomicStore,
      {element.memory(), element.index().emit(loc), detail::node_as<V>(value).emit(loc)}, loc);
}

/// Stores `desired` if the element equals `expected`; returns the old value either way.
template <class T, class Index, class E, class D>
auto atomic_compare_exchange(const ElementRef<T, Index> &element, const E &expected,
                             const D &desired, const Loc &loc = Loc::current()) {
  static_assert(lanes_of<typename detail::AtomicValue<std::remove_const_t<T>, E>::type> == 1,
                "cubecc: atomic_compare_exchange works on one element (loop over the lanes)");
  return detail::atomic<ir::Opcode::AtomicCmpXchg>(element, loc, expected, desired);
}

namespace detail {
template <ir::Opcode Op, class X> auto subgroup_unary(const X &x, const Loc &loc) {
  static_assert(ExprLike<X>, "cubecc: subgroup operations take kernel values");
  using T = value_of<X>;
  return Val<T>::from_ir(emit(Op, {x.dsl_node().emit(loc)}, ir_type<T>(), loc));
}
template <ir::Opcode Op, class X, class L>
auto subgroup_shuffle(const X &x, const L &lane, const Loc &loc) {
  static_assert(ExprLike<X>, "cubecc: subgroup operations take kernel values");
  using T = value_of<X>;
  return Val<T>::from_ir(
      emit(Op, {x.dsl_node().emit(loc), node_as<uint32_t>(lane).emit(loc)}, ir_type<T>(), loc));
}
} // namespace detail

#define CUBECC_DSL_SUBGROUP(name, opcode)                                                          \
  template <class X> auto name(const X &x, const Loc &loc = Loc::current()) {                      \
    return detail::subgroup_unary<ir::Opcode::opcode>(x, loc);                                     \
  }
CUBECC_DSL_SUBGROUP(subgroup_sum, SubgroupSum)
CUBECC_DSL_SUBGROUP(subgroup_min, SubgroupMin)
CUBECC_DSL_SUBGROUP(subgroup_max, SubgroupMax)
CUBECC_DSL_SUBGROUP(subgroup_and, SubgroupAnd)
CUBECC_DSL_SUBGROUP(subgroup_or, SubgroupOr)
CUBECC_DSL_SUBGROUP(subgroup_xor, SubgroupXor)
CUBECC_DSL_SUBGROUP(subgroup_inclusive_sum, SubgroupInclusiveSum)
CUBECC_DSL_SUBGROUP(subgroup_exclusive_sum, SubgroupExclusiveSum)
CUBECC_DSL_SUBGROUP(subgroup_inclusive_min, SubgroupInclusiveMin)
CUBECC_DSL_SUBGROUP(subgroup_exclusive_min, SubgroupExclusiveMin)
CUBECC_DSL_SUBGROUP(subgroup_inclusive_max, SubgroupInclusiveMax)
CUBECC_DSL_SUBGROUP(subgroup_exclusive_max, SubgroupExclusiveMax)
CUBECC_DSL_SUBGROUP(subgroup_product, SubgroupProduct)
CUBECC_DSL_SUBGROUP(subgroup_inclusive_product, SubgroupInclusiveProduct)
CUBECC_DSL_SUBGROUP(subgroup_exclusive_product, SubgroupExclusiveProduct)
#undef CUBECC_DSL_SUBGROUP

#define CUBECC_DSL_SHUFFLE(name, opcode)                                                           \
  template <class X, class L>                                                                      \
  auto name(const X &x, const L &lane, const Loc &loc = Loc::current()) {                          \
    return detail::subgroup_shuffle<ir::Opcode::opcode>(x, lane, loc);                             \
  }
/// The value of `x` in lane `lane` (which must be the same for the whole subgroup).
CUBECC_DSL_SHUFFLE(subgroup_broadcast, SubgroupBroadcast)
CUBECC_DSL_SHUFFLE(subgroup_shuffle, SubgroupShuffle)
CUBECC_DSL_SHUFFLE(subgroup_shuffle_xor, SubgroupShuffleXor)
CUBECC_DSL_SHUFFLE(subgroup_shuffle_up, SubgroupShuffleUp)
CUBECC_DSL_SHUFFLE(subgroup_shuffle_down, SubgroupShuffleDown)
#undef CUBECC_DSL_SHUFFLE

/// One bit per lane whose `b` is true, lane 0 in bit 0 of component 0.
template <class B>
Val<Vec<uint32_t, 4>> subgroup_ballot(const B &b, const Loc &loc = Loc::current()) {
  return Val<Vec<uint32_t, 4>>::from_ir(detail::emit(ir::Opcode::SubgroupBallot,
                                                     {detail::node_as<bool>(b).emit(loc)},
                                                     ir_type<Vec<uint32_t, 4>>(), loc));
}
template <class B> Val<bool> subgroup_all(const B &b, const Loc &loc = Loc::current()) {
  return Val<bool>::from_ir(detail::emit(
      ir::Opcode::SubgroupAll, {detail::node_as<bool>(b).emit(loc)}, ir_type<bool>(), loc));
}
template <class B> Val<bool> subgroup_any(const B &b, const Loc &loc = Loc::current()) {
  return Val<bool>::from_ir(detail::emit(
      ir::Opcode::SubgroupAny, {detail::node_as<bool>(b).emit(loc)}, ir_type<bool>(), loc));
}
/// True in exactly one active lane of the subgroup.
inline Val<bool> subgroup_elect(const Loc &loc = Loc::current()) {
  return Val<bool>::from_ir(detail::emit(ir::Opcode::SubgroupElect, {}, ir_type<bool>(), loc));
}

} // namespace cubecc::dsl
