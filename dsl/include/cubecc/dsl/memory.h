//===- memory.h - Kernel parameters, memory and mutable locals -------------------------------===//
//
// Tensor<T, Rank> and Array<T> are global buffers (read-only when T is const), Scalar<T> a value
// parameter, Shared<T, N> workgroup memory, Local<T, N> per-invocation arrays, Var<T> a mutable
// local. Indexing gives an element reference: read it in an expression, assign to store.
//
// Launch ABI (the order of the IR kernel's parameters): each Tensor<T, R> is its buffer followed
// by R u32 shapes and R u32 strides (in elements); an Array<T> is its buffer; a Scalar<T> is the
// value. Parameters appear in the C++ function's order.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/expr.h"

#include <array>
#include <string>
#include <utility>

namespace cubecc::dsl {

namespace detail {

template <class T> constexpr size_t bytes_of() {
  using S = scalar_of<T>;
  constexpr size_t scalar = std::is_same_v<S, f16> || std::is_same_v<S, bf16> ? 2 : sizeof(S);
  return scalar * static_cast<size_t>(lanes_of<T>);
}

/// The most shared memory one Shared<T, N> array may take: the largest target's, 227 KiB (CUDA
/// sm_90 with the opt-in). The total over a kernel's arrays, and targets with less (48 KiB of
/// static __shared__ on most GPUs before the opt-in, 64 KiB of LDS, Vulkan's limit), are checked
/// when compiling for a target.
inline constexpr size_t kMaxSharedBytes = 227 * 1024;

/// The node for an index: integer kernel values, or C++ integers (as u32).
template <class I> auto index_node(const I &i) {
  if constexpr (ExprLike<I>) {
    static_assert(IntegerType<value_of<I>> && lanes_of<value_of<I>> == 1,
                  "cubecc: indices must be integer scalars; convert with "
                  "dsl::cast<uint32_t>(...)");
    return i.dsl_node();
  } else {
    static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>,
                  "cubecc: indices must be integers (a float index? convert with "
                  "dsl::cast<uint32_t>(...))");
    return make_const<uint32_t>(i);
  }
}

} // namespace detail

/// A load of element(s) of type V at `index` in memory `memory`.
template <class V, class Index> struct LoadExpr {
  using dsl_value_type = V;
  ir::Value *memory;
  Index index;
  LoadExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    return detail::emit(ir::Opcode::Load, {memory, index.emit(loc)}, ir_type<V>(), loc);
  }
};

/// A value to be stored, materialized where the assignment is written (its location is the
/// store's location).
template <KernelType V> struct Stored {
  template <class E>
  Stored(const E &e, const Loc &where = Loc::current())
      : value(detail::node_as<V>(e).emit(where)), loc(where) {}
  ir::Value *value;
  Loc loc;
};

/// `x op= v` for anything that reads through dsl_node() and writes through operator=(Stored):
/// one load, the op and one store, all at the statement's location.
template <class Derived, KernelType V> struct CompoundAssign {
#define CUBECC_DSL_COMPOUND(op, opcode)                                                            \
  const Derived &operator op##=(Stored<V> s) const {                                               \
    const Derived &self = static_cast<const Derived &>(*this);                                     \
    ir::Value *old = self.dsl_node().emit(s.loc);                                                  \
    ir::Value *next = detail::emit(ir::Opcode::opcode, {old, s.value}, ir_type<V>(), s.loc);       \
    self = Stored<V>(Val<V>::from_ir(next), s.loc);                                                \
    return self;                                                                                   \
  }
  CUBECC_DSL_COMPOUND(+, Add)
  CUBECC_DSL_COMPOUND(-, Sub)
  CUBECC_DSL_COMPOUND(*, Mul)
  CUBECC_DSL_COMPOUND(/, Div)
  CUBECC_DSL_COMPOUND(&, And)
  CUBECC_DSL_COMPOUND(|, Or)
  CUBECC_DSL_COMPOUND(^, Xor)
#undef CUBECC_DSL_COMPOUND
};

/// One element of a buffer, shared or local array. `T` is const for read-only memory.
template <class T, class Index>
class ElementRef : public CompoundAssign<ElementRef<T, Index>, std::remove_const_t<T>> {
public:
  using V = std::remove_const_t<T>;
  ElementRef(ir::Value *memory, Index index) : memory_(memory), index_(index) {}

