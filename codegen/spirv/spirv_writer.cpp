//===- spirv_writer.cpp - IR kernels to SPIR-V compute shaders -------------------------------===//
//
// One pass over the kernel body, in order, writing SPIR-V directly:
//   - Vectors are scalarized: every IR value maps to one SPIR-V id per lane. Lane-wise ops become
//     one instruction per lane, splat/build/extract/insert cost nothing, and 8- and 16-lane
//     vectors (which Vulkan SPIR-V cannot declare) need no special case. lavapipe and GPU
//     compilers vectorize across invocations, not within one, so nothing is lost.
//   - Structured control flow maps one to one: `if` is a selection construct whose merge block
//     takes the results as phis; `for` and `while` are loop constructs (header with phis for the
//     carried values, a continue block with phis for every `yield`/`continue` edge, a merge block
//     with phis for every exit). `break`/`continue` at any depth of nested `if`s are branches to
//     the innermost loop's merge block or continue target, which SPIR-V allows.
//   - Code the IR leaves unreachable (after an `if` whose branches all leave the loop) is not
//     written; its merge block holds OpUnreachable.
//   - The writer sees legalized IR (passes/legalize.h, run by emit_spirv on a copy of the
//     kernel): integer division never sees a zero divisor, shift amounts are in range,
//     float-to-integer casts are in range, `erf` and C's `pow` are expanded into other ops. What
//     is left here is target-specific: `round` rounds halfway cases away from zero, float
//     min/max are NMin/NMax, exact fmod and fma, and float add/sub/mul are NoContraction.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/spirv.h"

#include "cubecc/ir/clone.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/print_format.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/subgroup_combine.h"
#include "cubecc/passes/legalize.h"
#include "spirv_module.h"

#include <fmt/format.h>
#include <spirv/unified1/GLSL.std.450.h>

#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

namespace cubecc::codegen {
namespace {

using namespace spirv;
using ir::Opcode;
using ir::Scalar;
using ir::Type;
using Lanes = std::vector<Id>;

/// A memory object of the kernel: a buffer parameter, a shared or a local array.
struct MemoryObject {
  Id variable = 0;
  spv::StorageClass storage = spv::StorageClass::StorageBuffer;
};

/// A branch to a merge block or continue target, with the values its phis take from it.
struct Edge {
  Lanes values; ///< every carried value's lanes, in order
  Id from = 0;
};

struct LoopContext {
  Id merge = 0;
  Id cont = 0;
  Id body = 0;     ///< while: the `do` region's first block, the target of `condition`
  Lanes forwarded; ///< while: the values `condition` passes to the `do` region
  std::vector<Edge> breaks;
  std::vector<Edge> continues;
};

struct IfContext {
  Id merge = 0;
  std::vector<Edge> yields;
};

constexpr uint32_t kScopeDevice = static_cast<uint32_t>(spv::Scope::Device);
constexpr uint32_t kScopeWorkgroup = static_cast<uint32_t>(spv::Scope::Workgroup);
constexpr uint32_t kScopeSubgroup = static_cast<uint32_t>(spv::Scope::Subgroup);

class Writer {
public:
  Writer(const ir::Kernel &kernel, const TargetFeatures &features,
         std::vector<ir::Diagnostic> &errors)
      : kernel_(kernel), features_(features), errors_(errors) {}

  std::optional<SpirvKernel> run();
  /// What run() checks before it writes (the kernel's types and ops against the features).
  bool check() {
    abi_ = KernelAbi::of(kernel_);
    return check_features();
  }

private:
  const ir::Kernel &kernel_;
  const TargetFeatures &features_;
  std::vector<ir::Diagnostic> &errors_;
  ModuleBuilder m_;
  KernelAbi abi_;
  TargetFeatures relies_on_; ///< what the module relies on (SpirvKernel::relies_on)
  std::set<std::string> reported_;
  std::set<Id> named_;
  bool buffers_communicate_ = false; ///< some buffer is both written and read (see run())
  std::set<unsigned> float_widths_;  ///< float types the module declares

  std::unordered_map<const ir::Value *, Lanes> values_;
  std::unordered_map<const ir::Value *, MemoryObject> memory_;
  /// Value parameters in order, with the parameter block's members each is read from.
  std::vector<std::pair<const ir::Value *, std::vector<uint32_t>>> value_params_;
  Id param_block_var_ = 0;
  spv::StorageClass param_storage_ = spv::StorageClass::PushConstant;
  Words param_members_; ///< the member types
  Words interface_;
  std::vector<Block> blocks_;
  size_t cur_ = 0;
  bool live_ = true; ///< whether the current block is reachable
  std::vector<LoopContext> loops_;
  std::vector<IfContext> ifs_;
  std::unordered_map<uint32_t, Id> builtins_; ///< BuiltIn -> its Input variable
  Id last_file_ = 0;
  uint32_t last_line_ = 0, last_col_ = 0;

  //===--- Diagnostics ------------------------------------------------------------------===//

  /// Reports an error once per `key` (default: the message): a missing feature is reported at
  /// the first op that needs it, not at every one.
  void fail(const ir::Operation *op, const std::string &message, const std::string &key = {}) {
    if (!reported_.insert(key.empty() ? message : key).second)
      return;
    errors_.push_back(ir::diagnostic_at(*kernel_.module(), op, message));
  }

  std::string where(const ir::Operation &op) const {
    return fmt::format("kernel '{}': op '{}'", kernel_.name(), op.name());
  }

  bool check_type(const ir::Operation &op, Scalar s);
  bool check_features();
  void relies_on_flags();

  //===--- Types, constants, instructions ------------------------------------------------===//

  Id scalar_type(Scalar s) {
    s = ir::register_scalar(s);
    switch (s) { // the capability each width needs, on first use
    case Scalar::I8:
    case Scalar::U8:
      m_.capability(spv::Capability::Int8);
      break;
    case Scalar::I16:
    case Scalar::U16:
      m_.capability(spv::Capability::Int16);
      break;
    case Scalar::I64:
    case Scalar::U64:
      m_.capability(spv::Capability::Int64);
      break;
    case Scalar::F16:
      m_.capability(spv::Capability::Float16);
      break;
    case Scalar::F64:
      m_.capability(spv::Capability::Float64);
      break;
    case Scalar::BF16: // bf16 values live in f32 registers (exactly), see round_bf16()
      float_widths_.insert(32);
      return m_.type_float(32);
    default:
      break;
    }
    switch (ir::scalar_class(s)) {
    case ir::ScalarClass::Bool:
      return m_.type_bool();
    case ir::ScalarClass::Signed:
      return m_.type_int(ir::scalar_bits(s), true);
    case ir::ScalarClass::Unsigned:
      return m_.type_int(ir::scalar_bits(s), false);
    case ir::ScalarClass::Float:
      float_widths_.insert(ir::scalar_bits(s));
      return m_.type_float(ir::scalar_bits(s));
    case ir::ScalarClass::StorageFloat:
      break; // a byte (register_scalar, above)
    }
    return 0;
  }
  Id uint_type(unsigned bits) {
    return scalar_type(bits == 8    ? Scalar::U8
                       : bits == 16 ? Scalar::U16
                       : bits == 64 ? Scalar::U64
                                    : Scalar::U32);
  }
  Id u32_type() { return scalar_type(Scalar::U32); }
  /// The type of an element in memory: bf16 is stored as its 16 bits.
  Id storage_type(Scalar s) { return s == Scalar::BF16 ? uint_type(16) : scalar_type(s); }
  /// A matrix fragment: SPV_NV_cooperative_matrix's type of the subgroup (the IR's role has no
  /// SPIR-V counterpart: an `a` and an `acc` of the same element and size are one type).
  Id matrix_type(Type t) {
    // A fragment's type is valid only where the device lists a shape that has it: the first of
    // the target's (matrix.mma adds its own shape too).
    for (size_t i = 0; i < ir::matrix_shapes().size(); ++i) {
      const ir::MatrixShape &s = ir::matrix_shapes()[i];
      uint32_t rows = t.role() == ir::MatrixRole::B ? s.k : s.m;
      uint32_t cols = t.role() == ir::MatrixRole::A ? s.k : s.n;
      Scalar element = t.role() == ir::MatrixRole::Accumulator ? s.accumulator
                       : t.role() == ir::MatrixRole::A         ? s.a
                                                               : s.b;
      if ((features_.matrix_shapes >> i & 1) && t.rows() == rows && t.cols() == cols &&
          t.element() == element) {
        relies_on_.matrix_shapes |= 1u << i;
        break;
      }
    }
    m_.capability(spv::Capability::CooperativeMatrixNV);
    m_.extension("SPV_NV_cooperative_matrix");
    return m_.type_cooperative_matrix_nv(scalar_type(t.element()), u32(kScopeSubgroup),
                                         u32(t.rows()), u32(t.cols()));
  }
  /// The type of one SPIR-V id of a value of type `t`: a lane, or a whole matrix.
  Id value_type(Type t) { return t.is_matrix() ? matrix_type(t) : scalar_type(t.element()); }

  //===--- bf16 emulation: f32 registers holding bf16 values exactly ----------------------===//

  /// The bf16 bits (in a u32) of an f32 value, rounded to nearest even; NaN stays NaN (quiet).
  Id f32_to_bf16_bits(Id x) {
    Id u = u32_type(), b = m_.type_bool();
    Id bits = emit(spv::Op::OpBitcast, u, {x});
    Id lsb = emit(spv::Op::OpBitwiseAnd, u,
                  {emit(spv::Op::OpShiftRightLogical, u, {bits, u32(16)}), u32(1)});
    Id rounded = emit(
        spv::Op::OpShiftRightLogical, u,
        {emit(spv::Op::OpIAdd, u, {bits, emit(spv::Op::OpIAdd, u, {u32(0x7fff), lsb})}), u32(16)});
    Id nan = emit(spv::Op::OpBitwiseOr, u,
                  {emit(spv::Op::OpShiftRightLogical, u, {bits, u32(16)}), u32(0x40)});
    return emit(spv::Op::OpSelect, u, {emit(spv::Op::OpIsNan, b, {x}), nan, rounded});
  }
  /// The f32 register value of bf16 bits held in the low half of a u32.
  Id bf16_bits_to_f32(Id bits32) {
    return emit(spv::Op::OpBitcast, m_.type_float(32),
                {emit(spv::Op::OpShiftLeftLogical, u32_type(), {bits32, u32(16)})});
  }
  /// Rounds an f32 register to bf16 precision (the result of every rounding bf16 op). Computing
  /// +, -, *, / and sqrt in f32 and rounding once is exact rounding for bf16 (24 >= 2 * 8 + 2).
  Id round_bf16(Id x) { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }
  Id round_if_bf16(Scalar s, Id x) { return s == Scalar::BF16 ? round_bf16(x) : x; }
  /// An f64 rounded to f32 toward zero with the last bit set when inexact (round to odd), so
  /// that rounding it again to bf16 is the correct single rounding of the f64 value.
  Id f64_to_f32_odd(Id x) {
    Id f = m_.type_float(32), u = u32_type(), b = m_.type_bool();
    Id r = emit(spv::Op::OpFConvert, f, {x});
    Id back = emit(spv::Op::OpFConvert, scalar_type(Scalar::F64), {r});
    Id bits = emit(spv::Op::OpBitcast, u, {r});
    // Rounded away from zero: step one ulp back toward zero (the magnitude's bits, so -1).
    Id away = emit(spv::Op::OpFOrdGreaterThan, b,
                   {ext(GLSLstd450FAbs, scalar_type(Scalar::F64), {back}),
                    ext(GLSLstd450FAbs, scalar_type(Scalar::F64), {x})});
    bits = emit(spv::Op::OpSelect, u, {away, emit(spv::Op::OpISub, u, {bits, u32(1)}), bits});
    Id inexact = emit(spv::Op::OpFOrdNotEqual, b, {back, x});
    bits =
        emit(spv::Op::OpSelect, u, {inexact, emit(spv::Op::OpBitwiseOr, u, {bits, u32(1)}), bits});
    return emit(spv::Op::OpSelect, f,
                {emit(spv::Op::OpLogicalOr, b,
                      {emit(spv::Op::OpIsInf, b, {r}), emit(spv::Op::OpIsNan, b, {r})}),
                 r, emit(spv::Op::OpBitcast, f, {bits})});
  }

  /// A constant of scalar type `s` from its IR bit pattern (zero-extended).
  Id constant(Scalar s, uint64_t bits) {
    if (s == Scalar::Bool)
      return m_.constant_bool(bits != 0);
    if (s == Scalar::BF16) // the f32 register value
      return m_.constant(m_.type_float(32), (bits & 0xffff) << 16, 32);
    unsigned width = ir::scalar_bits(s);
    if (ir::is_signed(s) && width < 32)
      bits =
          static_cast<uint32_t>(ir::sign_extend(bits, width)); // the literal rule for narrow ints
    return m_.constant(scalar_type(s), bits, width);
  }
  /// A float constant of type `s` with the value `v` (rounded once to `s`).
  Id constant_value(Scalar s, double v) { return constant(s, ir::from_double(s, v)); }
  Id u32(uint32_t v) { return constant(Scalar::U32, v); }

  Words &body() { return blocks_[cur_].body; }

  Id emit(spv::Op op, Id type, std::initializer_list<Id> operands) {
    Id r = m_.id();
    Words ops = {type, r};
    ops.insert(ops.end(), operands.begin(), operands.end());
    append(body(), op, ops);
    return r;
  }
  void emit_void(spv::Op op, std::initializer_list<uint32_t> operands) {
    append(body(), op, operands);
  }
  Id ext(GLSLstd450 inst, Id type, std::initializer_list<Id> args) {
    Id r = m_.id();
    Words ops = {type, r, m_.glsl_std_450(), static_cast<uint32_t>(inst)};
    ops.insert(ops.end(), args.begin(), args.end());
    append(body(), spv::Op::OpExtInst, ops);
    return r;
  }
  Id no_contraction(Id r) {
    m_.decorate(r, spv::Decoration::NoContraction);
    return r;
  }

  Id new_block(Id label) {
    blocks_.push_back(Block{label, {}, {}});
    cur_ = blocks_.size() - 1;
    last_file_ = 0; // OpLine ends with its block
    return label;
  }
  Id current_label() const { return blocks_[cur_].label; }
  void branch(Id target) { emit_void(spv::Op::OpBranch, {target}); }

  void locate(const ir::Operation &op) {
    ir::Location loc = op.location();
    if (!loc.known())
      return;
    Id file = m_.string(kernel_.module()->file_name(loc.file));
    if (file == last_file_ && loc.line == last_line_ && loc.col == last_col_)
      return;
    emit_void(spv::Op::OpLine, {file, loc.line, loc.col});
    last_file_ = file;
    last_line_ = loc.line;
    last_col_ = loc.col;
  }

