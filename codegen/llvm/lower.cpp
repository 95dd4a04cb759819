//===- lower.cpp - cubecc IR to LLVM IR: SPMD on SIMD -----------------------------------------===//
//
// The scheme (docs/cpu.md has the long form):
//   - A workgroup of N invocations runs as G = ceil(N / W) gangs of W lanes; lane l of gang g is
//     local_index g * W + l. A gang is a subgroup.
//   - Every IR value is, per IR lane, one LLVM value: a scalar when it is the same in every
//     active lane of the gang (gang-uniform: parameters, constants, loads at uniform indices,
//     subgroup reductions, ...; decided by `decide_shapes` before emission), else a <W x T>
//     vector. f16 and bf16 values are their i16 bit patterns, converted with integer code.
//   - Control flow: an `if` on a gang-uniform condition branches; on a varying one, both sides
//     run under masks (a side whose mask is empty is skipped). A loop whose bounds and exits are
//     gang-uniform is an ordinary loop; otherwise it runs while any lane is active, each lane
//     leaving under its mask. Masks live in allocas that SROA turns back into SSA.
//   - Barriers: ops containing a barrier (and ifs holding an exit of such a loop) run once per
//     workgroup ("workgroup level", their control taken from invocation 0: the verifier makes
//     it uniform); the ops between them form segments that loop over the gangs. Values that
//     cross from a segment to anywhere else live in per-gang slots (allocas).
//   - Every op keeps the reference interpreter's semantics: guarded division and shifts,
//     saturating float-to-int conversion, minNum/maxNum with the interpreter's signed-zero and
//     NaN choices, f16/bf16 rounded once per op.
//
//===-----------------------------------------------------------------------------------------===//
#include "llvm/lower.h"

#include "cubecc/ir/ops.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/semantics.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace cubecc::llvm_backend {
namespace {

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

bool is_half(Scalar s) {
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
    switch (s) {
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
    }
    return B_.getInt32Ty();
  }
  Type *vec_type(Type *t) { return llvm::FixedVectorType::get(t, W_); }
  Type *part_type(Scalar s, bool vec) { return vec ? vec_type(elem_type(s)) : elem_type(s); }
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
      p.push_back(llvm::Constant::getNullValue(part_type(v->type().element(), vec)));
    return p;
  }

  //===- Storage of values that cross segments ----------------------------------------------===//

  void make_storage(const ir::Value *v, bool per_gang) {
    if (storage_.count(v))
      return;
    Storage s;
    s.parts = v->type().lanes();
    s.part_type = part_type(v->type().element(), is_vec(v));
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
  /// Emits `body(gang)` for every gang (a loop when there are several).
  void for_each_gang(const std::function<void(Value *)> &body) {
    if (G_ == 1) {
      body(B_.getInt32(0));
      return;
    }
    BasicBlock *pre = B_.GetInsertBlock(), *loop = block("gangs"), *done = block("gangs.done");
    B_.CreateBr(loop);
    B_.SetInsertPoint(loop);
    llvm::PHINode *g = B_.CreatePHI(B_.getInt32Ty(), 2);
    g->addIncoming(B_.getInt32(0), pre);
    body(g);
    Value *next = B_.CreateAdd(g, B_.getInt32(1));
    g->addIncoming(next, B_.GetInsertBlock());
    B_.CreateCondBr(B_.CreateICmpULT(next, B_.getInt32(G_)), loop, done);
    B_.SetInsertPoint(done);
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
  void emit_subgroup(const ir::Operation *op);

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
  Value *int64_to_odd_f64(Value *v, bool is_signed);
  Value *index64(Scalar s, Value *v) {
    Type *t = shaped(v, B_.getInt64Ty());
    return ir::is_signed(s) ? B_.CreateSExt(v, t) : B_.CreateZExt(v, t);
  }
  Value *identity(Opcode combine, Scalar s, bool sum_substitute);

  //===- Memory helpers ----------------------------------------------------------------------===//

  Value *check_bounds(const ir::Operation *op, const MemInfo &mem, Value *idx64, unsigned lanes,
                      uint32_t kind, Value *mask);
  llvm::Function *fault_function();
  Value *local_element_index(const MemInfo &mem, Value *idx64, unsigned k);

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
};

//===- Analyses
//--------------------------------------------------------------------------------===//

bool contains_barrier(const ir::Operation *op) {
  bool found = false;
  op->walk([&](const ir::Operation *o) { found |= o->opcode() == Opcode::Barrier; });
  return found;
}

bool is_loop(const ir::Operation *op) {
  return op->opcode() == Opcode::For || op->opcode() == Opcode::While;
}

/// The loop a break or continue leaves or restarts.
const ir::Operation *target_loop(const ir::Operation *exit) {
  const ir::Operation *p = exit->parent_op();
  while (p && !is_loop(p))
    p = p->parent_op();
  return p;
}

/// Calls `fn` on the break/continue ops inside `op`'s regions that target a loop enclosing
/// `op` (not descending into nested loops).
void for_each_outer_exit(const ir::Operation *op,
                         const std::function<void(const ir::Operation *)> &fn) {
  for (unsigned r = 0; r < op->num_regions(); ++r)
    for (const ir::Operation *o : op->region(r)) {
      if (o->opcode() == Opcode::Break || o->opcode() == Opcode::Continue)
        fn(o);
      else if (o->opcode() == Opcode::If)
        for_each_outer_exit(o, fn);
    }
}

void Lowering::find_workgroup_level_ops() {
  kernel_.walk([&](const ir::Operation *op) {
    if (op->opcode() == Opcode::Barrier || (op->has_flag(ir::HasRegions) && contains_barrier(op)))
      wg_ops_.insert(op);
  });
  // Ifs that hold an exit of a workgroup-level loop run at workgroup level too (the verifier
  // makes such exits uniform), innermost first so that enclosing ifs see them.
  std::vector<const ir::Operation *> ifs;
  kernel_.walk([&](const ir::Operation *op) {
    if (op->opcode() == Opcode::If)
      ifs.push_back(op);
  });
  for (auto it = ifs.rbegin(); it != ifs.rend(); ++it) {
    bool exits = false;
    for_each_outer_exit(
        *it, [&](const ir::Operation *e) { exits |= wg_ops_.count(target_loop(e)) != 0; });
    if (exits)
      wg_ops_.insert(*it);
    bool any_exit = false;
    for_each_outer_exit(*it, [&](const ir::Operation *) { any_exit = true; });
    if (any_exit)
      ifs_with_exits_.insert(*it);
  }
  has_wg_ops_ = !wg_ops_.empty();
}

/// Which values vary across the lanes of a gang (vec_); the rest are gang-uniform scalars. A
/// fixed point: values only ever become varying.
void Lowering::decide_shapes() {
  auto vec = [&](const ir::Value *v) { return vec_.count(v) != 0; };
  bool changed = true;
  auto mark = [&](const ir::Value *v) {
    if (vec_.insert(v).second)
      changed = true;
  };
  auto exits_uniform = [&](const ir::Operation *loop) {
    bool uniform = true;
    std::function<void(const ir::Region &, bool)> scan = [&](const ir::Region &r, bool under) {
      for (const ir::Operation *o : r) {
        if ((o->opcode() == Opcode::Break || o->opcode() == Opcode::Continue) &&
            target_loop(o) == loop && under)
          uniform = false;
        if (o->opcode() == Opcode::If) {
          bool u = under || vec(o->operand(0));
          scan(o->region(0), u);
          scan(o->region(1), u);
        }
      }
    };
    for (unsigned r = 0; r < loop->num_regions(); ++r)
      scan(loop->region(r), false);
    return uniform;
  };
  while (changed) {
    changed = false;
    uniform_loops_.clear();
    kernel_.walk([&](const ir::Operation *op) {
      Opcode o = op->opcode();
      bool any_operand = false;
      for (const ir::Value *v : op->operands())
        any_operand |= vec(v);
      switch (op->info().signature) {
      case ir::Signature::Builtin3:
      case ir::Signature::Builtin1:
        if (o == Opcode::GlobalId || o == Opcode::LocalId || o == Opcode::LocalIndex ||
            o == Opcode::SubgroupLane)
          mark(op->result());
        return;
      case ir::Signature::Load:
        if (vec(op->operand(1)) || op->operand(0)->type().kind() == ir::TypeKind::Local)
          mark(op->result());
        return;
      case ir::Signature::AtomicRmw:
      case ir::Signature::AtomicCmpXchg:
        mark(op->result());
        return;
      case ir::Signature::SubgroupUnary:
        if (o == Opcode::SubgroupInclusiveSum || o == Opcode::SubgroupExclusiveSum ||
            o == Opcode::SubgroupInclusiveMin || o == Opcode::SubgroupExclusiveMin ||
            o == Opcode::SubgroupInclusiveMax || o == Opcode::SubgroupExclusiveMax)
          mark(op->result());
        return;
      case ir::Signature::SubgroupShuffle:
        if (vec(op->operand(0)) && (o != Opcode::SubgroupBroadcast || vec(op->operand(1))))
          mark(op->result());
        return;
      case ir::Signature::SubgroupElect:
        mark(op->result());
        return;
      case ir::Signature::SubgroupBallot:
      case ir::Signature::SubgroupVote:
        return;
      case ir::Signature::If: {
        bool cond = vec(op->operand(0)) && !wg_ops_.count(op);
        for (unsigned i = 0; i < op->num_results(); ++i) {
          bool v = cond;
          for (unsigned r = 0; r < 2; ++r) {
            const ir::Operation *t = op->region(r).terminator();
            if (t && t->opcode() == Opcode::Yield && vec(t->operand(i)))
              v = true;
          }
          if (v)
            mark(op->result(i));
        }
        return;
      }
      case ir::Signature::For:
      case ir::Signature::While: {
        bool is_for = o == Opcode::For;
        bool uniform = wg_ops_.count(op) != 0;
        if (!uniform) {
          bool bounds = is_for
                            ? !vec(op->operand(0)) && !vec(op->operand(1)) && !vec(op->operand(2))
                            : !vec(op->region(0).terminator()->operand(0));
          uniform = bounds && exits_uniform(op);
        }
        if (uniform)
          uniform_loops_.insert(op);
        const ir::Region &carried_region = op->region(0);
        unsigned first = is_for ? 1 : 0, first_operand = is_for ? 3 : 0;
        // Terminators that set carried values (yield, continue) and results (break).
        std::vector<const ir::Operation *> sets_carried, sets_results;
        std::function<void(const ir::Region &)> scan = [&](const ir::Region &r) {
          for (const ir::Operation *t : r) {
            if ((t->opcode() == Opcode::Break || t->opcode() == Opcode::Continue) &&
                target_loop(t) == op)
              (t->opcode() == Opcode::Break ? sets_results : sets_carried).push_back(t);
            if (t->opcode() == Opcode::If)
              for (unsigned i = 0; i < 2; ++i)
                scan(t->region(i));
          }
        };
        const ir::Region &body = op->region(is_for ? 0 : 1);
        scan(body);
        if (body.terminator()->opcode() == Opcode::Yield)
          sets_carried.push_back(body.terminator());
        if (is_for) {
          if (!uniform)
            mark(carried_region.argument(0));
          for (unsigned c = 0; c < op->num_results(); ++c) {
            bool v = !uniform || vec(op->operand(first_operand + c));
            for (const ir::Operation *t : sets_carried)
              v |= vec(t->operand(c));
            for (const ir::Operation *t : sets_results)
              v |= vec(t->operand(c));
            if (v) {
              mark(carried_region.argument(first + c));
              mark(op->result(c));
            }
          }
        } else {
          for (unsigned c = 0; c < carried_region.num_arguments(); ++c) {
            bool v = !uniform || vec(op->operand(c));
            for (const ir::Operation *t : sets_carried)
              v |= vec(t->operand(c));
            if (v)
              mark(carried_region.argument(c));
          }
          const ir::Operation *cond = op->region(0).terminator();
          for (unsigned c = 0; c < op->num_results(); ++c) {
            bool fwd = !uniform || vec(cond->operand(c + 1));
            bool res = fwd;
            for (const ir::Operation *t : sets_results)
              res |= vec(t->operand(c));
            if (fwd)
              mark(op->region(1).argument(c));
            if (res) {
              mark(op->result(c));
              mark(op->region(1).argument(c)); // shares storage with the result
            }
          }
        }
        return;
      }
      default:
        break;
      }
      if (op->has_flag(ir::Pure) && any_operand)
        for (unsigned i = 0; i < op->num_results(); ++i)
          mark(op->result(i));
    });
  }
}

void Lowering::assign_segments(const ir::Region &region) {
  int current = -1;
  for (const ir::Operation *op : region) {
    if (op->is_terminator() || wg_ops_.count(op)) {
      segment_of_[op] = -1;
      current = -1;
      for (unsigned r = 0; r < op->num_regions(); ++r)
        assign_segments(op->region(r));
      continue;
    }
    if (current < 0)
      current = next_segment_++;
    const_cast<ir::Operation *>(op)->walk(
        [&](const ir::Operation *o) { segment_of_[o] = current; });
  }
}

/// -2: a parameter (visible everywhere); -1: defined at workgroup level; else its segment.
int Lowering::context_of_def(const ir::Value *v) {
  if (const ir::Operation *d = v->defining_op())
    return segment_of_.at(d);
  const ir::Operation *parent = v->owner_region()->parent_op();
  if (!parent)
    return -2;
  return segment_of_.at(parent);
}

void Lowering::plan_storage() {
  // Workgroup-level values: the results and region arguments of workgroup-level ops.
  for (const ir::Operation *op : wg_ops_) {
    if (op->opcode() == Opcode::For) {
      const ir::Region &body = op->region(0);
      make_storage(body.argument(0), false);
      for (unsigned c = 0; c < op->num_results(); ++c) {
        make_storage(body.argument(c + 1), true);
        storage_[op->result(c)] = storage_.at(body.argument(c + 1));
      }
    } else if (op->opcode() == Opcode::While) {
      for (unsigned c = 0; c < op->region(0).num_arguments(); ++c)
        make_storage(op->region(0).argument(c), true);
      for (unsigned c = 0; c < op->num_results(); ++c) {
        make_storage(op->region(1).argument(c), true);
        storage_[op->result(c)] = storage_.at(op->region(1).argument(c));
      }
    } else {
      for (unsigned c = 0; c < op->num_results(); ++c)
        make_storage(op->result(c), true);
    }
  }
  // Segment values used outside their segment.
  kernel_.walk([&](const ir::Operation *op) {
    int use = segment_of_.at(op);
    for (const ir::Value *v : op->operands()) {
      if (v->type().is_memory())
        continue;
      int def = context_of_def(v);
      if (def >= 0 && def != use)
        make_storage(v, true);
    }
  });
}

//===- Lane semantics ----------------------------------------------------------------------===//

Value *Lowering::to_f32(Scalar s, Value *bits) {
  if (s == Scalar::F32)
    return bits;
  Type *i32 = shaped(bits, B_.getInt32Ty()), *f32 = shaped(bits, B_.getFloatTy());
  Value *h = B_.CreateZExt(bits, i32);
  if (s == Scalar::BF16)
    return B_.CreateBitCast(B_.CreateShl(h, 16), f32);
  auto c = [&](uint64_t v) { return int_const(bits, B_.getInt32Ty(), v); };
  Value *sign = B_.CreateShl(B_.CreateAnd(h, c(0x8000)), 16);
  Value *exp = B_.CreateAnd(B_.CreateLShr(h, 10), c(0x1f));
  Value *mant = B_.CreateAnd(h, c(0x3ff));
  Value *normal = B_.CreateOr(
      sign, B_.CreateOr(B_.CreateShl(B_.CreateAdd(exp, c(112)), 23), B_.CreateShl(mant, 13)));
  Value *special = B_.CreateOr(sign, B_.CreateOr(c(0x7f800000), B_.CreateShl(mant, 13)));
  Value *sub = B_.CreateFMul(B_.CreateUIToFP(mant, f32), llvm::ConstantFP::get(f32, 0x1p-24));
  Value *sub_bits = B_.CreateOr(B_.CreateBitCast(sub, i32), sign);
  Value *r = B_.CreateSelect(B_.CreateICmpEQ(exp, c(0)), sub_bits,
                             B_.CreateSelect(B_.CreateICmpEQ(exp, c(31)), special, normal));
  return B_.CreateBitCast(r, f32);
}

Value *Lowering::from_f32(Scalar s, Value *f) {
  if (s == Scalar::F32)
    return f;
  Type *i32 = shaped(f, B_.getInt32Ty()), *i16 = shaped(f, B_.getInt16Ty());
  auto c = [&](uint64_t v) { return int_const(f, B_.getInt32Ty(), v); };
  Value *x = B_.CreateBitCast(f, i32);
  if (s == Scalar::BF16) {
    Value *is_nan = B_.CreateAnd(B_.CreateICmpEQ(B_.CreateAnd(x, c(0x7f800000)), c(0x7f800000)),
                                 B_.CreateICmpNE(B_.CreateAnd(x, c(0x7fffff)), c(0)));
    Value *nan = B_.CreateOr(B_.CreateLShr(x, 16), c(0x40));
    Value *rounded = B_.CreateLShr(
        B_.CreateAdd(x, B_.CreateAdd(c(0x7fff), B_.CreateAnd(B_.CreateLShr(x, 16), c(1)))), 16);
    return B_.CreateTrunc(B_.CreateSelect(is_nan, nan, rounded), i16);
  }
  Value *sign = B_.CreateAnd(B_.CreateLShr(x, 16), c(0x8000));
  Value *exp = B_.CreateAnd(B_.CreateLShr(x, 23), c(0xff));
  Value *mant = B_.CreateAnd(x, c(0x7fffff));
  Value *special = B_.CreateOr(
      sign, B_.CreateOr(c(0x7c00),
                        B_.CreateSelect(B_.CreateICmpNE(mant, c(0)),
                                        B_.CreateOr(c(0x200), B_.CreateLShr(mant, 13)), c(0))));
  Value *e = B_.CreateSub(exp, c(112)); // exp - 127 + 15, as signed
  Value *inf = B_.CreateOr(sign, c(0x7c00));
  Value *out = B_.CreateOr(sign, B_.CreateOr(B_.CreateShl(e, 10), B_.CreateLShr(mant, 13)));
  Value *rest = B_.CreateAnd(mant, c(0x1fff));
  Value *up = B_.CreateOr(B_.CreateICmpUGT(rest, c(0x1000)),
                          B_.CreateAnd(B_.CreateICmpEQ(rest, c(0x1000)),
                                       B_.CreateICmpNE(B_.CreateAnd(out, c(1)), c(0))));
  Value *normal = B_.CreateAdd(out, B_.CreateZExt(up, i32));
  // Subnormal results: the mantissa with its implicit bit, shifted right by 14 - e (14..24).
  Value *m = B_.CreateOr(mant, c(0x800000));
  Value *shift = B_.CreateSub(c(14), e);
  shift = B_.CreateSelect(B_.CreateICmpUGT(shift, c(31)), c(31), shift);
  Value *half = B_.CreateLShr(m, shift);
  Value *one = c(1);
  Value *rest2 = B_.CreateAnd(m, B_.CreateSub(B_.CreateShl(one, shift), one));
  Value *halfway = B_.CreateShl(one, B_.CreateSub(shift, one));
  Value *up2 = B_.CreateOr(B_.CreateICmpUGT(rest2, halfway),
                           B_.CreateAnd(B_.CreateICmpEQ(rest2, halfway),
                                        B_.CreateICmpNE(B_.CreateAnd(half, one), c(0))));
  Value *subnormal = B_.CreateOr(sign, B_.CreateAdd(half, B_.CreateZExt(up2, i32)));
  Value *r = B_.CreateSelect(
      B_.CreateICmpEQ(exp, c(0xff)), special,
      B_.CreateSelect(B_.CreateICmpSGE(e, c(31)), inf,
                      B_.CreateSelect(B_.CreateICmpSGE(e, c(1)), normal,
                                      B_.CreateSelect(B_.CreateICmpSGE(e, c(uint32_t(-10))),
                                                      subnormal, sign))));
  return B_.CreateTrunc(r, i16);
}

/// `d` rounded to float toward zero with the last bit set when inexact (round to odd): rounding
/// that again to f16/bf16 is a single correct rounding of `d` (as ir::from_double).
Value *Lowering::f64_to_odd_f32(Value *d) {
  Type *f32 = shaped(d, B_.getFloatTy()), *i32 = shaped(d, B_.getInt32Ty());
  Value *f = B_.CreateFPTrunc(d, f32);
  Value *back = B_.CreateFPExt(f, d->getType());
  Value *keep =
      B_.CreateOr(B_.CreateFCmpOEQ(back, d),
                  B_.CreateOr(B_.CreateFCmpUNO(d, d),
                              B_.CreateFCmpOEQ(B_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, f),
                                               llvm::ConstantFP::getInfinity(f32))));
  Value *bits = B_.CreateBitCast(f, i32);
  Value *away = B_.CreateFCmpOGT(B_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                 B_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d));
  Value *adjusted =
      B_.CreateSelect(away, B_.CreateSub(bits, int_const(d, B_.getInt32Ty(), 1)), bits);
  Value *odd = B_.CreateOr(adjusted, int_const(d, B_.getInt32Ty(), 1));
  return B_.CreateBitCast(B_.CreateSelect(keep, bits, odd), f32);
}