  LoadExpr<V, Index> dsl_node() const { return {memory_, index_}; }

  const ElementRef &operator=(Stored<V> s) const {
    static_assert(!std::is_const_v<T>,
                  "cubecc: cannot store to read-only memory (the tensor is declared with a const "
                  "element type; drop the const to write it)");
    detail::emit_void(ir::Opcode::Store, {memory_, index_.emit(s.loc), s.value}, s.loc);
    return *this;
  }
  const ElementRef &operator=(const ElementRef &other) const { return *this = Stored<V>(other); }

  /// The memory object and the index, for atomics.
  ir::Value *memory() const { return memory_; }
  const Index &index() const { return index_; }

private:
  ir::Value *memory_;
  Index index_;
};

/// Shared by every indexable memory handle: element access and vector loads and stores.
template <class T, class Derived> class Indexable {
public:
  using V = std::remove_const_t<T>;
  using dsl_element_type = T; ///< const for read-only memory
  template <class I> auto operator[](const I &i) const {
    auto index = detail::index_node(i);
    return ElementRef<T, decltype(index)>(self().memory(), index);
  }
  /// N consecutive elements from index i (i must be a multiple of N).
  template <int N, class I> Val<Vec<V, N>> load(const I &i, const Loc &loc = Loc::current()) const {
    static_assert(lanes_of<V> == 1, "cubecc: vector loads read memory of scalars");
    ir::Value *v =
        detail::emit(ir::Opcode::Load, {self().memory(), detail::index_node(i).emit(loc)},
                     ir_type<Vec<V, N>>(), loc);
    return Val<Vec<V, N>>::from_ir(v);
  }
  /// load<N>(i) where `mask` is true and `other` (a Vec<V, N>) where it is false, without
  /// reading memory where it is false: a guarded vector load, as dsl::load is for one element.
  template <int N, class I, class C, class O>
  Val<Vec<V, N>> load(const I &i, const C &mask, const O &other,
                      const Loc &loc = Loc::current()) const {
    static_assert(ExprLike<C> && std::is_same_v<value_of<C>, bool>,
                  "cubecc: a masked load's mask must be a kernel bool (a comparison, say)");
    ir::Value *condition = mask.dsl_node().emit(loc);
    auto index = detail::index_node(i);
    return Val<Vec<V, N>>::from_ir(detail::emit_if_value(
        condition, ir_type<Vec<V, N>>(), [&] { return load<N>(index, loc).ir(); },
        [&] { return detail::node_as<Vec<V, N>>(other).emit(loc); }, loc));
  }
  /// Stores the N lanes of `value` from index i (i must be a multiple of N).
  template <int N, class I> void store(const I &i, Stored<Vec<V, N>> value) const {
    static_assert(!std::is_const_v<T>, "cubecc: cannot store to read-only memory (the tensor is "
                                       "declared with a const element type)");
    detail::emit_void(ir::Opcode::Store,
                      {self().memory(), detail::index_node(i).emit(value.loc), value.value},
                      value.loc);
  }

private:
  const Derived &self() const { return static_cast<const Derived &>(*this); }
};

/// A scalar kernel parameter.
template <KernelType T> class Scalar {
public:
  static Scalar dsl_make_parameter(const std::string &name) {
    ir::Value *v = detail::add_parameter(ir_type<T>(), name.c_str());
    return Scalar(Val<T>::from_ir(v));
  }
  Val<T> dsl_node() const { return value_; }
  operator Val<T>() const { return value_; }

private:
  explicit Scalar(Val<T> v) : value_(v) {}
  Val<T> value_;
};

/// A global buffer of a runtime size. `Array<const T>` is read-only.
template <class T> class Array : public Indexable<T, Array<T>> {
  static_assert(KernelType<std::remove_const_t<T>> && lanes_of<std::remove_const_t<T>> == 1 &&
                    !std::is_same_v<std::remove_const_t<T>, bool>,
                "cubecc: Array<T> holds scalars (bool: use uint8_t)");

public:
  static Array dsl_make_parameter(const std::string &name) {
    ir::Access access = std::is_const_v<T> ? ir::Access::Read : ir::Access::ReadWrite;
    return Array(detail::add_parameter(
        ir::Type::buffer(detail::ScalarTraits<std::remove_const_t<T>>::scalar, access),
        name.c_str()));
  }
  ir::Value *memory() const { return buffer_; }
  /// The element count.
  Val<uint32_t> size(const Loc &loc = Loc::current()) const {
    return Val<uint32_t>::from_ir(
        detail::emit(ir::Opcode::BufferSize, {buffer_}, ir_type<uint32_t>(), loc));
  }

private:
  explicit Array(ir::Value *buffer) : buffer_(buffer) {}
  ir::Value *buffer_;
};

