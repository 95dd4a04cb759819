//===- lower_semantics.cpp - What each lane computes: the interpreter's semantics
//---------------===//
#include "llvm/lowering.h"

namespace cubecc::llvm_backend {

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

Value *Lowering::half_fma_to_odd_f32(Value *a, Value *b, Value *c) {
  Type *f64 = shaped(a, B_.getDoubleTy()), *i64 = shaped(a, B_.getInt64Ty());
  Value *x = B_.CreateFPExt(a, f64), *y = B_.CreateFPExt(b, f64), *z = B_.CreateFPExt(c, f64);
  Value *xy = B_.CreateFMul(x, y); // at most 22 significant bits: exact
  Value *r = B_.CreateFAdd(xy, z);
  Value *z_part = B_.CreateFSub(r, xy);
  Value *xy_part = B_.CreateFSub(r, z_part);
  Value *xy_err = B_.CreateFSub(xy, xy_part), *z_err = B_.CreateFSub(z, z_part);
  Value *err = B_.CreateFAdd(xy_err, z_err);
  Value *bits = B_.CreateBitCast(r, i64);
  auto c64 = [&](uint64_t v) { return int_const(a, B_.getInt64Ty(), v); };
  // Inexact (an infinite or NaN sum has a NaN error: unordered, kept) with an even last bit:
  // one unit in the last place toward the exact sum.
  Value *move = B_.CreateAnd(B_.CreateFCmpONE(err, llvm::ConstantFP::get(f64, 0.0)),
                             B_.CreateICmpEQ(B_.CreateAnd(bits, c64(1)), c64(0)));
  Value *same_sign = B_.CreateICmpSGE(B_.CreateXor(bits, B_.CreateBitCast(err, i64)), c64(0));
  Value *moved = B_.CreateSelect(same_sign, B_.CreateAdd(bits, c64(1)), B_.CreateSub(bits, c64(1)));
  return f64_to_odd_f32(B_.CreateBitCast(B_.CreateSelect(move, moved, bits), f64));
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
    // Legalized: the value converts without saturating.
    return ir::is_signed(to) ? B_.CreateFPToSI(v, to_type) : B_.CreateFPToUI(v, to_type);
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
  // glibc 2.35 and later have libmvec variants of these too.
  case Opcode::Tan:
    base = "tan";
    break;
  case Opcode::Asin:
    base = "asin";
    break;
  case Opcode::Acos:
    base = "acos";
    break;
  case Opcode::Atan:
    base = "atan";
    break;
  case Opcode::Atan2:
    base = "atan2";
    break;
  case Opcode::Sinh:
    base = "sinh";
    break;
  case Opcode::Cosh:
    base = "cosh";
    break;
  case Opcode::Asinh:
    base = "asinh";
    break;
  case Opcode::Acosh:
    base = "acosh";
    break;
  case Opcode::Atanh:
    base = "atanh";
    break;
  case Opcode::Expm1:
    base = "expm1";
    break;
  case Opcode::Log1p:
    base = "log1p";
    break;
  case Opcode::Hypot:
    base = "hypot";
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
    // The other ops are correctly rounded through f32 (it has over twice their bits); fma is not.
    if (op == Opcode::Fma)
      return from_f32(s, half_fma_to_odd_f32(fa, fb, fc));
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
  case Opcode::Trunc:
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, a);
  case Opcode::IsNan:
    return B_.CreateFCmpUNO(a, a);
  case Opcode::IsInf:
    return B_.CreateFCmpOEQ(B_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a),
                            llvm::ConstantFP::getInfinity(a->getType()));
  case Opcode::Fma:
    return B_.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
  default:
    return math_call(op, s, a, b);
  }
}

Value *Lowering::int_arith(Opcode op, Scalar s, Value *a, Value *b, Value *c) {
  bool sgn = ir::is_signed(s);
  Type *t = a->getType();
  auto k = [&](uint64_t v) { return llvm::ConstantInt::get(t, v); };
  switch (op) {
  case Opcode::Add:
    return B_.CreateAdd(a, b);
  case Opcode::Sub:
    return B_.CreateSub(a, b);
  case Opcode::Mul:
    return B_.CreateMul(a, b);
  case Opcode::Div: // legalized: the divisor is neither 0 nor (signed) -1
    return sgn ? B_.CreateSDiv(a, b) : B_.CreateUDiv(a, b);
  case Opcode::Rem:
    return sgn ? B_.CreateSRem(a, b) : B_.CreateURem(a, b);
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
  case Opcode::Shl: // legalized: the amount is below the width
    return B_.CreateShl(a, b);
  case Opcode::Shr:
    return sgn ? B_.CreateAShr(a, b) : B_.CreateLShr(a, b);
  case Opcode::Popcount:
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, a);
  case Opcode::Clz: // defined for 0: the width
    return B_.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, a, B_.getFalse());
  case Opcode::Ctz:
    return B_.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, a, B_.getFalse());
  case Opcode::Ffs:
    return B_.CreateSelect(B_.CreateICmpEQ(a, k(0)), k(0),
                           B_.CreateAdd(int_arith(Opcode::Ctz, s, a, nullptr, nullptr), k(1)));
  case Opcode::BitReverse:
    return B_.CreateUnaryIntrinsic(llvm::Intrinsic::bitreverse, a);
  case Opcode::MulHi: {                    // the exact product in twice the width
    unsigned w = t->getScalarSizeInBits(); // `t` may be a vector (one lane per invocation)
    Type *wide = t->getWithNewBitWidth(2 * w);
    auto ext = [&](Value *v) { return sgn ? B_.CreateSExt(v, wide) : B_.CreateZExt(v, wide); };
    Value *p = B_.CreateMul(ext(a), ext(b));
    return B_.CreateTrunc(B_.CreateLShr(p, llvm::ConstantInt::get(wide, w)), t);
  }
  case Opcode::AddSat:
    return B_.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::sadd_sat : llvm::Intrinsic::uadd_sat, a,
                                    b);
  case Opcode::SubSat:
    return B_.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::ssub_sat : llvm::Intrinsic::usub_sat, a,
                                    b);
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
  case Opcode::Mul:
    if (s == Scalar::F16)
      return llvm::ConstantInt::get(t, 0x3c00);
    if (s == Scalar::BF16)
      return llvm::ConstantInt::get(t, 0x3f80);
    return ir::is_float(s) ? llvm::ConstantFP::get(t, 1.0) : llvm::ConstantInt::get(t, 1);
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

} // namespace cubecc::llvm_backend
