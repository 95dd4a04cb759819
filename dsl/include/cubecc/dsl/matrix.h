//===- matrix.h - Matrix fragments: tensor-core multiply-accumulate ---------------------------===//
//
//   using A = dsl::MatrixA<dsl::f16, 16, 16>;          // M x K
//   using B = dsl::MatrixB<dsl::f16, 16, 8>;           // K x N
//   using C = dsl::Accumulator<float, 16, 8>;          // M x N
//   A a = A::load(a_tile, 0u, 16u);                    // row-major, leading dimension 16
//   B b = B::load(b_tile, 0u, 16u, dsl::ColMajor);
//   C c = dsl::mma(a, b, C::fill(0.0f));               // D = A B + C
//   c.store(out, row * n + col, n);
//
// A matrix is one value of the whole subgroup (docs/ir.md §2.2): every invocation of the
// subgroup must reach each matrix operation, with the same operands. Shapes, roles and element
// types are checked at compile time against the shapes cubecc has; which of them a target runs
// is checked when the kernel is compiled for it. Matrices are values, not variables: a loop
// that updates them carries them with dsl::for_carry.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/control.h"
#include "cubecc/dsl/memory.h"

namespace cubecc::dsl {

/// How a matrix lies in memory: element (r, c) at index + r * stride + c (RowMajor) or
/// index + c * stride + r (ColMajor).
enum class Layout { RowMajor, ColMajor };
inline constexpr Layout RowMajor = Layout::RowMajor;
inline constexpr Layout ColMajor = Layout::ColMajor;

namespace detail {
template <class T>
inline constexpr bool is_operand_element_v =
    std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, e4m3> ||
    std::is_same_v<T, e5m2> || std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t> ||
    std::is_same_v<T, float>;
template <class T>
inline constexpr bool is_accumulator_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, int32_t>;
template <class Memory> using memory_element_t = typename Memory::dsl_element_type;
template <class X> inline constexpr bool is_local_v = false;
template <KernelType T, int N> inline constexpr bool is_local_v<Local<T, N>> = true;
ir::Value *emit_matrix_access(ir::Opcode op, ir::Value *memory, ir::Value *index, ir::Value *stride,
                              ir::Value *matrix, ir::Type type, Layout layout, const Loc &loc);
} // namespace detail

/// A Rows x Cols matrix of T held by the subgroup, in the role R of `D = A * B + C`.
template <ir::MatrixRole R, class T, int Rows, int Cols> class Matrix {
  static_assert(R == ir::MatrixRole::Accumulator ? detail::is_accumulator_element_v<T>
                                                 : detail::is_operand_element_v<T>,
                "cubecc: a MatrixA or MatrixB holds f16, bf16, e4m3, e5m2, int8_t, uint8_t or "
                "float (multiplied as tf32); an Accumulator holds float, f16 or int32_t");
  static_assert((Rows == 8 || Rows == 16 || Rows == 32) && (Cols == 8 || Cols == 16 || Cols == 32),
                "cubecc: matrix rows and columns are 8, 16 or 32 (docs/ir.md §2.2 lists the "
                "shapes)");

public:
  using element_type = T;
  static constexpr ir::MatrixRole role = R;
  static constexpr int rows = Rows;
  static constexpr int cols = Cols;

  static ir::Type ir_type() {
    return ir::Type::matrix(R, detail::ScalarTraits<T>::scalar, Rows, Cols);
  }
  static Matrix from_ir(ir::Value *v) { return Matrix(v); }
  ir::Value *ir() const { return value_; }

  /// Every element `value` (a C++ number or a kernel value of type T, the same in the whole
  /// subgroup).
  template <class E> static Matrix fill(const E &value, const Loc &loc = Loc::current()) {
    ir::Value *v = detail::node_as<T>(value).emit(loc);
    return Matrix(detail::emit(ir::Opcode::MatrixFill, {v}, ir_type(), loc));
  }

  /// Loads element (r, c) from memory[index + r * stride + c] (RowMajor) or
  /// memory[index + c * stride + r] (ColMajor). `memory` is a Tensor, Array or Shared array of
  /// T, or a Slice of one (index counts from the slice's start); index and stride are uint32_t,
  /// the same in the whole subgroup.
  template <class Memory, class I, class S>
  static Matrix load(const Memory &memory, const I &index, const S &stride,
                     Layout layout = RowMajor, const Loc &loc = Loc::current()) {
    check_memory<Memory>();
    ir::Value *v = detail::emit_matrix_access(
        ir::Opcode::MatrixLoad, memory.memory(), first_element(memory, index, loc),
        detail::node_as<uint32_t>(stride).emit(loc), nullptr, ir_type(), layout, loc);
    return Matrix(v);
  }

  /// Stores the matrix as load() reads it.
  template <class Memory, class I, class S>
  void store(const Memory &memory, const I &index, const S &stride, Layout layout = RowMajor,
             const Loc &loc = Loc::current()) const {
    check_memory<Memory>();
    static_assert(!std::is_const_v<detail::memory_element_t<Memory>>,
                  "cubecc: cannot store a matrix to read-only memory (drop the const of the "
                  "tensor's element type)");
    detail::emit_matrix_access(
        ir::Opcode::MatrixStore, memory.memory(), first_element(memory, index, loc),
        detail::node_as<uint32_t>(stride).emit(loc), value_, ir_type(), layout, loc);
  }

private:
  /// `index` in the underlying memory: a Slice's start added.
  template <class Memory, class I>
  static ir::Value *first_element(const Memory &memory, const I &index, const Loc &loc) {
    return detail::from_start(memory, detail::node_as<uint32_t>(index)).emit(loc);
  }
  template <class Memory> static void check_memory() {
    static_assert(
        requires { typename Memory::dsl_element_type; },
        "cubecc: matrices load from and store to a dsl::Tensor, dsl::Array or dsl::Shared");
    if constexpr (requires { typename Memory::dsl_element_type; }) {
      static_assert(std::is_same_v<std::remove_const_t<detail::memory_element_t<Memory>>, T>,
                    "cubecc: the memory's element type must be the matrix's (convert the "
                    "matrix with dsl::convert, or the data before it is stored)");
      static_assert(!detail::is_local_v<Memory>,
                    "cubecc: a matrix is shared by the subgroup; load it from a Tensor or a "
                    "Shared array, not from invocation-private Local memory");
    }
  }
  explicit Matrix(ir::Value *v) : value_(v) {}
  ir::Value *value_;
};

/// The left operand of mma (M x K), the right operand (K x N) and the accumulator (M x N).
template <class T, int M, int K> using MatrixA = Matrix<ir::MatrixRole::A, T, M, K>;
template <class T, int K, int N> using MatrixB = Matrix<ir::MatrixRole::B, T, K, N>;
template <class T, int M, int N> using Accumulator = Matrix<ir::MatrixRole::Accumulator, T, M, N>;

namespace detail {
template <class X> inline constexpr bool is_matrix_v = false;
template <ir::MatrixRole R, class T, int Rows, int Cols>
inline constexpr bool is_matrix_v<Matrix<R, T, Rows, Cols>> = true;

template <ir::MatrixRole R, class T, int Rows, int Cols> struct Carry<Matrix<R, T, Rows, Cols>> {
  static constexpr bool known = true;
  static void flatten(const Matrix<R, T, Rows, Cols> &m, std::vector<ir::Value *> &out) {
    out.push_back(m.ir());
  }
  static Matrix<R, T, Rows, Cols> rebuild(std::span<ir::Value *const> values, size_t &next) {
    return Matrix<R, T, Rows, Cols>::from_ir(values[next++]);
  }
};
} // namespace detail

/// D = A * B + C, for a shape cubecc has (docs/ir.md §2.2: 16x16x16 and 16x8x16 for f16 and
/// bf16, 16x8x32 and 16x16x32 for fp8 (e4m3 and e5m2 in any pair) and 8-bit integers (either
/// signedness, into int32_t), 16x8x8 and 16x16x8 for float operands, which are rounded to tf32
/// (10 fraction bits, to nearest, ties away from zero) as they enter). Each float element is
/// rounded once (the interpreter sums in double precision; hardware in its own order, within the
/// bound docs/ir.md §4.13 gives); integer sums are exact, wrapped to 32 bits.
template <class A, class B, class C>
C mma(const A &a, const B &b, const C &c, const Loc &loc = Loc::current()) {
  static_assert(detail::is_matrix_v<A> && detail::is_matrix_v<B> && detail::is_matrix_v<C>,
                "cubecc: mma takes a MatrixA, a MatrixB and an Accumulator");
  if constexpr (detail::is_matrix_v<A> && detail::is_matrix_v<B> && detail::is_matrix_v<C>) {
    static_assert(A::role == ir::MatrixRole::A && B::role == ir::MatrixRole::B &&
                      C::role == ir::MatrixRole::Accumulator,
                  "cubecc: mma(a, b, c) takes a MatrixA, a MatrixB and an Accumulator, in order");
    static_assert(A::cols == B::rows && A::rows == C::rows && B::cols == C::cols,
                  "cubecc: mma multiplies M x K by K x N into M x N: the shapes do not fit");
    static_assert(ir::is_matrix_shape(C::rows, C::cols, A::cols,
                                      detail::ScalarTraits<typename A::element_type>::scalar,
                                      detail::ScalarTraits<typename B::element_type>::scalar,
                                      detail::ScalarTraits<typename C::element_type>::scalar),
                  "cubecc: no target has this mma shape; cubecc has 16x16x16 and 16x8x16 "
                  "(f16 x f16 -> f32 or f16, bf16 x bf16 -> f32), 16x8x32 and 16x16x32 (e4m3 or "
                  "e5m2 x e4m3 or e5m2 -> f32; int8_t or uint8_t x int8_t or uint8_t -> "
                  "int32_t), 16x8x8 and 16x16x8 (float x float as tf32 -> float), M x N x K");
  }
  return C::from_ir(detail::emit_n(ir::Opcode::MatrixMma,
                                   std::array<ir::Value *, 3>{a.ir(), b.ir(), c.ir()}, C::ir_type(),
                                   loc));
}

/// `m` with each element converted to To's element type (round to nearest even); an
/// Accumulator may become a MatrixA or MatrixB (to feed one product into the next).
template <class To, class From> To convert(const From &m, const Loc &loc = Loc::current()) {
  static_assert(detail::is_matrix_v<To> && detail::is_matrix_v<From>,
                "cubecc: convert<To>(m) converts a matrix to another Matrix type");
  if constexpr (detail::is_matrix_v<To> && detail::is_matrix_v<From>) {
    static_assert(To::rows == From::rows && To::cols == From::cols,
                  "cubecc: convert keeps the rows and columns");
    static_assert(To::role == From::role || From::role == ir::MatrixRole::Accumulator,
                  "cubecc: only an Accumulator changes its role (into a MatrixA or MatrixB)");
    static_assert(!std::is_integral_v<typename To::element_type> &&
                      !std::is_integral_v<typename From::element_type>,
                  "cubecc: integer matrices are only loaded, multiplied and stored (requantize "
                  "the elements in memory)");
  }
  return To::from_ir(detail::emit(ir::Opcode::MatrixConvert, {m.ir()}, To::ir_type(), loc));
}

} // namespace cubecc::dsl