/// A strided view of a global buffer with Rank dimensions; shapes and strides are kernel
/// parameters. `t[i]` indexes the buffer directly (flat); `t(i, j)` applies the strides.
template <class T, int Rank = 1> class Tensor : public Indexable<T, Tensor<T, Rank>> {
  static_assert(KernelType<std::remove_const_t<T>> && lanes_of<std::remove_const_t<T>> == 1 &&
                    !std::is_same_v<std::remove_const_t<T>, bool>,
                "cubecc: Tensor<T> holds scalars (bool: use uint8_t)");
  static_assert(Rank >= 1 && Rank <= 8, "cubecc: tensors have 1 to 8 dimensions");

public:
  static Tensor dsl_make_parameter(const std::string &name) {
    ir::Access access = std::is_const_v<T> ? ir::Access::Read : ir::Access::ReadWrite;
    Tensor t(detail::add_parameter(
        ir::Type::buffer(detail::ScalarTraits<std::remove_const_t<T>>::scalar, access),
        name.c_str()));
    for (int d = 0; d < Rank; ++d)
      t.shape_[d] =
          detail::add_parameter(ir_type<uint32_t>(), (name + ".shape" + std::to_string(d)).c_str());
    for (int d = 0; d < Rank; ++d)
      t.stride_[d] = detail::add_parameter(ir_type<uint32_t>(),
                                           (name + ".stride" + std::to_string(d)).c_str());
    return t;
  }
  ir::Value *memory() const { return buffer_; }
  static constexpr int rank() { return Rank; }
  Val<uint32_t> shape(int d, const Loc &loc = Loc::current()) const {
    return Val<uint32_t>::from_ir(shape_[check(d, loc)]);
  }
  Val<uint32_t> stride(int d, const Loc &loc = Loc::current()) const {
    return Val<uint32_t>::from_ir(stride_[check(d, loc)]);
  }
  /// The extent of dimension `d`, a runtime uint32_t; 1 for d >= rank() (a missing dimension
  /// has one element), so loops over every dimension can run to a common maximum rank.
  template <class D>
  requires ExprLike<D> Val<uint32_t> shape(const D &d, const Loc &loc = Loc::current())
  const { return pick(shape_, d, 1u, loc); }
  /// The stride of dimension `d`, a runtime uint32_t; 0 for d >= rank().
  template <class D>
  requires ExprLike<D> Val<uint32_t> stride(const D &d, const Loc &loc = Loc::current())
  const { return pick(stride_, d, 0u, loc); }
  /// The element count: the product of the shape.
  Val<uint32_t> size(const Loc &loc = Loc::current()) const {
    ir::Value *n = shape_[0];
    for (int d = 1; d < Rank; ++d)
      n = detail::emit(ir::Opcode::Mul, {n, shape_[d]}, ir_type<uint32_t>(), loc);
    return Val<uint32_t>::from_ir(n);
  }
  /// The coordinate along dimension `d` (a C++ int or a runtime uint32_t) of the element at flat
  /// index `i`: (i / stride(d)) % shape(d). For a view whose strides order its dimensions
  /// (row-major, say); for a dimension of stride 0 (a broadcast) the value is unspecified.
  template <class I, class D>
  Val<uint32_t> coordinate(const I &i, const D &d, const Loc &loc = Loc::current()) const {
    return Val<uint32_t>((detail::index_node(i) / stride(d, loc)) % shape(d, loc), loc);
  }
  /// The element count of the buffer the tensor views (what flat `t[i]` may reach), which a
  /// strided or padded view may make larger than size().
  Val<uint32_t> buffer_size(const Loc &loc = Loc::current()) const {
    return Val<uint32_t>::from_ir(
        detail::emit(ir::Opcode::BufferSize, {buffer_}, ir_type<uint32_t>(), loc));
  }
  /// The element at coordinates (i0, i1, ...): sum of i_d * stride(d).
  /// Coordinates are uint32_t values or C++ integers.
  template <class... I> auto operator()(const I &...i) const {
    static_assert(sizeof...(I) == Rank, "cubecc: give one coordinate per tensor dimension");
    return [&]<size_t... D>(std::index_sequence<D...>) {
      auto offset = (... + (Val<uint32_t>::from_ir(stride_[D]) * detail::index_node(i)));
      return (*this)[offset];
    }
    (std::index_sequence_for<I...>{});
  }

private:
  explicit Tensor(ir::Value *buffer) : buffer_(buffer) {}
  /// values[d] by a runtime d: a chain of selects, `outside` past the last dimension.
  template <class D>
  static Val<uint32_t> pick(const std::array<ir::Value *, Rank> &values, const D &d,
                            uint32_t outside, const Loc &loc) {
    static_assert(std::is_same_v<value_of<D>, uint32_t>,
                  "cubecc: a runtime tensor dimension is a uint32_t (cast it with "
                  "dsl::cast<uint32_t>)");
    Val<uint32_t> dim = d;
    ir::Value *result = detail::emit_int_constant(ir_type<uint32_t>(), outside, loc);
    for (int k = Rank - 1; k >= 0; --k) {
      ir::Value *is_k = (dim == static_cast<uint32_t>(k)).dsl_node().emit(loc);
      result =
          detail::emit(ir::Opcode::Select, {is_k, values[k], result}, ir_type<uint32_t>(), loc);
    }
    return Val<uint32_t>::from_ir(result);
  }
  static int check(int d, const Loc &loc) {
    if (d < 0 || d >= Rank)
      throw TraceError("tensor dimension " + std::to_string(d) +
                           " is out of range for a tensor of " + std::to_string(Rank) +
                           " dimension(s)",
                       loc);
    return d;
  }
  ir::Value *buffer_;
  std::array<ir::Value *, Rank> shape_{};
  std::array<ir::Value *, Rank> stride_{};
};