/// A 64-bit integer as a double that is exact, or rounded to odd past 2^53 (ir::convert_lane).
Value *Lowering::int64_to_odd_f64(Value *v, bool is_signed) {
  Type *i64 = v->getType(), *f64 = shaped(v, B_.getDoubleTy());
  auto c = [&](uint64_t x) { return int_const(v, B_.getInt64Ty(), x); };
  Value *negative = is_signed ? B_.CreateICmpSLT(v, c(0)) : nullptr;
  Value *magnitude = is_signed ? B_.CreateSelect(negative, B_.CreateSub(c(0), v), v) : v;
  Value *lz = B_.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, magnitude, B_.getFalse());
  Value *used = B_.CreateSub(c(64), lz);
  Value *shift = B_.CreateSelect(B_.CreateICmpUGT(used, c(53)), B_.CreateSub(used, c(53)), c(0));
  Value *kept = B_.CreateLShr(magnitude, shift);
  Value *lost = B_.CreateAnd(magnitude, B_.CreateSub(B_.CreateShl(c(1), shift), c(1)));
  kept = B_.CreateOr(kept, B_.CreateZExt(B_.CreateICmpNE(lost, c(0)), i64));
  Value *scale = B_.CreateBitCast(B_.CreateShl(B_.CreateAdd(shift, c(1023)), 52), f64);
  Value *x = B_.CreateFMul(B_.CreateUIToFP(kept, f64), scale);
  return is_signed ? B_.CreateSelect(negative, B_.CreateFNeg(x), x) : x;
}

