//===- types.h - Types of cubecc IR values ----------------------------------------------------===//
//
// A Type is a small value (compared and hashed by value, no context needed): a scalar, a vector
// of a scalar, a memory object (global buffer, workgroup-shared array, invocation-local array)
// of a scalar element type, or a matrix fragment held by a whole subgroup (docs/ir.md §2.2).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cubecc::ir {

/// Scalar element types. `class` is one of Bool, Signed, Unsigned, Float, StorageFloat. The
/// storage floats (OCP 8-bit e4m3 and e5m2, the 4-bit e2m1 and the exponent-only ue8m0 scale;
/// docs/ir.md §2.1) are stored and converted, never computed with; each takes one byte (e2m1 in
/// its low four bits). New scalars go at the end: bundles store a scalar as its index.
#define CUBECC_SCALAR_TYPES(X)                                                                     \
  X(Bool, "bool", 1, Bool)                                                                         \
  X(I8, "i8", 8, Signed)                                                                           \
  X(I16, "i16", 16, Signed)                                                                        \
  X(I32, "i32", 32, Signed)                                                                        \
  X(I64, "i64", 64, Signed)                                                                        \
  X(U8, "u8", 8, Unsigned)                                                                         \
  X(U16, "u16", 16, Unsigned)                                                                      \
  X(U32, "u32", 32, Unsigned)                                                                      \
  X(U64, "u64", 64, Unsigned)                                                                      \
  X(F16, "f16", 16, Float)                                                                         \
  X(BF16, "bf16", 16, Float)                                                                       \
  X(F32, "f32", 32, Float)                                                                         \
  X(F64, "f64", 64, Float)                                                                         \
  X(E4M3, "e4m3", 8, StorageFloat)                                                                 \
  X(E5M2, "e5m2", 8, StorageFloat)                                                                 \
  X(E2M1, "e2m1", 8, StorageFloat)                                                                 \
  X(UE8M0, "ue8m0", 8, StorageFloat)

enum class Scalar : uint8_t {
#define X(id, name, bits, cls) id,
  CUBECC_SCALAR_TYPES(X)
#undef X
};

enum class ScalarClass : uint8_t { Bool, Signed, Unsigned, Float, StorageFloat };

std::string_view scalar_name(Scalar s);
unsigned scalar_bits(Scalar s);
ScalarClass scalar_class(Scalar s);
std::optional<Scalar> parse_scalar(std::string_view name);
inline bool is_float(Scalar s) {
  return scalar_class(s) == ScalarClass::Float;
}
/// e4m3, e5m2, e2m1, ue8m0: loaded, stored, selected, shuffled, bitcast and cast, nothing else.
inline bool is_storage_float(Scalar s) {
  return scalar_class(s) == ScalarClass::StorageFloat;
}
/// The scalar a backend holds `s` in, in registers and in memory: a storage float is its byte
/// (legalize has expanded every conversion, so only moves, loads, stores, selects, shuffles and
/// bitcasts remain), every other scalar is itself. The one place that says so for all targets.
inline Scalar register_scalar(Scalar s) {
  return is_storage_float(s) ? Scalar::U8 : s;
}
inline bool is_integer(Scalar s) {
  return scalar_class(s) == ScalarClass::Signed || scalar_class(s) == ScalarClass::Unsigned;
}
inline bool is_signed(Scalar s) {
  return scalar_class(s) == ScalarClass::Signed;
}

/// The part a matrix fragment plays in `D = A * B + C` (docs/ir.md §2.2).
enum class MatrixRole : uint8_t {
  A,           ///< the left operand, rows x depth
  B,           ///< the right operand, depth x cols
  Accumulator, ///< C and D, rows x cols
};
std::string_view matrix_role_name(MatrixRole r);

/// Who may read and write a global buffer.
enum class Access : uint8_t { Read, Write, ReadWrite };
std::string_view access_name(Access a);

enum class TypeKind : uint8_t {
  Scalar, ///< one element
  Vector, ///< `lanes` elements, lanes in {2, 3, 4, 8, 16}
  Buffer, ///< global memory: a runtime-sized array of `element`, with an access mode
  Shared, ///< workgroup-shared array of `count` elements
  Local,  ///< invocation-private array of `count` elements
  Matrix, ///< a `rows` x `cols` matrix of `element` held jointly by the subgroup, with a role
};