  const Lanes &lanes(const ir::Value *v) { return values_.at(v); }
  Id lane(const ir::Value *v, unsigned k) { return values_.at(v)[k]; }
  void bind(const ir::Value *v, Lanes ids) {
    if (!v->name().empty()) {
      for (size_t k = 0; k < ids.size(); ++k)
        if (!named_.insert(ids[k]).second)
          continue; // a value forwarded under a second name (a region argument) keeps its first
        else if (ids.size() == 1)
          m_.name(ids[k], v->name());
        else
          m_.name(ids[k], fmt::format("{}.{}", v->name(), k));
    }
    values_[v] = std::move(ids);
  }

  //===--- Lowering ---------------------------------------------------------------------===//

  void declare_parameters();
  void read_parameters();
  void declare_memory();
  void emit_region(const ir::Region &region);
  void emit_op(const ir::Operation &op);
  void emit_arith(const ir::Operation &op);
  bool emit_zero_division(const ir::Operation &op);
  void emit_conversion(const ir::Operation &op);
  void emit_memory(const ir::Operation &op);
  void emit_builtin(const ir::Operation &op);
  void emit_print(const ir::Operation &op);
  void emit_atomic(const ir::Operation &op);
  void emit_subgroup(const ir::Operation &op);
  void emit_matrix(const ir::Operation &op);
  void emit_if(const ir::Operation &op);
  void emit_for(const ir::Operation &op);
  void emit_while(const ir::Operation &op);
  void emit_terminator(const ir::Operation &op);
  /// Phis in the current block, one per lane of `types`, from `edges`; split per value.
  std::vector<Lanes> phis(std::span<const Type> types, const std::vector<Edge> &edges);
  Lanes flatten(std::span<ir::Value *const> values);
  std::vector<Lanes> split(std::span<const Type> types, const Lanes &flat);