/// An array in workgroup-shared memory, allocated once per workgroup.
template <KernelType T, int N> class Shared : public Indexable<T, Shared<T, N>> {
  static_assert(N > 0, "cubecc: Shared<T, N> needs N > 0");
  static_assert(detail::bytes_of<T>() * N <= detail::kMaxSharedBytes,
                "cubecc: this Shared<T, N> is larger than the 227 KiB of shared memory the "
                "largest GPU gives a kernel; use smaller tiles");
  static_assert(lanes_of<T> == 1, "cubecc: Shared<T, N> holds scalars; load vectors with load<N>");

public:
  explicit Shared(const Loc &loc = Loc::current())
      : memory_(detail::emit_alloc(ir::Opcode::SharedAlloc,
                                   ir::Type::shared(detail::ScalarTraits<T>::scalar, N), loc)) {}
  ir::Value *memory() const { return memory_; }

private:
  ir::Value *memory_;
};

/// An array private to each invocation.
template <KernelType T, int N> class Local : public Indexable<T, Local<T, N>> {
  static_assert(N > 0, "cubecc: Local<T, N> needs N > 0");
  static_assert(lanes_of<T> == 1, "cubecc: Local<T, N> holds scalars");

public:
  explicit Local(const Loc &loc = Loc::current())
      : memory_(detail::emit_alloc(ir::Opcode::LocalAlloc,
                                   ir::Type::local(detail::ScalarTraits<T>::scalar, N), loc)) {}
  ir::Value *memory() const { return memory_; }

private:
  ir::Value *memory_;
};

