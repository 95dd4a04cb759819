//===- lowering.h - The lowering's state, shared by its lower_*.cpp files (private) -----------===//
//
// One Lowering object lowers one kernel (lower.cpp has the scheme). Its methods are split by
// family: lower.cpp (analyses, workgroup level and segments, the kernel function),
// lower_semantics.cpp (what each lane computes), lower_memory.cpp (loads, stores, atomics,
// bounds checks), lower_ops.cpp (op dispatch, control flow in segments, builtins, subgroup ops).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ops.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/semantics.h"
#include "llvm/lower.h"
#include <fmt/format.h>
#include <functional>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace cubecc::llvm_backend {

using ir::Opcode;
using ir::Scalar;
using llvm::BasicBlock;
using llvm::Type;
using llvm::Value;
using Parts = std::vector<Value *>;

struct Failure {
  ir::Diagnostic diagnostic;
};

struct MemInfo {
  enum Kind { Buffer, Shared, Local } kind = Buffer;
  Scalar element = Scalar::U8;
  unsigned param = 0;     ///< buffers: the parameter's index in the IR signature
  Value *base = nullptr;  ///< pointer to element 0 (local: of the first copy)
  Value *count = nullptr; ///< buffers: i64 element count
  uint64_t n = 0;         ///< arrays: element count
};

/// An integer value whose lane l is base + l * stride (base gang-uniform).
struct Affine {
  Value *base;
  int64_t stride;
};

/// Where a value lives when it crosses segments: per gang (slot) or once (workgroup scalar).
struct Storage {
  llvm::AllocaInst *ptr = nullptr;
  Type *part_type = nullptr;
  unsigned parts = 1;
  bool per_gang = true;
};

struct LoopContext {
  const ir::Operation *op = nullptr;
  bool uniform = false;
  bool is_for = false;
  BasicBlock *latch = nullptr, *exit = nullptr;
  llvm::AllocaInst *live = nullptr, *iter = nullptr;
  std::vector<std::vector<llvm::AllocaInst *>> carried, results;
};

struct WgLoop {
  const ir::Operation *op;
  BasicBlock *latch, *exit;
};

inline bool is_half(Scalar s) {
  return s == Scalar::F16 || s == Scalar::BF16;
}

class Lowering {
public:
  Lowering(const ir::Kernel &kernel, llvm::LLVMContext &context, llvm::TargetMachine &machine,
           const LowerOptions &options)
      : kernel_(kernel), ctx_(context), machine_(machine), opt_(options), B_(context),
        W_(options.width) {
    const auto &wg = kernel.workgroup_size();
    wg_ = wg;
    N_ = wg[0] * wg[1] * wg[2];
    G_ = (N_ + W_ - 1) / W_;
  }

  std::unique_ptr<llvm::Module> run();

private:
  //===- Errors ------------------------------------------------------------------------------===//

  [[noreturn]] void fail(const ir::Operation *op, const std::string &message) {
    ir::Diagnostic d;
    if (op && op->location().known()) {
      d.file = std::string(kernel_.module()->file_name(op->location().file));
      d.line = op->location().line;
      d.col = op->location().col;
    }
    d.message = fmt::format("'{}' in kernel {}: {}", op ? op->name() : "kernel",
                            ir::format_symbol(kernel_.name()), message);
    throw Failure{std::move(d)};
  }

  //===- Types and constants -----------------------------------------------------------------===//