Value *Lowering::convert(Scalar from, Scalar to, Value *v) {
  Type *to_type = shaped(v, elem_type(to));
  if (from == to)
    return v;
  if (to == Scalar::Bool) {
    if (ir::is_float(from)) {
      Value *f = is_half(from) ? to_f32(from, v) : v;
      return B_.CreateFCmpUNE(f, llvm::ConstantFP::get(f->getType(), 0.0));
    }
    return B_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (from == Scalar::Bool) {
    if (!ir::is_float(to))
      return B_.CreateZExt(v, to_type);
    if (is_half(to)) {
      uint64_t one = to == Scalar::F16 ? 0x3c00 : 0x3f80;
      return B_.CreateSelect(v, int_const(v, B_.getInt16Ty(), one),
                             int_const(v, B_.getInt16Ty(), 0));
    }
    return B_.CreateSelect(v, llvm::ConstantFP::get(to_type, 1.0),
                           llvm::ConstantFP::get(to_type, 0.0));
  }
  if (ir::is_float(from) && ir::is_float(to)) {
    if (is_half(from))
      v = to_f32(from, v), from = Scalar::F32;
    if (from == to)
      return v;
    if (to == Scalar::F64)
      return B_.CreateFPExt(v, to_type);
    if (to == Scalar::F32)
      return B_.CreateFPTrunc(v, to_type);
    if (from == Scalar::F64)
      v = f64_to_odd_f32(v);
    return from_f32(to, v);
  }
  if (ir::is_float(to)) {
    bool sgn = ir::is_signed(from);
    if (to == Scalar::F32 || to == Scalar::F64)
      return sgn ? B_.CreateSIToFP(v, to_type) : B_.CreateUIToFP(v, to_type);
    Type *f64 = shaped(v, B_.getDoubleTy());
    Value *d = ir::scalar_bits(from) == 64
                   ? int64_to_odd_f64(v, sgn)
                   : (sgn ? B_.CreateSIToFP(v, f64) : B_.CreateUIToFP(v, f64));
    return from_f32(to, f64_to_odd_f32(d));
  }
  if (ir::is_float(from)) {
    if (is_half(from))
      v = to_f32(from, v);
    auto id = ir::is_signed(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
    return B_.CreateIntrinsic(id, {to_type, v->getType()}, {v});
  }
  return ir::is_signed(from) ? B_.CreateSExtOrTrunc(v, to_type) : B_.CreateZExtOrTrunc(v, to_type);
}

Value *Lowering::float_min_max(Scalar s, Value *a, Value *b, bool is_max) {
  Value *fa = is_half(s) ? to_f32(s, a) : a, *fb = is_half(s) ? to_f32(s, b) : b;
  unsigned w = ir::scalar_bits(s);
  Type *int_type = shaped(a, B_.getIntNTy(w));
  Value *ia = is_half(s) ? a : B_.CreateBitCast(a, int_type);
  Value *ib = is_half(s) ? b : B_.CreateBitCast(b, int_type);
  Value *zero = llvm::Constant::getNullValue(int_type);
  Value *a_nan = B_.CreateFCmpUNO(fa, fa), *b_nan = B_.CreateFCmpUNO(fb, fb);
  Value *a_neg = B_.CreateICmpSLT(ia, zero), *b_neg = B_.CreateICmpSLT(ib, zero);
  Value *a_less =
      B_.CreateOr(B_.CreateFCmpOLT(fa, fb),
                  B_.CreateAnd(B_.CreateFCmpOEQ(fa, fb), B_.CreateAnd(a_neg, B_.CreateNot(b_neg))));
  Value *normal = is_max ? B_.CreateSelect(a_less, b, a) : B_.CreateSelect(a_less, a, b);
  Value *both = B_.CreateSelect(B_.CreateICmpULT(ia, ib), a, b);
  return B_.CreateSelect(B_.CreateAnd(a_nan, b_nan), both,
                         B_.CreateSelect(a_nan, b, B_.CreateSelect(b_nan, a, normal)));
}

Value *Lowering::math_call(Opcode op, Scalar s, Value *a, Value *b) {
  const char *base = nullptr;
  switch (op) {
  case Opcode::Exp:
    base = "exp";
    break;
  case Opcode::Exp2:
    base = "exp2";
    break;
  case Opcode::Log:
    base = "log";
    break;
  case Opcode::Log2:
    base = "log2";
    break;
  case Opcode::Sin:
    base = "sin";
    break;
  case Opcode::Cos:
    base = "cos";
    break;
  case Opcode::Tanh:
    base = "tanh";
    break;
  case Opcode::Erf:
    base = "erf";
    break;
  case Opcode::Pow:
    base = "pow";
    break;
  default:
    return nullptr;
  }
  bool f32 = s == Scalar::F32;
  std::string scalar_name = std::string(base) + (f32 ? "f" : "");
  Type *elem = f32 ? B_.getFloatTy() : B_.getDoubleTy();
  auto declare = [&](const std::string &name, Type *t) {
    std::vector<Type *> params(b ? 2 : 1, t);
    llvm::FunctionCallee callee =
        module_->getOrInsertFunction(name, llvm::FunctionType::get(t, params, false));
    if (auto *fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
      fn->setDoesNotThrow();
      fn->setDoesNotAccessMemory();
      fn->setWillReturn();
    }
    return callee;
  };
  if (!a->getType()->isVectorTy()) {
    std::vector<Value *> args = {a};
    if (b)
      args.push_back(b);
    return B_.CreateCall(declare(scalar_name, elem), args);
  }
  // glibc's libmvec: _ZGV<isa>N<lanes>v[v]_<name>; isa b = SSE4, d = AVX2, e = AVX-512.
  char isa = opt_.level == "x86-64-v4" ? 'e' : opt_.level == "x86-64-v3" ? 'd' : 'b';
  unsigned lanes = f32 ? W_ : W_ / 2;
  std::string name = fmt::format("_ZGV{}N{}{}_{}", isa, lanes, b ? "vv" : "v", scalar_name);
  Type *chunk = llvm::FixedVectorType::get(elem, lanes);
  llvm::FunctionCallee callee = declare(name, chunk);
  if (f32) {
    std::vector<Value *> args = {a};
    if (b)
      args.push_back(b);
    return B_.CreateCall(callee, args);
  }
  Value *result = llvm::PoisonValue::get(a->getType());
  for (unsigned half = 0; half < 2; ++half) {
    llvm::SmallVector<int, 16> pick, place;
    for (unsigned i = 0; i < lanes; ++i)
      pick.push_back(static_cast<int>(half * lanes + i));
    std::vector<Value *> args = {B_.CreateShuffleVector(a, pick)};
    if (b)
      args.push_back(B_.CreateShuffleVector(b, pick));
    Value *r = B_.CreateCall(callee, args);
    for (unsigned i = 0; i < W_; ++i)
      place.push_back(i / lanes == half ? static_cast<int>(i % lanes) : -1);
    Value *widened = B_.CreateShuffleVector(r, place);
    llvm::SmallVector<int, 16> merge;
    for (unsigned i = 0; i < W_; ++i)
      merge.push_back(i / lanes == half ? static_cast<int>(W_ + i) : static_cast<int>(i));
    result = B_.CreateShuffleVector(result, widened, merge);
  }
  return result;
}

Value *Lowering::float_arith(Opcode op, Scalar s, Value *a, Value *b, Value *c) {
  switch (op) {
  case Opcode::Min:
  case Opcode::Max:
    return float_min_max(s, a, b, op == Opcode::Max);
  case Opcode::Clamp:
    return float_min_max(s, float_min_max(s, a, b, true), c, false);
  case Opcode::Neg:
    if (is_half(s))
      return B_.CreateXor(a, int_const(a, B_.getInt16Ty(), 0x8000));
    return B_.CreateFNeg(a);
  case Opcode::Abs:
    if (is_half(s))
      return B_.CreateAnd(a, int_const(a, B_.getInt16Ty(), 0x7fff));
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
  default:
    break;
  }
  if (is_half(s)) {
    Value *fa = to_f32(s, a), *fb = b ? to_f32(s, b) : nullptr, *fc = c ? to_f32(s, c) : nullptr;
    Value *r = float_arith(op, Scalar::F32, fa, fb, fc);
    return r->getType()->getScalarType()->isIntegerTy(1) ? r : from_f32(s, r);
  }
  switch (op) {
  case Opcode::Add:
    return B_.CreateFAdd(a, b);
  case Opcode::Sub:
    return B_.CreateFSub(a, b);
  case Opcode::Mul:
    return B_.CreateFMul(a, b);
  case Opcode::Div:
    return B_.CreateFDiv(a, b);
  case Opcode::Rem:
    return B_.CreateFRem(a, b);
  case Opcode::Eq:
    return B_.CreateFCmpOEQ(a, b);
  case Opcode::Ne:
    return B_.CreateFCmpUNE(a, b);
  case Opcode::Lt:
    return B_.CreateFCmpOLT(a, b);
  case Opcode::Le:
    return B_.CreateFCmpOLE(a, b);
  case Opcode::Gt:
    return B_.CreateFCmpOGT(a, b);
  case Opcode::Ge:
    return B_.CreateFCmpOGE(a, b);
  case Opcode::Sqrt:
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a);
  case Opcode::Rsqrt:
    return B_.CreateFDiv(llvm::ConstantFP::get(a->getType(), 1.0),
                         B_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a));
  case Opcode::Floor:
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, a);
  case Opcode::Ceil:
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, a);
  case Opcode::Round:
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::round, a);
  case Opcode::Fma:
    return B_.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
  default:
    return math_call(op, s, a, b);
  }
}

Value *Lowering::int_arith(Opcode op, Scalar s, Value *a, Value *b, Value *c) {
  bool sgn = ir::is_signed(s);
  unsigned w = ir::scalar_bits(s);
  Type *t = a->getType();
  auto k = [&](uint64_t v) { return llvm::ConstantInt::get(t, v); };
  switch (op) {
  case Opcode::Add:
    return B_.CreateAdd(a, b);
  case Opcode::Sub:
    return B_.CreateSub(a, b);
  case Opcode::Mul:
    return B_.CreateMul(a, b);
  case Opcode::Div:
  case Opcode::Rem: {
    // The interpreter's choices: x / 0 = 0, x % 0 = 0, MIN / -1 = MIN, x % -1 = 0.
    Value *zero = B_.CreateICmpEQ(b, k(0));
    Value *minus_one = sgn ? B_.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(t)) : nullptr;
    Value *bad = sgn ? B_.CreateOr(zero, minus_one) : zero;
    Value *safe = B_.CreateSelect(bad, k(1), b);
    if (op == Opcode::Div) {
      Value *q = sgn ? B_.CreateSDiv(a, safe) : B_.CreateUDiv(a, safe);
      if (sgn)
        q = B_.CreateSelect(minus_one, B_.CreateSub(k(0), a), q);
      return B_.CreateSelect(zero, k(0), q);
    }
    Value *r = sgn ? B_.CreateSRem(a, safe) : B_.CreateURem(a, safe);
    return B_.CreateSelect(bad, k(0), r);
  }
  case Opcode::Neg:
    return B_.CreateSub(k(0), a);
  case Opcode::Abs:
    return B_.CreateSelect(B_.CreateICmpSLT(a, k(0)), B_.CreateSub(k(0), a), a);
  case Opcode::Min:
    return B_.CreateSelect(sgn ? B_.CreateICmpSLT(a, b) : B_.CreateICmpULT(a, b), a, b);
  case Opcode::Max:
    return B_.CreateSelect(sgn ? B_.CreateICmpSGT(a, b) : B_.CreateICmpUGT(a, b), a, b);
  case Opcode::Clamp:
    return int_arith(Opcode::Min, s, int_arith(Opcode::Max, s, a, b, nullptr), c, nullptr);
  case Opcode::And:
    return B_.CreateAnd(a, b);
  case Opcode::Or:
    return B_.CreateOr(a, b);
  case Opcode::Xor:
    return B_.CreateXor(a, b);
  case Opcode::Not:
    return B_.CreateNot(a);
  case Opcode::Shl:
    return B_.CreateShl(a, B_.CreateAnd(b, k(w - 1)));
  case Opcode::Shr:
    return sgn ? B_.CreateAShr(a, B_.CreateAnd(b, k(w - 1)))
               : B_.CreateLShr(a, B_.CreateAnd(b, k(w - 1)));
  case Opcode::Eq:
    return B_.CreateICmpEQ(a, b);
  case Opcode::Ne:
    return B_.CreateICmpNE(a, b);
  case Opcode::Lt:
    return sgn ? B_.CreateICmpSLT(a, b) : B_.CreateICmpULT(a, b);
  case Opcode::Le:
    return sgn ? B_.CreateICmpSLE(a, b) : B_.CreateICmpULE(a, b);
  case Opcode::Gt:
    return sgn ? B_.CreateICmpSGT(a, b) : B_.CreateICmpUGT(a, b);
  case Opcode::Ge:
    return sgn ? B_.CreateICmpSGE(a, b) : B_.CreateICmpUGE(a, b);
  default:
    return nullptr;
  }
}

Value *Lowering::arith(Opcode op, Scalar s, Value *a, Value *b, Value *c) {
  if (b && c)
    match({&a, &b, &c});
  else if (b)
    match({&a, &b});
  return ir::is_float(s) ? float_arith(op, s, a, b, c) : int_arith(op, s, a, b, c);
}

Value *Lowering::identity(Opcode combine, Scalar s, bool sum_substitute) {
  Type *t = elem_type(s);
  unsigned w = ir::scalar_bits(s);
  switch (combine) {
  case Opcode::Add:
    if (!ir::is_float(s))
      return llvm::ConstantInt::get(t, 0);
    if (is_half(s))
      return llvm::ConstantInt::get(t, sum_substitute ? 0x8000 : 0);
    return llvm::ConstantFP::get(t, sum_substitute ? -0.0 : 0.0);
  case Opcode::Or:
  case Opcode::Xor:
    return llvm::ConstantInt::get(t, 0);
  case Opcode::And:
    return llvm::Constant::getAllOnesValue(t);
  case Opcode::Min:
  case Opcode::Max: {
    bool is_min = combine == Opcode::Min;
    if (s == Scalar::F16)
      return llvm::ConstantInt::get(t, is_min ? 0x7c00 : 0xfc00);
    if (s == Scalar::BF16)
      return llvm::ConstantInt::get(t, is_min ? 0x7f80 : 0xff80);
    if (ir::is_float(s))
      return llvm::ConstantFP::getInfinity(t, !is_min);
    if (ir::is_signed(s))
      return llvm::ConstantInt::get(t, is_min ? ir::width_mask(w - 1) : uint64_t{1} << (w - 1));
    return llvm::ConstantInt::get(t, is_min ? ir::width_mask(w) : 0);
  }
  default:
    return llvm::ConstantInt::get(t, 0);
  }
}

//===- Memory ------------------------------------------------------------------------------===//

