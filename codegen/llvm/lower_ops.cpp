//===- lower_ops.cpp - Op dispatch, control flow in segments, builtins, subgroup ops
//------------===//
#include "llvm/lowering.h"

#include "cubecc/ir/print_format.h"
#include "cubecc/ir/subgroup_combine.h"

#include <stdexcept>

namespace cubecc::llvm_backend {

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
      // A source lane outside the subgroup keeps the lane's own value (docs/ir.md §4.12).
      Value *in_range = nullptr;
      if (o == Opcode::SubgroupShuffle || o == Opcode::SubgroupShuffleXor)
        in_range = B_.CreateICmpULT(src, splat(B_.getInt32(W_)));
      else if (o == Opcode::SubgroupShuffleUp)
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
  const ir::SubgroupCombine how = ir::subgroup_combine(o);
  const Opcode combine = how.combine;
  const bool inclusive = how.scan == ir::SubgroupCombine::Scan::Inclusive;
  const bool exclusive = how.scan == ir::SubgroupCombine::Scan::Exclusive;
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
        case Opcode::Mul:
          r = B_.CreateMulReduce(xv);
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
      } else if (combine != Opcode::Add) {
        // Float min/max pick an element by a total order (NaN loses to any number, two NaNs
        // by their bits), so a tree gives the interpreter's fold; folding the identity in
        // last reproduces its start value (a NaN against +inf gives +inf there).
        Value *t = xv;
        for (unsigned d = W_ / 2; d >= 1; d /= 2) {
          llvm::SmallVector<int, 16> upper;
          for (unsigned l = 0; l < W_; ++l)
            upper.push_back(static_cast<int>(l + d < W_ ? l + d : l));
          t = combine_values(t, B_.CreateShuffleVector(t, upper));
        }
        r = combine_values(start, B_.CreateExtractElement(t, uint64_t{0}));
      }
      if (!r) {
        r = start;
        for (unsigned l = 0; l < W_; ++l)
          r = combine_values(r, B_.CreateExtractElement(xv, uint64_t{l}));
      }
      out.push_back(r);
      continue;
    }
    if (!ir::is_float(s) || combine != Opcode::Add) {
      // Integer scans and float min/max scans: log2(W) shift-and-combine steps (exact: the
      // ops are associative and commutative, see above); exclusive is inclusive shifted by one
      // lane with the identity in front.
      Value *identity_vector = splat(start);
      Value *x = xv;
      for (unsigned d = 1; d < W_; d *= 2) {
        llvm::SmallVector<int, 16> shift;
        for (unsigned l = 0; l < W_; ++l)
          shift.push_back(l >= d ? static_cast<int>(l - d) : static_cast<int>(W_ + l));
        x = combine_values(x, B_.CreateShuffleVector(x, identity_vector, shift));
      }
      if (ir::is_float(s))
        x = combine_values(identity_vector, x); // the interpreter's start value, folded in
      if (exclusive) {
        llvm::SmallVector<int, 16> shift;
        for (unsigned l = 0; l < W_; ++l)
          shift.push_back(l >= 1 ? static_cast<int>(l - 1) : static_cast<int>(W_));
        x = B_.CreateShuffleVector(x, identity_vector, shift);
      }
      out.push_back(x);
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
  if (ir::is_matrix_op(o))
    return emit_matrix(op);
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
  case ir::Signature::Compare:
  case ir::Signature::Classify: {
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
  case ir::Signature::Print:
    return emit_print(op);
  case ir::Signature::AsyncCopy: // done at once by the legalize pass
  case ir::Signature::AsyncGroup:
    throw std::logic_error(fmt::format("the LLVM lowering met '{}', which the legalize pass "
                                       "lowers: a bug in cubecc",
                                       op->name()));
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

/// printf once per active lane, in lane order, each value widened as docs/ir.md §4.15 says (to
/// i64 or double), then fflush(NULL): the output is not held back in the stdio buffer.
void Lowering::emit_print(const ir::Operation *op) {
  const ir::PrintFormat format = ir::print_format_of(*op);
  llvm::FunctionCallee printf_fn = module_->getOrInsertFunction(
      "printf", llvm::FunctionType::get(B_.getInt32Ty(), {B_.getPtrTy()}, true));
  llvm::FunctionCallee fflush_fn = module_->getOrInsertFunction(
      "fflush", llvm::FunctionType::get(B_.getInt32Ty(), {B_.getPtrTy()}, false));
  Value *text = B_.CreateGlobalString(format.printf_string(), "print.format");
  for (unsigned l = 0; l < W_; ++l) {
    BasicBlock *run = block("print.lane"), *next = block("print.next");
    B_.CreateCondBr(B_.CreateExtractElement(mask_, uint64_t{l}), run, next);
    B_.SetInsertPoint(run);
    std::vector<Value *> args = {text};
    for (const ir::PrintArgument &a : format.args) {
      Value *x = part(op->operand(a.operand), a.lane);
      if (x->getType()->isVectorTy())
        x = B_.CreateExtractElement(x, uint64_t{l});
      switch (ir::print_class(a.type)) {
      case ir::PrintClass::Float:
        if (is_half(a.type))
          x = to_f32(a.type, x);
        args.push_back(B_.CreateFPExt(x, B_.getDoubleTy()));
        break;
      case ir::PrintClass::Signed:
        args.push_back(B_.CreateSExt(x, B_.getInt64Ty()));
        break;
      case ir::PrintClass::Unsigned:
        args.push_back(B_.CreateZExt(x, B_.getInt64Ty()));
        break;
      }
    }
    B_.CreateCall(printf_fn, args);
    B_.CreateBr(next);
    B_.SetInsertPoint(next);
  }
  B_.CreateCall(fflush_fn, {llvm::ConstantPointerNull::get(B_.getPtrTy())});
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
        Type *t = value_part_type(op->result(i)->type(), true);
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
      Type *t = value_part_type(arg->type(), is_vec(arg));
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
  llvm::Instruction *back_edge = nullptr;
  if (loop.uniform) {
    back_edge = B_.CreateCondBr(wrapped, exit, header);
  } else {
    B_.CreateStore(B_.CreateAnd(B_.CreateLoad(mask_type(), loop.live), B_.CreateNot(wrapped)),
                   loop.live);
    back_edge = B_.CreateBr(header);
  }
  if (auto unroll = op->attributes().get_int("unroll")) {
    // The IR's hint, as LLVM's loop metadata: unroll = 1 asks for no unrolling.
    llvm::Metadata *hint =
        *unroll <= 1
            ? llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")})
            : llvm::MDNode::get(ctx_,
                                {llvm::MDString::get(ctx_, "llvm.loop.unroll.count"),
                                 llvm::ConstantAsMetadata::get(B_.getInt32(
                                     static_cast<uint32_t>(std::min<int64_t>(*unroll, 1024))))});
    llvm::MDNode *loop_id = llvm::MDNode::getDistinct(ctx_, {nullptr, hint});
    loop_id->replaceOperandWith(0, loop_id);
    back_edge->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
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
      slots.push_back(entry_alloca(value_part_type(arg->type(), is_vec(arg)), 1, "carried"));
      B_.CreateStore(conform(init[k], is_vec(arg)), slots.back());
    }
    loop.carried.push_back(slots);
  }
  for (unsigned c = 0; c < op->num_results(); ++c) {
    const ir::Value *r = op->result(c);
    std::vector<llvm::AllocaInst *> slots;
    for (unsigned k = 0; k < r->type().lanes(); ++k) {
      Type *t = value_part_type(r->type(), is_vec(r));
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

} // namespace cubecc::llvm_backend