  Type *elem_type(Scalar s) {
    switch (ir::register_scalar(s)) {
    case Scalar::Bool:
      return B_.getInt1Ty();
    case Scalar::I8:
    case Scalar::U8:
      return B_.getInt8Ty();
    case Scalar::I16:
    case Scalar::U16:
    case Scalar::F16:
    case Scalar::BF16:
      return B_.getInt16Ty();
    case Scalar::I32:
    case Scalar::U32:
      return B_.getInt32Ty();
    case Scalar::I64:
    case Scalar::U64:
      return B_.getInt64Ty();
    case Scalar::F32:
      return B_.getFloatTy();
    case Scalar::F64:
      return B_.getDoubleTy();
    case Scalar::E4M3: // bytes (register_scalar): not reached
    case Scalar::E5M2:
    case Scalar::E2M1:
    case Scalar::UE8M0:
      break;
    }
    return B_.getInt32Ty();
  }
  Type *vec_type(Type *t) { return llvm::FixedVectorType::get(t, W_); }
  Type *part_type(Scalar s, bool vec) { return vec ? vec_type(elem_type(s)) : elem_type(s); }
  /// A matrix (docs/ir.md §2.2): one gang-uniform array of its rows x cols elements, row-major.
  llvm::ArrayType *matrix_type(ir::Type t) {
    return llvm::ArrayType::get(elem_type(t.element()), t.matrix_elements());
  }
  /// The LLVM type of each of a value of type `t`'s parts (one per lane; a matrix is one part).
  Type *value_part_type(ir::Type t, bool vec) {
    return t.is_matrix() ? matrix_type(t) : part_type(t.element(), vec);
  }
  Type *mask_type() { return vec_type(B_.getInt1Ty()); }
  /// `t` in the shape (scalar or W-vector) of `like`.
  Type *shaped(Value *like, Type *t) { return like->getType()->isVectorTy() ? vec_type(t) : t; }
  Value *splat(Value *v) { return v->getType()->isVectorTy() ? v : B_.CreateVectorSplat(W_, v); }
  /// Splats the scalars among `vs` when any of them is a vector.
  void match(std::initializer_list<Value **> vs) {
    bool any_vector = false;
    for (Value **v : vs)
      any_vector |= (*v)->getType()->isVectorTy();
    if (any_vector)
      for (Value **v : vs)
        *v = splat(*v);
  }
  Value *int_const(Value *like, Type *t, uint64_t v) {
    return llvm::ConstantInt::get(shaped(like, t), v);
  }
  Value *all_true() { return llvm::ConstantInt::getTrue(mask_type()); }
  Value *all_false() { return llvm::ConstantInt::getFalse(mask_type()); }
  Value *any(Value *mask) { return B_.CreateOrReduce(mask); }
  llvm::AllocaInst *entry_alloca(Type *t, uint64_t count = 1, const char *name = "") {
    llvm::IRBuilder<> b(&function_->getEntryBlock(), function_->getEntryBlock().begin());
    return b.CreateAlloca(t, b.getInt64(count), name);
  }
  BasicBlock *block(const char *name) { return BasicBlock::Create(ctx_, name, function_); }
  /// After a branch that ends the current block: continue in a block no one reaches.
  void continue_dead() { B_.SetInsertPoint(block("dead")); }

  //===- Representation ----------------------------------------------------------------------===//

  bool is_vec(const ir::Value *v) const { return vec_.count(v) != 0; }
  const Parts &get(const ir::Value *v) {
    auto it = vals_.find(v);
    if (it == vals_.end())
      fail(v->defining_op(), "internal error: a value is used where it was not lowered (a bug "
                             "in cubecc's CPU backend)");
    return it->second;
  }
  Value *part(const ir::Value *v, unsigned k) { return get(v)[k]; }
  /// A part in the representation `vec` asks for (a gang-uniform vector gives its lane 0).
  Value *conform(Value *p, bool vec) {
    if (vec)
      return splat(p);
    return p->getType()->isVectorTy() ? B_.CreateExtractElement(p, uint64_t{0}) : p;
  }
  void define(const ir::Value *v, Parts parts) {
    if (!is_vec(v))
      for (Value *&p : parts)
        if (p->getType()->isVectorTy())
          fail(v->defining_op(), "internal error: a gang-uniform value was lowered as a vector "
                                 "(a bug in cubecc's CPU backend)");
    auto st = storage_.find(v);
    if (st != storage_.end() && gang_)
      store_storage(v, gang_, parts);
    vals_[v] = std::move(parts);
  }
  Parts zeros(const ir::Value *v, bool vec) {
    Parts p;
    for (unsigned k = 0; k < v->type().lanes(); ++k)
      p.push_back(llvm::Constant::getNullValue(value_part_type(v->type(), vec)));
    return p;
  }

  //===- Storage of values that cross segments ----------------------------------------------===//