llvm::Function *Lowering::fault_function() {
  if (fault_fn_)
    return fault_fn_;
  Type *ptr = B_.getPtrTy(), *i32 = B_.getInt32Ty(), *i64 = B_.getInt64Ty();
  auto *type = llvm::FunctionType::get(B_.getVoidTy(), {ptr, i32, i32, i64, i64, i32, i32}, false);
  fault_fn_ = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, "cubecc_fault",
                                     module_.get());
  fault_fn_->addFnAttr(llvm::Attribute::NoInline);
  fault_fn_->addFnAttr(llvm::Attribute::Cold);
  llvm::IRBuilder<> b(BasicBlock::Create(ctx_, "entry", fault_fn_));
  auto arg = [&](unsigned i) { return fault_fn_->getArg(i); };
  Value *record = b.CreateLoad(ptr, b.CreateConstGEP1_64(b.getInt8Ty(), arg(0), 40));
  BasicBlock *claim = BasicBlock::Create(ctx_, "claim", fault_fn_);
  BasicBlock *fill = BasicBlock::Create(ctx_, "fill", fault_fn_);
  BasicBlock *done = BasicBlock::Create(ctx_, "done", fault_fn_);
  b.CreateCondBr(b.CreateIsNull(record), done, claim);
  b.SetInsertPoint(claim);
  Value *pair = b.CreateAtomicCmpXchg(record, b.getInt32(0), arg(1), llvm::MaybeAlign(4),
                                      llvm::AtomicOrdering::SequentiallyConsistent,
                                      llvm::AtomicOrdering::SequentiallyConsistent);
  b.CreateCondBr(b.CreateExtractValue(pair, 1), fill, done);
  b.SetInsertPoint(fill);
  auto field = [&](uint64_t offset) { return b.CreateConstGEP1_64(b.getInt8Ty(), record, offset); };
  b.CreateStore(arg(2), field(4));
  b.CreateStore(arg(3), field(8));
  b.CreateStore(arg(4), field(16));
  b.CreateStore(arg(5), field(24));
  b.CreateStore(arg(6), field(28));
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  return fault_fn_;
}

/// Checked mode: lanes of `mask` whose access [idx, idx + lanes) leaves the buffer record the
/// launch's first fault and drop out of the returned mask.
Value *Lowering::check_bounds(const ir::Operation *op, const MemInfo &mem, Value *idx64,
                              unsigned lanes, uint32_t kind, Value *mask) {
  if (!opt_.checked || mem.kind != MemInfo::Buffer)
    return mask;
  Value *count = mem.count;
  Value *count_v = idx64->getType()->isVectorTy() ? splat(count) : count;
  Value *ok = B_.CreateAnd(
      B_.CreateICmpULT(idx64, count_v),
      B_.CreateICmpUGE(B_.CreateSub(count_v, idx64), int_const(idx64, B_.getInt64Ty(), lanes)));
  Value *bad = B_.CreateAnd(mask, splat(B_.CreateNot(ok)));
  BasicBlock *record = block("fault"), *cont = block("fault.done");
  B_.CreateCondBr(any(bad), record, cont);
  B_.SetInsertPoint(record);
  Value *first = B_.CreateBinaryIntrinsic(llvm::Intrinsic::cttz,
                                          B_.CreateBitCast(bad, B_.getIntNTy(W_)), B_.getTrue());
  Value *index = idx64->getType()->isVectorTy() ? B_.CreateExtractElement(idx64, first) : idx64;
  B_.CreateCall(fault_function(),
                {launch_, B_.getInt32(kind), B_.getInt32(mem.param), index, count,
                 B_.getInt32(op->location().line), B_.getInt32(op->location().col)});
  B_.CreateBr(cont);
  B_.SetInsertPoint(cont);
  return B_.CreateAnd(mask, splat(ok));
}

/// The element index (lane-interleaved layout) of element idx + k of a local array, per lane.
Value *Lowering::local_element_index(const MemInfo &mem, Value *idx64, unsigned k) {
  Value *copy = has_wg_ops_ ? B_.CreateZExt(gang_, B_.getInt64Ty()) : B_.getInt64(0);
  Value *row = B_.CreateAdd(B_.CreateMul(copy, B_.getInt64(mem.n)), B_.getInt64(k));
  Value *element = B_.CreateAdd(splat(idx64), splat(row));
  return B_.CreateAdd(B_.CreateMul(element, splat(B_.getInt64(W_))),
                      B_.CreateZExt(lane_, vec_type(B_.getInt64Ty())));
}

void Lowering::emit_load(const ir::Operation *op) {
  const MemInfo &mem = memory_.at(op->operand(0));
  const ir::Value *index = op->operand(1);
  Scalar is = index->type().element();
  Type *t = elem_type(mem.element);
  unsigned lanes = op->result()->type().lanes();
  Value *idx = part(index, 0);
  Value *idx64 = index64(is, idx);
  Value *mask = check_bounds(op, mem, idx64, lanes, 1, mask_);
  Parts out;
  llvm::Align align(ir::scalar_bits(mem.element) / 8);
  if (mem.kind == MemInfo::Local) {
    for (unsigned k = 0; k < lanes; ++k) {
      Value *ptrs = B_.CreateGEP(t, mem.base, local_element_index(mem, idx64, k));
      out.push_back(B_.CreateMaskedGather(vec_type(t), ptrs, align, mask,
                                          llvm::Constant::getNullValue(vec_type(t))));
    }
    define(op->result(), out);
    return;
  }
  if (!idx->getType()->isVectorTy()) {
    // One address for the whole gang: a scalar load when any lane is active.
    BasicBlock *pre = B_.GetInsertBlock(), *load = block("load.uniform"),
               *done = block("load.done");
    B_.CreateCondBr(any(mask), load, done);
    B_.SetInsertPoint(load);
    Parts loaded;
    for (unsigned k = 0; k < lanes; ++k)
      loaded.push_back(B_.CreateAlignedLoad(
          t, B_.CreateGEP(t, mem.base, B_.CreateAdd(idx64, B_.getInt64(k))), align));
    BasicBlock *end = B_.GetInsertBlock();
    B_.CreateBr(done);
    B_.SetInsertPoint(done);
    for (unsigned k = 0; k < lanes; ++k) {
      llvm::PHINode *phi = B_.CreatePHI(t, 2);
      phi->addIncoming(llvm::Constant::getNullValue(t), pre);
      phi->addIncoming(loaded[k], end);
      out.push_back(phi);
    }
    define(op->result(), out);
    return;
  }
  auto aff = affine_.find(index);
  if (lanes == 1 && aff != affine_.end() && aff->second.stride == 1) {
    // Consecutive lanes: one masked vector load (unless the index wraps inside the gang).
    Value *first = index64(is, aff->second.base);
    Value *last = B_.CreateExtractElement(idx64, uint64_t{W_ - 1});
    Value *no_wrap = B_.CreateICmpEQ(last, B_.CreateAdd(first, B_.getInt64(W_ - 1)));
    BasicBlock *pre_fast = block("load.vector"), *slow = block("load.gather"),
               *done = block("load.done");
    B_.CreateCondBr(no_wrap, pre_fast, slow);
    B_.SetInsertPoint(pre_fast);
    Value *fast = B_.CreateMaskedLoad(vec_type(t), B_.CreateGEP(t, mem.base, first), align, mask,
                                      llvm::Constant::getNullValue(vec_type(t)));
    BasicBlock *fast_end = B_.GetInsertBlock();
    B_.CreateBr(done);
    B_.SetInsertPoint(slow);
    Value *gathered = B_.CreateMaskedGather(vec_type(t), B_.CreateGEP(t, mem.base, idx64), align,
                                            mask, llvm::Constant::getNullValue(vec_type(t)));
    BasicBlock *slow_end = B_.GetInsertBlock();
    B_.CreateBr(done);
    B_.SetInsertPoint(done);
    llvm::PHINode *phi = B_.CreatePHI(vec_type(t), 2);
    phi->addIncoming(fast, fast_end);
    phi->addIncoming(gathered, slow_end);
    define(op->result(), {phi});
    return;
  }
  for (unsigned k = 0; k < lanes; ++k) {
    Value *ptrs = B_.CreateGEP(t, mem.base, B_.CreateAdd(idx64, splat(B_.getInt64(k))));
    out.push_back(B_.CreateMaskedGather(vec_type(t), ptrs, align, mask,
                                        llvm::Constant::getNullValue(vec_type(t))));
  }
  define(op->result(), out);
}

void Lowering::emit_store(const ir::Operation *op) {
  const MemInfo &mem = memory_.at(op->operand(0));
  const ir::Value *index = op->operand(1);
  Scalar is = index->type().element();
  Type *t = elem_type(mem.element);
  const Parts &value = get(op->operand(2));
  unsigned lanes = op->operand(2)->type().lanes();
  Value *idx = part(index, 0);
  Value *idx64 = index64(is, idx);
  Value *mask = check_bounds(op, mem, idx64, lanes, 2, mask_);
  llvm::Align align(ir::scalar_bits(mem.element) / 8);
  if (mem.kind == MemInfo::Local) {
    for (unsigned k = 0; k < lanes; ++k)
      B_.CreateMaskedScatter(splat(value[k]),
                             B_.CreateGEP(t, mem.base, local_element_index(mem, idx64, k)), align,
                             mask);
    return;
  }
  bool uniform_value = true;
  for (Value *v : value)
    uniform_value &= !v->getType()->isVectorTy();
  if (!idx->getType()->isVectorTy() && uniform_value) {
    BasicBlock *store = block("store.uniform"), *done = block("store.done");
    B_.CreateCondBr(any(mask), store, done);
    B_.SetInsertPoint(store);
    for (unsigned k = 0; k < lanes; ++k)
      B_.CreateAlignedStore(value[k],
                            B_.CreateGEP(t, mem.base, B_.CreateAdd(idx64, B_.getInt64(k))), align);
    B_.CreateBr(done);
    B_.SetInsertPoint(done);
    return;
  }
  auto aff = affine_.find(index);
  if (lanes == 1 && aff != affine_.end() && aff->second.stride == 1) {
    Value *first = index64(is, aff->second.base);
    Value *last = B_.CreateExtractElement(idx64, uint64_t{W_ - 1});
    Value *no_wrap = B_.CreateICmpEQ(last, B_.CreateAdd(first, B_.getInt64(W_ - 1)));
    BasicBlock *fast = block("store.vector"), *slow = block("store.scatter"),
               *done = block("store.done");
    B_.CreateCondBr(no_wrap, fast, slow);
    B_.SetInsertPoint(fast);
    B_.CreateMaskedStore(splat(value[0]), B_.CreateGEP(t, mem.base, first), align, mask);
    B_.CreateBr(done);
    B_.SetInsertPoint(slow);
    B_.CreateMaskedScatter(splat(value[0]), B_.CreateGEP(t, mem.base, splat(idx64)), align, mask);
    B_.CreateBr(done);
    B_.SetInsertPoint(done);
    return;
  }
  // Scatters write lanes in order, so the highest active lane wins a shared address (the
  // interpreter's order).
  for (unsigned k = 0; k < lanes; ++k)
    B_.CreateMaskedScatter(
        splat(value[k]),
        B_.CreateGEP(t, mem.base, B_.CreateAdd(splat(idx64), splat(B_.getInt64(k)))), align, mask);
}