  Id arith(Opcode opc, Scalar s, Id a, Id b);
  Id compare(Opcode opc, Scalar s, Id a, Id b);
  Id math(const ir::Operation &op, Scalar s, Id a, Id b, Id c);
  Id cast(Scalar from, Scalar to, Id x);
  Lanes bitcast(Type from, Type to, const Lanes &x);
  Id round_away(Scalar s, Id x);
  Id fma_through_f64(Id a, Id b, Id c); // f32
  Id sum_to_odd(Scalar s, Id p, Id q);
  Id half_fma_to_odd(Scalar s, Id x, Id y, Id z);
  Id int64_to_f64_odd(Scalar from, Id x); ///< x rounded to odd in f64
  Id fmod_exact(Scalar s, Id x, Id y);
  Id element_pointer(const ir::Value *memory, Id index);
  Id index_operand(const ir::Value *index, uint32_t offset);
  Id builtin_input(spv::BuiltIn builtin, bool vector3);
  Id subgroup_op(const ir::Operation &op, Scalar s, Id x);
  Id atomic(const ir::Operation &op);
};

//===--- Feature gating -----------------------------------------------------------------===//

bool Writer::check_type(const ir::Operation &op, Scalar s) {
  const char *missing = nullptr;
  switch (ir::register_scalar(s)) {
  case Scalar::I8:
  case Scalar::U8:
    missing = features_.int8 ? nullptr : "8-bit integers (shaderInt8, storageBuffer8BitAccess)";
    break;
  case Scalar::I16:
  case Scalar::U16:
    missing = features_.int16 ? nullptr : "16-bit integers (shaderInt16)";
    break;
  case Scalar::I64:
  case Scalar::U64:
    missing = features_.int64 ? nullptr : "64-bit integers (shaderInt64)";
    break;
  case Scalar::F16:
    missing = features_.float16 ? nullptr : "f16 (shaderFloat16, storageBuffer16BitAccess)";
    break;
  case Scalar::BF16: // emulated: u16 in memory, f32 in registers
    relies_on_.bfloat16 = true;
    missing = features_.bfloat16 && features_.int16 && features_.float16
                  ? nullptr
                  : "bf16 (emulated with 16-bit storage and f32 arithmetic)";
    break;
  case Scalar::F64:
    missing = features_.float64 ? nullptr : "f64 (shaderFloat64)";
    break;
  default:
    break;
  }
  if (!missing)
    return true;
  fail(&op,
       fmt::format("{} uses {}, which target '{}' does not support", where(op), missing,
                   features_.target),
       missing);
  return false;
}

bool Writer::check_features() {
  bool ok = true;
  auto unsupported = [&](const ir::Operation &op, const std::string &feature) {
    fail(&op, fmt::format("{} needs {}, which target '{}' does not support", where(op), feature,
                          features_.target));
    ok = false;
  };
  for (unsigned i = 0; i < kernel_.num_parameters(); ++i) {
    Scalar s = kernel_.parameter(i)->type().element();
    bool bf16_ok = features_.bfloat16 && features_.int16 && features_.float16;
    if ((s == Scalar::BF16 && !bf16_ok) || (s == Scalar::F16 && !features_.float16) ||
        (s == Scalar::F64 && !features_.float64)) {
      fail(nullptr,
           fmt::format("kernel '{}': parameter {} has type {}, which target '{}' does "
                       "not support",
                       kernel_.name(), i, kernel_.parameter(i)->type().str(), features_.target));
      ok = false;
    }
  }
  kernel_.walk([&](const ir::Operation *op) {
    for (unsigned i = 0; i < op->num_results(); ++i)
      ok &= check_type(*op, op->result(i)->type().element());
    Scalar s = op->num_results() ? op->result()->type().element() : Scalar::U32;
    const ir::OpInfo &info = op->info();
    if (info.signature == ir::Signature::AtomicRmw ||
        info.signature == ir::Signature::AtomicCmpXchg ||
        info.signature == ir::Signature::AtomicLoad ||
        info.signature == ir::Signature::AtomicStore) {
      Scalar e = op->operand(0)->type().element();
      unsigned bits = ir::scalar_bits(e);
      if (bits < 32) {
        unsupported(*op, fmt::format("atomics on {} ({})", ir::scalar_name(e),
                                     ir::is_float(e)
                                         ? "cubecc writes Vulkan float atomics on f32 and f64 only"
                                         : "Vulkan has 32- and 64-bit atomics only"));
      } else if (ir::is_float(e)) {
        bool add = op->opcode() == Opcode::AtomicAdd;
        bool min_max = op->opcode() == Opcode::AtomicMin || op->opcode() == Opcode::AtomicMax;
        bool load_store = op->opcode() == Opcode::AtomicLoad || op->opcode() == Opcode::AtomicStore;
        if (load_store && e == Scalar::F32) {
          if (!features_.float32_atomics)
            unsupported(*op, "atomic load/store on f32 (shaderBufferFloat32Atomics)");
        } else if (load_store && e == Scalar::F64) {
          unsupported(*op, "atomic load/store on f64 (cubecc does not enable "
                           "shaderBufferFloat64Atomics)");
        } else if (min_max) {
          if (e != Scalar::F32)
            unsupported(*op, fmt::format("atomic min/max on {} (Vulkan has them on f32 only)",
                                         ir::scalar_name(e)));
          else if (!features_.float32_atomic_min_max)
            unsupported(*op, "atomic min/max on f32 (shaderBufferFloat32AtomicMinMax, "
                             "VK_EXT_shader_atomic_float2)");
        } else if (e == Scalar::F32 && add && !features_.float32_atomic_add)
          unsupported(*op, "atomic add on f32 (shaderBufferFloat32AtomicAdd)");
        else if (e == Scalar::F32 && !add && !features_.float32_atomics)
          unsupported(*op, "atomic exchange on f32 (shaderBufferFloat32Atomics)");
        else if (e == Scalar::F64 && !(add && features_.float64_atomic_add))
          unsupported(*op, fmt::format("atomic {} on f64", add ? "add" : "exchange"));
      } else if (bits == 64 && !features_.int64_atomics) {
        unsupported(*op, "64-bit atomics (shaderBufferInt64Atomics)");
      }
    }
    if (ir::is_matrix_op(op->opcode())) {
      // The target's shapes are checked by check_target_support; what SPIR-V 1.5 cannot declare
      // is checked here: cooperative matrices of bf16 and fp8 (no such SPIR-V types).
      for (unsigned i = 0; i < op->num_operands() + op->num_results(); ++i) {
        Type t = i < op->num_operands() ? op->operand(i)->type()
                                        : op->result(i - op->num_operands())->type();
        if (t.is_matrix() && t.element() != Scalar::F16 && t.element() != Scalar::F32)
          unsupported(*op, fmt::format("a cooperative matrix of {} (SPIR-V 1.5 has no {} type)",
                                       ir::scalar_name(t.element()), ir::scalar_name(t.element())));
      }
    } else if (info.flags & ir::Subgroup) {
      Scalar operand = op->num_operands() ? op->operand(0)->type().element() : Scalar::Bool;
      unsigned bits = ir::scalar_bits(operand);
      if (operand != Scalar::Bool && operand != Scalar::BF16 && bits != 32 &&
          !features_.subgroup_extended_types)
        unsupported(*op, fmt::format("subgroup operations on {} (shaderSubgroupExtendedTypes)",
                                     ir::scalar_name(operand)));
      switch (info.signature) {
      case ir::Signature::SubgroupUnary:
        if (!features_.subgroup_arithmetic)
          unsupported(*op, "subgroup arithmetic (VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)");
        break;
      case ir::Signature::SubgroupShuffle:
        if (op->opcode() == Opcode::SubgroupBroadcast ? !features_.subgroup_ballot
                                                      : !features_.subgroup_shuffle)
          unsupported(*op, "subgroup shuffles (VK_SUBGROUP_FEATURE_SHUFFLE_BIT)");
        break;
      default:
        if (!features_.subgroup_ballot)
          unsupported(*op, "subgroup ballot and votes (VK_SUBGROUP_FEATURE_BALLOT_BIT)");
        break;
      }
    }
    if (op->opcode() == Opcode::Fma && s == Scalar::F64 && !features_.fused_fma)
      unsupported(*op, "a single-rounding f64 fma (the device computes GLSL.std.450 Fma on f64 "
                       "as a * b + c; f32 and f16 fma are emulated exactly)");
    // Subgroups must be consecutive local_index values (docs/ir.md §4.9).
    if ((info.flags & ir::Subgroup) || op->opcode() == Opcode::SubgroupId ||
        op->opcode() == Opcode::SubgroupLane || op->opcode() == Opcode::NumSubgroups) {
      auto wg = kernel_.workgroup_size();
      bool rows = wg[1] * wg[2] > 1;
      if (!features_.linear_subgroups && rows &&
          (features_.subgroup_size == 0 || wg[0] % features_.subgroup_size != 0))
        fail(op,
             fmt::format("kernel '{}' uses subgroups ('{}') with workgroup({}, {}, {}), which "
                         "target '{}' does not support: it forms subgroups along x rows, which "
                         "would not be consecutive local_index values (docs/ir.md §4.9); make "
                         "workgroup x a multiple of the subgroup size ({}) or use one row",
                         kernel_.name(), op->name(), wg[0], wg[1], wg[2], features_.target,
                         features_.subgroup_size),
             "subgroup layout");
      ok &= !rows || features_.linear_subgroups ||
            (features_.subgroup_size != 0 && wg[0] % features_.subgroup_size == 0);
      // Several rows are one subgroup's consecutive invocations only where subgroups are linear,
      // or x rows of a multiple of this subgroup size.
      if (rows && features_.linear_subgroups)
        relies_on_.linear_subgroups = true;
      else if (rows)
        relies_on_.subgroup_size = features_.subgroup_size;
    }
    // GLSL.std.450 has its transcendental functions for 16- and 32-bit floats only (rsqrt is
    // InverseSqrt, defined for f64; hypot is legalized into sqrt and division).
    if (op->has_flag(ir::Approximate) && s == Scalar::F64 && op->opcode() != Opcode::Rsqrt &&
        op->opcode() != Opcode::Hypot)
      unsupported(*op, fmt::format("'{}' on f64 (GLSL.std.450 defines it for 16- and 32-bit "
                                   "floats only; compute in f32 with an explicit cast)",
                                   op->name()));
  });
  abi_.param_block_in_buffer = abi_.param_block_bytes > features_.max_param_block_bytes;
  return ok;
}

//===--- Parameters, memory, builtins ----------------------------------------------------===//

void Writer::declare_parameters() {
  // Value parameters: one push-constant block, one member per lane (4 or 8 bytes, see
  // kernel_abi.h), read at the start of the kernel and again after barriers (read_parameters).
  Words members;
  std::vector<std::pair<unsigned, unsigned>> member_of; // (parameter, lane) per member
  for (unsigned i = 0; i < kernel_.num_parameters(); ++i) {
    const ParamSlot &slot = abi_.params[i];
    if (slot.kind != ParamSlot::Value)
      continue;
    for (unsigned k = 0; k < slot.type.lanes(); ++k) {
      members.push_back(uint_type(slot.lane_bytes * 8));
      member_of.emplace_back(i, k);
    }
  }
  // Push constants, or a read-only storage buffer after the kernel's own buffers when the block
  // exceeds the target's push-constant limit.
  Id block_var = 0;
  spv::StorageClass block_storage = abi_.param_block_in_buffer ? spv::StorageClass::StorageBuffer
                                                               : spv::StorageClass::PushConstant;
  if (!members.empty()) {
    Id block = m_.type_struct(members);
    m_.decorate(block, spv::Decoration::Block);
    m_.name(block, "Parameters");
    for (uint32_t j = 0; j < members.size(); ++j) {
      auto [i, k] = member_of[j];
      const ParamSlot &slot = abi_.params[i];
      m_.member_decorate(block, j, spv::Decoration::Offset, {slot.offset + k * slot.lane_bytes});
      if (abi_.param_block_in_buffer)
        m_.member_decorate(block, j, spv::Decoration::NonWritable);
      std::string name = kernel_.parameter(i)->name();
      if (name.empty())
        name = fmt::format("p{}", i);
      m_.member_name(block, j, slot.type.lanes() == 1 ? name : fmt::format("{}.{}", name, k));
    }
    block_var = m_.global_variable(m_.type_pointer(block_storage, block), block_storage);
    if (abi_.param_block_in_buffer) {
      m_.decorate(block_var, spv::Decoration::DescriptorSet, {0});
      m_.decorate(block_var, spv::Decoration::Binding, {abi_.num_buffers});
    }
    m_.name(block_var, "parameters");
    interface_.push_back(block_var);
  }

  param_block_var_ = block_var;
  param_storage_ = block_storage;
  param_members_ = members;
  for (uint32_t j = 0; j < members.size(); ++j) {
    const ir::Value *param = kernel_.parameter(member_of[j].first);
    if (value_params_.empty() || value_params_.back().first != param)
      value_params_.emplace_back(param, std::vector<uint32_t>{});
    value_params_.back().second.push_back(j);
  }

  for (unsigned i = 0; i < kernel_.num_parameters(); ++i) {
    const ir::Value *param = kernel_.parameter(i);
    const ParamSlot &slot = abi_.params[i];
    std::string name = param->name().empty() ? fmt::format("p{}", i) : param->name();
    if (slot.kind == ParamSlot::Value)
      continue; // read_parameters
    // A storage buffer: a Block struct holding a runtime array, one struct type per buffer so
    // that its access decoration is its own.
    Scalar e = slot.type.element();
    unsigned bytes = ir::scalar_bits(e) / 8;
    if (bytes == 1)
      m_.capability(spv::Capability::StorageBuffer8BitAccess);
    else if (bytes == 2)
      m_.capability(spv::Capability::StorageBuffer16BitAccess);
    Id array = m_.type_runtime_array(storage_type(e), bytes);
    Id block = m_.type_struct({array});
    m_.decorate(block, spv::Decoration::Block);
    m_.member_decorate(block, 0, spv::Decoration::Offset, {0});
    if (slot.type.access() == ir::Access::Read)
      m_.member_decorate(block, 0, spv::Decoration::NonWritable);
    else if (slot.type.access() == ir::Access::Write)
      m_.member_decorate(block, 0, spv::Decoration::NonReadable);
    m_.name(block, name + "_buffer");
    m_.member_name(block, 0, "data");
    Id var = m_.global_variable(m_.type_pointer(spv::StorageClass::StorageBuffer, block),
                                spv::StorageClass::StorageBuffer);
    m_.decorate(var, spv::Decoration::DescriptorSet, {0});
    m_.decorate(var, spv::Decoration::Binding, {slot.binding});
    m_.name(var, name);
    interface_.push_back(var);
    memory_[param] = MemoryObject{var, spv::StorageClass::StorageBuffer};
  }
}

void Writer::read_parameters() {
  // At the kernel's start, and again after each barrier at the kernel's top level (and each
  // top-level construct holding one): a value read before a barrier and used after it is live
  // across it, and lavapipe saves and restores each such value at each barrier (transpose ran at
  // 1.06 of its GLSL twin with one read at the top, 0.87 so). Not after a barrier nested in a
  // branch or loop: a read there is a masked one on lavapipe, slower than the saved value
  // (softmax 1.06 against 1.02).
  for (const auto &[param, members] : value_params_) {
    Scalar s = param->type().element();
    unsigned bits = ir::scalar_bits(s);
    Lanes lanes;
    for (uint32_t j : members) {
      Id member_type = param_members_[j];
      Id pointer = emit(spv::Op::OpAccessChain, m_.type_pointer(param_storage_, member_type),
                        {param_block_var_, u32(j)});
      Id raw = emit(spv::Op::OpLoad, member_type, {pointer});
      Id v;
      if (s == Scalar::Bool)
        v = emit(spv::Op::OpINotEqual, m_.type_bool(), {raw, u32(0)});
      else if (s == Scalar::BF16)
        v = bf16_bits_to_f32(raw);
      else if (bits < 32) // f16 as its bits; a storage float is its byte (legalized IR)
        v = cast(Scalar::U32, s == Scalar::F16 ? Scalar::U16 : ir::register_scalar(s), raw);
      else
        v = raw;
      if (s == Scalar::F16 || ((bits == 32 || bits == 64) && s != Scalar::U32 && s != Scalar::U64))
        v = emit(spv::Op::OpBitcast, scalar_type(s), {v});
      // (bf16 is already its f32 register value)
      lanes.push_back(v);
    }
    bind(param, std::move(lanes));
  }
}

Id Writer::builtin_input(spv::BuiltIn builtin, bool vector3) {
  static_assert(sizeof(spv::BuiltIn) == 4);
  Id type = vector3 ? m_.type_vector(u32_type(), 3) : u32_type();
  Id &var = builtins_[static_cast<uint32_t>(builtin)];
  if (!var) {
    var = m_.global_variable(m_.type_pointer(spv::StorageClass::Input, type),
                             spv::StorageClass::Input);
    m_.decorate(var, spv::Decoration::BuiltIn, {static_cast<uint32_t>(builtin)});
    interface_.push_back(var);
  }
  return emit(spv::Op::OpLoad, type, {var});
}

Id Writer::index_operand(const ir::Value *index, uint32_t offset) {
  Scalar s = index->type().element();
  Id id = lane(index, 0);
  if (ir::scalar_bits(s) < 32) {
    s = ir::is_signed(s) ? Scalar::I32 : Scalar::U32;
    id = cast(index->type().element(), s, id);
  }
  if (offset)
    id = emit(spv::Op::OpIAdd, scalar_type(s), {id, constant(s, offset)});
  return id;
}

Id Writer::element_pointer(const ir::Value *memory, Id index) {
  const MemoryObject &object = memory_.at(memory);
  Id pointer_type = m_.type_pointer(object.storage, storage_type(memory->type().element()));
  if (object.storage == spv::StorageClass::StorageBuffer)
    return emit(spv::Op::OpAccessChain, pointer_type, {object.variable, u32(0), index});
  return emit(spv::Op::OpAccessChain, pointer_type, {object.variable, index});
}

//===--- Scalar semantics ------------------------------------------------------------------===//

Id Writer::arith(Opcode opc, Scalar s, Id a, Id b) {
  if (s == Scalar::BF16) { // f32 arithmetic, rounded once to bf16 where it rounds
    Id r = arith(opc, Scalar::F32, a, b);
    bool exact = opc == Opcode::Min || opc == Opcode::Max;
    return exact ? r : round_bf16(r);
  }
  Id t = scalar_type(s);
  bool f = ir::is_float(s), sg = ir::is_signed(s), boolean = s == Scalar::Bool;
  switch (opc) {
  case Opcode::Add:
    return f ? no_contraction(emit(spv::Op::OpFAdd, t, {a, b})) : emit(spv::Op::OpIAdd, t, {a, b});
  case Opcode::Sub:
    return f ? no_contraction(emit(spv::Op::OpFSub, t, {a, b})) : emit(spv::Op::OpISub, t, {a, b});
  case Opcode::Mul:
    return f ? no_contraction(emit(spv::Op::OpFMul, t, {a, b})) : emit(spv::Op::OpIMul, t, {a, b});
  case Opcode::Div:
    return emit(f ? spv::Op::OpFDiv : sg ? spv::Op::OpSDiv : spv::Op::OpUDiv, t, {a, b});
  case Opcode::Rem:
    if (f && features_.int64) // OpFRem is x - y * trunc(x / y), inexact: C's fmod is exact
      return s == Scalar::F16
                 ? emit(spv::Op::OpFConvert, t,
                        {fmod_exact(Scalar::F32, cast(s, Scalar::F32, a), cast(s, Scalar::F32, b))})
                 : fmod_exact(s, a, b);
    return emit(f ? spv::Op::OpFRem : sg ? spv::Op::OpSRem : spv::Op::OpUMod, t, {a, b});
  case Opcode::Min:
    return ext(f ? GLSLstd450NMin : sg ? GLSLstd450SMin : GLSLstd450UMin, t, {a, b});
  case Opcode::Max:
    return ext(f ? GLSLstd450NMax : sg ? GLSLstd450SMax : GLSLstd450UMax, t, {a, b});
  case Opcode::And:
    return emit(boolean ? spv::Op::OpLogicalAnd : spv::Op::OpBitwiseAnd, t, {a, b});
  case Opcode::Or:
    return emit(boolean ? spv::Op::OpLogicalOr : spv::Op::OpBitwiseOr, t, {a, b});
  case Opcode::Xor:
    return emit(boolean ? spv::Op::OpLogicalNotEqual : spv::Op::OpBitwiseXor, t, {a, b});
  case Opcode::Shl:
    return emit(spv::Op::OpShiftLeftLogical, t, {a, b});
  case Opcode::Shr:
    return emit(sg ? spv::Op::OpShiftRightArithmetic : spv::Op::OpShiftRightLogical, t, {a, b});
  default:
    throw std::logic_error("arith: not a binary arithmetic op");
  }
}

Id Writer::compare(Opcode opc, Scalar s, Id a, Id b) {
  Id t = m_.type_bool();
  bool f = ir::is_float(s), sg = ir::is_signed(s);
  if (s == Scalar::Bool)
    return emit(opc == Opcode::Eq ? spv::Op::OpLogicalEqual : spv::Op::OpLogicalNotEqual, t,
                {a, b});
  spv::Op op;
  switch (opc) {
  case Opcode::Eq:
    op = f ? spv::Op::OpFOrdEqual : spv::Op::OpIEqual;
    break;
  case Opcode::Ne:
    op = f ? spv::Op::OpFUnordNotEqual : spv::Op::OpINotEqual;
    break;
  case Opcode::Lt:
    op = f ? spv::Op::OpFOrdLessThan : sg ? spv::Op::OpSLessThan : spv::Op::OpULessThan;
    break;
  case Opcode::Le:
    op = f    ? spv::Op::OpFOrdLessThanEqual
         : sg ? spv::Op::OpSLessThanEqual
              : spv::Op::OpULessThanEqual;
    break;
  case Opcode::Gt:
    op = f ? spv::Op::OpFOrdGreaterThan : sg ? spv::Op::OpSGreaterThan : spv::Op::OpUGreaterThan;
    break;
  case Opcode::Ge:
    op = f    ? spv::Op::OpFOrdGreaterThanEqual
         : sg ? spv::Op::OpSGreaterThanEqual
              : spv::Op::OpUGreaterThanEqual;
    break;
  default:
    throw std::logic_error("compare: not a comparison");
  }
  return emit(op, t, {a, b});
}

Id Writer::cast(Scalar from, Scalar to, Id x) {
  if (from == to)
    return x;
  if (from == Scalar::BF16) // the f32 register holds the value exactly
    return cast(Scalar::F32, to, x);
  if (to == Scalar::BF16) {
    if (to == from || from == Scalar::Bool)
      return from == Scalar::Bool ? cast(Scalar::Bool, Scalar::F32, x) : x;
    if (from == Scalar::F32 || from == Scalar::F16 || ir::scalar_bits(from) <= 16)
      return round_bf16(cast(from, Scalar::F32, x)); // exact in f32, rounded once
    // f64 and 32/64-bit integers: through f64 (64-bit integers rounded to odd there), rounded to
    // odd in f32, then to bf16: one rounding in effect.
    if (!features_.float64)
      return round_bf16(cast(from, Scalar::F32, x));
    Id wide = ir::scalar_bits(from) == 64 && ir::is_integer(from) ? int64_to_f64_odd(from, x)
                                                                  : cast(from, Scalar::F64, x);
    return round_bf16(f64_to_f32_odd(wide));
  }
  Id t = scalar_type(to);
  unsigned fb = ir::scalar_bits(from), tb = ir::scalar_bits(to);
  Id b = m_.type_bool();
  if (to == Scalar::Bool)
    return emit(ir::is_float(from) ? spv::Op::OpFUnordNotEqual : spv::Op::OpINotEqual, b,
                {x, constant(from, 0)});
  if (from == Scalar::Bool)
    return emit(spv::Op::OpSelect, t,
                {x, ir::is_float(to) ? constant_value(to, 1) : constant(to, 1), constant(to, 0)});
  if (ir::is_integer(from) && ir::is_integer(to)) {
    if (fb == tb)
      return emit(spv::Op::OpBitcast, t, {x});
    Id r;
    if (tb > fb && ir::is_signed(from))
      r = emit(spv::Op::OpSConvert, uint_type(tb), {x});
    else
      r = emit(spv::Op::OpUConvert, uint_type(tb), {x});
    return ir::is_signed(to) ? emit(spv::Op::OpBitcast, t, {r}) : r;
  }
  if (ir::is_integer(from))
    return emit(ir::is_signed(from) ? spv::Op::OpConvertSToF : spv::Op::OpConvertUToF, t, {x});
  if (ir::is_float(to))
    return emit(spv::Op::OpFConvert, t, {x});
  // Float to integer: legalization made the operand one that converts without saturating.
  return emit(ir::is_signed(to) ? spv::Op::OpConvertFToS : spv::Op::OpConvertFToU, t, {x});
}

/// NonSemantic.DebugPrintf's DebugPrintf (instruction 1): the format as an OpString, then the
/// values, each converted to the 32-bit (or 64-bit integer) type its conversion reads. Devices
/// ignore it unless a debug-printf layer is enabled (docs/spirv.md).
void Writer::emit_print(const ir::Operation &op) {
  const ir::PrintFormat format = ir::print_format_of(op);
  Id r = m_.id();
  Words ops = {m_.type_void(), r, m_.debug_printf(), 1, m_.string(format.printf_string(true))};
  for (const ir::PrintArgument &a : format.args) {
    Id x = lane(op.operand(a.operand), a.lane);
    Scalar to = ir::is_float(a.type)                                ? Scalar::F32
                : ir::scalar_bits(a.type) == 64                     ? a.type
                : ir::print_class(a.type) == ir::PrintClass::Signed ? Scalar::I32
                                                                    : Scalar::U32;
    ops.push_back(to == a.type ? x : cast(a.type, to, x));
  }
  append(body(), spv::Op::OpExtInst, ops);
}

Lanes Writer::bitcast(Type from, Type to, const Lanes &x) {
  if (from.element() == Scalar::BF16 || to.element() == Scalar::BF16) {
    // bf16 takes part as its 16 bits (u16).
    Lanes bits = x;
    if (from.element() == Scalar::BF16) {
      for (Id &l : bits)
        l = emit(spv::Op::OpUConvert, uint_type(16),
                 {emit(spv::Op::OpShiftRightLogical, u32_type(),
                       {emit(spv::Op::OpBitcast, u32_type(), {l}), u32(16)})});
      from = from.with_element(Scalar::U16);
    }
    if (to.element() != Scalar::BF16)
      return bitcast(from, to, bits);
    Lanes out = bitcast(from, to.with_element(Scalar::U16), bits);
    for (Id &l : out)
      l = bf16_bits_to_f32(emit(spv::Op::OpUConvert, u32_type(), {l}));
    return out;
  }
  Lanes out;
  Id t = scalar_type(to.element()), f = scalar_type(from.element());
  if (from.lanes() == to.lanes()) {
    for (Id lane : x) // a storage float and u8 share their SPIR-V type: nothing to do
      out.push_back(t == f ? lane : emit(spv::Op::OpBitcast, t, {lane}));
    return out;
  }
  // Different lane widths: through unsigned integers, lane 0 in the least significant bits.
  unsigned sb = ir::scalar_bits(from.element()), tb = ir::scalar_bits(to.element());
  Lanes src;
  for (Id lane : x)
    src.push_back(f == uint_type(sb) ? lane : emit(spv::Op::OpBitcast, uint_type(sb), {lane}));
  auto finish = [&](Id u) { return t == uint_type(tb) ? u : emit(spv::Op::OpBitcast, t, {u}); };
  if (sb < tb) {
    unsigned ratio = tb / sb;
    for (unsigned j = 0; j < to.lanes(); ++j) {
      Id acc = 0;
      for (unsigned i = 0; i < ratio; ++i) {
        Id part = emit(spv::Op::OpUConvert, uint_type(tb), {src[j * ratio + i]});
        if (i)
          part = emit(spv::Op::OpShiftLeftLogical, uint_type(tb),
                      {part, constant(tb == 64 ? Scalar::U64 : Scalar::U32, i * sb)});
        acc = acc ? emit(spv::Op::OpBitwiseOr, uint_type(tb), {acc, part}) : part;
      }
      out.push_back(finish(acc));
    }
  } else {
    unsigned ratio = sb / tb;
    Scalar shift_type = sb == 64 ? Scalar::U64 : Scalar::U32;
    for (Id s : src)
      for (unsigned p = 0; p < ratio; ++p) {
        Id shifted =
            p ? emit(spv::Op::OpShiftRightLogical, uint_type(sb), {s, constant(shift_type, p * tb)})
              : s;
        out.push_back(finish(emit(spv::Op::OpUConvert, uint_type(tb), {shifted})));
      }
  }
  return out;
}

Id Writer::round_away(Scalar s, Id x) {
  // trunc(x) + sign(x) when the dropped fraction is at least one half: halfway cases away from
  // zero (C round), not GLSL Round's implementation-chosen direction.
  Id t = scalar_type(s), b = m_.type_bool();
  Id whole = ext(GLSLstd450Trunc, t, {x});
  Id fraction = ext(GLSLstd450FAbs, t, {emit(spv::Op::OpFSub, t, {x, whole})});
  Id up = emit(spv::Op::OpFOrdGreaterThanEqual, b, {fraction, constant_value(s, 0.5)});
  Id away = emit(spv::Op::OpFAdd, t, {whole, ext(GLSLstd450FSign, t, {x})});
  return emit(spv::Op::OpSelect, t, {up, away, whole});
}

Id Writer::fmod_exact(Scalar s, Id x, Id y) {
  // C's fmod, exactly, for f32 and f64: with |x| = mx * 2^ex and |y| = my * 2^ey (integer
  // significands, subnormals included), fmod(|x|, |y|) = ((mx * 2^(ex - ey)) mod my) * 2^ey,
  // computed by a loop that shifts the running remainder left by at most 64 - p bits and
  // reduces it mod my each time (f32: at most 7 iterations, f64: at most 191). The result is
  // exact (it is representable) and has the sign of x.
  bool f64 = s == Scalar::F64;
  unsigned p = f64 ? 53 : 24, mantissa = p - 1, exponent_mask = f64 ? 0x7ff : 0xff;
  Id t = scalar_type(s), u = uint_type(64), i = scalar_type(Scalar::I32), u32t = u32_type(),
     b = m_.type_bool();
  Id width_type = uint_type(f64 ? 64 : 32);
  auto c64 = [&](uint64_t v) { return constant(Scalar::U64, v); };
  // The integer significand (as u64) and the biased exponent (as u32, 1 for subnormals).
  auto split = [&](Id v) {
    Id bits = emit(spv::Op::OpBitcast, width_type, {ext(GLSLstd450FAbs, t, {v})});
    Id bits64 = f64 ? bits : emit(spv::Op::OpUConvert, u, {bits});
    Id field =
        emit(spv::Op::OpBitwiseAnd, u,
             {emit(spv::Op::OpShiftRightLogical, u, {bits64, c64(mantissa)}), c64(exponent_mask)});
    Id fraction = emit(spv::Op::OpBitwiseAnd, u, {bits64, c64((uint64_t(1) << mantissa) - 1)});
    Id normal = emit(spv::Op::OpINotEqual, b, {field, c64(0)});
    Id significand =
        emit(spv::Op::OpSelect, u,
             {normal, emit(spv::Op::OpBitwiseOr, u, {fraction, c64(uint64_t(1) << mantissa)}),
              fraction});
    Id biased = emit(spv::Op::OpSelect, u, {normal, field, c64(1)});
    return std::pair{significand, emit(spv::Op::OpUConvert, u32t, {biased})};
  };
  auto [mx, ex] = split(x);
  auto [my, ey] = split(y);
  Id ax = ext(GLSLstd450FAbs, t, {x}), ay = ext(GLSLstd450FAbs, t, {y});
  Id my_safe = emit(spv::Op::OpSelect, u, {emit(spv::Op::OpIEqual, b, {my, c64(0)}), c64(1), my});
  Id shifts = emit(
      spv::Op::OpSelect, u32t,
      {emit(spv::Op::OpUGreaterThan, b, {ex, ey}), emit(spv::Op::OpISub, u32t, {ex, ey}), u32(0)});
  Id start = emit(spv::Op::OpUMod, u, {mx, my_safe});

  // while (shifts > 0) { k = min(shifts, 64 - p); m = (m << k) mod my; shifts -= k; }
  Id preheader = current_label();
  Id header = m_.id(), body_label = m_.id(), cont = m_.id(), merge = m_.id();
  branch(header);
  new_block(header);
  size_t header_block = cur_;
  Id m = m_.id(), left = m_.id();
  Id more = emit(spv::Op::OpUGreaterThan, b, {left, u32(0)});
  emit_void(spv::Op::OpLoopMerge,
            {merge, cont, static_cast<uint32_t>(spv::LoopControlMask::MaskNone)});
  emit_void(spv::Op::OpBranchConditional, {more, body_label, merge});
  new_block(body_label);
  Id k = ext(GLSLstd450UMin, u32t, {left, u32(64 - p)});
  Id next_m =
      emit(spv::Op::OpUMod, u,
           {emit(spv::Op::OpShiftLeftLogical, u, {m, emit(spv::Op::OpUConvert, u, {k})}), my_safe});
  Id next_left = emit(spv::Op::OpISub, u32t, {left, k});
  branch(cont);
  new_block(cont);
  branch(header);
  append(blocks_[header_block].phis, spv::Op::OpPhi, {u, m, start, preheader, next_m, cont});
  append(blocks_[header_block].phis, spv::Op::OpPhi,
         {u32t, left, shifts, preheader, next_left, cont});
  new_block(merge);

  // m * 2^(ey - bias - mantissa), exact; with x's sign.
  int bias = f64 ? 1023 : 127;
  Id scale =
      emit(spv::Op::OpISub, i,
           {emit(spv::Op::OpBitcast, i, {ey}),
            constant(Scalar::I32, static_cast<uint32_t>(bias + static_cast<int>(mantissa)))});
  Id magnitude = ext(GLSLstd450Ldexp, t, {emit(spv::Op::OpConvertUToF, t, {m}), scale});
  Id result = emit(spv::Op::OpSelect, t,
                   {emit(spv::Op::OpFOrdLessThan, b, {x, constant(s, 0)}),
                    emit(spv::Op::OpFNegate, t, {magnitude}), magnitude});
  // |x| < |y| (y infinite included): x itself. NaN operands, infinite x or zero y: NaN.
  result = emit(spv::Op::OpSelect, t, {emit(spv::Op::OpFOrdLessThan, b, {ax, ay}), x, result});
  Id invalid = emit(spv::Op::OpLogicalOr, b,
                    {emit(spv::Op::OpLogicalOr, b,
                          {emit(spv::Op::OpIsNan, b, {x}), emit(spv::Op::OpIsNan, b, {y})}),
                     emit(spv::Op::OpLogicalOr, b,
                          {emit(spv::Op::OpIsInf, b, {x}),
                           emit(spv::Op::OpFOrdEqual, b, {ay, constant(s, 0)})})});
  return emit(spv::Op::OpSelect, t,
              {invalid, constant(s, ir::from_double(s, std::nan(""))), result});
}

Id Writer::fma_through_f64(Id a, Id b, Id c) {
  // a * b is exact in f64 (at most 48 significant bits); a * b + c rounded to f64 and then to
  // f32 is the correctly rounded fma except when the f64 result falls exactly halfway between two
  // floats without being exact: then its last bit is moved toward the exact result (the
  // rounding-to-odd fix, as in musl's fmaf). Every f64 operation is NoContraction: fusing them
  // again would break the exactness this relies on. The fix is rare (one sum in 2^29 for f32
  // lands halfway), so it sits behind a branch that is not flattened: lavapipe skips a branch no
  // lane takes, and the common path is a multiply, an add and one compare (about 1.25x faster
  // than the same fix computed on every lane, bench/vulkan_vs_glsl).
  Id d = scalar_type(Scalar::F64), u = uint_type(64), b1 = m_.type_bool();
  unsigned dropped = 52 - 23; // mantissa bits f32 does not keep
  auto nc = [&](spv::Op op, Id p, Id q) { return no_contraction(emit(op, d, {p, q})); };
  Id x = emit(spv::Op::OpFConvert, d, {a}), y = emit(spv::Op::OpFConvert, d, {b}),
     z = emit(spv::Op::OpFConvert, d, {c});
  Id xy = nc(spv::Op::OpFMul, x, y);
  Id r = nc(spv::Op::OpFAdd, xy, z);
  Id bits = emit(spv::Op::OpBitcast, u, {r});
  Id low =
      emit(spv::Op::OpBitwiseAnd, u, {bits, constant(Scalar::U64, (uint64_t(1) << dropped) - 1)});
  Id halfway =
      emit(spv::Op::OpIEqual, b1, {low, constant(Scalar::U64, uint64_t(1) << (dropped - 1))});
  Id common = current_label(), fix_label = m_.id(), merge = m_.id();
  emit_void(spv::Op::OpSelectionMerge,
            {merge, static_cast<uint32_t>(spv::SelectionControlMask::DontFlatten)});
  emit_void(spv::Op::OpBranchConditional, {halfway, fix_label, merge});
  new_block(fix_label);
  Id exact = emit(spv::Op::OpLogicalAnd, b1,
                  {emit(spv::Op::OpFOrdEqual, b1, {nc(spv::Op::OpFSub, r, xy), z}),
                   emit(spv::Op::OpFOrdEqual, b1, {nc(spv::Op::OpFSub, r, z), xy})});
  Id special = emit(spv::Op::OpLogicalOr, b1,
                    {emit(spv::Op::OpIsNan, b1, {r}), emit(spv::Op::OpIsInf, b1, {r})});
  Id negative = emit(spv::Op::OpINotEqual, b1,
                     {emit(spv::Op::OpShiftRightLogical, u, {bits, constant(Scalar::U64, 63)}),
                      constant(Scalar::U64, 0)});
  // The error r - exact, computed exactly: the sign says which way to move.
  Id z_above = emit(spv::Op::OpFOrdGreaterThan, b1, {z, xy});
  Id err = emit(spv::Op::OpSelect, d,
                {emit(spv::Op::OpLogicalEqual, b1, {negative, z_above}),
                 nc(spv::Op::OpFAdd, nc(spv::Op::OpFSub, xy, r), z),
                 nc(spv::Op::OpFAdd, nc(spv::Op::OpFSub, z, r), xy)});
  Id up =
      emit(spv::Op::OpLogicalEqual, b1,
           {negative, emit(spv::Op::OpFOrdLessThan, b1, {err, constant_value(Scalar::F64, 0)})});
  Id moved = emit(spv::Op::OpSelect, u,
                  {up, emit(spv::Op::OpIAdd, u, {bits, constant(Scalar::U64, 1)}),
                   emit(spv::Op::OpISub, u, {bits, constant(Scalar::U64, 1)})});
  Id fixed = emit(
      spv::Op::OpSelect, d,
      {emit(spv::Op::OpLogicalOr, b1, {exact, special}), r, emit(spv::Op::OpBitcast, d, {moved})});
  Id fixed_label = current_label();
  branch(merge);
  new_block(merge);
  Id result = m_.id();
  append(blocks_[cur_].phis, spv::Op::OpPhi, {d, result, r, common, fixed, fixed_label});
  return emit(spv::Op::OpFConvert, scalar_type(Scalar::F32), {result});
}

Id Writer::sum_to_odd(Scalar s, Id p, Id q) {
  // TwoSum: the error of the rounded sum, exactly (no contraction). An inexact sum with an even
  // last bit moves one unit in the last place toward the exact sum; an infinite or NaN sum has
  // a NaN error (unordered: kept).
  unsigned w = ir::scalar_bits(s);
  Scalar us = w == 64 ? Scalar::U64 : Scalar::U32;
  Id t = scalar_type(s), u = uint_type(w), b1 = m_.type_bool();
  auto nc = [&](spv::Op op, Id l, Id r) { return no_contraction(emit(op, t, {l, r})); };
  Id r = nc(spv::Op::OpFAdd, p, q);
  Id q_part = nc(spv::Op::OpFSub, r, p);
  Id p_part = nc(spv::Op::OpFSub, r, q_part);
  Id p_err = nc(spv::Op::OpFSub, p, p_part);
  Id q_err = nc(spv::Op::OpFSub, q, q_part);
  Id err = nc(spv::Op::OpFAdd, p_err, q_err);
  Id bits = emit(spv::Op::OpBitcast, u, {r});
  Id one = constant(us, 1), zero = constant(us, 0);
  Id move =
      emit(spv::Op::OpLogicalAnd, b1,
           {emit(spv::Op::OpFOrdNotEqual, b1, {err, constant_value(s, 0)}),
            emit(spv::Op::OpIEqual, b1, {emit(spv::Op::OpBitwiseAnd, u, {bits, one}), zero})});
  Id same_sign =
      emit(spv::Op::OpIEqual, b1,
           {emit(spv::Op::OpShiftRightLogical, u,
                 {emit(spv::Op::OpBitwiseXor, u, {bits, emit(spv::Op::OpBitcast, u, {err})}),
                  constant(us, w - 1)}),
            zero});
  Id moved = emit(
      spv::Op::OpSelect, u,
      {same_sign, emit(spv::Op::OpIAdd, u, {bits, one}), emit(spv::Op::OpISub, u, {bits, one})});
  return emit(spv::Op::OpBitcast, t, {emit(spv::Op::OpSelect, u, {move, moved, bits})});
}

Id Writer::int64_to_f64_odd(Scalar from, Id x) {
  // |x| as two 32-bit halves, each exact in f64 (the high one scaled by 2^32, exactly); their sum
  // rounded to odd (sum_to_odd), then the sign. Converting x to f64 directly rounds to nearest,
  // which can land on a bf16 halfway point: 2^60 + 2^52 + 1.
  Id u64 = uint_type(64), u32 = u32_type(), d = scalar_type(Scalar::F64), b1 = m_.type_bool();
  bool is_signed = ir::is_signed(from);
  Id bits = is_signed ? emit(spv::Op::OpBitcast, u64, {x}) : x;
  Id negative = 0;
  if (is_signed) {
    negative = emit(spv::Op::OpSLessThan, b1, {x, constant(from, 0)});
    bits = emit(spv::Op::OpSelect, u64,
                {negative, emit(spv::Op::OpISub, u64, {constant(Scalar::U64, 0), bits}), bits});
  }
  Id hi = emit(spv::Op::OpUConvert, u32,
               {emit(spv::Op::OpShiftRightLogical, u64, {bits, constant(Scalar::U64, 32)})});
  Id lo = emit(spv::Op::OpUConvert, u32, {bits});
  Id high = no_contraction(
      emit(spv::Op::OpFMul, d,
           {emit(spv::Op::OpConvertUToF, d, {hi}), constant_value(Scalar::F64, 4294967296.0)}));
  Id low = emit(spv::Op::OpConvertUToF, d, {lo});
  Id r = sum_to_odd(Scalar::F64, high, low);
  return is_signed ? emit(spv::Op::OpSelect, d, {negative, emit(spv::Op::OpFNegate, d, {r}), r})
                   : r;
}

Id Writer::half_fma_to_odd(Scalar s, Id x, Id y, Id z) {
  // x * y + z for f16 or bf16 values held in f32, rounded to odd in f32: rounding that to the
  // narrow type to nearest is one correct rounding of the exact result. Rounding to nearest in
  // f32 first would not be: (32 + 2^-5)(32 - 2^-6) + 9 * 2^-14 in f16, or a bf16 product that is
  // itself a halfway point plus a much smaller addend. An f16 product is exact in f32 (at most
  // 22 significant bits, well inside f32's range), so is the error of the f32 sum; a bf16
  // product may leave f32's range, so it is formed in f64 where the device has it (then rounded
  // to odd again, into f32) and in f32 (exact unless the product over- or underflows) elsewhere.
  Scalar w = s == Scalar::BF16 && features_.float64 ? Scalar::F64 : Scalar::F32;
  if (w == Scalar::F64) {
    Id d = scalar_type(Scalar::F64);
    x = emit(spv::Op::OpFConvert, d, {x});
    y = emit(spv::Op::OpFConvert, d, {y});
    z = emit(spv::Op::OpFConvert, d, {z});
  }
  Id xy = no_contraction(emit(spv::Op::OpFMul, scalar_type(w), {x, y}));
  Id r = sum_to_odd(w, xy, z);
  return w == Scalar::F64 ? f64_to_f32_odd(r) : r;
}

Id Writer::math(const ir::Operation &op, Scalar s, Id a, Id b, Id c) {
  if (s == Scalar::BF16) {
    // In f32, rounded once to bf16 (floor, ceil and round of a bf16 value are bf16 values); fma
    // rounded to odd in f32 first (even a fused f32 fma rounds twice on the way to bf16).
    if (op.opcode() == Opcode::Fma)
      return round_bf16(half_fma_to_odd(Scalar::BF16, a, b, c));
    Id r = math(op, Scalar::F32, a, b, c);
    bool exact = op.opcode() == Opcode::Floor || op.opcode() == Opcode::Ceil ||
                 op.opcode() == Opcode::Round || op.opcode() == Opcode::Trunc;
    return exact ? r : round_bf16(r);
  }
  Id t = scalar_type(s);
  switch (op.opcode()) {
  case Opcode::Sqrt:
    return ext(GLSLstd450Sqrt, t, {a});
  case Opcode::Rsqrt:
    return ext(GLSLstd450InverseSqrt, t, {a});
  case Opcode::Exp:
    return ext(GLSLstd450Exp, t, {a});
  case Opcode::Exp2:
    return ext(GLSLstd450Exp2, t, {a});
  case Opcode::Log:
    return ext(GLSLstd450Log, t, {a});
  case Opcode::Log2:
    return ext(GLSLstd450Log2, t, {a});
  case Opcode::Sin:
    return ext(GLSLstd450Sin, t, {a});
  case Opcode::Cos:
    return ext(GLSLstd450Cos, t, {a});
  case Opcode::Tanh: {
    // Cephes' tanhf: an odd polynomial below 0.625 (where exp-based formulas cancel), else
    // 1 - 2 / (exp(2|x|) + 1) with the sign of x. Implementations' Tanh is often exp-based.
    Id bt = m_.type_bool();
    auto cst = [&](double v) { return constant_value(s, v); };
    auto add = [&](Id p, Id q) { return emit(spv::Op::OpFAdd, t, {p, q}); };
    auto mul = [&](Id p, Id q) { return emit(spv::Op::OpFMul, t, {p, q}); };
    Id ax = ext(GLSLstd450FAbs, t, {a});
    Id z = mul(a, a);
    Id p = cst(-5.70498872745e-3);
    for (double k : {2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1})
      p = add(mul(p, z), cst(k));
    Id small = add(mul(mul(p, z), a), a);
    Id e = ext(GLSLstd450Exp, t, {mul(ax, cst(2))});
    Id large =
        emit(spv::Op::OpFSub, t, {cst(1), emit(spv::Op::OpFDiv, t, {cst(2), add(e, cst(1))})});
    large = mul(large, ext(GLSLstd450FSign, t, {a}));
    return emit(spv::Op::OpSelect, t,
                {emit(spv::Op::OpFOrdGreaterThan, bt, {ax, cst(0.625)}), large, small});
  }
  case Opcode::Floor:
    return ext(GLSLstd450Floor, t, {a});
  case Opcode::Ceil:
    return ext(GLSLstd450Ceil, t, {a});
  case Opcode::Round:
    return round_away(s, a);
  case Opcode::Pow: // legalized: pow(|x|, y) with C's special cases around it
    return ext(GLSLstd450Pow, t, {a, b});
  case Opcode::Trunc:
    return ext(GLSLstd450Trunc, t, {a});
  case Opcode::Tan:
    return ext(GLSLstd450Tan, t, {a});
  // asin, acos, atan, atan2, the hyperbolic functions but tanh, expm1, log1p and hypot are
  // legalized (LegalizeTarget::native_libm): GLSL's asin, acos and atan are coarse, its sinh
  // cancels near 0, and it has no expm1, log1p or hypot.
  case Opcode::Fma:
    relies_on_.fused_fma |= features_.fused_fma;
    if (features_.fused_fma || s == Scalar::F64)
      return ext(GLSLstd450Fma, t, {a, b, c});
    if (s == Scalar::F16) {
      Id f = scalar_type(Scalar::F32);
      Id x = emit(spv::Op::OpFConvert, f, {a}), y = emit(spv::Op::OpFConvert, f, {b}),
         z = emit(spv::Op::OpFConvert, f, {c});
      return emit(spv::Op::OpFConvert, t, {half_fma_to_odd(s, x, y, z)});
    }
    if (!features_.float64)
      return ext(GLSLstd450Fma, t, {a, b, c});
    return fma_through_f64(a, b, c);
  default:
    throw std::logic_error("math: not a math op");
  }
}

//===--- Subgroups and atomics -------------------------------------------------------------===//

Id Writer::subgroup_op(const ir::Operation &op, Scalar s, Id x) {
  if (s == Scalar::BF16) // combined in f32 (in an unspecified order anyway), rounded once
    return round_bf16(subgroup_op(op, Scalar::F32, x));
  const ir::SubgroupCombine how = ir::subgroup_combine(op.opcode());
  bool min_max = how.combine == Opcode::Min || how.combine == Opcode::Max;
  if (s == Scalar::F16 && min_max) // exact through f32; lavapipe's f16 FMin/FMax mishandle NaN
    return emit(
        spv::Op::OpFConvert, scalar_type(s),
        {subgroup_op(op, Scalar::F32, emit(spv::Op::OpFConvert, scalar_type(Scalar::F32), {x}))});
  Id t = scalar_type(s);
  Id scope = u32(kScopeSubgroup);
  bool f = ir::is_float(s), sg = ir::is_signed(s), boolean = s == Scalar::Bool;
  spv::GroupOperation group =
      how.scan == ir::SubgroupCombine::Scan::Inclusive   ? spv::GroupOperation::InclusiveScan
      : how.scan == ir::SubgroupCombine::Scan::Exclusive ? spv::GroupOperation::ExclusiveScan
                                                         : spv::GroupOperation::Reduce;
  spv::Op sop;
  switch (how.combine) {
  case Opcode::Add:
    sop = f ? spv::Op::OpGroupNonUniformFAdd : spv::Op::OpGroupNonUniformIAdd;
    break;
  case Opcode::Mul:
    sop = f ? spv::Op::OpGroupNonUniformFMul : spv::Op::OpGroupNonUniformIMul;
    break;
  case Opcode::Min:
    sop = f    ? spv::Op::OpGroupNonUniformFMin
          : sg ? spv::Op::OpGroupNonUniformSMin
               : spv::Op::OpGroupNonUniformUMin;
    break;
  case Opcode::Max:
    sop = f    ? spv::Op::OpGroupNonUniformFMax
          : sg ? spv::Op::OpGroupNonUniformSMax
               : spv::Op::OpGroupNonUniformUMax;
    break;
  case Opcode::And:
    sop = boolean ? spv::Op::OpGroupNonUniformLogicalAnd : spv::Op::OpGroupNonUniformBitwiseAnd;
    break;
  case Opcode::Or:
    sop = boolean ? spv::Op::OpGroupNonUniformLogicalOr : spv::Op::OpGroupNonUniformBitwiseOr;
    break;
  case Opcode::Xor:
    sop = boolean ? spv::Op::OpGroupNonUniformLogicalXor : spv::Op::OpGroupNonUniformBitwiseXor;
    break;
  default:
    throw std::logic_error("subgroup_op: not a reduction or scan");
  }
  m_.capability(spv::Capability::GroupNonUniformArithmetic);
  return emit(sop, t, {scope, static_cast<uint32_t>(group), x});
}

Id Writer::atomic(const ir::Operation &op) {
  const ir::Value *memory = op.operand(0);
  Scalar s = op.result()->type().element();
  Id t = scalar_type(s);
  Id pointer = element_pointer(memory, index_operand(op.operand(1), 0));
  Id scope = u32(memory->type().kind() == ir::TypeKind::Buffer ? kScopeDevice : kScopeWorkgroup);
  Id relaxed = u32(0);
  Id v = lane(op.operand(2), 0);
  if (ir::scalar_bits(s) == 64 && !ir::is_float(s))
    m_.capability(spv::Capability::Int64Atomics);
  bool sg = ir::is_signed(s);
  spv::Op aop;
  switch (op.opcode()) {
  case Opcode::AtomicAdd:
    if (ir::is_float(s)) {
      m_.extension("SPV_EXT_shader_atomic_float_add");
      m_.capability(s == Scalar::F64 ? spv::Capability::AtomicFloat64AddEXT
                                     : spv::Capability::AtomicFloat32AddEXT);
      aop = spv::Op::OpAtomicFAddEXT;
    } else {
      aop = spv::Op::OpAtomicIAdd;
    }
    break;
  case Opcode::AtomicSub:
    aop = spv::Op::OpAtomicISub;
    break;
  case Opcode::AtomicMin:
  case Opcode::AtomicMax: {
    bool min = op.opcode() == Opcode::AtomicMin;
    if (ir::is_float(s)) {
      m_.extension("SPV_EXT_shader_atomic_float_min_max");
      m_.capability(spv::Capability::AtomicFloat32MinMaxEXT);
      aop = min ? spv::Op::OpAtomicFMinEXT : spv::Op::OpAtomicFMaxEXT;
    } else if (min) {
      aop = sg ? spv::Op::OpAtomicSMin : spv::Op::OpAtomicUMin;
    } else {
      aop = sg ? spv::Op::OpAtomicSMax : spv::Op::OpAtomicUMax;
    }
    break;
  }
  case Opcode::AtomicAnd:
    aop = spv::Op::OpAtomicAnd;
    break;
  case Opcode::AtomicOr:
    aop = spv::Op::OpAtomicOr;
    break;
  case Opcode::AtomicXor:
    aop = spv::Op::OpAtomicXor;
    break;
  case Opcode::AtomicXchg:
    aop = spv::Op::OpAtomicExchange;
    break;
  case Opcode::AtomicCmpXchg:
    return emit(spv::Op::OpAtomicCompareExchange, t,
                {pointer, scope, relaxed, relaxed, lane(op.operand(3), 0), v});
  default:
    throw std::logic_error("atomic: not an atomic op");
  }
  return emit(aop, t, {pointer, scope, relaxed, v});
}

//===--- Ops -------------------------------------------------------------------------------===//

Lanes Writer::flatten(std::span<ir::Value *const> values) {
  Lanes flat;
  for (const ir::Value *v : values) {
    const Lanes &l = lanes(v);
    flat.insert(flat.end(), l.begin(), l.end());
  }
  return flat;
}

std::vector<Lanes> Writer::split(std::span<const Type> types, const Lanes &flat) {
  std::vector<Lanes> out;
  size_t pos = 0;
  for (Type t : types) {
    out.emplace_back(flat.begin() + pos, flat.begin() + pos + t.lanes());
    pos += t.lanes();
  }
  return out;
}

std::vector<Lanes> Writer::phis(std::span<const Type> types, const std::vector<Edge> &edges) {
  Lanes flat;
  size_t pos = 0;
  for (Type t : types)
    for (unsigned k = 0; k < t.lanes(); ++k, ++pos) {
      Id r = m_.id();
      Words ops = {value_type(t), r};
      for (const Edge &e : edges) {
        ops.push_back(e.values[pos]);
        ops.push_back(e.from);
      }
      append(blocks_[cur_].phis, spv::Op::OpPhi, ops);
      flat.push_back(r);
    }
  return split(types, flat);
}

std::vector<Type> result_types(const ir::Operation &op) {
  std::vector<Type> types;
  for (unsigned i = 0; i < op.num_results(); ++i)
    types.push_back(op.result(i)->type());
  return types;
}

std::vector<Type> argument_types(const ir::Region &region, unsigned first = 0) {
  std::vector<Type> types;
  for (unsigned i = first; i < region.num_arguments(); ++i)
    types.push_back(region.argument(i)->type());
  return types;
}

namespace {
bool holds_barrier(const ir::Operation &op) {
  bool barrier = false;
  op.walk([&](const ir::Operation *nested) { barrier |= nested->opcode() == Opcode::Barrier; });
  return barrier;
}
} // namespace

void Writer::emit_region(const ir::Region &region) {
  bool top_level = &region == &kernel_.body();
  for (const ir::Operation *op : region) {
    if (!live_)
      return; // the rest of the region cannot be reached
    locate(*op);
    emit_op(*op);
    if (top_level && live_ &&
        (op->opcode() == Opcode::Barrier || (op->num_regions() > 0 && holds_barrier(*op))))
      read_parameters();
  }
}

void Writer::emit_if(const ir::Operation &op) {
  const ir::Region &then_region = op.region(0), &else_region = op.region(1);
  // An else holding only `yield` with no values: the false edge goes straight to the merge.
  bool trivial_else = else_region.size() == 1 && else_region.front()->opcode() == Opcode::Yield &&
                      else_region.front()->num_operands() == 0;
  Id then_label = m_.id(), else_label = trivial_else ? 0 : m_.id(), merge = m_.id();
  emit_void(spv::Op::OpSelectionMerge,
            {merge, static_cast<uint32_t>(spv::SelectionControlMask::MaskNone)});
  emit_void(spv::Op::OpBranchConditional,
            {lane(op.operand(0), 0), then_label, trivial_else ? merge : else_label});
  ifs_.push_back(IfContext{merge, {}});
  if (trivial_else)
    ifs_.back().yields.push_back(Edge{{}, current_label()});
  new_block(then_label);
  live_ = true;
  emit_region(then_region);
  if (!trivial_else) {
    new_block(else_label);
    live_ = true;
    emit_region(else_region);
  }
  IfContext ctx = std::move(ifs_.back());
  ifs_.pop_back();
  new_block(merge);
  if (ctx.yields.empty()) { // both branches left the loop
    emit_void(spv::Op::OpUnreachable, {});
    live_ = false;
    return;
  }
  live_ = true;
  std::vector<Type> types = result_types(op);
  std::vector<Lanes> results = phis(types, ctx.yields);
  for (unsigned i = 0; i < op.num_results(); ++i)
    bind(op.result(i), std::move(results[i]));
}

/// The LoopControl operands for a loop's `unroll` attribute.
Words loop_control(const ir::Operation &op) {
  auto unroll = op.attributes().get_int("unroll");
  if (!unroll)
    return {static_cast<uint32_t>(spv::LoopControlMask::MaskNone)};
  if (*unroll == 1)
    return {static_cast<uint32_t>(spv::LoopControlMask::DontUnroll)};
  return {static_cast<uint32_t>(spv::LoopControlMask::PartialCount),
          static_cast<uint32_t>(*unroll)};
}

/// The bits of `v` when it is a constant (or a splat of one).
std::optional<uint64_t> constant_bits(const ir::Value *v) {
  const ir::Operation *def = v->defining_op();
  if (def && def->opcode() == Opcode::Splat)
    def = def->operand(0)->defining_op();
  if (!def || def->opcode() != Opcode::Const)
    return std::nullopt;
  return static_cast<uint64_t>(*def->attributes().get_int("value"));
}

/// Whether the next iv of `for` (iv + step, after a body that ran with iv < hi) can wrap around
/// I. Not when step is a positive constant and every iv < hi leaves room for it: hi <= MAX - step
/// + 1, so always for a step of 1, and for a larger step when hi is a constant that fits (a
/// negative signed hi too). Then the continue block is a plain add, which drivers' loop
/// analyses (NIR's trip counts, LLVM's induction variables) recognize.
bool iv_may_wrap(const ir::Operation &op) {
  std::optional<uint64_t> step_bits = constant_bits(op.operand(2));
  if (!step_bits)
    return true;
  Scalar s = op.operand(0)->type().element();
  unsigned width = ir::scalar_bits(s);
  uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
  uint64_t max = ir::is_signed(s) ? mask >> 1 : mask; // the largest value of I
  uint64_t step = *step_bits & mask;
  if (step == 0 || step > max) // zero or negative: undefined (docs/ir.md §5.3), keep the guard
    return true;
  if (step == 1)
    return false;
  std::optional<uint64_t> hi_bits = constant_bits(op.operand(1));
  if (!hi_bits)
    return true;
  uint64_t hi = *hi_bits & mask;
  if (hi > max) // a negative signed hi: iv + step <= hi - 1 + step < step <= MAX
    return false;
  return hi > max - step + 1;
}

void Writer::emit_for(const ir::Operation &op) {
  const ir::Region &loop_body = op.region(0);
  Scalar iv_scalar = op.operand(0)->type().element();
  Id iv_type = scalar_type(iv_scalar);
  Id lo = lane(op.operand(0), 0), hi = lane(op.operand(1), 0), step = lane(op.operand(2), 0);
  Lanes inits = flatten(op.operands().subspan(3));
  std::vector<Type> types = result_types(op);

  // Where the next iv may wrap around, the last iv that leaves room for a step: the continue
  // block's next iv is min(iv, limit) + step, which is iv + step up to the limit and at least hi
  // past it (ending the loop) without wrapping. limit = max(hi, MIN + step) - step, computed once
  // here; per iteration a min and an add (a compare and a select of the wrapped sum cost softmax
  // 3% on lavapipe).
  bool may_wrap = iv_may_wrap(op);
  Id limit = 0;
  if (may_wrap) {
    Id lowest_hi = step; // MIN + step: the least hi for which the subtraction does not wrap
    if (ir::is_signed(iv_scalar)) {
      unsigned width = ir::scalar_bits(iv_scalar);
      lowest_hi =
          arith(Opcode::Add, iv_scalar, constant(iv_scalar, uint64_t(1) << (width - 1)), step);
    }
    Id room = arith(Opcode::Max, iv_scalar, hi, lowest_hi);
    limit = arith(Opcode::Sub, iv_scalar, room, step);
  }

  Id preheader = current_label();
  Id header = m_.id(), body_label = m_.id(), cont = m_.id(), merge = m_.id();
  branch(header);
  new_block(header);
  size_t header_block = cur_;
  Id iv = m_.id();
  Lanes carried;
  for (size_t k = 0; k < inits.size(); ++k)
    carried.push_back(m_.id());
  Id in_range = compare(Opcode::Lt, iv_scalar, iv, hi);
  Words merge_ops = {merge, cont};
  Words control = loop_control(op);
  merge_ops.insert(merge_ops.end(), control.begin(), control.end());
  append(body(), spv::Op::OpLoopMerge, merge_ops);
  emit_void(spv::Op::OpBranchConditional, {in_range, body_label, merge});

  loops_.push_back(LoopContext{merge, cont, 0, {}, {Edge{carried, header}}, {}});
  new_block(body_label);
  live_ = true;
  bind(loop_body.argument(0), {iv});
  std::vector<Lanes> carried_lanes = split(types, carried);
  for (unsigned i = 0; i < op.num_results(); ++i)
    bind(loop_body.argument(i + 1), carried_lanes[i]);
  emit_region(loop_body);
  LoopContext ctx = std::move(loops_.back());
  loops_.pop_back();

  // The continue block: the carried values of every `yield`/`continue`, then the next iv. The
  // sequence must not wrap around (docs/ir.md §5.3): where it may, the iv is first clamped to
  // `limit` (above), so that the sum ends the loop instead of wrapping.
  new_block(cont);
  Lanes next_carried;
  Id next_iv;
  if (ctx.continues.empty()) { // every iteration leaves the loop: no back edge is ever taken
    for (Type t : types)
      for (unsigned k = 0; k < t.lanes(); ++k)
        next_carried.push_back(m_.undef(value_type(t)));
    next_iv = m_.undef(iv_type);
  } else {
    for (Lanes &l : phis(types, ctx.continues))
      next_carried.insert(next_carried.end(), l.begin(), l.end());
    Id from = may_wrap ? arith(Opcode::Min, iv_scalar, iv, limit) : iv;
    next_iv = emit(spv::Op::OpIAdd, iv_type, {from, step});
  }
  branch(header);

  Words &header_phis = blocks_[header_block].phis;
  append(header_phis, spv::Op::OpPhi, {iv_type, iv, lo, preheader, next_iv, cont});
  size_t pos = 0;
  for (Type t : types)
    for (unsigned k = 0; k < t.lanes(); ++k, ++pos)
      append(header_phis, spv::Op::OpPhi,
             {value_type(t), carried[pos], inits[pos], preheader, next_carried[pos], cont});

  new_block(merge);
  live_ = true;
  std::vector<Lanes> results = phis(types, ctx.breaks);
  for (unsigned i = 0; i < op.num_results(); ++i)
    bind(op.result(i), std::move(results[i]));
}

void Writer::emit_while(const ir::Operation &op) {
  const ir::Region &before = op.region(0), &after = op.region(1);
  Lanes inits = flatten(op.operands());
  std::vector<Type> carried_types = argument_types(before);
  std::vector<Type> types = result_types(op);

  Id preheader = current_label();
  Id header = m_.id(), before_label = m_.id(), do_label = m_.id(), cont = m_.id(), merge = m_.id();
  branch(header);
  new_block(header);
  size_t header_block = cur_;
  Lanes carried;
  for (size_t k = 0; k < inits.size(); ++k)
    carried.push_back(m_.id());
  std::vector<Lanes> carried_lanes = split(carried_types, carried);
  for (unsigned i = 0; i < before.num_arguments(); ++i)
    bind(before.argument(i), carried_lanes[i]);
  Words merge_ops = {merge, cont};
  Words control = loop_control(op);
  merge_ops.insert(merge_ops.end(), control.begin(), control.end());
  append(body(), spv::Op::OpLoopMerge, merge_ops);
  branch(before_label);

  loops_.push_back(LoopContext{merge, cont, do_label, {}, {}, {}});
  new_block(before_label);
  live_ = true;
  emit_region(before); // ends with `condition`, which branches to do_label or merge
  {
    std::vector<Lanes> forwarded = split(types, loops_.back().forwarded);
    new_block(do_label);
    live_ = true;
    for (unsigned i = 0; i < after.num_arguments(); ++i)
      bind(after.argument(i), forwarded[i]);
  }
  emit_region(after);
  LoopContext ctx = std::move(loops_.back());
  loops_.pop_back();

  new_block(cont);
  Lanes next;
  if (ctx.continues.empty()) {
    for (Type t : carried_types)
      for (unsigned k = 0; k < t.lanes(); ++k)
        next.push_back(m_.undef(value_type(t)));
  } else {
    for (Lanes &l : phis(carried_types, ctx.continues))
      next.insert(next.end(), l.begin(), l.end());
  }
  branch(header);
  size_t pos = 0;
  for (Type t : carried_types)
    for (unsigned k = 0; k < t.lanes(); ++k, ++pos)
      append(blocks_[header_block].phis, spv::Op::OpPhi,
             {value_type(t), carried[pos], inits[pos], preheader, next[pos], cont});

  new_block(merge);
  live_ = true;
  std::vector<Lanes> results = phis(types, ctx.breaks);
  for (unsigned i = 0; i < op.num_results(); ++i)
    bind(op.result(i), std::move(results[i]));
}

void Writer::emit_terminator(const ir::Operation &op) {
  const ir::Operation *parent = op.parent_op();
  switch (op.opcode()) {
  case Opcode::Return:
    emit_void(spv::Op::OpReturn, {});
    return;
  case Opcode::Yield:
    if (parent->opcode() == Opcode::If) {
      ifs_.back().yields.push_back(Edge{flatten(op.operands()), current_label()});
      branch(ifs_.back().merge);
    } else { // a loop body: the next iteration
      loops_.back().continues.push_back(Edge{flatten(op.operands()), current_label()});
      branch(loops_.back().cont);
    }
    return;
  case Opcode::Condition: {
    LoopContext &loop = loops_.back();
    loop.forwarded = flatten(op.operands().subspan(1));
    loop.breaks.push_back(Edge{loop.forwarded, current_label()});
    emit_void(spv::Op::OpBranchConditional, {lane(op.operand(0), 0), loop.body, loop.merge});
    return;
  }
  case Opcode::Break:
    loops_.back().breaks.push_back(Edge{flatten(op.operands()), current_label()});
    branch(loops_.back().merge);
    return;
  case Opcode::Continue:
    loops_.back().continues.push_back(Edge{flatten(op.operands()), current_label()});
    branch(loops_.back().cont);
    return;
  default:
    throw std::logic_error("emit_terminator: not a terminator");
  }
}

/// One op: a short dispatch by op family.
void Writer::emit_op(const ir::Operation &op) {
  if (op.info().flags & ir::Terminator)
    return emit_terminator(op);
  if (!passes::is_legal(op))
    passes::throw_not_legalized(op, "SPIR-V");
  switch (op.info().signature) {
  case ir::Signature::Constant:
  case ir::Signature::Binary:
  case ir::Signature::Unary:
  case ir::Signature::Ternary:
  case ir::Signature::Compare:
  case ir::Signature::Classify:
  case ir::Signature::Select:
    return emit_arith(op);
  case ir::Signature::Cast:
  case ir::Signature::Bitcast:
  case ir::Signature::Splat:
  case ir::Signature::VecBuild:
  case ir::Signature::VecExtract:
  case ir::Signature::VecInsert:
    return emit_conversion(op);
  case ir::Signature::Load:
  case ir::Signature::Store:
  case ir::Signature::BufferSize:
  case ir::Signature::SharedAlloc:
  case ir::Signature::LocalAlloc:
    return emit_memory(op);
  case ir::Signature::Builtin3:
  case ir::Signature::Builtin1:
  case ir::Signature::Sync:
    return emit_builtin(op);
  case ir::Signature::AsyncCopy: // done at once by the legalize pass (no async.copy in SPIR-V)
  case ir::Signature::AsyncGroup:
    passes::throw_not_legalized(op, "SPIR-V");
  case ir::Signature::Print:
    return emit_print(op);
  case ir::Signature::AtomicRmw:
  case ir::Signature::AtomicCmpXchg:
  case ir::Signature::AtomicLoad:
  case ir::Signature::AtomicStore:
    return emit_atomic(op);
  case ir::Signature::SubgroupUnary:
  case ir::Signature::SubgroupShuffle:
  case ir::Signature::SubgroupBallot:
  case ir::Signature::SubgroupVote:
  case ir::Signature::SubgroupElect:
    return emit_subgroup(op);
  case ir::Signature::MatrixFill:
  case ir::Signature::MatrixLoad:
  case ir::Signature::MatrixStore:
  case ir::Signature::MatrixMma:
  case ir::Signature::MatrixConvert:
    return emit_matrix(op);
  case ir::Signature::If:
    return emit_if(op);
  case ir::Signature::For:
    return emit_for(op);
  case ir::Signature::While:
    return emit_while(op);
  default:
    throw std::logic_error(fmt::format("op '{}' has no SPIR-V lowering", op.name()));
  }
}

/// Constants, arithmetic, math, comparisons and select, lane by lane.
/// A float division with a constant ±0 operand, which lavapipe (Mesa's NIR) folds to +0 although
/// IEEE (and the IR) give ±inf, a signed zero or NaN: written so that no such fold applies.
/// Returns false (writing nothing) when neither operand is a constant zero.
bool Writer::emit_zero_division(const ir::Operation &op) {
  Scalar s = op.result()->type().element();
  Id t = scalar_type(s);
  uint64_t sign = uint64_t(1) << (ir::scalar_bits(s) - 1);
  auto zero_bits = [&](const ir::Value *v) {
    std::optional<uint64_t> bits = constant_bits(v);
    return bits && (*bits & (sign - 1)) == 0 ? bits : std::nullopt;
  };
  Lanes out;
  if (std::optional<uint64_t> divisor = zero_bits(op.operand(1))) {
    // x / ±0 is x * ±inf for every x: ±inf, or NaN for x = 0 and NaN.
    double inf = std::numeric_limits<double>::infinity();
    Id scaled_by = constant_value(s, (*divisor & sign) ? -inf : inf);
    for (unsigned k = 0; k < op.result()->type().lanes(); ++k)
      out.push_back(no_contraction(emit(spv::Op::OpFMul, t, {lane(op.operand(0), k), scaled_by})));
  } else if (std::optional<uint64_t> dividend = zero_bits(op.operand(0))) {
    // ±0 / y: NaN for y = ±0 or NaN, else a zero whose sign is the product of the signs; with
    // compares and selects alone.
    bool negative = (*dividend & sign) != 0;
    Id plus = constant_value(s, 0.0), minus = constant_value(s, -0.0);
    Id nan = constant_value(s, std::numeric_limits<double>::quiet_NaN());
    Id b = m_.type_bool();
    for (unsigned k = 0; k < op.result()->type().lanes(); ++k) {
      Id y = lane(op.operand(1), k);
      Id below = emit(spv::Op::OpFOrdLessThan, b, {y, plus});
      Id zero =
          emit(spv::Op::OpSelect, t, {below, negative ? plus : minus, negative ? minus : plus});
      Id y_zero = emit(spv::Op::OpFOrdEqual, b, {y, plus});
      Id y_nan = emit(spv::Op::OpIsNan, b, {y});
      Id undefined = emit(spv::Op::OpLogicalOr, b, {y_zero, y_nan});
      out.push_back(emit(spv::Op::OpSelect, t, {undefined, nan, zero}));
    }
  } else {
    return false;
  }
  bind(op.result(), std::move(out));
  return true;
}

void Writer::emit_arith(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  const ir::OpInfo &info = op.info();
  Type rt = op.num_results() ? op.result()->type() : Type();
  Scalar rs = rt.element();
  Id t = op.num_results() ? scalar_type(rs) : 0;
  auto per_lane = [&](auto &&f) {
    Lanes out;
    for (unsigned k = 0; k < rt.lanes(); ++k)
      out.push_back(f(k));
    bind(op.result(), std::move(out));
  };
  auto operand = [&](unsigned i, unsigned k) { return lane(op.operand(i), k); };
  switch (op.info().signature) {
  case ir::Signature::Constant:
    return bind(op.result(),
                {constant(rs, static_cast<uint64_t>(*op.attributes().get_int("value")))});
  case ir::Signature::Binary:
    if (info.type_class == ir::TypeClass::Float) // pow
      return per_lane([&](unsigned k) { return math(op, rs, operand(0, k), operand(1, k), 0); });
    if (opc == Opcode::Div && ir::is_float(rs) && emit_zero_division(op))
      return;
    return per_lane([&](unsigned k) { return arith(opc, rs, operand(0, k), operand(1, k)); });
  case ir::Signature::Unary:
    if (info.type_class == ir::TypeClass::Float)
      return per_lane([&](unsigned k) { return math(op, rs, operand(0, k), 0, 0); });
    return per_lane([&](unsigned k) {
      Id a = operand(0, k);
      switch (opc) {
      case Opcode::Neg:
        return emit(ir::is_float(rs) ? spv::Op::OpFNegate : spv::Op::OpSNegate, t, {a});
      case Opcode::Abs:
        if (ir::is_float(rs))
          return ext(GLSLstd450FAbs, t, {a});
        // a < 0 ? 0 - a : a, wrapping (SAbs of MIN is not pinned down)
        return emit(spv::Op::OpSelect, t,
                    {emit(spv::Op::OpSLessThan, m_.type_bool(), {a, constant(rs, 0)}),
                     emit(spv::Op::OpISub, t, {constant(rs, 0), a}), a});
      case Opcode::Not:
        return emit(rs == Scalar::Bool ? spv::Op::OpLogicalNot : spv::Op::OpNot, t, {a});
      default:
        throw std::logic_error("unary op without lowering");
      }
    });
  case ir::Signature::Ternary:
    if (opc == Opcode::Fma)
      return per_lane(
          [&](unsigned k) { return math(op, rs, operand(0, k), operand(1, k), operand(2, k)); });
    return per_lane([&](unsigned k) { // clamp = min(max(x, lo), hi)
      return arith(Opcode::Min, rs, arith(Opcode::Max, rs, operand(0, k), operand(1, k)),
                   operand(2, k));
    });
  case ir::Signature::Compare: {
    Scalar s = op.operand(0)->type().element();
    return per_lane([&](unsigned k) { return compare(opc, s, operand(0, k), operand(1, k)); });
  }
  case ir::Signature::Classify: // bf16 values live in f32 registers: the f32 test is theirs
    return per_lane([&](unsigned k) {
      return emit(opc == Opcode::IsNan ? spv::Op::OpIsNan : spv::Op::OpIsInf, m_.type_bool(),
                  {operand(0, k)});
    });
  case ir::Signature::Select: {
    bool vector_condition = op.operand(0)->type().is_vector();
    return per_lane([&](unsigned k) {
      return emit(spv::Op::OpSelect, t,
                  {operand(0, vector_condition ? k : 0), operand(1, k), operand(2, k)});
    });
  }
  default:
    throw std::logic_error(fmt::format("emit_arith: op '{}' is not one", op.name()));
  }
}

/// Casts, bitcasts and the vector ops (which cost nothing: vectors are scalarized).
void Writer::emit_conversion(const ir::Operation &op) {
  Type rt = op.num_results() ? op.result()->type() : Type();
  Scalar rs = rt.element();
  auto per_lane = [&](auto &&f) {
    Lanes out;
    for (unsigned k = 0; k < rt.lanes(); ++k)
      out.push_back(f(k));
    bind(op.result(), std::move(out));
  };
  auto operand = [&](unsigned i, unsigned k) { return lane(op.operand(i), k); };
  switch (op.info().signature) {
  case ir::Signature::Cast: {
    Scalar from = op.operand(0)->type().element();
    return per_lane([&](unsigned k) { return cast(from, rs, operand(0, k)); });
  }
  case ir::Signature::Bitcast:
    return bind(op.result(), bitcast(op.operand(0)->type(), rt, lanes(op.operand(0))));
  case ir::Signature::Splat:
    return per_lane([&](unsigned) { return operand(0, 0); });
  case ir::Signature::VecBuild:
    return per_lane([&](unsigned k) { return operand(k, 0); });
  case ir::Signature::VecExtract:
    return bind(op.result(), {operand(0, static_cast<unsigned>(*op.attributes().get_int("lane")))});
  case ir::Signature::VecInsert: {
    Lanes v = lanes(op.operand(0));
    v[*op.attributes().get_int("lane")] = operand(1, 0);
    return bind(op.result(), std::move(v));
  }
  default:
    throw std::logic_error(fmt::format("emit_conversion: op '{}' is not one", op.name()));
  }
}

/// Loads, stores, buffer sizes and shared/local arrays.
void Writer::emit_memory(const ir::Operation &op) {
  const ir::OpInfo &info = op.info();
  Type rt = op.num_results() ? op.result()->type() : Type();
  Scalar rs = rt.element();
  Id t = op.num_results() ? scalar_type(rs) : 0;
  auto per_lane = [&](auto &&f) {
    Lanes out;
    for (unsigned k = 0; k < rt.lanes(); ++k)
      out.push_back(f(k));
    bind(op.result(), std::move(out));
  };
  switch (op.info().signature) {
  case ir::Signature::Load:
    return per_lane([&](unsigned k) {
      Id pointer = element_pointer(op.operand(0), index_operand(op.operand(1), k));
      if (rs != Scalar::BF16)
        return emit(spv::Op::OpLoad, t, {pointer});
      Id bits = emit(spv::Op::OpLoad, uint_type(16), {pointer});
      return bf16_bits_to_f32(emit(spv::Op::OpUConvert, u32_type(), {bits}));
    });
  case ir::Signature::Store: {
    const ir::Value *value = op.operand(2);
    bool bf16 = value->type().element() == Scalar::BF16;
    for (unsigned k = 0; k < value->type().lanes(); ++k) {
      Id v = lane(value, k);
      if (bf16) // the register holds a bf16 value exactly: its top 16 bits
        v = emit(spv::Op::OpUConvert, uint_type(16),
                 {emit(spv::Op::OpShiftRightLogical, u32_type(),
                       {emit(spv::Op::OpBitcast, u32_type(), {v}), u32(16)})});
      emit_void(spv::Op::OpStore,
                {element_pointer(op.operand(0), index_operand(op.operand(1), k)), v});
    }
    return;
  }
  case ir::Signature::BufferSize: {
    Id length = emit(spv::Op::OpArrayLength, u32_type(), {memory_.at(op.operand(0)).variable, 0});
    return bind(op.result(), {cast(Scalar::U32, rs, length)});
  }
  case ir::Signature::SharedAlloc:
  case ir::Signature::LocalAlloc: {
    bool shared = info.signature == ir::Signature::SharedAlloc;
    spv::StorageClass storage = shared ? spv::StorageClass::Workgroup : spv::StorageClass::Function;
    Id array = m_.type_array(storage_type(rs), rt.count(), 0);
    Id pointer = m_.type_pointer(storage, array);
    Id var;
    if (shared) {
      var = m_.global_variable(pointer, storage);
      interface_.push_back(var);
    } else { // function variables open the entry block
      var = m_.id();
      append(blocks_[0].phis, spv::Op::OpVariable,
             {pointer, var, static_cast<uint32_t>(spv::StorageClass::Function)});
    }
    if (!op.result()->name().empty())
      m_.name(var, op.result()->name());
    memory_[op.result()] = MemoryObject{var, storage};
    return;
  }
  default:
    throw std::logic_error(fmt::format("emit_memory: op '{}' is not one", op.name()));
  }
}

/// Builtins (ids, sizes, subgroup ids) and barriers/fences.
void Writer::emit_builtin(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  Type rt = op.num_results() ? op.result()->type() : Type();
  Scalar rs = rt.element();
  Id t = op.num_results() ? scalar_type(rs) : 0;
  auto per_lane = [&](auto &&f) {
    Lanes out;
    for (unsigned k = 0; k < rt.lanes(); ++k)
      out.push_back(f(k));
    bind(op.result(), std::move(out));
  };
  switch (op.info().signature) {
  case ir::Signature::Builtin3: {
    if (opc == Opcode::WorkgroupSize)
      return per_lane([&](unsigned k) { return u32(kernel_.workgroup_size()[k]); });
    spv::BuiltIn builtin = opc == Opcode::GlobalId      ? spv::BuiltIn::GlobalInvocationId
                           : opc == Opcode::LocalId     ? spv::BuiltIn::LocalInvocationId
                           : opc == Opcode::WorkgroupId ? spv::BuiltIn::WorkgroupId
                                                        : spv::BuiltIn::NumWorkgroups;
    Id v = builtin_input(builtin, true);
    return per_lane([&](unsigned k) {
      return emit(spv::Op::OpCompositeExtract, u32_type(), {v, k});
    });
  }
  case ir::Signature::Builtin1: {
    if (opc == Opcode::LocalIndex)
      return bind(op.result(), {builtin_input(spv::BuiltIn::LocalInvocationIndex, false)});
    m_.capability(spv::Capability::GroupNonUniform);
    if (opc == Opcode::SubgroupSize)
      return bind(op.result(), {builtin_input(spv::BuiltIn::SubgroupSize, false)});
    if (opc == Opcode::SubgroupLane) // the hardware lane: what shuffles and ballots index
      return bind(op.result(), {builtin_input(spv::BuiltIn::SubgroupLocalInvocationId, false)});
    // subgroup_id and num_subgroups as docs/ir.md §4.9 defines them (the writer only accepts
    // workgroup shapes where subgroups are consecutive local_index values); drivers disagree on
    // the NumSubgroups builtin for a partial last subgroup (lavapipe counts 1 for 12 of 8).
    Id size = builtin_input(spv::BuiltIn::SubgroupSize, false);
    if (opc == Opcode::SubgroupId)
      return bind(op.result(),
                  {emit(spv::Op::OpUDiv, t,
                        {builtin_input(spv::BuiltIn::LocalInvocationIndex, false), size})});
    auto wg = kernel_.workgroup_size();
    Id invocations = u32(wg[0] * wg[1] * wg[2]);
    return bind(
        op.result(),
        {emit(spv::Op::OpUDiv, t,
              {emit(spv::Op::OpISub, t, {emit(spv::Op::OpIAdd, t, {invocations, size}), u32(1)}),
               size})});
  }
  case ir::Signature::Sync: {
    uint32_t acquire_release = static_cast<uint32_t>(spv::MemorySemanticsMask::AcquireRelease);
    uint32_t uniform = static_cast<uint32_t>(spv::MemorySemanticsMask::UniformMemory);
    uint32_t workgroup = static_cast<uint32_t>(spv::MemorySemanticsMask::WorkgroupMemory);
    // Buffer memory takes part in workgroup-scope ordering only when invocations can talk through
    // a buffer at all (buffers_communicate_); otherwise ordering it costs time for nothing.
    uint32_t semantics = acquire_release | workgroup | (buffers_communicate_ ? uniform : 0);
    if (opc == Opcode::Barrier)
      emit_void(spv::Op::OpControlBarrier,
                {u32(kScopeWorkgroup), u32(kScopeWorkgroup), u32(semantics)});
    else if (opc == Opcode::SubgroupBarrier)
      emit_void(spv::Op::OpControlBarrier,
                {u32(kScopeSubgroup), u32(kScopeSubgroup), u32(semantics)});
    else if (opc == Opcode::FenceWorkgroup)
      emit_void(spv::Op::OpMemoryBarrier, {u32(kScopeWorkgroup), u32(semantics)});
    else
      emit_void(spv::Op::OpMemoryBarrier, {u32(kScopeDevice), u32(acquire_release | uniform)});
    return;
  }
  default:
    throw std::logic_error(fmt::format("emit_builtin: op '{}' is not one", op.name()));
  }
}

/// Atomics on buffers and shared memory.
void Writer::emit_atomic(const ir::Operation &op) {
  switch (op.info().signature) {
  case ir::Signature::AtomicRmw:
  case ir::Signature::AtomicCmpXchg:
    return bind(op.result(), {atomic(op)});
  case ir::Signature::AtomicLoad:
  case ir::Signature::AtomicStore: { // relaxed, at the memory's scope
    const ir::Value *memory = op.operand(0);
    Scalar s = memory->type().element();
    if (ir::scalar_bits(s) == 64 && !ir::is_float(s))
      m_.capability(spv::Capability::Int64Atomics);
    Id pointer = element_pointer(memory, index_operand(op.operand(1), 0));
    Id scope = u32(memory->type().kind() == ir::TypeKind::Buffer ? kScopeDevice : kScopeWorkgroup);
    if (op.opcode() == Opcode::AtomicLoad)
      return bind(op.result(),
                  {emit(spv::Op::OpAtomicLoad, scalar_type(s), {pointer, scope, u32(0)})});
    emit_void(spv::Op::OpAtomicStore, {pointer, scope, u32(0), lane(op.operand(2), 0)});
    return;
  }
  default:
    throw std::logic_error(fmt::format("emit_atomic: op '{}' is not one", op.name()));
  }
}

/// Subgroup reductions, scans, shuffles, ballots, votes and elect.
void Writer::emit_subgroup(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  Type rt = op.num_results() ? op.result()->type() : Type();
  Scalar rs = rt.element();
  Id t = op.num_results() ? scalar_type(rs) : 0;
  auto per_lane = [&](auto &&f) {
    Lanes out;
    for (unsigned k = 0; k < rt.lanes(); ++k)
      out.push_back(f(k));
    bind(op.result(), std::move(out));
  };
  auto operand = [&](unsigned i, unsigned k) { return lane(op.operand(i), k); };
  switch (op.info().signature) {
  case ir::Signature::SubgroupUnary:
    m_.capability(spv::Capability::GroupNonUniform);
    return per_lane([&](unsigned k) { return subgroup_op(op, rs, operand(0, k)); });
  case ir::Signature::SubgroupShuffle: {
    m_.capability(spv::Capability::GroupNonUniform);
    spv::Op sop = spv::Op::OpGroupNonUniformShuffle;
    switch (opc) {
    case Opcode::SubgroupBroadcast:
      m_.capability(spv::Capability::GroupNonUniformBallot);
      sop = spv::Op::OpGroupNonUniformBroadcast;
      break;
    case Opcode::SubgroupShuffle:
      m_.capability(spv::Capability::GroupNonUniformShuffle);
      break;
    case Opcode::SubgroupShuffleXor:
      m_.capability(spv::Capability::GroupNonUniformShuffle);
      sop = spv::Op::OpGroupNonUniformShuffleXor;
      break;
    case Opcode::SubgroupShuffleUp:
      m_.capability(spv::Capability::GroupNonUniformShuffleRelative);
      sop = spv::Op::OpGroupNonUniformShuffleUp;
      break;
    default:
      m_.capability(spv::Capability::GroupNonUniformShuffleRelative);
      sop = spv::Op::OpGroupNonUniformShuffleDown;
      break;
    }
    if (opc == Opcode::SubgroupBroadcast)
      return per_lane([&](unsigned k) {
        return emit(sop, t, {u32(kScopeSubgroup), operand(0, k), operand(1, 0)});
      });
    // A source lane outside the subgroup gives the invocation's own value (docs/ir.md §4.12);
    // SPIR-V leaves it undefined (lavapipe wraps around, or gives 0 for f16).
    Id ut = u32_type(), arg = operand(1, 0);
    Id own = builtin_input(spv::BuiltIn::SubgroupLocalInvocationId, false);
    Id size = builtin_input(spv::BuiltIn::SubgroupSize, false);
    Id in_range;
    switch (opc) {
    case Opcode::SubgroupShuffle:
      in_range = emit(spv::Op::OpULessThan, m_.type_bool(), {arg, size});
      break;
    case Opcode::SubgroupShuffleXor:
      in_range = emit(spv::Op::OpULessThan, m_.type_bool(),
                      {emit(spv::Op::OpBitwiseXor, ut, {own, arg}), size});
      break;
    case Opcode::SubgroupShuffleUp:
      in_range = emit(spv::Op::OpULessThanEqual, m_.type_bool(), {arg, own});
      break;
    default:
      in_range =
          emit(spv::Op::OpULessThan, m_.type_bool(), {arg, emit(spv::Op::OpISub, ut, {size, own})});
      break;
    }
    return per_lane([&](unsigned k) {
      Id x = operand(0, k);
      Id shuffled = emit(sop, t, {u32(kScopeSubgroup), x, arg});
      return emit(spv::Op::OpSelect, t, {in_range, shuffled, x});
    });
  }
  case ir::Signature::SubgroupBallot: {
    m_.capability(spv::Capability::GroupNonUniformBallot);
    Id v = emit(spv::Op::OpGroupNonUniformBallot, m_.type_vector(u32_type(), 4),
                {u32(kScopeSubgroup), operand(0, 0)});
    return per_lane([&](unsigned k) {
      return emit(spv::Op::OpCompositeExtract, u32_type(), {v, k});
    });
  }
  case ir::Signature::SubgroupVote:
    m_.capability(spv::Capability::GroupNonUniformVote);
    return bind(op.result(), {emit(opc == Opcode::SubgroupAll ? spv::Op::OpGroupNonUniformAll
                                                              : spv::Op::OpGroupNonUniformAny,
                                   t, {u32(kScopeSubgroup), operand(0, 0)})});
  case ir::Signature::SubgroupElect:
    m_.capability(spv::Capability::GroupNonUniform);
    return bind(op.result(), {emit(spv::Op::OpGroupNonUniformElect, t, {u32(kScopeSubgroup)})});
  default:
    throw std::logic_error(fmt::format("emit_subgroup: op '{}' is not one", op.name()));
  }
}

/// Matrix fragments as SPV_NV_cooperative_matrix values: one id per matrix, whose layout across
/// the subgroup is the driver's. Loads and stores take a pointer to the first element and the
/// stride in elements, as the IR does.
void Writer::emit_matrix(const ir::Operation &op) {
  auto col_major = [&] {
    return m_.constant_bool(op.attributes().get_int("col_major").value_or(0) != 0);
  };
  auto first_element = [&] {
    return element_pointer(op.operand(0), index_operand(op.operand(1), 0));
  };
  switch (op.info().signature) {
  case ir::Signature::MatrixFill:
    return bind(op.result(), {emit(spv::Op::OpCompositeConstruct, matrix_type(op.result()->type()),
                                   {lane(op.operand(0), 0)})});
  case ir::Signature::MatrixLoad:
    return bind(op.result(),
                {emit(spv::Op::OpCooperativeMatrixLoadNV, matrix_type(op.result()->type()),
                      {first_element(), index_operand(op.operand(2), 0), col_major()})});
  case ir::Signature::MatrixStore:
    return emit_void(
        spv::Op::OpCooperativeMatrixStoreNV,
        {first_element(), lane(op.operand(3), 0), index_operand(op.operand(2), 0), col_major()});
  case ir::Signature::MatrixMma:
    // the verifier has checked that the shape is one of ir::matrix_shapes()
    relies_on_.matrix_shapes |=
        1u << *ir::matrix_shape_index(op.operand(0)->type(), op.operand(1)->type(),
                                      op.operand(2)->type());
    return bind(op.result(),
                {emit(spv::Op::OpCooperativeMatrixMulAddNV, matrix_type(op.result()->type()),
                      {lane(op.operand(0), 0), lane(op.operand(1), 0), lane(op.operand(2), 0)})});
  case ir::Signature::MatrixConvert: {
    Type from = op.operand(0)->type(), to = op.result()->type();
    if (from.element() == to.element()) // only the role changes: the same SPIR-V type
      return bind(op.result(), {lane(op.operand(0), 0)});
    return bind(op.result(),
                {emit(spv::Op::OpFConvert, matrix_type(to), {lane(op.operand(0), 0)})});
  }
  default:
    throw std::logic_error(fmt::format("emit_matrix: op '{}' is not one", op.name()));
  }
}

/// The flags behind the capabilities the module declares (a device checks those again when it
/// loads the module): a bundle's SPIR-V for lavapipe that uses no f64 runs on a GPU without it.
/// f32 atomic exchange and subgroup ops on narrow and wide types have no capability of their own:
/// the target's flags stand for them.
void Writer::relies_on_flags() {
  using C = spv::Capability;
  auto declares = [&](C c) { return m_.has_capability(c); };
  TargetFeatures &r = relies_on_;
  r.int8 = declares(C::Int8) || declares(C::StorageBuffer8BitAccess);
  r.int16 = declares(C::Int16);
  r.int64 = declares(C::Int64);
  r.float16 = declares(C::Float16);
  r.float64 = declares(C::Float64);
  r.int64_atomics = declares(C::Int64Atomics);
  r.float32_atomic_add = declares(C::AtomicFloat32AddEXT);
  r.float64_atomic_add = declares(C::AtomicFloat64AddEXT);
  r.float32_atomic_min_max = declares(C::AtomicFloat32MinMaxEXT);
  r.subgroup_arithmetic = declares(C::GroupNonUniformArithmetic);
  r.subgroup_shuffle =
      declares(C::GroupNonUniformShuffle) || declares(C::GroupNonUniformShuffleRelative);
  r.subgroup_ballot = declares(C::GroupNonUniformBallot) || declares(C::GroupNonUniformVote);
}

std::optional<SpirvKernel> Writer::run() {
  abi_ = KernelAbi::of(kernel_);
  // The features below are set where the code comes to depend on them, the flags behind
  // capabilities once the module is written (relies_on_flags); the rest are the target's.
  relies_on_ = features_;
  relies_on_.bfloat16 = false;
  relies_on_.fused_fma = false;
  relies_on_.signed_zero_inf_nan_preserve = false;
  relies_on_.subgroup_size = 0;
  relies_on_.linear_subgroups = false;
  relies_on_.matrix_shapes = 0;
  if (std::optional<int64_t> size = kernel_.attributes().get_int(ir::kSubgroupSizeAttribute))
    relies_on_.subgroup_size = static_cast<uint32_t>(*size);
  if (!check_features())
    return std::nullopt;
  // Invocations can exchange data through a buffer only if some buffer is both written and read
  // (by stores, loads or atomics): written buffers never alias another parameter (docs/ir.md
  // §4.8), so a kernel that reads `in` and writes `out` has nothing to order in buffer memory.
  std::set<const ir::Value *> written, read;
  kernel_.walk([&](const ir::Operation *op) {
    if (op->num_operands() == 0 || op->operand(0)->type().kind() != ir::TypeKind::Buffer)
      return;
    if (op->has_flag(ir::WritesMemory))
      written.insert(op->operand(0));
    if (op->has_flag(ir::ReadsMemory))
      read.insert(op->operand(0));
  });
  for (const ir::Value *buffer : written)
    buffers_communicate_ |= read.count(buffer) > 0;
  m_.capability(spv::Capability::Shader);
  Id function_type = m_.type_function_void();
  Id function = m_.id();
  m_.name(function, kernel_.name());
  new_block(m_.id());
  declare_parameters();
  read_parameters();
  emit_region(kernel_.body());
  if (features_.signed_zero_inf_nan_preserve && !float_widths_.empty()) {
    // Keep -0.0, infinities and NaN through every float op (docs/ir.md §4.2).
    m_.capability(spv::Capability::SignedZeroInfNanPreserve);
    relies_on_.signed_zero_inf_nan_preserve = true;
    for (unsigned width : float_widths_)
      m_.execution_mode(spv::ExecutionMode::SignedZeroInfNanPreserve, {width});
  }
  uint32_t local_size[3] = {kernel_.workgroup_size()[0], kernel_.workgroup_size()[1],
                            kernel_.workgroup_size()[2]};
  SpirvKernel out;
  out.words = m_.finish(function, interface_, local_size, blocks_, function_type);
  relies_on_flags();
  out.abi = std::move(abi_);
  out.relies_on = std::move(relies_on_);
  return out;
}

} // namespace

namespace {

/// `kernel` legalized for SPIR-V, in a module of its own.
std::unique_ptr<ir::Module> legalized(const ir::Kernel &kernel) {
  // GLSL.std.450 has no erf, and its Pow leaves x < 0 and x = 0, y <= 0 undefined.
  passes::LegalizeTarget target;
  target.name = "spirv";
  target.native_erf = false;
  target.native_libm = false; // GLSL.std.450 lacks expm1, log1p, hypot; its asin... are coarse
  target.c_pow = false;
  std::unique_ptr<ir::Module> legal = ir::copy_kernel(kernel);
  passes::legalize(*legal, target);
  return legal;
}

} // namespace

std::optional<SpirvKernel> emit_spirv(const ir::Kernel &kernel, const TargetFeatures &features,
                                      std::vector<ir::Diagnostic> &errors) {
  if (!check_target_support(kernel, features, errors))
    return std::nullopt;
  bool within_limits = check_target_limits(kernel, features, errors);
  std::unique_ptr<ir::Module> legal = legalized(kernel);
  std::optional<SpirvKernel> out = Writer(*legal->kernels().front(), features, errors).run();
  return within_limits ? out : std::nullopt;
}

bool check_spirv(const ir::Kernel &kernel, const TargetFeatures &features,
                 std::vector<ir::Diagnostic> &errors) {
  if (!check_target_support(kernel, features, errors))
    return false;
  bool within_limits = check_target_limits(kernel, features, errors);
  std::unique_ptr<ir::Module> legal = legalized(kernel);
  return Writer(*legal->kernels().front(), features, errors).check() && within_limits;
}

} // namespace cubecc::codegen
