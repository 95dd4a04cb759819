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
//   - Every op keeps the reference interpreter's semantics: the kernel arrives legalized
//     (passes/legalize.h: guarded division, masked shifts, in-range float-to-int conversion);
//     minNum/maxNum with the interpreter's signed-zero and NaN choices and f16/bf16 rounded once
//     per op are done here.
//
//===-----------------------------------------------------------------------------------------===//
#include "llvm/lowering.h"

#include "cubecc/codegen/cpu_abi.h"
#include "cubecc/codegen/kernel_abi.h"

#include "cubecc/ir/subgroup_combine.h"

#include <functional>

namespace cubecc::llvm_backend {
namespace {

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

} // namespace

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
      case ir::Signature::AtomicLoad:
        mark(op->result());
        return;
      case ir::Signature::SubgroupUnary:
        if (ir::subgroup_combine(o).scan != ir::SubgroupCombine::Scan::None)
          mark(op->result()); // a scan differs per lane
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
  std::string parameters; // cubecc_cpu_interface's part for them
  for (unsigned i = 0; i < kernel_.num_parameters(); ++i) {
    const ir::Value *p = kernel_.parameter(i);
    ir::Type t = p->type();
    if (t.kind() == ir::TypeKind::Buffer) {
      parameters += fmt::format("; {} binding {}", t.str(), binding);
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
    parameters += fmt::format("; {} at {} x{}", t.str(), offset, lane_bytes);
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
      shared_offset += codegen::KernelAbi::padded_shared_bytes(t); // the ABI's layout
    } else {
      mem.kind = MemInfo::Local;
      uint64_t copies = has_wg_ops_ ? G_ : 1;
      uint64_t bytes = copies * mem.n * W_ * (ir::scalar_bits(t.element()) / 8);
      if (bytes <= kMaxStackLocalBytes) {
        mem.base = entry_alloca(elem_type(t.element()), copies * mem.n * W_, "local");
      } else {
        // Too big for the calling thread's stack: from the heap, once per call. Without the
        // memory the call runs no workgroup: it records fault kind 4 (cpu_abi.h) with the bytes
        // asked for, frees what it had, and returns.
        llvm::FunctionCallee alloc =
            module_->getOrInsertFunction("malloc", llvm::FunctionType::get(ptr, {i64}, false));
        mem.base = B_.CreateCall(alloc, {B_.getInt64(bytes)});
        heap_.push_back(mem.base);
        BasicBlock *failed = block("local.nomem"), *ok = block("local.ok");
        B_.CreateCondBr(B_.CreateIsNull(mem.base), failed, ok);
        B_.SetInsertPoint(failed);
        free_heap();
        B_.CreateCall(fault_function(),
                      {launch_, B_.getInt32(CUBECC_CPU_FAULT_NO_MEMORY), B_.getInt32(0),
                       B_.getInt64(0), B_.getInt64(bytes), B_.getInt32(op->location().line),
                       B_.getInt32(op->location().col)});
        B_.CreateRetVoid();
        B_.SetInsertPoint(ok);
        entry = ok;
      }
    }
    memory_[op->result()] = mem;
  }
  const auto &wg = kernel_.workgroup_size();
  interface_ = fmt::format("workgroup {} {} {}; shared {}{}", wg[0], wg[1], wg[2], shared_offset,
                           parameters);
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
  free_heap();
  B_.CreateRetVoid();
}

void Lowering::free_heap() {
  if (heap_.empty())
    return;
  llvm::FunctionCallee release = module_->getOrInsertFunction(
      "free", llvm::FunctionType::get(B_.getVoidTy(), {B_.getPtrTy()}, false));
  for (Value *p : heap_)
    B_.CreateCall(release, {p}); // free(NULL) does nothing
}

std::unique_ptr<llvm::Module> Lowering::run() {
  module_ = std::make_unique<llvm::Module>("cubecc_" + kernel_.name(), ctx_);
  module_->setTargetTriple(machine_.getTargetTriple().str());
  module_->setDataLayout(machine_.createDataLayout());
  find_workgroup_level_ops();
  decide_shapes();
  check_matrices();
  assign_segments(kernel_.body());
  auto *i32 = llvm::Type::getInt32Ty(ctx_);
  for (auto [name, value] :
       {std::pair<const char *, uint32_t>{CUBECC_CPU_ABI_VERSION_SYMBOL, CUBECC_CPU_ABI_VERSION},
        {CUBECC_CPU_SUBGROUP_SIZE_SYMBOL, W_}}) {
    auto *g = new llvm::GlobalVariable(*module_, i32, true, llvm::GlobalValue::ExternalLinkage,
                                       llvm::ConstantInt::get(i32, value), name);
    g->setVisibility(llvm::GlobalValue::DefaultVisibility);
  }
  emit_entry();
  llvm::Constant *text = llvm::ConstantDataArray::getString(ctx_, interface_, true);
  auto *g =
      new llvm::GlobalVariable(*module_, text->getType(), true, llvm::GlobalValue::ExternalLinkage,
                               text, CUBECC_CPU_INTERFACE_SYMBOL);
  g->setVisibility(llvm::GlobalValue::DefaultVisibility);
  return std::move(module_);
}

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