void Lowering::emit_atomic(const ir::Operation *op) {
  const MemInfo &mem = memory_.at(op->operand(0));
  Scalar s = op->result()->type().element();
  Scalar is = op->operand(1)->type().element();
  Type *t = elem_type(s);
  Value *idx64 = index64(is, part(op->operand(1), 0));
  Value *mask = check_bounds(op, mem, idx64, 1, 3, mask_);
  Value *v = part(op->operand(2), 0);
  Value *v2 = op->num_operands() > 3 ? part(op->operand(3), 0) : nullptr;
  llvm::AllocaInst *result = entry_alloca(vec_type(t), 1, "atomic.old");
  B_.CreateStore(llvm::Constant::getNullValue(vec_type(t)), result);
  llvm::Align align(ir::scalar_bits(s) / 8);
  auto lane_of = [&](Value *x, unsigned l) {
    return x->getType()->isVectorTy() ? B_.CreateExtractElement(x, uint64_t{l}) : x;
  };
  auto order = llvm::AtomicOrdering::Monotonic;
  for (unsigned l = 0; l < W_; ++l) {
    BasicBlock *run = block("atomic.lane"), *next = block("atomic.next");
    B_.CreateCondBr(B_.CreateExtractElement(mask, uint64_t{l}), run, next);
    B_.SetInsertPoint(run);
    Value *ptr = B_.CreateGEP(t, mem.base, lane_of(idx64, l));
    Value *val = lane_of(v, l);
    Value *old = nullptr;
    bool flt = ir::is_float(s);
    Type *int_type = B_.getIntNTy(ir::scalar_bits(s));
    switch (op->opcode()) {
    case Opcode::AtomicAdd:
      if (!flt) {
        old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, ptr, val, align, order);
      } else if (!is_half(s)) {
        old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::FAdd, ptr, val, align, order);
      } else {
        // f16/bf16: a compare-exchange loop on the bits, the sum rounded once.
        Value *initial = B_.CreateAlignedLoad(t, ptr, align);
        llvm::cast<llvm::LoadInst>(initial)->setAtomic(order);
        BasicBlock *before = B_.GetInsertBlock(), *loop = block("atomic.cas"),
                   *done = block("atomic.cas.done");
        B_.CreateBr(loop);
        B_.SetInsertPoint(loop);
        llvm::PHINode *current = B_.CreatePHI(t, 2);
        current->addIncoming(initial, before);
        Value *sum = from_f32(s, B_.CreateFAdd(to_f32(s, current), to_f32(s, val)));
        Value *pair = B_.CreateAtomicCmpXchg(ptr, current, sum, align, order, order);
        current->addIncoming(B_.CreateExtractValue(pair, 0), loop);
        B_.CreateCondBr(B_.CreateExtractValue(pair, 1), done, loop);
        B_.SetInsertPoint(done);
        old = current;
      }
      break;
    case Opcode::AtomicSub:
      old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::Sub, ptr, val, align, order);
      break;
    case Opcode::AtomicMin:
      old = B_.CreateAtomicRMW(ir::is_signed(s) ? llvm::AtomicRMWInst::Min
                                                : llvm::AtomicRMWInst::UMin,
                               ptr, val, align, order);
      break;
    case Opcode::AtomicMax:
      old = B_.CreateAtomicRMW(ir::is_signed(s) ? llvm::AtomicRMWInst::Max
                                                : llvm::AtomicRMWInst::UMax,
                               ptr, val, align, order);
      break;
    case Opcode::AtomicAnd:
      old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::And, ptr, val, align, order);
      break;
    case Opcode::AtomicOr:
      old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::Or, ptr, val, align, order);
      break;
    case Opcode::AtomicXor:
      old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::Xor, ptr, val, align, order);
      break;
    case Opcode::AtomicXchg:
      old = B_.CreateBitCast(B_.CreateAtomicRMW(llvm::AtomicRMWInst::Xchg, ptr,
                                                B_.CreateBitCast(val, int_type), align, order),
                             t);
      break;
    case Opcode::AtomicCmpXchg:
      old = B_.CreateExtractValue(
          B_.CreateAtomicCmpXchg(ptr, val, lane_of(v2, l), align, order, order), 0);
      break;
    default:
      fail(op, "internal error: unknown atomic");
    }
    Value *all = B_.CreateLoad(vec_type(t), result);
    B_.CreateStore(B_.CreateInsertElement(all, old, uint64_t{l}), result);
    B_.CreateBr(next);
    B_.SetInsertPoint(next);
  }
  define(op->result(), {B_.CreateLoad(vec_type(t), result)});
}

//===- Subgroup operations -----------------------------------------------------------------===//

void Lowering::emit_subgroup(const ir::Operation *op) {
  Opcode o = op->opcode();
  Value *mask = mask_;
  Type *lane_int = B_.getIntNTy(W_);
  auto bits = [&](Value *m) { return B_.CreateBitCast(m, lane_int); };
  switch (o) {
  case Opcode::SubgroupElect: {
    Value *first = B_.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, bits(mask), B_.getFalse());
    first = B_.CreateZExtOrTrunc(first, B_.getInt32Ty());
    define(op->result(), {B_.CreateICmpEQ(lane_, splat(first))});
    return;
  }
  case Opcode::SubgroupBallot: {
    Value *set = B_.CreateAnd(mask, splat(part(op->operand(0), 0)));
    Value *word = B_.CreateZExtOrTrunc(bits(set), B_.getInt32Ty());
    define(op->result(), {word, B_.getInt32(0), B_.getInt32(0), B_.getInt32(0)});
    return;
  }
  case Opcode::SubgroupAll:
  case Opcode::SubgroupAny: {
    Value *c = splat(part(op->operand(0), 0));
    Value *r = o == Opcode::SubgroupAny ? any(B_.CreateAnd(mask, c))
                                        : B_.CreateNot(any(B_.CreateAnd(mask, B_.CreateNot(c))));
    define(op->result(), {r});
    return;
  }
  default:
    break;
  }
  const ir::Value *x = op->operand(0);
  Scalar s = x->type().element();
  unsigned lanes = x->type().lanes();
  Parts out;
  if (op->info().signature == ir::Signature::SubgroupShuffle) {
    Value *arg = part(op->operand(1), 0);
    for (unsigned k = 0; k < lanes; ++k) {
      Value *xv = part(x, k);
      if (!xv->getType()->isVectorTy()) {
        out.push_back(xv); // every lane holds the same value: any source gives it
        continue;
      }
      if (o == Opcode::SubgroupBroadcast && !arg->getType()->isVectorTy()) {
        out.push_back(B_.CreateExtractElement(xv, B_.CreateAnd(arg, B_.getInt32(W_ - 1))));
        continue;
      }
      Value *a = splat(arg);
      Value *src = o == Opcode::SubgroupShuffleXor    ? B_.CreateXor(lane_, a)
                   : o == Opcode::SubgroupShuffleUp   ? B_.CreateSub(lane_, a)
                   : o == Opcode::SubgroupShuffleDown ? B_.CreateAdd(lane_, a)
                                                      : a;
      Value *in_range = nullptr;
      if (o == Opcode::SubgroupShuffleUp)
        in_range = B_.CreateICmpULE(a, lane_);
      else if (o == Opcode::SubgroupShuffleDown)
        in_range = B_.CreateAnd(B_.CreateICmpULT(a, splat(gang_size_)),
                                B_.CreateICmpULT(src, splat(gang_size_)));
      src = B_.CreateAnd(src, splat(B_.getInt32(W_ - 1)));
      // A lane permutation through memory: spill the gang's vector, gather it back.
      Type *vt = xv->getType();
      bool is_bool = vt->getScalarType()->isIntegerTy(1);
      Value *stored = is_bool ? B_.CreateZExt(xv, vec_type(B_.getInt8Ty())) : xv;
      llvm::AllocaInst *spill = entry_alloca(stored->getType(), 1, "shuffle");
      B_.CreateStore(stored, spill);
      Type *et = stored->getType()->getScalarType();
      Value *ptrs = B_.CreateGEP(et, spill, B_.CreateZExt(src, vec_type(B_.getInt64Ty())));
      Value *r =
          B_.CreateMaskedGather(stored->getType(), ptrs, llvm::Align(et->getScalarSizeInBits() / 8),
                                all_true(), llvm::Constant::getNullValue(stored->getType()));
      if (is_bool)
        r = B_.CreateTrunc(r, vt);
      if (in_range)
        r = B_.CreateSelect(in_range, r, xv); // out of range: the lane keeps its own value
      out.push_back(r);
    }
    define(op->result(), out);
    return;
  }
  Opcode combine = (o == Opcode::SubgroupMin || o == Opcode::SubgroupInclusiveMin ||
                    o == Opcode::SubgroupExclusiveMin)
                       ? Opcode::Min
                   : (o == Opcode::SubgroupMax || o == Opcode::SubgroupInclusiveMax ||
                      o == Opcode::SubgroupExclusiveMax)
                       ? Opcode::Max
                   : o == Opcode::SubgroupAnd ? Opcode::And
                   : o == Opcode::SubgroupOr  ? Opcode::Or
                   : o == Opcode::SubgroupXor ? Opcode::Xor
                                              : Opcode::Add;
  bool inclusive = o == Opcode::SubgroupInclusiveSum || o == Opcode::SubgroupInclusiveMin ||
                   o == Opcode::SubgroupInclusiveMax;
  bool exclusive = o == Opcode::SubgroupExclusiveSum || o == Opcode::SubgroupExclusiveMin ||
                   o == Opcode::SubgroupExclusiveMax;
  Value *start = identity(combine, s, false);
  Value *substitute = identity(combine, s, true);
  auto combine_values = [&](Value *a, Value *b) {
    if (s == Scalar::Bool) {
      return combine == Opcode::And  ? B_.CreateAnd(a, b)
             : combine == Opcode::Or ? B_.CreateOr(a, b)
                                     : B_.CreateXor(a, b);
    }
    return arith(combine, s, a, b, nullptr);
  };
  for (unsigned k = 0; k < lanes; ++k) {
    Value *xv = B_.CreateSelect(mask, splat(part(x, k)), splat(substitute));
    if (!inclusive && !exclusive) {
      Value *r = nullptr;
      if (!ir::is_float(s)) {
        bool sgn = ir::is_signed(s);
        switch (combine) {
        case Opcode::Add:
          r = B_.CreateAddReduce(xv);
          break;
        case Opcode::And:
          r = B_.CreateAndReduce(xv);
          break;
        case Opcode::Or:
          r = B_.CreateOrReduce(xv);
          break;
        case Opcode::Xor:
          r = B_.CreateXorReduce(xv);
          break;
        case Opcode::Min:
          r = B_.CreateIntMinReduce(xv, sgn);
          break;
        case Opcode::Max:
          r = B_.CreateIntMaxReduce(xv, sgn);
          break;
        default:
          break;
        }
      } else if (combine == Opcode::Add && !is_half(s)) {
        r = B_.CreateFAddReduce(start, xv); // ordered: lane 0 first, as the interpreter
      }
      if (!r) {
        r = start;
        for (unsigned l = 0; l < W_; ++l)
          r = combine_values(r, B_.CreateExtractElement(xv, uint64_t{l}));
      }
      out.push_back(r);
      continue;
    }
    Value *acc = start;
    Value *scan = llvm::PoisonValue::get(xv->getType());
    for (unsigned l = 0; l < W_; ++l) {
      Value *before = acc;
      acc = combine_values(acc, B_.CreateExtractElement(xv, uint64_t{l}));
      scan = B_.CreateInsertElement(scan, inclusive ? acc : before, uint64_t{l});
    }
    out.push_back(scan);
  }
  define(op->result(), out);
}

//===- Builtins ----------------------------------------------------------------------------===//

void Lowering::emit_builtin(const ir::Operation *op) {
  Type *i32 = B_.getInt32Ty();
  auto k = [&](uint64_t v) { return llvm::ConstantInt::get(i32, v); };
  Value *gang_base = B_.CreateMul(gang_, k(W_));
  Value *local_index = B_.CreateAdd(splat(gang_base), lane_);
  // local_id, with the lanes that stay gang-uniform kept scalar.
  auto local_id = [&](Parts &p, Affine *x_affine) {
    if (wg_[1] * wg_[2] == 1) {
      p = {local_index, k(0), k(0)};
      *x_affine = {gang_base, 1};
      return true;
    }
    if (wg_[0] % W_ == 0) {
      Value *x0 = B_.CreateURem(gang_base, k(wg_[0]));
      Value *row = B_.CreateUDiv(gang_base, k(wg_[0]));
      p = {B_.CreateAdd(splat(x0), lane_), B_.CreateURem(row, k(wg_[1])),
           B_.CreateUDiv(row, k(wg_[1]))};
      *x_affine = {x0, 1};
      return true;
    }
    Value *vx = splat(k(wg_[0])), *vy = splat(k(wg_[1]));
    Value *row = B_.CreateUDiv(local_index, vx);
    p = {B_.CreateURem(local_index, vx), B_.CreateURem(row, vy), B_.CreateUDiv(row, vy)};
    return false;
  };
  Parts p;
  Affine x_affine{nullptr, 0};
  switch (op->opcode()) {
  case Opcode::LocalIndex:
    define(op->result(), {local_index});
    affine_[op->result()] = {gang_base, 1};
    return;
  case Opcode::LocalId:
    if (local_id(p, &x_affine))
      affine_[op->result()] = x_affine; // (lane x only; read through vec.extract)
    define(op->result(), p);
    return;
  case Opcode::GlobalId: {
    bool affine = local_id(p, &x_affine);
    for (unsigned d = 0; d < 3; ++d) {
      Value *base = B_.CreateMul(workgroup_id_[d], k(wg_[d]));
      p[d] = p[d]->getType()->isVectorTy() ? B_.CreateAdd(splat(base), p[d])
                                           : B_.CreateAdd(base, p[d]);
      if (d == 0 && affine)
        x_affine = {B_.CreateAdd(base, x_affine.base), 1};
    }
    if (affine)
      affine_[op->result()] = x_affine;
    define(op->result(), p);
    return;
  }
  case Opcode::WorkgroupId:
    define(op->result(), {workgroup_id_[0], workgroup_id_[1], workgroup_id_[2]});
    return;
  case Opcode::WorkgroupSize:
    define(op->result(), {k(wg_[0]), k(wg_[1]), k(wg_[2])});
    return;
  case Opcode::NumWorkgroups:
    define(op->result(), {num_workgroups_[0], num_workgroups_[1], num_workgroups_[2]});
    return;
  case Opcode::SubgroupId:
    define(op->result(), {gang_});
    return;
  case Opcode::SubgroupSize:
    define(op->result(), {k(W_)});
    return;
  case Opcode::SubgroupLane:
    define(op->result(), {lane_});
    affine_[op->result()] = {k(0), 1};
    return;
  case Opcode::NumSubgroups:
    define(op->result(), {k(G_)});
    return;
  default:
    fail(op, "internal error: unknown builtin");
  }
}

