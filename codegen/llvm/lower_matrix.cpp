//===- lower_matrix.cpp - Matrix ops, computed once per gang ----------------------------------===//
//
// A gang is a subgroup, so a matrix (docs/ir.md §2.2) is one gang-uniform value: an LLVM array
// of its rows x cols elements, row-major, held like any gang-uniform scalar (phis, loop-carried
// slots, per-gang slots across barriers). Each op is a loop over the elements in the
// interpreter's order, so that every result is the interpreter's bit for bit: matrix.mma sums
// each element in double from C over k = 0, 1, ... and rounds once to the accumulator type.
//
//===-----------------------------------------------------------------------------------------===//
#include "llvm/lowering.h"

namespace cubecc::llvm_backend {

/// The whole-subgroup rules of docs/ir.md §2.2, checked before emission: the workgroup is whole
/// gangs, every matrix op is reached by the whole gang (no control flow that differs between its
/// lanes around it), no matrix value is chosen per lane, and fp8 fragments are not converted
/// (as on CUDA and HIP). Operands that the shape analysis cannot prove gang-uniform (an index
/// computed from local_index / 32, say) are taken from lane 0: the IR requires them equal across
/// the subgroup, and the interpreter reports a kernel where they are not.
void Lowering::check_matrices() {
  auto vec = [&](const ir::Value *v) { return vec_.count(v) != 0; };
  kernel_.walk([&](const ir::Operation *op) {
    for (unsigned r = 0; r < op->num_regions(); ++r)
      for (unsigned i = 0; i < op->region(r).num_arguments(); ++i)
        if (const ir::Value *a = op->region(r).argument(i); a->type().is_matrix() && vec(a))
          fail(op, "a matrix carried by a loop that not every invocation of a subgroup runs "
                   "alike (its bounds or exits differ between the invocations); matrices are "
                   "values of the whole subgroup");
    for (unsigned i = 0; i < op->num_results(); ++i)
      if (op->result(i)->type().is_matrix() && vec(op->result(i)))
        fail(op, "a matrix chosen by control flow that differs between the invocations of a "
                 "subgroup; matrices are values of the whole subgroup");
    if (!ir::is_matrix_op(op->opcode()))
      return;
    if (N_ % W_ != 0)
      fail(op, fmt::format("whole subgroups: the workgroup has {} invocations, not a multiple of "
                           "the subgroup size {}",
                           N_, W_));
    for (const ir::Operation *p = op->parent_op(); p; p = p->parent_op()) {
      bool loop = p->opcode() == Opcode::For || p->opcode() == Opcode::While;
      bool divergent = p->opcode() == Opcode::If ? vec(p->operand(0)) && !wg_ops_.count(p)
                                                 : loop && !uniform_loops_.count(p);
      if (divergent)
        fail(op, "needs the whole subgroup, but it is under control flow that depends on the "
                 "invocation (make the condition or the loop's bounds the same across the "
                 "subgroup)");
    }
    if (op->opcode() == Opcode::MatrixConvert &&
        (ir::is_storage_float(op->operand(0)->type().element()) ||
         ir::is_storage_float(op->result()->type().element())))
      fail(op, fmt::format("conversion of an fp8 fragment ({} to {}) is not lowered; convert "
                           "the elements in memory instead",
                           op->operand(0)->type().str(), op->result()->type().str()));
  });
}

Value *Lowering::build_matrix(ir::Type t, const std::function<Value *(Value *)> &element) {
  llvm::ArrayType *type = matrix_type(t);
  llvm::AllocaInst *slot = entry_alloca(type, 1, "matrix");
  counted_loop(B_.getInt64Ty(), t.matrix_elements(), "matrix", [&](Value *e) {
    B_.CreateStore(element(e), B_.CreateInBoundsGEP(type, slot, {B_.getInt64(0), e}));
  });
  return B_.CreateLoad(type, slot);
}

Value *Lowering::spill_matrix(ir::Type t, Value *matrix) {
  llvm::AllocaInst *slot = entry_alloca(matrix_type(t), 1, "matrix.operand");
  B_.CreateStore(matrix, slot);
  return slot;
}

Value *Lowering::matrix_element(ir::Type t, Value *slot, Value *e) {
  llvm::ArrayType *type = matrix_type(t);
  return B_.CreateLoad(type->getElementType(),
                       B_.CreateInBoundsGEP(type, slot, {B_.getInt64(0), e}));
}

Value *Lowering::matrix_element_to_f64(Scalar s, Value *v) {
  if (!ir::is_storage_float(s))
    return convert(s, Scalar::F64, v);
  // e4m3 and e5m2 are bytes here (legalize expands their scalar conversions): a table of the
  // 256 values, made with the interpreter's own decoding.
  std::string name = fmt::format("cubecc.{}.to_f64", ir::scalar_name(s));
  auto *table_type = llvm::ArrayType::get(B_.getDoubleTy(), 256);
  llvm::GlobalVariable *table = module_->getGlobalVariable(name, true);
  if (!table) {
    std::vector<double> values(256);
    for (unsigned bits = 0; bits < 256; ++bits)
      values[bits] = ir::to_double(s, bits);
    table = new llvm::GlobalVariable(*module_, table_type, true, llvm::GlobalValue::InternalLinkage,
                                     llvm::ConstantDataArray::get(ctx_, values), name);
  }
  Value *index = B_.CreateZExt(v, B_.getInt64Ty());
  return B_.CreateLoad(B_.getDoubleTy(),
                       B_.CreateInBoundsGEP(table_type, table, {B_.getInt64(0), index}));
}

void Lowering::emit_matrix(const ir::Operation *op) {
  /// A gang-uniform operand (lane 0 of one the shape analysis keeps per lane: see above).
  auto uniform = [&](unsigned i) { return conform(part(op->operand(i), 0), false); };
  switch (op->opcode()) {
  case Opcode::MatrixFill: {
    Value *value = uniform(0);
    define(op->result(), {build_matrix(op->result()->type(), [&](Value *) { return value; })});
    return;
  }
  case Opcode::MatrixLoad:
  case Opcode::MatrixStore: {
    const bool load = op->opcode() == Opcode::MatrixLoad;
    const ir::Type m = load ? op->result()->type() : op->operand(3)->type();
    const MemInfo &mem = memory_.at(op->operand(0));
    const Scalar is = op->operand(1)->type().element();
    Value *index = index64(is, uniform(1)), *stride = index64(is, uniform(2));
    const bool col_major = op->attributes().get_int("col_major").value_or(0) != 0;
    Type *t = elem_type(mem.element);
    llvm::Align align(ir::scalar_bits(mem.element) / 8);
    // Element (r, c) at index + r * stride + c (column-major: index + c * stride + r), in the
    // index's 64-bit form: it wraps as the interpreter's does, and checked mode reports it.
    auto address = [&](Value *e, Value *&idx64) {
      Value *r = B_.CreateUDiv(e, B_.getInt64(m.cols())),
            *c = B_.CreateURem(e, B_.getInt64(m.cols()));
      idx64 = B_.CreateAdd(
          index, B_.CreateAdd(B_.CreateMul(col_major ? c : r, stride), col_major ? r : c));
      Value *ok = opt_.checked ? any(check_bounds(op, mem, idx64, 1, load ? 1 : 2, all_true()))
                               : B_.getTrue();
      return ok;
    };
    if (load) {
      define(op->result(), {build_matrix(m, [&](Value *e) {
               Value *idx64 = nullptr;
               Value *ok = address(e, idx64);
               if (!opt_.checked)
                 return static_cast<Value *>(
                     B_.CreateAlignedLoad(t, B_.CreateGEP(t, mem.base, idx64), align));
               BasicBlock *pre = B_.GetInsertBlock(), *read = block("matrix.read"),
                          *done = block("matrix.read.done");
               B_.CreateCondBr(ok, read, done);
               B_.SetInsertPoint(read);
               Value *loaded = B_.CreateAlignedLoad(t, B_.CreateGEP(t, mem.base, idx64), align);
               B_.CreateBr(done);
               B_.SetInsertPoint(done);
               llvm::PHINode *phi = B_.CreatePHI(t, 2);
               phi->addIncoming(llvm::Constant::getNullValue(t), pre);
               phi->addIncoming(loaded, read);
               return static_cast<Value *>(phi);
             })});
      return;
    }
    Value *slot = spill_matrix(m, part(op->operand(3), 0));
    counted_loop(B_.getInt64Ty(), m.matrix_elements(), "matrix.store", [&](Value *e) {
      Value *idx64 = nullptr;
      Value *ok = address(e, idx64);
      Value *value = matrix_element(m, slot, e);
      if (!opt_.checked) {
        B_.CreateAlignedStore(value, B_.CreateGEP(t, mem.base, idx64), align);
        return;
      }
      BasicBlock *write = block("matrix.write"), *done = block("matrix.write.done");
      B_.CreateCondBr(ok, write, done);
      B_.SetInsertPoint(write);
      B_.CreateAlignedStore(value, B_.CreateGEP(t, mem.base, idx64), align);
      B_.CreateBr(done);
      B_.SetInsertPoint(done);
    });
    return;
  }
  case Opcode::MatrixMma: {
    const ir::Type a = op->operand(0)->type(), b = op->operand(1)->type(),
                   c = op->operand(2)->type();
    const uint64_t n = c.cols(), k = a.cols();
    Value *sa = spill_matrix(a, part(op->operand(0), 0));
    Value *sb = spill_matrix(b, part(op->operand(1), 0));
    Value *sc = spill_matrix(c, part(op->operand(2), 0));
    // Integers: the exact sum in 64 bits, wrapped to the i32 accumulator. Floats: the products
    // are exact in double; the sum is not fused (no contraction).
    const bool integer = ir::is_integer(c.element());
    Type *sum_type = integer ? B_.getInt64Ty() : B_.getDoubleTy();
    auto widen = [&](Scalar s, Value *v) {
      if (!integer)
        return matrix_element_to_f64(s, v);
      return ir::is_signed(s) ? B_.CreateSExt(v, sum_type) : B_.CreateZExt(v, sum_type);
    };
    // An f32 operand enters as tf32 (ir::round_to_tf32: 10 fraction bits, nearest, ties away;
    // NaN kept).
    auto operand = [&](Scalar s, Value *v) {
      if (s != Scalar::F32)
        return widen(s, v);
      Value *bits = B_.CreateBitCast(v, B_.getInt32Ty());
      Value *rounded = B_.CreateAnd(B_.CreateAdd(bits, B_.getInt32(0x1000)), 0xFFFFE000u);
      Value *tf32 =
          B_.CreateSelect(B_.CreateFCmpUNO(v, v), v, B_.CreateBitCast(rounded, B_.getFloatTy()));
      return widen(s, tf32);
    };
    llvm::AllocaInst *sum = entry_alloca(sum_type, 1, "matrix.sum");
    define(op->result(), {build_matrix(c, [&](Value *e) {
             Value *i = B_.CreateUDiv(e, B_.getInt64(n)), *j = B_.CreateURem(e, B_.getInt64(n));
             B_.CreateStore(widen(c.element(), matrix_element(c, sc, e)), sum);
             counted_loop(B_.getInt64Ty(), k, "matrix.k", [&](Value *kk) {
               Value *x = operand(
                   a.element(),
                   matrix_element(a, sa, B_.CreateAdd(B_.CreateMul(i, B_.getInt64(k)), kk)));
               Value *y = operand(
                   b.element(),
                   matrix_element(b, sb, B_.CreateAdd(B_.CreateMul(kk, B_.getInt64(n)), j)));
               Value *s = B_.CreateLoad(sum_type, sum);
               B_.CreateStore(integer ? B_.CreateAdd(s, B_.CreateMul(x, y))
                                      : B_.CreateFAdd(s, B_.CreateFMul(x, y)),
                              sum);
             });
             Value *total = B_.CreateLoad(sum_type, sum);
             return integer ? B_.CreateTrunc(total, elem_type(c.element()))
                            : convert(Scalar::F64, c.element(), total);
           })});
    return;
  }
  case Opcode::MatrixConvert: {
    const ir::Type from = op->operand(0)->type(), to = op->result()->type();
    Value *slot = spill_matrix(from, part(op->operand(0), 0));
    define(op->result(), {build_matrix(to, [&](Value *e) {
             return convert(from.element(), to.element(), matrix_element(from, slot, e));
           })});
    return;
  }
  default:
    fail(op, "internal error: an unknown matrix op (a bug in cubecc's CPU backend)");
  }
}

} // namespace cubecc::llvm_backend