/// The type of an IR value.
class Type {
public:
  Type() = default;
  static Type scalar(Scalar s) { return Type(TypeKind::Scalar, s, 1, Access::ReadWrite); }
  static Type vector(Scalar s, uint32_t lanes) {
    return Type(TypeKind::Vector, s, lanes, Access::ReadWrite);
  }
  static Type buffer(Scalar s, Access a) { return Type(TypeKind::Buffer, s, 0, a); }
  static Type shared(Scalar s, uint32_t count) {
    return Type(TypeKind::Shared, s, count, Access::ReadWrite);
  }
  static Type local(Scalar s, uint32_t count) {
    return Type(TypeKind::Local, s, count, Access::ReadWrite);
  }
  /// A matrix fragment. Its scope is always the subgroup: every invocation of the subgroup
  /// holds a share of it and takes part in every op on it.
  static Type matrix(MatrixRole role, Scalar s, uint32_t rows, uint32_t cols) {
    Type t(TypeKind::Matrix, s, (rows << 16) | cols, Access::ReadWrite);
    t.role_ = role;
    return t;
  }
  static bool valid_lanes(uint64_t lanes) {
    return lanes == 2 || lanes == 3 || lanes == 4 || lanes == 8 || lanes == 16;
  }

  TypeKind kind() const { return kind_; }
  /// The scalar of a scalar or vector, the element of a memory type.
  Scalar element() const { return element_; }
  /// Lanes of a vector (1 for a scalar).
  uint32_t lanes() const { return kind_ == TypeKind::Vector ? count_ : 1; }
  /// Element count of a shared or local array.
  uint32_t count() const { return count_; }
  /// Bytes of a shared or local array, in 64 bits: `shared<f64, 4294967295>` is 32 GiB, not a
  /// 32-bit wrap of it.
  uint64_t array_bytes() const { return uint64_t{count_} * (scalar_bits(element_) / 8); }
  Access access() const { return access_; }
  /// Rows, columns and role of a matrix.
  uint32_t rows() const { return count_ >> 16; }
  uint32_t cols() const { return count_ & 0xFFFF; }
  MatrixRole role() const { return role_; }

  bool is_scalar() const { return kind_ == TypeKind::Scalar; }
  bool is_vector() const { return kind_ == TypeKind::Vector; }
  /// Scalars and vectors: the types of values that live in registers.
  bool is_value() const { return is_scalar() || is_vector(); }
  bool is_matrix() const { return kind_ == TypeKind::Matrix; }
  bool is_memory() const {
    return kind_ == TypeKind::Buffer || kind_ == TypeKind::Shared || kind_ == TypeKind::Local;
  }
  bool is_scalar(Scalar s) const { return is_scalar() && element_ == s; }
  bool is_bool() const { return is_value() && element_ == Scalar::Bool; }
  /// Elements of a matrix (rows x cols); each invocation's share is this over the subgroup size.
  uint32_t matrix_elements() const { return rows() * cols(); }
  bool is_readable() const { return is_memory() && access_ != Access::Write; }
  bool is_writable() const { return is_memory() && access_ != Access::Read; }

  /// The scalar type of one lane (or of one element of a memory type).
  Type element_type() const { return scalar(element_); }
  /// This type with its element replaced by `s` (shape kept).
  Type with_element(Scalar s) const {
    Type t(kind_, s, count_, access_);
    t.role_ = role_;
    return t;
  }

  std::string str() const;

  friend bool operator==(const Type &, const Type &) = default;

private:
  Type(TypeKind k, Scalar s, uint32_t count, Access a)
      : kind_(k), element_(s), access_(a), count_(count) {}
  TypeKind kind_ = TypeKind::Scalar;
  Scalar element_ = Scalar::Bool;
  Access access_ = Access::ReadWrite;
  MatrixRole role_ = MatrixRole::A; ///< matrices only; A elsewhere, so that == compares kinds
  uint32_t count_ = 1;              ///< lanes, array elements, or a matrix's rows << 16 | cols
};