//===- Ops ---------------------------------------------------------------------------------===//

void Lowering::emit_op(const ir::Operation *op) {
  Opcode o = op->opcode();
  switch (op->info().signature) {
  case ir::Signature::Constant: {
    Scalar s = op->result()->type().element();
    uint64_t bits = static_cast<uint64_t>(*op->attributes().get_int("value"));
    Value *c;
    if (s == Scalar::F32)
      c = llvm::ConstantFP::get(ctx_,
                                llvm::APFloat(llvm::APFloat::IEEEsingle(), llvm::APInt(32, bits)));
    else if (s == Scalar::F64)
      c = llvm::ConstantFP::get(ctx_,
                                llvm::APFloat(llvm::APFloat::IEEEdouble(), llvm::APInt(64, bits)));
    else
      c = llvm::ConstantInt::get(elem_type(s), bits);
    define(op->result(), {c});
    return;
  }
  case ir::Signature::Unary:
  case ir::Signature::Binary:
  case ir::Signature::Ternary:
  case ir::Signature::Compare: {
    Scalar s = op->operand(0)->type().element();
    Parts out;
    for (unsigned k = 0; k < op->operand(0)->type().lanes(); ++k) {
      Value *a = part(op->operand(0), k);
      Value *b = op->num_operands() > 1 ? part(op->operand(1), k) : nullptr;
      Value *c = op->num_operands() > 2 ? part(op->operand(2), k) : nullptr;
      out.push_back(arith(o, s, a, b, c));
    }
    define(op->result(), out);
    if (op->result()->type().is_scalar() && !ir::is_float(s) && s != Scalar::Bool &&
        (o == Opcode::Add || o == Opcode::Sub || o == Opcode::Mul)) {
      // Track base + lane * stride through add, sub and multiplication by constants.
      auto a = affine_.find(op->operand(0)), b = affine_.find(op->operand(1));
      Value *av = part(op->operand(0), 0), *bv = part(op->operand(1), 0);
      bool a_uniform = !av->getType()->isVectorTy(), b_uniform = !bv->getType()->isVectorTy();
      auto *bc = llvm::dyn_cast<llvm::ConstantInt>(bv);
      auto *ac = llvm::dyn_cast<llvm::ConstantInt>(av);
      if (o == Opcode::Add || o == Opcode::Sub) {
        bool sub = o == Opcode::Sub;
        if (a != affine_.end() && b_uniform)
          affine_[op->result()] = {sub ? B_.CreateSub(a->second.base, bv)
                                       : B_.CreateAdd(a->second.base, bv),
                                   a->second.stride};
        else if (b != affine_.end() && a_uniform && !sub)
          affine_[op->result()] = {B_.CreateAdd(av, b->second.base), b->second.stride};
        else if (a != affine_.end() && b != affine_.end())
          affine_[op->result()] = {sub ? B_.CreateSub(a->second.base, b->second.base)
                                       : B_.CreateAdd(a->second.base, b->second.base),
                                   sub ? a->second.stride - b->second.stride
                                       : a->second.stride + b->second.stride};
      } else if (a != affine_.end() && bc) {
        affine_[op->result()] = {B_.CreateMul(a->second.base, bv),
                                 a->second.stride * static_cast<int64_t>(bc->getZExtValue())};
      } else if (b != affine_.end() && ac) {
        affine_[op->result()] = {B_.CreateMul(av, b->second.base),
                                 b->second.stride * static_cast<int64_t>(ac->getZExtValue())};
      }
    }
    return;
  }
  case ir::Signature::Select: {
    Parts out;
    bool vector_cond = op->operand(0)->type().is_vector();
    for (unsigned k = 0; k < op->result()->type().lanes(); ++k) {
      Value *c = part(op->operand(0), vector_cond ? k : 0);
      Value *a = part(op->operand(1), k), *b = part(op->operand(2), k);
      match({&c, &a, &b});
      out.push_back(B_.CreateSelect(c, a, b));
    }
    define(op->result(), out);
    return;
  }
  case ir::Signature::Cast: {
    Scalar from = op->operand(0)->type().element(), to = op->result()->type().element();
    Parts out;
    for (Value *p : get(op->operand(0)))
      out.push_back(convert(from, to, p));
    define(op->result(), out);
    if (op->result()->type().is_scalar() && from == to)
      if (auto a = affine_.find(op->operand(0)); a != affine_.end())
        affine_[op->result()] = a->second;
    return;
  }
  case ir::Signature::Bitcast: {
    ir::Type from = op->operand(0)->type(), to = op->result()->type();
    unsigned fw = ir::scalar_bits(from.element()), tw = ir::scalar_bits(to.element());
    Parts in = get(op->operand(0));
    bool vector = false;
    for (Value *p : in)
      vector |= p->getType()->isVectorTy();
    Type *fi = B_.getIntNTy(fw), *ti = B_.getIntNTy(tw);
    for (Value *&p : in) {
      if (vector)
        p = splat(p);
      p = B_.CreateBitCast(p, vector ? vec_type(fi) : fi);
    }
    Parts pieces;
    if (fw == tw) {
      pieces = in;
    } else if (fw > tw) {
      for (Value *p : in)
        for (unsigned j = 0; j < fw / tw; ++j)
          pieces.push_back(
              B_.CreateTrunc(B_.CreateLShr(p, llvm::ConstantInt::get(p->getType(), j * tw)),
                             vector ? vec_type(ti) : ti));
    } else {
      for (unsigned i = 0; i < to.lanes(); ++i) {
        Value *acc = nullptr;
        for (unsigned j = 0; j < tw / fw; ++j) {
          Value *w = B_.CreateZExt(in[i * (tw / fw) + j], vector ? vec_type(ti) : ti);
          w = B_.CreateShl(w, llvm::ConstantInt::get(w->getType(), j * fw));
          acc = acc ? B_.CreateOr(acc, w) : w;
        }
        pieces.push_back(acc);
      }
    }
    Parts out;
    for (Value *p : pieces)
      out.push_back(B_.CreateBitCast(p, shaped(p, elem_type(to.element()))));
    define(op->result(), out);
    return;
  }
  case ir::Signature::Splat:
    define(op->result(), Parts(op->result()->type().lanes(), part(op->operand(0), 0)));
    return;
  case ir::Signature::VecBuild: {
    Parts out;
    for (const ir::Value *v : op->operands())
      out.push_back(part(v, 0));
    define(op->result(), out);
    return;
  }
  case ir::Signature::VecExtract: {
    auto lane = static_cast<unsigned>(*op->attributes().get_int("lane"));
    define(op->result(), {part(op->operand(0), lane)});
    if (lane == 0)
      if (auto a = affine_.find(op->operand(0)); a != affine_.end())
        affine_[op->result()] = a->second;
    return;
  }
  case ir::Signature::VecInsert: {
    auto lane = static_cast<unsigned>(*op->attributes().get_int("lane"));
    Parts out = get(op->operand(0));
    out[lane] = part(op->operand(1), 0);
    define(op->result(), out);
    return;
  }
  case ir::Signature::Load:
    return emit_load(op);
  case ir::Signature::Store:
    return emit_store(op);
  case ir::Signature::BufferSize:
    define(op->result(), {B_.CreateTrunc(memory_.at(op->operand(0)).count,
                                         elem_type(op->result()->type().element()))});
    return;
  case ir::Signature::SharedAlloc:
  case ir::Signature::LocalAlloc:
    return; // laid out at entry
  case ir::Signature::Builtin3:
  case ir::Signature::Builtin1:
    return emit_builtin(op);
  case ir::Signature::Sync:
    if (o != Opcode::Barrier)
      B_.CreateFence(llvm::AtomicOrdering::AcquireRelease);
    return;
  case ir::Signature::AtomicRmw:
  case ir::Signature::AtomicCmpXchg:
    return emit_atomic(op);
  case ir::Signature::SubgroupUnary:
  case ir::Signature::SubgroupShuffle:
  case ir::Signature::SubgroupBallot:
  case ir::Signature::SubgroupVote:
  case ir::Signature::SubgroupElect:
    return emit_subgroup(op);
  case ir::Signature::If:
    return emit_if(op);
  case ir::Signature::For:
    return emit_for(op);
  case ir::Signature::While:
    return emit_while(op);
  default:
    fail(op, "internal error: a terminator where an op was expected");
  }
}

const ir::Operation *Lowering::emit_ops(const ir::Region &region) {
  for (const ir::Operation *op : region) {
    if (op->is_terminator())
      return op;
    emit_op(op);
  }
  return nullptr;
}

//===- Control flow inside segments --------------------------------------------------------===//

void Lowering::emit_exit(const ir::Operation *term) {
  LoopContext &loop = loops_.back();
  bool is_break = term->opcode() == Opcode::Break;
  auto &targets = is_break && !loop.is_for ? loop.results : loop.carried;
  std::vector<Parts> vals;
  for (const ir::Value *v : term->operands())
    vals.push_back(get(v));
  for (size_t i = 0; i < vals.size(); ++i)
    for (size_t k = 0; k < vals[i].size(); ++k) {
      llvm::AllocaInst *slot = targets[i][k];
      bool vec = slot->getAllocatedType()->isVectorTy();
      Value *v = conform(vals[i][k], vec);
      if (!loop.uniform)
        v = B_.CreateSelect(mask_, v, B_.CreateLoad(slot->getAllocatedType(), slot));
      B_.CreateStore(v, slot);
    }
  if (loop.uniform) {
    B_.CreateBr(is_break ? loop.exit : loop.latch);
    continue_dead();
    return;
  }
  Value *keep = B_.CreateNot(mask_);
  B_.CreateStore(B_.CreateAnd(B_.CreateLoad(mask_type(), loop.iter), keep), loop.iter);
  if (is_break)
    B_.CreateStore(B_.CreateAnd(B_.CreateLoad(mask_type(), loop.live), keep), loop.live);
}

void Lowering::emit_loop_yield(LoopContext &loop, const ir::Operation *term) {
  for (unsigned i = 0; i < term->num_operands(); ++i) {
    const Parts &vals = get(term->operand(i));
    for (size_t k = 0; k < vals.size(); ++k) {
      llvm::AllocaInst *slot = loop.carried[i][k];
      Value *v = conform(vals[k], slot->getAllocatedType()->isVectorTy());
      if (!loop.uniform)
        v = B_.CreateSelect(mask_, v, B_.CreateLoad(slot->getAllocatedType(), slot));
      B_.CreateStore(v, slot);
    }
  }
}

void Lowering::emit_if(const ir::Operation *op) {
  Value *c = part(op->operand(0), 0);
  unsigned n = op->num_results();
  Value *outer = mask_;
  std::vector<Parts> results(n);
  if (!c->getType()->isVectorTy()) {
    BasicBlock *then_bb = block("then"), *else_bb = block("else"), *merge = block("endif");
    B_.CreateCondBr(c, then_bb, else_bb);
    std::vector<std::pair<BasicBlock *, std::vector<Parts>>> incoming;
    for (unsigned r = 0; r < 2; ++r) {
      B_.SetInsertPoint(r == 0 ? then_bb : else_bb);
      mask_ = outer;
      const ir::Operation *term = emit_ops(op->region(r));
      std::vector<Parts> vals(n);
      for (unsigned i = 0; i < n; ++i) {
        bool vec = is_vec(op->result(i));
        if (term->opcode() == Opcode::Yield)
          for (Value *p : get(term->operand(i)))
            vals[i].push_back(conform(p, vec));
        else
          vals[i] = zeros(op->result(i), vec);
      }
      if (term->opcode() != Opcode::Yield)
        emit_exit(term);
      incoming.push_back({B_.GetInsertBlock(), vals});
      B_.CreateBr(merge);
    }
    B_.SetInsertPoint(merge);
    for (unsigned i = 0; i < n; ++i)
      for (size_t k = 0; k < incoming[0].second[i].size(); ++k) {
        llvm::PHINode *phi = B_.CreatePHI(incoming[0].second[i][k]->getType(), 2);
        for (auto &[bb, vals] : incoming)
          phi->addIncoming(vals[i][k], bb);
        results[i].push_back(phi);
      }
    mask_ = outer;
  } else {
    Value *then_mask = B_.CreateAnd(outer, c), *else_mask = B_.CreateAnd(outer, B_.CreateNot(c));
    std::vector<std::vector<llvm::AllocaInst *>> slots(n);
    for (unsigned i = 0; i < n; ++i)
      for (unsigned k = 0; k < op->result(i)->type().lanes(); ++k) {
        Type *t = part_type(op->result(i)->type().element(), true);
        slots[i].push_back(entry_alloca(t, 1, "if.result"));
        B_.CreateStore(llvm::Constant::getNullValue(t), slots[i].back());
      }
    BasicBlock *then_bb = block("then"), *mid = block("then.done"), *else_bb = block("else"),
               *merge = block("endif");
    B_.CreateCondBr(any(then_mask), then_bb, mid);
    for (unsigned r = 0; r < 2; ++r) {
      B_.SetInsertPoint(r == 0 ? then_bb : else_bb);
      mask_ = r == 0 ? then_mask : else_mask;
      Value *side = mask_;
      const ir::Operation *term = emit_ops(op->region(r));
      if (term->opcode() == Opcode::Yield) {
        for (unsigned i = 0; i < n; ++i) {
          const Parts &vals = get(term->operand(i));
          for (size_t k = 0; k < vals.size(); ++k) {
            Value *v = splat(vals[k]);
            if (r == 1)
              v = B_.CreateSelect(side, v, B_.CreateLoad(v->getType(), slots[i][k]));
            B_.CreateStore(v, slots[i][k]);
          }
        }
      } else {
        emit_exit(term);
      }
      B_.CreateBr(r == 0 ? mid : merge);
      if (r == 0) {
        B_.SetInsertPoint(mid);
        B_.CreateCondBr(any(else_mask), else_bb, merge);
      }
    }
    B_.SetInsertPoint(merge);
    for (unsigned i = 0; i < n; ++i)
      for (llvm::AllocaInst *slot : slots[i])
        results[i].push_back(B_.CreateLoad(slot->getAllocatedType(), slot));
    mask_ = outer;
  }
  if (ifs_with_exits_.count(op) && !loops_.empty() && !loops_.back().uniform)
    mask_ = B_.CreateAnd(mask_, B_.CreateLoad(mask_type(), loops_.back().iter));
  for (unsigned i = 0; i < n; ++i)
    define(op->result(i), results[i]);
}

