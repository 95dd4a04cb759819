//===- ops.h - Opcode enum and per-op facts, generated from ops.def --------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace cubecc::ir {

/// How an op's operands, results and regions are shaped and typed. The verifier implements one
/// rule per signature; docs/ir.md describes each.
enum class Signature : uint8_t {
  Constant,        ///< () -> scalar; attribute `value`
  Unary,           ///< (T) -> T
  Binary,          ///< (T, T) -> T
  Ternary,         ///< (T, T, T) -> T
  Compare,         ///< (T, T) -> bool with T's lanes
  Classify,        ///< (T) -> bool with T's lanes
  Select,          ///< (bool with T's lanes or bool, T, T) -> T
  Cast,            ///< (T) -> U, same lanes
  Bitcast,         ///< (T) -> U, same total bits
  Splat,           ///< (scalar S) -> vector of S
  VecBuild,        ///< (S x lanes) -> vector of S
  VecExtract,      ///< (vector of S) -> S; attribute `lane`
  VecInsert,       ///< (vector of S, S) -> vector of S; attribute `lane`
  Load,            ///< (memory of S, integer index) -> S or vector of S
  Store,           ///< (memory of S, integer index, S or vector of S) -> ()
  BufferSize,      ///< (buffer) -> integer scalar: the element count
  SharedAlloc,     ///< () -> shared array
  LocalAlloc,      ///< () -> local array
  Builtin3,        ///< () -> u32x3
  Builtin1,        ///< () -> u32
  Sync,            ///< () -> ()
  Print,           ///< (scalars...) -> (); attribute `format`
  AsyncCopy,       ///< (shared of S, integer index, buffer of S, integer index, bool) -> ()
  AsyncGroup,      ///< () -> (): async.commit, async.wait
  AtomicRmw,       ///< (buffer or shared of S, integer index, S) -> S
  AtomicCmpXchg,   ///< (buffer or shared of S, integer index, S expected, S desired) -> S
  AtomicLoad,      ///< (buffer or shared of S, integer index) -> S
  AtomicStore,     ///< (buffer or shared of S, integer index, S) -> ()
  SubgroupUnary,   ///< (T) -> T
  SubgroupShuffle, ///< (T, u32) -> T
  SubgroupBallot,  ///< (bool) -> u32x4
  SubgroupVote,    ///< (bool) -> bool
  SubgroupElect,   ///< () -> bool
  MatrixFill,      ///< (scalar S) -> matrix of S
  MatrixLoad,      ///< (memory of S, integer index, integer stride) -> matrix of S
  MatrixStore,     ///< (memory of S, integer index, integer stride, matrix of S) -> ()
  MatrixMma,       ///< (matrix A, matrix B, accumulator C) -> accumulator of C's type
  MatrixConvert,   ///< (matrix) -> matrix of the same rows and cols
  If,              ///< (bool) -> (results...); regions then, else
  For,             ///< (lo, hi, step, inits...) -> (results...); region body(iv, carried...)
  While,           ///< (inits...) -> (results...); regions before(carried...), after(forwarded...)
  Yield,           ///< terminator of if branches, for bodies and while `after` regions
  Condition,       ///< terminator of while `before` regions: (bool, forwarded...)
  Break,           ///< leaves the innermost loop with its results
  Continue,        ///< starts the next iteration of the innermost loop with new carried values
  Return,          ///< terminator of a kernel body
};

/// Which element types the main operand of an op may have.
enum class TypeClass : uint8_t {
  Any,           ///< any value type the signature allows
  Numeric,       ///< integers and floats
  Signed,        ///< signed integers and floats
  Integer,       ///< integers
  IntegerOrBool, ///< integers and bool
  Float,         ///< floats
};

enum OpFlag : uint32_t {
  Pure = 1u << 0,         ///< no side effects; may be removed when unused, merged, hoisted
  Commutative = 1u << 1,  ///< the two operands may be swapped
  ReadsMemory = 1u << 2,  ///< reads a memory object
  WritesMemory = 1u << 3, ///< writes a memory object
  Allocates = 1u << 4,    ///< allocates a memory object
  Builtin = 1u << 5,      ///< reads a launch builtin
  Synchronizes = 1u << 6, ///< barrier or fence: orders memory, must not be moved or merged
  Subgroup = 1u << 7,     ///< a subgroup collective: every invocation of the subgroup takes part
  HasRegions = 1u << 8,   ///< owns regions
  Terminator = 1u << 9,   ///< ends a region
  Approximate = 1u << 10, ///< accuracy is the target's (docs/ir.md §4.2): never folded on the host
  Effect = 1u << 11,      ///< an effect outside memory (print): never removed, merged or moved
};

enum class Opcode : uint16_t {
#define CUBECC_OP(id, name, sig, cls, flags) id,
#include "cubecc/ir/ops.def"
};

/// Facts from the op table.
struct OpInfo {
  Opcode opcode;
  std::string_view name;
  Signature signature;
  TypeClass type_class;
  uint32_t flags;
};

/// Operand count fixed by a signature, or -1 when the op takes a variable number.
int fixed_operand_count(Signature sig);
/// Result count fixed by a signature, or -1 when it varies (if, for, while).
int fixed_result_count(Signature sig);
/// Regions an op of this signature owns.
constexpr unsigned region_count(Signature sig) {
  switch (sig) {
  case Signature::If:
  case Signature::While:
    return 2;
  case Signature::For:
    return 1;
  default:
    return 0;
  }
}

namespace detail {
/// The op table, indexed by opcode. In the header so that op_info() is an inline load: every op
/// built, matched or printed asks for its facts.
inline constexpr OpInfo kOps[] = {
#define CUBECC_OP(id, name, sig, cls, flags)                                                       \
  {Opcode::id, name, Signature::sig, TypeClass::cls, static_cast<uint32_t>(flags)},
#include "cubecc/ir/ops.def"
};
} // namespace detail

inline const OpInfo &op_info(Opcode op) {
  return detail::kOps[static_cast<unsigned>(op)];
}
inline std::string_view op_name(Opcode op) {
  return op_info(op).name;
}
/// matrix.fill, load, store, mma and convert: the ops on matrix fragments.
inline bool is_matrix_op(Opcode op) {
  return op == Opcode::MatrixFill || op == Opcode::MatrixLoad || op == Opcode::MatrixStore ||
         op == Opcode::MatrixMma || op == Opcode::MatrixConvert;
}
/// The binary op an atomic read-modify-write combines the old value with (atomic.add: add, ...,
/// atomic.xor: xor); the opcode itself for xchg and cmpxchg, which do not combine.
inline Opcode atomic_combine(Opcode op) {
  switch (op) {
  case Opcode::AtomicAdd:
    return Opcode::Add;
  case Opcode::AtomicSub:
    return Opcode::Sub;
  case Opcode::AtomicMin:
    return Opcode::Min;
  case Opcode::AtomicMax:
    return Opcode::Max;
  case Opcode::AtomicAnd:
    return Opcode::And;
  case Opcode::AtomicOr:
    return Opcode::Or;
  case Opcode::AtomicXor:
    return Opcode::Xor;
  default:
    return op;
  }
}
/// Every op of the table, in table order.
std::span<const OpInfo> all_ops();
std::optional<Opcode> parse_opcode(std::string_view name);

} // namespace cubecc::ir