/// A mutable local variable. Reading it in an expression loads its current value; assigning
/// stores. (It lives in invocation-private memory; the optimizer promotes it to registers.)
template <KernelType T> class Var : public CompoundAssign<Var<T>, T> {
  // Memory holds no bool (docs/ir.md): a Var<bool> keeps 0 or 1 in a u8 (promote-locals turns
  // it into an SSA bool again).
  using Storage = std::conditional_t<
      BoolType<T>, std::conditional_t<lanes_of<T> == 1, uint8_t, Vec<uint8_t, lanes_of<T>>>, T>;

public:
  template <class E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, Var>)
      Var(const E &init, const Loc &loc = Loc::current())
      : slot_(allocate(loc)) {
    *this = Stored<T>(init, loc);
  }
  /// A new variable holding the other's current value (not an alias).
  Var(const Var &other, const Loc &loc = Loc::current()) : slot_(allocate(loc)) {
    *this = Stored<T>(other, loc);
  }

  auto dsl_node() const {
    LoadExpr<Storage, ConstExpr<uint32_t>> load{slot_, detail::make_const<uint32_t>(0)};
    if constexpr (BoolType<T>)
      return OpExpr<ir::Opcode::Ne, T, decltype(load), ConstExpr<Storage>>{
          {load, detail::make_const<Storage>(0)}};
    else
      return load;
  }

  const Var &operator=(Stored<T> s) const {
    ir::Value *zero = detail::make_const<uint32_t>(0).emit(s.loc);
    ir::Value *value = s.value;
    if constexpr (BoolType<T>) // true -> 1, false -> 0
      value = detail::emit(ir::Opcode::Cast, {value}, ir_type<Storage>(), s.loc);
    detail::emit_void(ir::Opcode::Store, {slot_, zero, value}, s.loc);
    return *this;
  }
  // Taking a non-const reference keeps this copy assignment from competing with
  // operator=(Stored<T>) when the right side is an expression (a prvalue cannot bind here).
  Var &operator=(Var &other) {
    *this = Stored<T>(other);
    return *this;
  }

private:
  static ir::Value *allocate(const Loc &loc) {
    return detail::emit_alloc(ir::Opcode::LocalAlloc,
                              ir::Type::local(detail::ScalarTraits<scalar_of<Storage>>::scalar,
                                              static_cast<uint32_t>(lanes_of<Storage>)),
                              loc);
  }
  ir::Value *slot_;
};

namespace detail {
template <class C, class E, class O> struct MaskedLoadExpr {
  using dsl_value_type = typename E::dsl_value_type;
  C mask;
  E element; ///< the load, emitted only in the branch where the mask holds
  O other;
  MaskedLoadExpr dsl_node() const { return *this; }
  ir::Value *emit(const Loc &loc) const {
    return emit_if_value(
        mask.emit(loc), ir_type<dsl_value_type>(), [&] { return element.emit(loc); },
        [&] { return other.emit(loc); }, loc);
  }
};
} // namespace detail

/// `length` consecutive elements of a memory handle from element `start` (both runtime uint32_t
/// values, or C++ integers): `s[i]` is `memory[start + i]`, `s.size()` is `length`. Made by
/// dsl::slice(t, start, length); a slice of a slice adds the starts. Reads and writes follow the
/// underlying memory's access (a slice of a Tensor<const T> is read-only). Indexing past
/// `length` is not checked: the index reaches the memory as start + i.
template <class T> class Slice {
public:
  using V = std::remove_const_t<T>;
  using dsl_element_type = T; ///< const for read-only memory
  Slice(ir::Value *memory, Val<uint32_t> start, Val<uint32_t> length)
      : memory_(memory), start_(start), length_(length) {}
  template <class I> auto operator[](const I &i) const {
    auto index = start_ + detail::index_node(i);
    return ElementRef<T, decltype(index)>(memory_, index);
  }
  Val<uint32_t> size() const { return length_; }
  Val<uint32_t> start() const { return start_; }
  ir::Value *memory() const { return memory_; }
  /// N consecutive elements from i (start + i must be a multiple of N).
  template <int N, class I> Val<Vec<V, N>> load(const I &i, const Loc &loc = Loc::current()) const {
    ir::Value *index = (start_ + detail::index_node(i)).emit(loc);
    return Val<Vec<V, N>>::from_ir(
        detail::emit(ir::Opcode::Load, {memory_, index}, ir_type<Vec<V, N>>(), loc));
  }
  template <int N, class I> void store(const I &i, Stored<Vec<V, N>> value) const {
    static_assert(!std::is_const_v<T>, "cubecc: cannot store to read-only memory (the slice is of "
                                       "a tensor declared with a const element type)");
    ir::Value *index = (start_ + detail::index_node(i)).emit(value.loc);
    detail::emit_void(ir::Opcode::Store, {memory_, index, value.value}, value.loc);
  }

private:
  ir::Value *memory_;
  Val<uint32_t> start_, length_;
};

namespace detail {
/// `index` (an element of `memory`) as an index into the underlying buffer or array: a Slice's
/// start added, any other handle's index as it is.
template <class M, class I> auto from_start(const M &memory, const I &index) {
  if constexpr (requires { memory.start(); })
    return memory.start() + index;
  else
    return index;
}
} // namespace detail