void Lowering::emit_for(const ir::Operation *op) {
  const ir::Region &body = op->region(0);
  Scalar s = op->operand(0)->type().element();
  bool sgn = ir::is_signed(s);
  LoopContext loop;
  loop.op = op;
  loop.is_for = true;
  loop.uniform = uniform_loops_.count(op) != 0;
  Value *outer = mask_;
  Value *lo = part(op->operand(0), 0), *hi = part(op->operand(1), 0),
        *step = part(op->operand(2), 0);
  for (unsigned c = 0; c < op->num_results(); ++c) {
    const ir::Value *arg = body.argument(c + 1);
    std::vector<llvm::AllocaInst *> slots;
    const Parts &init = get(op->operand(3 + c));
    for (unsigned k = 0; k < arg->type().lanes(); ++k) {
      Type *t = part_type(arg->type().element(), is_vec(arg));
      slots.push_back(entry_alloca(t, 1, "carried"));
      B_.CreateStore(conform(init[k], is_vec(arg)), slots.back());
    }
    loop.carried.push_back(slots);
  }
  bool iv_vec = is_vec(body.argument(0));
  llvm::AllocaInst *iv = entry_alloca(part_type(s, iv_vec), 1, "iv");
  B_.CreateStore(conform(lo, iv_vec), iv);
  if (!loop.uniform) {
    loop.live = entry_alloca(mask_type(), 1, "live");
    loop.iter = entry_alloca(mask_type(), 1, "iter");
    B_.CreateStore(outer, loop.live);
  }
  BasicBlock *header = block("for"), *body_bb = block("for.body"), *latch = block("for.latch"),
             *exit = block("for.end");
  loop.latch = latch;
  loop.exit = exit;
  B_.CreateBr(header);
  B_.SetInsertPoint(header);
  Value *ivv = B_.CreateLoad(iv->getAllocatedType(), iv);
  Value *hv = conform(hi, iv_vec);
  Value *more = sgn ? B_.CreateICmpSLT(ivv, hv) : B_.CreateICmpULT(ivv, hv);
  if (loop.uniform) {
    B_.CreateCondBr(more, body_bb, exit);
  } else {
    Value *running = B_.CreateAnd(B_.CreateLoad(mask_type(), loop.live), more);
    B_.CreateStore(running, loop.live);
    B_.CreateCondBr(any(running), body_bb, exit);
    B_.SetInsertPoint(body_bb);
    B_.CreateStore(running, loop.iter);
    mask_ = running;
  }
  B_.SetInsertPoint(body_bb);
  define(body.argument(0), {ivv});
  for (unsigned c = 0; c < op->num_results(); ++c) {
    Parts p;
    for (llvm::AllocaInst *slot : loop.carried[c])
      p.push_back(B_.CreateLoad(slot->getAllocatedType(), slot));
    define(body.argument(c + 1), p);
  }
  loops_.push_back(loop);
  const ir::Operation *term = emit_ops(body);
  if (term->opcode() == Opcode::Yield)
    emit_loop_yield(loops_.back(), term);
  else
    emit_exit(term);
  loops_.pop_back();
  B_.CreateBr(latch);
  B_.SetInsertPoint(latch);
  Value *sv = conform(step, iv_vec);
  Value *next = B_.CreateAdd(ivv, sv);
  Value *wrapped = sgn ? B_.CreateICmpSLT(next, ivv) : B_.CreateICmpULT(next, ivv);
  B_.CreateStore(next, iv);
  if (loop.uniform) {
    B_.CreateCondBr(wrapped, exit, header);
  } else {
    B_.CreateStore(B_.CreateAnd(B_.CreateLoad(mask_type(), loop.live), B_.CreateNot(wrapped)),
                   loop.live);
    B_.CreateBr(header);
  }
  B_.SetInsertPoint(exit);
  mask_ = outer;
  for (unsigned c = 0; c < op->num_results(); ++c) {
    Parts p;
    for (llvm::AllocaInst *slot : loop.carried[c])
      p.push_back(conform(B_.CreateLoad(slot->getAllocatedType(), slot), is_vec(op->result(c))));
    define(op->result(c), p);
  }
}

void Lowering::emit_while(const ir::Operation *op) {
  const ir::Region &before = op->region(0), &after = op->region(1);
  LoopContext loop;
  loop.op = op;
  loop.uniform = uniform_loops_.count(op) != 0;
  Value *outer = mask_;
  for (unsigned c = 0; c < before.num_arguments(); ++c) {
    const ir::Value *arg = before.argument(c);
    std::vector<llvm::AllocaInst *> slots;
    const Parts &init = get(op->operand(c));
    for (unsigned k = 0; k < arg->type().lanes(); ++k) {
      slots.push_back(entry_alloca(part_type(arg->type().element(), is_vec(arg)), 1, "carried"));
      B_.CreateStore(conform(init[k], is_vec(arg)), slots.back());
    }
    loop.carried.push_back(slots);
  }
  for (unsigned c = 0; c < op->num_results(); ++c) {
    const ir::Value *r = op->result(c);
    std::vector<llvm::AllocaInst *> slots;
    for (unsigned k = 0; k < r->type().lanes(); ++k) {
      Type *t = part_type(r->type().element(), is_vec(r));
      slots.push_back(entry_alloca(t, 1, "result"));
      B_.CreateStore(llvm::Constant::getNullValue(t), slots.back());
    }
    loop.results.push_back(slots);
  }
  if (!loop.uniform) {
    loop.live = entry_alloca(mask_type(), 1, "live");
    loop.iter = entry_alloca(mask_type(), 1, "iter");
    B_.CreateStore(outer, loop.live);
  }
  BasicBlock *header = block("while"), *before_bb = block("while.before"),
             *body_bb = block("while.body"), *exit = block("while.end");
  loop.latch = header;
  loop.exit = exit;
  B_.CreateBr(header);
  B_.SetInsertPoint(header);
  Value *live = nullptr;
  if (!loop.uniform) {
    live = B_.CreateLoad(mask_type(), loop.live);
    B_.CreateCondBr(any(live), before_bb, exit);
    mask_ = live;
  } else {
    B_.CreateBr(before_bb);
  }
  B_.SetInsertPoint(before_bb);
  for (unsigned c = 0; c < before.num_arguments(); ++c) {
    Parts p;
    for (llvm::AllocaInst *slot : loop.carried[c])
      p.push_back(B_.CreateLoad(slot->getAllocatedType(), slot));
    define(before.argument(c), p);
  }
  const ir::Operation *cond = emit_ops(before);
  Value *c = part(cond->operand(0), 0);
  std::vector<Parts> forwarded;
  for (unsigned i = 1; i < cond->num_operands(); ++i)
    forwarded.push_back(get(cond->operand(i)));
  Value *go = nullptr;
  if (loop.uniform) {
    for (unsigned r = 0; r < op->num_results(); ++r)
      for (size_t k = 0; k < forwarded[r].size(); ++k) {
        llvm::AllocaInst *slot = loop.results[r][k];
        B_.CreateStore(conform(forwarded[r][k], slot->getAllocatedType()->isVectorTy()), slot);
      }
    B_.CreateCondBr(c, body_bb, exit);
  } else {
    Value *cv = splat(c);
    go = B_.CreateAnd(live, cv);
    Value *stop = B_.CreateAnd(live, B_.CreateNot(cv));
    for (unsigned r = 0; r < op->num_results(); ++r)
      for (size_t k = 0; k < forwarded[r].size(); ++k) {
        llvm::AllocaInst *slot = loop.results[r][k];
        Value *v = splat(forwarded[r][k]);
        B_.CreateStore(B_.CreateSelect(stop, v, B_.CreateLoad(v->getType(), slot)), slot);
      }
    B_.CreateStore(go, loop.live);
    B_.CreateCondBr(any(go), body_bb, exit);
  }
  B_.SetInsertPoint(body_bb);
  if (!loop.uniform) {
    B_.CreateStore(go, loop.iter);
    mask_ = go;
  } else {
    mask_ = outer;
  }
  for (unsigned a = 0; a < after.num_arguments(); ++a) {
    Parts p;
    for (Value *v : forwarded[a])
      p.push_back(conform(v, is_vec(after.argument(a))));
    define(after.argument(a), p);
  }
  loops_.push_back(loop);
  const ir::Operation *term = emit_ops(after);
  if (term->opcode() == Opcode::Yield)
    emit_loop_yield(loops_.back(), term);
  else
    emit_exit(term);
  loops_.pop_back();
  B_.CreateBr(header);
  B_.SetInsertPoint(exit);
  mask_ = outer;
  for (unsigned r = 0; r < op->num_results(); ++r) {
    Parts p;
    for (llvm::AllocaInst *slot : loop.results[r])
      p.push_back(B_.CreateLoad(slot->getAllocatedType(), slot));
    define(op->result(r), p);
  }
}

//===- Workgroup level and segments --------------------------------------------------------===//

void Lowering::emit_segment(const std::vector<const ir::Operation *> &run) {
  if (run.empty())
    return;
  int segment = segment_of_.at(run.front());
  auto saved_vals = vals_;
  auto saved_affine = affine_;
  BasicBlock *pre = B_.GetInsertBlock();
  llvm::PHINode *g = nullptr;
  BasicBlock *loop = nullptr, *done = nullptr;
  if (G_ == 1) {
    gang_ = B_.getInt32(0);
  } else {
    loop = block("gang");
    done = block("gang.done");
    B_.CreateBr(loop);
    B_.SetInsertPoint(loop);
    g = B_.CreatePHI(B_.getInt32Ty(), 2);
    g->addIncoming(B_.getInt32(0), pre);
    gang_ = g;
  }
  Value *first = B_.CreateMul(gang_, B_.getInt32(W_));
  if (N_ % W_ == 0) {
    mask_ = all_true();
    gang_size_ = B_.getInt32(W_);
  } else {
    Value *left = B_.CreateSub(B_.getInt32(N_), first);
    mask_ = B_.CreateICmpULT(lane_, splat(left));
    gang_size_ = B_.CreateSelect(B_.CreateICmpULT(left, B_.getInt32(W_)), left, B_.getInt32(W_));
  }
  // Values from elsewhere: loaded once at the top of the gang's code.
  std::set<const ir::Value *> loaded;
  for (const ir::Operation *top : run)
    top->walk([&](const ir::Operation *op) {
      for (const ir::Value *v : op->operands())
        if (storage_.count(v) && context_of_def(v) != segment && loaded.insert(v).second) {
          const Storage &st = storage_.at(v);
          vals_[v] = st.per_gang ? load_storage(v, gang_) : load_storage(v, B_.getInt32(0));
        }
    });
  for (const ir::Operation *op : run)
    emit_op(op);
  if (G_ > 1) {
    Value *next = B_.CreateAdd(g, B_.getInt32(1));
    g->addIncoming(next, B_.GetInsertBlock());
    B_.CreateCondBr(B_.CreateICmpULT(next, B_.getInt32(G_)), loop, done);
    B_.SetInsertPoint(done);
  }
  gang_ = nullptr;
  vals_ = std::move(saved_vals);
  affine_ = std::move(saved_affine);
}