  void make_storage(const ir::Value *v, bool per_gang) {
    if (storage_.count(v))
      return;
    Storage s;
    s.parts = v->type().lanes();
    s.part_type = value_part_type(v->type(), is_vec(v));
    s.per_gang = per_gang;
    s.ptr = entry_alloca(s.part_type, uint64_t{s.parts} * (per_gang ? G_ : 1), "slot");
    storage_[v] = s;
  }
  Value *storage_ptr(const Storage &s, Value *gang, unsigned k) {
    Value *index =
        s.per_gang
            ? B_.CreateAdd(B_.CreateMul(B_.CreateZExt(gang, B_.getInt64Ty()), B_.getInt64(s.parts)),
                           B_.getInt64(k))
            : B_.getInt64(k);
    return B_.CreateGEP(s.part_type, s.ptr, index);
  }
  Parts load_storage(const ir::Value *v, Value *gang) {
    const Storage &s = storage_.at(v);
    Parts p;
    for (unsigned k = 0; k < s.parts; ++k)
      p.push_back(B_.CreateLoad(s.part_type, storage_ptr(s, gang, k)));
    return p;
  }
  void store_storage(const ir::Value *v, Value *gang, const Parts &parts) {
    const Storage &s = storage_.at(v);
    for (unsigned k = 0; k < s.parts; ++k)
      B_.CreateStore(conform(parts[k], s.part_type->isVectorTy()), storage_ptr(s, gang, k));
  }
  /// A value's parts for gang `gang` at workgroup level.
  Parts read_at_gang(const ir::Value *v, Value *gang) {
    if (storage_.count(v))
      return load_storage(v, gang);
    return get(v); // parameters
  }
  /// A workgroup-uniform value at workgroup level: invocation 0's.
  Value *read_uniform(const ir::Value *v) {
    return conform(read_at_gang(v, B_.getInt32(0))[0], false);
  }
  /// Emits `body(i)` for i = 0 .. n - 1 (n >= 1) as a loop over an integer of `type`, in blocks
  /// named `name`.
  void counted_loop(llvm::IntegerType *type, uint64_t n, const char *name,
                    const std::function<void(Value *)> &body) {
    BasicBlock *pre = B_.GetInsertBlock(), *loop = block(name);
    BasicBlock *done = BasicBlock::Create(ctx_, std::string(name) + ".done", function_);
    B_.CreateBr(loop);
    B_.SetInsertPoint(loop);
    llvm::PHINode *i = B_.CreatePHI(type, 2);
    i->addIncoming(llvm::ConstantInt::get(type, 0), pre);
    body(i);
    Value *next = B_.CreateAdd(i, llvm::ConstantInt::get(type, 1));
    i->addIncoming(next, B_.GetInsertBlock());
    B_.CreateCondBr(B_.CreateICmpULT(next, llvm::ConstantInt::get(type, n)), loop, done);
    B_.SetInsertPoint(done);
  }
  /// Emits `body(gang)` for every gang (a loop when there are several).
  void for_each_gang(const std::function<void(Value *)> &body) {
    if (G_ == 1)
      body(B_.getInt32(0));
    else
      counted_loop(B_.getInt32Ty(), G_, "gangs", body);
  }
  void copy_to_storage(const std::vector<const ir::Value *> &targets,
                       std::span<ir::Value *const> sources) {
    if (targets.empty())
      return;
    for_each_gang([&](Value *g) {
      std::vector<Parts> vals;
      for (const ir::Value *s : sources)
        vals.push_back(read_at_gang(s, g));
      for (size_t i = 0; i < targets.size(); ++i)
        store_storage(targets[i], g, vals[i]);
    });
  }

  //===- Analyses before emission ------------------------------------------------------------===//

  void find_workgroup_level_ops();
  void decide_shapes();
  void assign_segments(const ir::Region &region);
  void plan_storage();
  int context_of_def(const ir::Value *v);

  //===- Emission ----------------------------------------------------------------------------===//

  void emit_entry();
  void emit_wg_region(const ir::Region &region);
  void emit_wg_op(const ir::Operation *op);
  void emit_wg_exit(const ir::Operation *term);
  void emit_segment(const std::vector<const ir::Operation *> &run);
  const ir::Operation *emit_ops(const ir::Region &region);
  void emit_op(const ir::Operation *op);
  void emit_if(const ir::Operation *op);
  void emit_for(const ir::Operation *op);
  void emit_while(const ir::Operation *op);
  void emit_exit(const ir::Operation *term);
  void emit_loop_yield(LoopContext &loop, const ir::Operation *term);
  void emit_builtin(const ir::Operation *op);
  void emit_load(const ir::Operation *op);
  void emit_store(const ir::Operation *op);
  void emit_atomic(const ir::Operation *op);
  void emit_print(const ir::Operation *op);
  void emit_subgroup(const ir::Operation *op);
  void check_matrices();
  void emit_matrix(const ir::Operation *op);
  /// A matrix value built element by element: `element(e)` for e = 0 .. rows x cols - 1.
  Value *build_matrix(ir::Type t, const std::function<Value *(Value *)> &element);
  /// A matrix value in a fresh stack slot, to index element by element.
  Value *spill_matrix(ir::Type t, Value *matrix);
  Value *matrix_element(ir::Type t, Value *slot, Value *e);
  /// A matrix element (of a, b or acc) as the double the interpreter sums it as.
  Value *matrix_element_to_f64(Scalar s, Value *v);