/// The elements [start, start + length) of a Tensor (flat), Array, Shared or Local array, or
/// Slice, as a Slice.
template <class H, class S, class L>
auto slice(const H &memory, const S &start, const L &length, const Loc &loc = Loc::current()) {
  auto as_value = [&](const auto &node) -> Val<uint32_t> {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(node)>, Val<uint32_t>>)
      return node;
    else
      return Val<uint32_t>(node, loc);
  };
  Val<uint32_t> first = as_value(detail::index_node(start));
  Val<uint32_t> count = as_value(detail::index_node(length));
  using T = typename H::dsl_element_type;
  if constexpr (requires { memory.start(); })
    return Slice<T>(memory.memory(), as_value(memory.start() + first), count);
  else
    return Slice<T>(memory.memory(), first, count);
}

/// One element of a View: the memory's element(s) at its index, reinterpreted.
template <class U, class T, int N, class Index>
class ViewRef : public CompoundAssign<ViewRef<U, T, N, Index>, U> {
  using E = std::remove_const_t<T>;
  using Wide = std::conditional_t<N == 1, E, Vec<E, N>>;

public:
  ViewRef(ir::Value *memory, Index index) : memory_(memory), index_(index) {}
  auto dsl_node() const {
    using Load = LoadExpr<Wide, Index>;
    return OpExpr<ir::Opcode::Bitcast, U, Load>{std::tuple<Load>(Load{memory_, index_})};
  }
  const ViewRef &operator=(Stored<U> s) const {
    static_assert(!std::is_const_v<T>, "cubecc: cannot store through a view of read-only memory");
    ir::Value *bits = detail::emit(ir::Opcode::Bitcast, {s.value}, ir_type<Wide>(), s.loc);
    detail::emit_void(ir::Opcode::Store, {memory_, index_.emit(s.loc), bits}, s.loc);
    return *this;
  }
  const ViewRef &operator=(const ViewRef &other) const { return *this = Stored<U>(other); }

private:
  ir::Value *memory_;
  Index index_;
};

/// Memory of element type T seen as elements of type U, U as wide as N elements of T (N = 1, 2,
/// 4, 8, 16): element i is the bits of the memory's elements N i .. N i + N - 1 (lane 0 the least
/// significant, as dsl::bitcast). Made by dsl::view<U>(t). `v.size()` is the memory's size / N.
template <class U, class H> class View {
  using T = typename H::dsl_element_type;
  using E = std::remove_const_t<T>;
  static constexpr int N = static_cast<int>(detail::bytes_of<U>() / detail::bytes_of<E>());

public:
  explicit View(const H &memory) : memory_(memory) {}
  template <class I> auto operator[](const I &i) const {
    auto index = detail::from_start(memory_, element_of(i));
    return ViewRef<U, T, N, decltype(index)>(memory_.memory(), index);
  }
  Val<uint32_t> size(const Loc &loc = Loc::current()) const {
    if constexpr (N == 1)
      return memory_.size();
    else
      return Val<uint32_t>(memory_.size() / static_cast<uint32_t>(N), loc);
  }

private:
  /// The memory's element holding the first lane of element i.
  template <class I> static auto element_of(const I &i) {
    if constexpr (N == 1)
      return detail::index_node(i);
    else
      return detail::index_node(i) * static_cast<uint32_t>(N);
  }
  H memory_;
};

/// `memory` (a Tensor, Array or Slice) as elements of type U: same size, or a whole multiple of
/// the memory's element size (a u8 tensor as uint32_t, a uint32_t tensor as float, u8 as e4m3).
/// Views of narrower elements are not offered: a store would rewrite its neighbours; load the
/// wide element and dsl::bitcast it to a Vec instead.
template <KernelType U, class H> auto view(const H &memory) {
  using E = std::remove_const_t<typename H::dsl_element_type>;
  static_assert(lanes_of<U> == 1, "cubecc: dsl::view<U> views memory as scalars of type U");
  static_assert(!std::is_same_v<U, bool>, "cubecc: memory holds no bool; view it as uint8_t");
  constexpr size_t wide = detail::bytes_of<U>(), narrow = detail::bytes_of<E>();
  static_assert(wide >= narrow && wide % narrow == 0 &&
                    (wide / narrow == 1 || wide / narrow == 2 || wide / narrow == 4 ||
                     wide / narrow == 8 || wide / narrow == 16),
                "cubecc: dsl::view<U> needs U as wide as 1, 2, 4, 8 or 16 of the memory's "
                "elements; for narrower U load the element and dsl::bitcast it to a Vec<U, N>");
  return View<U, H>(memory);
}