void Lowering::emit_wg_region(const ir::Region &region) {
  std::vector<const ir::Operation *> run;
  for (const ir::Operation *op : region) {
    if (op->is_terminator())
      break;
    if (wg_ops_.count(op)) {
      emit_segment(run);
      run.clear();
      emit_wg_op(op);
    } else {
      run.push_back(op);
    }
  }
  emit_segment(run);
}

void Lowering::emit_wg_exit(const ir::Operation *term) {
  const WgLoop &loop = wg_loops_.back();
  const ir::Operation *l = loop.op;
  bool is_break = term->opcode() == Opcode::Break;
  std::vector<const ir::Value *> targets;
  if (l->opcode() == Opcode::For) {
    for (unsigned c = 0; c < l->num_results(); ++c)
      targets.push_back(l->region(0).argument(c + 1));
  } else if (is_break) {
    for (unsigned c = 0; c < l->num_results(); ++c)
      targets.push_back(l->region(1).argument(c));
  } else {
    for (unsigned c = 0; c < l->region(0).num_arguments(); ++c)
      targets.push_back(l->region(0).argument(c));
  }
  copy_to_storage(targets, term->operands());
  B_.CreateBr(is_break ? loop.exit : loop.latch);
  continue_dead();
}

void Lowering::emit_wg_op(const ir::Operation *op) {
  switch (op->opcode()) {
  case Opcode::Barrier:
    return; // the gangs run one after another: every access before it is done
  case Opcode::If: {
    Value *c = read_uniform(op->operand(0));
    BasicBlock *then_bb = block("wg.then"), *else_bb = block("wg.else"), *merge = block("wg.endif");
    B_.CreateCondBr(c, then_bb, else_bb);
    std::vector<const ir::Value *> results;
    for (unsigned i = 0; i < op->num_results(); ++i)
      results.push_back(op->result(i));
    for (unsigned r = 0; r < 2; ++r) {
      B_.SetInsertPoint(r == 0 ? then_bb : else_bb);
      emit_wg_region(op->region(r));
      const ir::Operation *term = op->region(r).terminator();
      if (term->opcode() == Opcode::Yield)
        copy_to_storage(results, term->operands());
      else
        emit_wg_exit(term);
      B_.CreateBr(merge);
    }
    B_.SetInsertPoint(merge);
    return;
  }
  case Opcode::For: {
    const ir::Region &body = op->region(0);
    Scalar s = op->operand(0)->type().element();
    bool sgn = ir::is_signed(s);
    Value *lo = read_uniform(op->operand(0)), *hi = read_uniform(op->operand(1)),
          *step = read_uniform(op->operand(2));
    std::vector<const ir::Value *> carried;
    for (unsigned c = 0; c < op->num_results(); ++c)
      carried.push_back(body.argument(c + 1));
    copy_to_storage(carried, op->operands().subspan(3));
    llvm::AllocaInst *iv = storage_.at(body.argument(0)).ptr;
    B_.CreateStore(lo, iv);
    BasicBlock *header = block("wg.for"), *body_bb = block("wg.for.body"),
               *latch = block("wg.for.latch"), *exit = block("wg.for.end");
    B_.CreateBr(header);
    B_.SetInsertPoint(header);
    Value *ivv = B_.CreateLoad(lo->getType(), iv);
    B_.CreateCondBr(sgn ? B_.CreateICmpSLT(ivv, hi) : B_.CreateICmpULT(ivv, hi), body_bb, exit);
    B_.SetInsertPoint(body_bb);
    wg_loops_.push_back({op, latch, exit});
    emit_wg_region(body);
    const ir::Operation *term = body.terminator();
    if (term->opcode() == Opcode::Yield)
      copy_to_storage(carried, term->operands());
    else
      emit_wg_exit(term);
    wg_loops_.pop_back();
    B_.CreateBr(latch);
    B_.SetInsertPoint(latch);
    Value *next = B_.CreateAdd(ivv, step);
    Value *wrapped = sgn ? B_.CreateICmpSLT(next, ivv) : B_.CreateICmpULT(next, ivv);
    B_.CreateStore(next, iv);
    B_.CreateCondBr(wrapped, exit, header);
    B_.SetInsertPoint(exit);
    return;
  }
  case Opcode::While: {
    const ir::Region &before = op->region(0), &after = op->region(1);
    std::vector<const ir::Value *> carried, forwarded;
    for (unsigned c = 0; c < before.num_arguments(); ++c)
      carried.push_back(before.argument(c));
    for (unsigned c = 0; c < after.num_arguments(); ++c)
      forwarded.push_back(after.argument(c));
    copy_to_storage(carried, op->operands());
    BasicBlock *header = block("wg.while"), *body_bb = block("wg.while.body"),
               *exit = block("wg.while.end");
    B_.CreateBr(header);
    B_.SetInsertPoint(header);
    emit_wg_region(before);
    const ir::Operation *cond = before.terminator();
    copy_to_storage(forwarded, cond->operands().subspan(1));
    B_.CreateCondBr(read_uniform(cond->operand(0)), body_bb, exit);
    B_.SetInsertPoint(body_bb);
    wg_loops_.push_back({op, header, exit});
    emit_wg_region(after);
    const ir::Operation *term = after.terminator();
    if (term->opcode() == Opcode::Yield)
      copy_to_storage(carried, term->operands());
    else
      emit_wg_exit(term);
    wg_loops_.pop_back();
    B_.CreateBr(header);
    B_.SetInsertPoint(exit);
    return;
  }
  default:
    fail(op, "internal error: not a workgroup-level op");
  }
}

//===- The kernel function -----------------------------------------------------------------===//

void Lowering::emit_entry() {
  Type *ptr = B_.getPtrTy(), *i64 = B_.getInt64Ty(), *i32 = B_.getInt32Ty();
  auto *type = llvm::FunctionType::get(B_.getVoidTy(), {ptr, i64, i64, ptr}, false);
  function_ = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, "cubecc_cpu_kernel",
                                     module_.get());
  function_->setVisibility(llvm::GlobalValue::DefaultVisibility);
  function_->setDoesNotThrow();
  function_->addFnAttr("target-cpu", machine_.getTargetCPU());
  function_->addFnAttr("target-features", machine_.getTargetFeatureString());
  if (W_ == 16) {
    function_->addFnAttr("prefer-vector-width", "512");
    function_->addFnAttr("min-legal-vector-width", "512");
  }
  launch_ = function_->getArg(0);
  Value *first = function_->getArg(1), *end = function_->getArg(2);
  shared_ = function_->getArg(3);
  BasicBlock *entry = BasicBlock::Create(ctx_, "entry", function_);
  B_.SetInsertPoint(entry);
  // Launch fields (cpu_abi.h): buffers @0, buffer_counts @8, params @16, num_workgroups @24.
  auto field = [&](uint64_t offset) {
    return B_.CreateConstGEP1_64(B_.getInt8Ty(), launch_, offset);
  };
  Value *buffers = B_.CreateLoad(ptr, field(0));
  Value *counts = B_.CreateLoad(ptr, field(8));
  Value *params = B_.CreateLoad(ptr, field(16));
  for (unsigned d = 0; d < 3; ++d)
    num_workgroups_[d] = B_.CreateLoad(i32, field(24 + 4 * d));
  llvm::SmallVector<llvm::Constant *, 16> lanes;
  for (unsigned l = 0; l < W_; ++l)
    lanes.push_back(B_.getInt32(l));
  lane_ = llvm::ConstantVector::get(lanes);
  // Parameters: buffers by binding; values from the parameter block (kernel_abi.h).
  unsigned binding = 0;
  uint32_t offset = 0;
  for (unsigned i = 0; i < kernel_.num_parameters(); ++i) {
    const ir::Value *p = kernel_.parameter(i);
    ir::Type t = p->type();
    if (t.kind() == ir::TypeKind::Buffer) {
      MemInfo mem;
      mem.kind = MemInfo::Buffer;
      mem.element = t.element();
      mem.param = i;
      mem.base = B_.CreateLoad(ptr, B_.CreateConstGEP1_64(ptr, buffers, binding));
      mem.count = B_.CreateLoad(i64, B_.CreateConstGEP1_64(i64, counts, binding));
      memory_[p] = mem;
      ++binding;
      continue;
    }
    uint32_t lane_bytes = ir::scalar_bits(t.element()) == 64 ? 8 : 4;
    offset = (offset + lane_bytes - 1) / lane_bytes * lane_bytes;
    Parts parts;
    for (unsigned l = 0; l < t.lanes(); ++l) {
      Type *slot = B_.getIntNTy(lane_bytes * 8);
      Value *raw = B_.CreateAlignedLoad(
          slot, B_.CreateConstGEP1_64(B_.getInt8Ty(), params, offset + l * lane_bytes),
          llvm::Align(4));
      Type *et = elem_type(t.element());
      Value *v = et->isFloatingPointTy() ? B_.CreateBitCast(raw, et) : B_.CreateTrunc(raw, et);
      parts.push_back(v);
    }
    offset += lane_bytes * t.lanes();
    vals_[p] = parts;
  }
  // Shared arrays in declaration order (KernelAbi::shared_bytes); local arrays per invocation.
  uint64_t shared_offset = 0;
  for (const ir::Operation *op : kernel_.body()) {
    if (op->opcode() != Opcode::SharedAlloc && op->opcode() != Opcode::LocalAlloc)
      continue;
    ir::Type t = op->result()->type();
    MemInfo mem;
    mem.element = t.element();
    mem.n = t.count();
    if (op->opcode() == Opcode::SharedAlloc) {
      mem.kind = MemInfo::Shared;
      mem.base = B_.CreateConstGEP1_64(B_.getInt8Ty(), shared_, shared_offset);
      shared_offset += t.array_bytes();
    } else {
      mem.kind = MemInfo::Local;
      uint64_t copies = has_wg_ops_ ? G_ : 1;
      mem.base = entry_alloca(elem_type(t.element()), copies * mem.n * W_, "local");
    }
    memory_[op->result()] = mem;
  }
  plan_storage();
  // The workgroup loop: [first, end), x fastest.
  BasicBlock *header = block("workgroup"), *body = block("workgroup.body"), *done = block("done");
  B_.CreateBr(header);
  B_.SetInsertPoint(header);
  llvm::PHINode *group = B_.CreatePHI(i64, 2);
  group->addIncoming(first, entry);
  B_.CreateCondBr(B_.CreateICmpULT(group, end), body, done);
  B_.SetInsertPoint(body);
  Value *nx = B_.CreateZExt(num_workgroups_[0], i64), *ny = B_.CreateZExt(num_workgroups_[1], i64);
  Value *row = B_.CreateUDiv(group, nx);
  workgroup_id_[0] = B_.CreateTrunc(B_.CreateURem(group, nx), i32);
  workgroup_id_[1] = B_.CreateTrunc(B_.CreateURem(row, ny), i32);
  workgroup_id_[2] = B_.CreateTrunc(B_.CreateUDiv(row, ny), i32);
  emit_wg_region(kernel_.body());
  group->addIncoming(B_.CreateAdd(group, B_.getInt64(1)), B_.GetInsertBlock());
  B_.CreateBr(header);
  B_.SetInsertPoint(done);
  B_.CreateRetVoid();
}

std::unique_ptr<llvm::Module> Lowering::run() {
  module_ = std::make_unique<llvm::Module>("cubecc_" + kernel_.name(), ctx_);
  module_->setTargetTriple(machine_.getTargetTriple().str());
  module_->setDataLayout(machine_.createDataLayout());
  find_workgroup_level_ops();
  decide_shapes();
  assign_segments(kernel_.body());
  auto *i32 = llvm::Type::getInt32Ty(ctx_);
  for (auto [name, value] : {std::pair<const char *, uint32_t>{"cubecc_cpu_abi_version", 1u},
                             {"cubecc_cpu_subgroup_size", W_}}) {
    auto *g = new llvm::GlobalVariable(*module_, i32, true, llvm::GlobalValue::ExternalLinkage,
                                       llvm::ConstantInt::get(i32, value), name);
    g->setVisibility(llvm::GlobalValue::DefaultVisibility);
  }
  emit_entry();
  return std::move(module_);
}

} // namespace

std::unique_ptr<llvm::Module> lower_kernel(const ir::Kernel &kernel, llvm::LLVMContext &context,
                                           llvm::TargetMachine &machine,
                                           const LowerOptions &options,
                                           std::vector<ir::Diagnostic> &errors) {
  try {
    Lowering lowering(kernel, context, machine, options);
    return lowering.run();
  } catch (const Failure &f) {
    errors.push_back(f.diagnostic);
    return nullptr;
  }
}

} // namespace cubecc::llvm_backend
