//===- lower_memory.cpp - Loads, stores, atomics and bounds checks
//------------------------------===//
#include "llvm/lowering.h"

#include "cubecc/codegen/cpu_abi.h"

namespace cubecc::llvm_backend {

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

/// Checked mode: lanes of `mask` whose access [idx, idx + lanes) leaves the buffer, shared or
/// local array record the launch's first fault and drop out of the returned mask. For arrays the
/// index is also replaced by 0 where it is out of bounds: some array paths address every lane's
/// slot and blend by the mask afterwards (a local row), and must not touch memory past the array.
Value *Lowering::check_bounds(const ir::Operation *op, const MemInfo &mem, Value *&idx64,
                              unsigned lanes, uint32_t kind, Value *mask) {
  if (!opt_.checked)
    return mask;
  const bool buffer = mem.kind == MemInfo::Buffer;
  Value *count = buffer ? mem.count : B_.getInt64(mem.n);
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
  uint32_t which = buffer                        ? mem.param
                   : mem.kind == MemInfo::Shared ? CUBECC_CPU_FAULT_SHARED_ARRAY
                                                 : CUBECC_CPU_FAULT_LOCAL_ARRAY;
  B_.CreateCall(fault_function(),
                {launch_, B_.getInt32(kind), B_.getInt32(which), index, count,
                 B_.getInt32(op->location().line), B_.getInt32(op->location().col)});
  B_.CreateBr(cont);
  B_.SetInsertPoint(cont);
  if (!buffer)
    idx64 = B_.CreateSelect(ok, idx64, llvm::Constant::getNullValue(idx64->getType()));
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

/// The row of element idx + k of a local array for a uniform `idx64`: its W lanes, contiguous.
Value *Lowering::local_row(const MemInfo &mem, Value *idx64, unsigned k) {
  Value *copy = has_wg_ops_ ? B_.CreateZExt(gang_, B_.getInt64Ty()) : B_.getInt64(0);
  Value *element =
      B_.CreateAdd(B_.CreateAdd(B_.CreateMul(copy, B_.getInt64(mem.n)), idx64), B_.getInt64(k));
  return B_.CreateGEP(elem_type(mem.element), mem.base, B_.CreateMul(element, B_.getInt64(W_)));
}

/// Whether an access of `lanes` elements per invocation at `index` covers one contiguous block
/// for the gang: index = base + lane * lanes (1 element: consecutive lanes; an N-lane vector
/// access: N consecutive elements per lane, interleaved).
bool Lowering::interleaved_access(const ir::Value *index, unsigned lanes) {
  auto aff = affine_.find(index);
  return aff != affine_.end() && aff->second.stride == static_cast<int64_t>(lanes) &&
         (lanes & (lanes - 1)) == 0;
}

/// True when the index's lanes really are base + lane * lanes: the last lane's index does not
/// overflow the index type (then no lane's does). A scalar test on the base; 64-bit indices
/// wrap exactly as the address arithmetic does, so they need none.
Value *Lowering::no_wrap(Scalar index_type, Value *idx64, const Affine &affine, unsigned lanes) {
  unsigned w = ir::scalar_bits(index_type);
  if (w >= 64)
    return B_.getTrue();
  uint64_t max = ir::is_signed(index_type) ? ir::width_mask(w - 1) : ir::width_mask(w);
  Value *first = index64(index_type, affine.base);
  return B_.CreateICmpSLE(first, B_.getInt64(max - uint64_t{W_ - 1} * lanes));
}

/// The vectors of `parts` (equal types, a power of two of them) one after another.
Value *Lowering::concat(std::vector<Value *> parts) {
  while (parts.size() > 1) {
    std::vector<Value *> next;
    for (size_t i = 0; i < parts.size(); i += 2) {
      unsigned n = llvm::cast<llvm::FixedVectorType>(parts[i]->getType())->getNumElements();
      llvm::SmallVector<int, 64> order;
      for (unsigned j = 0; j < 2 * n; ++j)
        order.push_back(static_cast<int>(j));
      next.push_back(B_.CreateShuffleVector(parts[i], parts[i + 1], order));
    }
    parts = std::move(next);
  }
  return parts.front();
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
  if (mem.kind == MemInfo::Local && !idx64->getType()->isVectorTy()) {
    // A uniform index: element idx + k of every lane is one contiguous W-wide row of the
    // lane-interleaved array. A plain vector load (inactive lanes read their own slot and are
    // masked to 0) lets SROA keep the array in registers when the index is a constant, as for
    // every DSL Var.
    for (unsigned k = 0; k < lanes; ++k) {
      Value *row = B_.CreateAlignedLoad(vec_type(t), local_row(mem, idx64, k), align);
      out.push_back(B_.CreateSelect(mask, row, llvm::Constant::getNullValue(vec_type(t))));
    }
    define(op->result(), out);
    return;
  }
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
  if (interleaved_access(index, lanes)) {
    // One contiguous block for the gang: a masked vector load (each lane's mask bit repeated
    // for its elements), split into the parts; a gather when the index wraps in the gang.
    const Affine &aff = affine_.at(index);
    Type *wide = llvm::FixedVectorType::get(t, W_ * lanes);
    BasicBlock *fast_bb = block("load.vector"), *slow_bb = block("load.gather"),
               *done = block("load.done");
    B_.CreateCondBr(no_wrap(is, idx64, aff, lanes), fast_bb, slow_bb);
    B_.SetInsertPoint(fast_bb);
    llvm::SmallVector<int, 64> repeat;
    for (unsigned j = 0; j < W_ * lanes; ++j)
      repeat.push_back(static_cast<int>(j / lanes));
    Value *wide_mask = lanes == 1 ? mask : B_.CreateShuffleVector(mask, repeat);
    Value *block_value = B_.CreateMaskedLoad(wide, B_.CreateGEP(t, mem.base, index64(is, aff.base)),
                                             align, wide_mask, llvm::Constant::getNullValue(wide));
    Parts fast;
    for (unsigned k = 0; k < lanes; ++k) {
      if (lanes == 1) {
        fast.push_back(block_value);
        break;
      }
      llvm::SmallVector<int, 16> pick;
      for (unsigned l = 0; l < W_; ++l)
        pick.push_back(static_cast<int>(l * lanes + k));
      fast.push_back(B_.CreateShuffleVector(block_value, pick));
    }
    BasicBlock *fast_end = B_.GetInsertBlock();
    B_.CreateBr(done);
    B_.SetInsertPoint(slow_bb);
    Parts slow;
    for (unsigned k = 0; k < lanes; ++k)
      slow.push_back(B_.CreateMaskedGather(
          vec_type(t), B_.CreateGEP(t, mem.base, B_.CreateAdd(idx64, splat(B_.getInt64(k)))), align,
          mask, llvm::Constant::getNullValue(vec_type(t))));
    BasicBlock *slow_end = B_.GetInsertBlock();
    B_.CreateBr(done);
    B_.SetInsertPoint(done);
    for (unsigned k = 0; k < lanes; ++k) {
      llvm::PHINode *phi = B_.CreatePHI(vec_type(t), 2);
      phi->addIncoming(fast[k], fast_end);
      phi->addIncoming(slow[k], slow_end);
      out.push_back(phi);
    }
    define(op->result(), out);
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
  if (mem.kind == MemInfo::Local && !idx64->getType()->isVectorTy()) {
    // A uniform index: a blend into the lanes' contiguous row (each lane owns its slot, so the
    // read-modify-write races with nobody); registers after SROA for constant indices.
    for (unsigned k = 0; k < lanes; ++k) {
      Value *ptr = local_row(mem, idx64, k);
      Value *old = B_.CreateAlignedLoad(vec_type(t), ptr, align);
      B_.CreateAlignedStore(B_.CreateSelect(mask, splat(value[k]), old), ptr, align);
    }
    return;
  }
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
  if (interleaved_access(index, lanes)) {
    const Affine &aff = affine_.at(index);
    BasicBlock *fast_bb = block("store.vector"), *slow_bb = block("store.scatter"),
               *done = block("store.done");
    B_.CreateCondBr(no_wrap(is, idx64, aff, lanes), fast_bb, slow_bb);
    B_.SetInsertPoint(fast_bb);
    Value *block_value;
    Value *wide_mask = mask;
    if (lanes == 1) {
      block_value = splat(value[0]);
    } else {
      std::vector<Value *> parts;
      for (Value *v : value)
        parts.push_back(splat(v));
      llvm::SmallVector<int, 64> interleave, repeat;
      for (unsigned j = 0; j < W_ * lanes; ++j) {
        interleave.push_back(static_cast<int>((j % lanes) * W_ + j / lanes));
        repeat.push_back(static_cast<int>(j / lanes));
      }
      Value *all = concat(parts);
      block_value = B_.CreateShuffleVector(all, interleave);
      wide_mask = B_.CreateShuffleVector(mask, repeat);
    }
    B_.CreateMaskedStore(block_value, B_.CreateGEP(t, mem.base, index64(is, aff.base)), align,
                         wide_mask);
    B_.CreateBr(done);
    B_.SetInsertPoint(slow_bb);
    for (unsigned k = 0; k < lanes; ++k)
      B_.CreateMaskedScatter(
          splat(value[k]),
          B_.CreateGEP(t, mem.base, B_.CreateAdd(splat(idx64), splat(B_.getInt64(k)))), align,
          mask);
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
  const bool store = op->opcode() == Opcode::AtomicStore; // the one without a result
  Scalar s = (store ? op->operand(2) : op->result())->type().element();
  Scalar is = op->operand(1)->type().element();
  Type *t = elem_type(s);
  Value *idx64 = index64(is, part(op->operand(1), 0));
  Value *mask = check_bounds(op, mem, idx64, 1, 3, mask_);
  Value *v = op->num_operands() > 2 ? part(op->operand(2), 0) : nullptr;
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
    Value *val = v ? lane_of(v, l) : nullptr;
    Value *old = nullptr;
    bool flt = ir::is_float(s);
    Type *int_type = B_.getIntNTy(ir::scalar_bits(s));
    // f16/bf16 add, min and max: a compare-exchange loop on the bits, the new value computed as
    // the non-atomic op computes it (rounded once; min and max as docs/ir.md §4.2).
    auto half_cas_loop = [&] {
      Value *initial = B_.CreateAlignedLoad(t, ptr, align);
      llvm::cast<llvm::LoadInst>(initial)->setAtomic(order);
      BasicBlock *before = B_.GetInsertBlock(), *loop = block("atomic.cas"),
                 *done = block("atomic.cas.done");
      B_.CreateBr(loop);
      B_.SetInsertPoint(loop);
      llvm::PHINode *current = B_.CreatePHI(t, 2);
      current->addIncoming(initial, before);
      Value *next = float_arith(ir::atomic_combine(op->opcode()), s, current, val, nullptr);
      Value *pair = B_.CreateAtomicCmpXchg(ptr, current, next, align, order, order);
      current->addIncoming(B_.CreateExtractValue(pair, 0), B_.GetInsertBlock());
      B_.CreateCondBr(B_.CreateExtractValue(pair, 1), done, loop);
      B_.SetInsertPoint(done);
      return static_cast<Value *>(current);
    };
    switch (op->opcode()) {
    case Opcode::AtomicAdd:
      if (!flt) {
        old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, ptr, val, align, order);
      } else if (!is_half(s)) {
        old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::FAdd, ptr, val, align, order);
      } else {
        old = half_cas_loop();
      }
      break;
    case Opcode::AtomicSub:
      old = B_.CreateAtomicRMW(llvm::AtomicRMWInst::Sub, ptr, val, align, order);
      break;
    case Opcode::AtomicMin:
    case Opcode::AtomicMax: {
      bool is_min = op->opcode() == Opcode::AtomicMin;
      if (flt && !is_half(s)) { // minnum/maxnum, like the non-atomic min and max
        old = B_.CreateAtomicRMW(is_min ? llvm::AtomicRMWInst::FMin : llvm::AtomicRMWInst::FMax,
                                 ptr, val, align, order);
        break;
      }
      if (flt) {
        old = half_cas_loop();
        break;
      }
      old = B_.CreateAtomicRMW(
          is_min ? (ir::is_signed(s) ? llvm::AtomicRMWInst::Min : llvm::AtomicRMWInst::UMin)
                 : (ir::is_signed(s) ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax),
          ptr, val, align, order);
      break;
    }
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
    case Opcode::AtomicLoad: {
      llvm::LoadInst *load = B_.CreateAlignedLoad(int_type, ptr, align);
      load->setAtomic(order);
      old = B_.CreateBitCast(load, t);
      break;
    }
    case Opcode::AtomicStore:
      B_.CreateAlignedStore(B_.CreateBitCast(val, int_type), ptr, align)->setAtomic(order);
      old = llvm::Constant::getNullValue(t);
      break;
    default:
      fail(op, "internal error: unknown atomic");
    }
    Value *all = B_.CreateLoad(vec_type(t), result);
    B_.CreateStore(B_.CreateInsertElement(all, old, uint64_t{l}), result);
    B_.CreateBr(next);
    B_.SetInsertPoint(next);
  }
  if (!store)
    define(op->result(), {B_.CreateLoad(vec_type(t), result)});
}

} // namespace cubecc::llvm_backend