/// `memory[index]` where `mask` is true and `other` where it is false, without reading memory
/// where it is false (an index out of bounds under a false mask is never read): a guarded load,
/// as Triton's `tl.load(ptr, mask, other)`. An expression, like `memory[index]`:
///   dsl::Val<float> x = dsl::load(in, i, i < n, 0.0f);
template <class M, class I, class C, class O>
auto load(const M &memory, const I &index, const C &mask, const O &other) {
  using E = node_of<decltype(memory[index])>;
  using T = typename E::dsl_value_type;
  static_assert(ExprLike<C>, "cubecc: dsl::load's mask must be a kernel bool (a comparison, "
                             "say); a C++ bool is comptime: use a plain C++ if");
  if constexpr (ExprLike<C>) {
    static_assert(std::is_same_v<value_of<C>, bool>,
                  "cubecc: dsl::load's mask must be a kernel bool (a comparison, say)");
    auto fallback = detail::node_as<T>(other);
    return detail::MaskedLoadExpr<node_of<C>, E, decltype(fallback)>{
        mask.dsl_node(), memory[index].dsl_node(), fallback};
  }
}

//===- Asynchronous copies into shared memory (docs/dsl.md, docs/ir.md §4.14) ----------------===//

/// Starts copying the N elements `src[src_index .. src_index + N)` (4, 8 or 16 bytes) into
/// `dst[dst_index ..]` without waiting for them: the copy lands at the latest when a
/// wait_async() lets its group complete, so the invocation can go on (issue more copies, compute
/// on other data) meanwhile. Where `inside` is false the source is not read and zeros are
/// written. Both indices must be multiples of N. The copied elements may be touched only after
/// the wait (and a barrier, for the other invocations): the interpreter refuses earlier
/// accesses. On CUDA sm_80 and later this is cp.async; elsewhere the copy is done at once.
///   dsl::copy_async<8>(tile, at, a, row * lda + k, row < m);
///   dsl::commit_async();
///   ...
///   dsl::wait_async(0);
///   dsl::barrier();
template <int N, KernelType T, int Size, class S, int Rank, class DI, class SI, class C>
void copy_async(const Shared<T, Size> &dst, const DI &dst_index, const Tensor<S, Rank> &src,
                const SI &src_index, const C &inside, const Loc &loc = Loc::current()) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>,
                "cubecc: copy_async copies between memory of one element type");
  static_assert(N * detail::bytes_of<T>() == 4 || N * detail::bytes_of<T>() == 8 ||
                    N * detail::bytes_of<T>() == 16,
                "cubecc: copy_async<N> copies 4, 8 or 16 bytes (N elements)");
  static_assert(ExprLike<C> || std::is_same_v<C, bool>,
                "cubecc: copy_async's `inside` is a kernel bool (a comparison, say)");
  detail::emit_void(ir::Opcode::AsyncCopy,
                    {dst.memory(), detail::node_as<uint32_t>(dst_index).emit(loc), src.memory(),
                     detail::node_as<uint32_t>(src_index).emit(loc),
                     detail::node_as<bool>(inside).emit(loc)},
                    "lanes", N, loc);
}
/// As above, reading the source everywhere.
template <int N, KernelType T, int Size, class S, int Rank, class DI, class SI>
void copy_async(const Shared<T, Size> &dst, const DI &dst_index, const Tensor<S, Rank> &src,
                const SI &src_index, const Loc &loc = Loc::current()) {
  copy_async<N>(dst, dst_index, src, src_index, true, loc);
}
/// Closes the group of this invocation's copies issued since the last commit_async().
inline void commit_async(const Loc &loc = Loc::current()) {
  detail::emit_void(ir::Opcode::AsyncCommit, {}, loc);
}
/// Waits until at most `pending` (0 to 8) of this invocation's newest groups are still in
/// flight: every older group has landed. The other invocations' copies are visible after a
/// barrier() that follows their waits.
inline void wait_async(int pending = 0, const Loc &loc = Loc::current()) {
  detail::emit_void(ir::Opcode::AsyncWait, {}, "pending", pending, loc);
}

} // namespace cubecc::dsl