  //===- Lane semantics ----------------------------------------------------------------------===//

  Value *arith(Opcode op, Scalar s, Value *a, Value *b, Value *c);
  Value *int_arith(Opcode op, Scalar s, Value *a, Value *b, Value *c);
  Value *float_arith(Opcode op, Scalar s, Value *a, Value *b, Value *c);
  Value *float_min_max(Scalar s, Value *a, Value *b, bool is_max);
  Value *math_call(Opcode op, Scalar s, Value *a, Value *b);
  Value *convert(Scalar from, Scalar to, Value *v);
  Value *to_f32(Scalar s, Value *bits);
  Value *from_f32(Scalar s, Value *f);
  Value *f64_to_odd_f32(Value *d);
  /// fma of f16/bf16 values (as f32) rounded to odd in f64 and then in f32: exact product, the
  /// sum's error by TwoSum. Rounding the result to f16/bf16 is then one correct rounding.
  Value *half_fma_to_odd_f32(Value *a, Value *b, Value *c);
  Value *int64_to_odd_f64(Value *v, bool is_signed);
  Value *index64(Scalar s, Value *v) {
    Type *t = shaped(v, B_.getInt64Ty());
    return ir::is_signed(s) ? B_.CreateSExt(v, t) : B_.CreateZExt(v, t);
  }
  Value *identity(Opcode combine, Scalar s, bool sum_substitute);

  //===- Memory helpers ----------------------------------------------------------------------===//

  Value *check_bounds(const ir::Operation *op, const MemInfo &mem, Value *&idx64, unsigned lanes,
                      uint32_t kind, Value *mask);
  llvm::Function *fault_function();
  Value *local_element_index(const MemInfo &mem, Value *idx64, unsigned k);
  Value *local_row(const MemInfo &mem, Value *idx64, unsigned k);
  bool interleaved_access(const ir::Value *index, unsigned lanes);
  Value *no_wrap(Scalar index_type, Value *idx64, const Affine &affine, unsigned lanes);
  Value *concat(std::vector<Value *> parts);

  const ir::Kernel &kernel_;
  llvm::LLVMContext &ctx_;
  llvm::TargetMachine &machine_;
  LowerOptions opt_;
  llvm::IRBuilder<> B_;
  unsigned W_, N_, G_;
  std::array<uint32_t, 3> wg_;
  std::unique_ptr<llvm::Module> module_;
  llvm::Function *function_ = nullptr;
  llvm::Function *fault_fn_ = nullptr;
  Value *launch_ = nullptr, *shared_ = nullptr;
  Value *workgroup_id_[3] = {}, *num_workgroups_[3] = {};
  Value *lane_ = nullptr; ///< <0, 1, ..., W-1> as i32
  Value *gang_ = nullptr; ///< the current gang (i32) inside a segment, else null
  Value *mask_ = nullptr; ///< the current execution mask
  Value *gang_size_ = nullptr;
  std::unordered_map<const ir::Value *, Parts> vals_;
  std::unordered_map<const ir::Value *, Affine> affine_;
  std::unordered_map<const ir::Value *, MemInfo> memory_;
  std::unordered_map<const ir::Value *, Storage> storage_;
  std::unordered_set<const ir::Value *> vec_;
  std::unordered_set<const ir::Operation *> wg_ops_, uniform_loops_, ifs_with_exits_;
  std::unordered_map<const ir::Operation *, int> segment_of_;
  int next_segment_ = 0;
  bool has_wg_ops_ = false;
  std::vector<LoopContext> loops_;
  std::vector<WgLoop> wg_loops_;
  std::vector<Value *> heap_; ///< local arrays too big for the stack
  /// Frees the heap local arrays (at the insertion point): before every return of the kernel.
  void free_heap();
  /// The exported cubecc_cpu_interface text (cpu_abi.h), written as the entry reads parameters.
  std::string interface_;
};

/// Local arrays up to this size live on the calling thread's stack, bigger ones on the heap.
inline constexpr uint64_t kMaxStackLocalBytes = 64 * 1024;

} // namespace cubecc::llvm_backend