/// One multiply-accumulate shape `D(m x n) = A(m x k) * B(k x n) + C(m x n)` that matrix.mma
/// accepts, with the element types of A, of B and of C and D.
struct MatrixShape {
  uint32_t m, n, k;
  Scalar a, b;
  Scalar accumulator;
  /// "16x16x16 f16->f32"; "16x8x32 e4m3*e5m2->f32" where A and B differ; "16x8x8 tf32->f32" for
  /// f32 operands (multiplied as TF32).
  std::string str() const;
};
/// Every shape cubecc has: those of NVIDIA's mma.sync (m16n8k16, fp8 and int8 m16n8k32, tf32
/// m16n8k8), AMD's MFMA and Vulkan's usual cooperative-matrix shapes (16x16x16, fp8 16x16x32).
/// A backend may support a subset (docs/ir.md §2.2 lists which). A constant, so that the DSL checks
/// shapes at compile time; the order is the bit order of a target's `matrix_shapes` mask (new
/// shapes go last: the masks are stored in bundles).
inline constexpr MatrixShape kMatrixShapes[] = {
    {16, 16, 16, Scalar::F16, Scalar::F16, Scalar::F32},
    {16, 16, 16, Scalar::F16, Scalar::F16, Scalar::F16},
    {16, 16, 16, Scalar::BF16, Scalar::BF16, Scalar::F32},
    {16, 8, 16, Scalar::F16, Scalar::F16, Scalar::F32},
    {16, 8, 16, Scalar::F16, Scalar::F16, Scalar::F16},
    {16, 8, 16, Scalar::BF16, Scalar::BF16, Scalar::F32},
    {16, 8, 32, Scalar::E4M3, Scalar::E4M3, Scalar::F32},
    {16, 8, 32, Scalar::E5M2, Scalar::E5M2, Scalar::F32},
    {16, 16, 32, Scalar::E4M3, Scalar::E4M3, Scalar::F32},
    {16, 16, 32, Scalar::E5M2, Scalar::E5M2, Scalar::F32},
    // 8-bit integers of either signedness -> i32 (mma.sync m16n8k32 .s8/.u8).
    {16, 8, 32, Scalar::I8, Scalar::I8, Scalar::I32},
    {16, 8, 32, Scalar::U8, Scalar::U8, Scalar::I32},
    {16, 8, 32, Scalar::I8, Scalar::U8, Scalar::I32},
    {16, 8, 32, Scalar::U8, Scalar::I8, Scalar::I32},
    {16, 16, 32, Scalar::I8, Scalar::I8, Scalar::I32},
    {16, 16, 32, Scalar::U8, Scalar::U8, Scalar::I32},
    {16, 16, 32, Scalar::I8, Scalar::U8, Scalar::I32},
    {16, 16, 32, Scalar::U8, Scalar::I8, Scalar::I32},
    // Mixed fp8 (sm_89 and later).
    {16, 8, 32, Scalar::E4M3, Scalar::E5M2, Scalar::F32},
    {16, 8, 32, Scalar::E5M2, Scalar::E4M3, Scalar::F32},
    {16, 16, 32, Scalar::E4M3, Scalar::E5M2, Scalar::F32},
    {16, 16, 32, Scalar::E5M2, Scalar::E4M3, Scalar::F32},
    // f32 operands multiplied as TF32 (mma.sync m16n8k8 .tf32, sm_80): each element rounded to
    // 10 fraction bits first (round_to_tf32 in float_formats.h).
    {16, 8, 8, Scalar::F32, Scalar::F32, Scalar::F32},
    {16, 16, 8, Scalar::F32, Scalar::F32, Scalar::F32},
};
static_assert(std::size(kMatrixShapes) <= 32, "a target's matrix_shapes mask has 32 bits");
inline std::span<const MatrixShape> matrix_shapes() {
  return kMatrixShapes;
}
/// Whether `m x n x k` with `a` and `b` operands and an `accumulator` is a shape of
/// kMatrixShapes.
constexpr bool is_matrix_shape(uint32_t m, uint32_t n, uint32_t k, Scalar a, Scalar b,
                               Scalar accumulator) {
  for (const MatrixShape &s : kMatrixShapes)
    if (s.m == m && s.n == n && s.k == k && s.a == a && s.b == b && s.accumulator == accumulator)
      return true;
  return false;
}
/// The index in matrix_shapes() of the shape of `a * b + c`, if it is one, with matching roles.
std::optional<size_t> matrix_shape_index(Type a, Type b, Type c);
/// Every shape of matrix_shapes() whose bit is set in `mask`, comma-separated.
std::string matrix_shapes_text(uint32_t mask = ~0u);
/// The bits of the shapes of matrix_shapes() that `keep` accepts (a target's `matrix_shapes`).
template <class F> uint32_t matrix_shape_mask(F &&keep) {
  uint32_t mask = 0;
  for (size_t i = 0; i < matrix_shapes().size(); ++i)
    if (keep(matrix_shapes()[i]))
      mask |= 1u << i;
  return mask;
}
/// Why `t` cannot be a matrix fragment (role, element or size), or empty.
std::string matrix_type_problem(Type t);

} // namespace cubecc::ir
