//===- builder.cpp ----------------------------------------------------------------------------===//
#include "cubecc/ir/builder.h"

#include "cubecc/ir/float16.h"

#include <fmt/format.h>

#include <bit>
#include <stdexcept>

namespace cubecc::ir {

Operation *Builder::create(Opcode opcode, std::span<Value *const> operands,
                           std::span<const Type> result_types,
                           std::vector<NamedAttribute> attributes) {
  if (!region_)
    throw std::logic_error("ir::Builder: no insertion point set");
  auto op = Operation::create(opcode, operands, result_types,
                              region_count(op_info(opcode).signature), {}, &module_.arena());
  // The location is read only now: a caller that has just set it field by field (the tracer,
  // once per op) would otherwise have it read back at once as one 8-byte word, which the CPU
  // cannot forward from the separate stores (a stall that cost a third of a trace).
  op->set_location(loc_);
  if (!attributes.empty())
    op->attributes().assign(std::move(attributes));
  return region_->insert(before_, std::move(op));
}

Type Builder::infer_result_type(Opcode opcode, std::span<Value *const> operands) {
  const OpInfo &info = op_info(opcode);
  auto need = [&](size_t n) {
    if (operands.size() != n)
      throw std::logic_error(fmt::format("ir::Builder: '{}' takes {} operand(s), got {}", info.name,
                                         n, operands.size()));
  };
  auto same = [&]() {
    for (Value *v : operands)
      if (v->type() != operands[0]->type())
        throw std::logic_error(fmt::format("ir::Builder: '{}' operand types differ: {} and {}",
                                           info.name, operands[0]->type().str(), v->type().str()));
  };
  switch (info.signature) {
  case Signature::Unary:
  case Signature::SubgroupUnary:
    need(1);
    return operands[0]->type();
  case Signature::Binary:
    need(2);
    same();
    return operands[0]->type();
  case Signature::Ternary:
    need(3);
    same();
    return operands[0]->type();
  case Signature::Compare:
    need(2);
    same();
    return operands[0]->type().with_element(Scalar::Bool);
  case Signature::Classify:
    need(1);
    return operands[0]->type().with_element(Scalar::Bool);
  case Signature::Select:
    need(3);
    return operands[1]->type();
  case Signature::SubgroupShuffle:
    need(2);
    return operands[0]->type();
  case Signature::Splat:
  case Signature::VecBuild:
    break;
  case Signature::SubgroupBallot:
    return Type::vector(Scalar::U32, 4);
  case Signature::SubgroupVote:
  case Signature::SubgroupElect:
    return Type::scalar(Scalar::Bool);
  case Signature::Builtin3:
    return Type::vector(Scalar::U32, 3);
  case Signature::Builtin1:
    return Type::scalar(Scalar::U32);
  case Signature::AtomicRmw:
  case Signature::AtomicCmpXchg:
    if (operands.size() > 2)
      return operands[2]->type(); // the value's type: a vector value makes one atomic per lane
    break;
  case Signature::AtomicLoad:
    if (operands.empty())
      break;
    return operands[0]->type().element_type();
  default:
    break;
  }
  throw std::logic_error(
      fmt::format("ir::Builder: the result type of '{}' must be given explicitly", info.name));
}

Value *Builder::op(Opcode opcode, std::initializer_list<Value *> operands) {
  std::span<Value *const> span(operands.begin(), operands.size());
  Type t = infer_result_type(opcode, span);
  return create(opcode, span, std::span<const Type>(&t, 1))->result();
}

Value *Builder::constant(Type type, int64_t bits) {
  Operation *op = create(Opcode::Const, {}, {type});
  op->attributes().set("value", bits); // inline: no vector to build
  return op->result();
}

Value *Builder::const_int(Type type, int64_t value) {
  unsigned width = scalar_bits(type.element());
  uint64_t bits = static_cast<uint64_t>(value);
  if (width < 64)
    bits &= (uint64_t{1} << width) - 1;
  return constant(type, static_cast<int64_t>(bits));
}

Value *Builder::const_float(Type type, double value) {
  int64_t bits;
  switch (type.element()) {
  case Scalar::F16:
    bits = float_to_f16_bits(static_cast<float>(value));
    break;
  case Scalar::BF16:
    bits = float_to_bf16_bits(static_cast<float>(value));
    break;
  case Scalar::F32:
    bits = std::bit_cast<uint32_t>(static_cast<float>(value));
    break;
  case Scalar::F64:
    bits = std::bit_cast<int64_t>(value);
    break;
  default:
    throw std::logic_error("ir::Builder: const_float needs a float type, got " + type.str());
  }
  return constant(type, bits);
}

Value *Builder::const_bool(bool value) {
  return constant(Type::scalar(Scalar::Bool), value ? 1 : 0);
}

Value *Builder::load(Value *memory, Value *index, Type result) {
  return create(Opcode::Load, {memory, index}, {result})->result();
}

Value *Builder::extract(Value *vector, uint32_t lane) {
  Operation *op = create(Opcode::VecExtract, {vector}, {vector->type().element_type()});
  op->attributes().set("lane", static_cast<int64_t>(lane));
  return op->result();
}

Operation *Builder::create_if(Value *condition, std::span<const Type> result_types) {
  Value *operands[] = {condition};
  return create(Opcode::If, operands, result_types);
}

Operation *Builder::create_for(Value *lo, Value *hi, Value *step, std::span<Value *const> inits) {
  std::vector<Value *> operands = {lo, hi, step};
  std::vector<Type> types;
  for (Value *v : inits) {
    operands.push_back(v);
    types.push_back(v->type());
  }
  Operation *loop = create(Opcode::For, operands, types);
  Region &body = loop->region(0);
  body.add_argument(lo->type());
  for (Type t : types)
    body.add_argument(t);
  return loop;
}

} // namespace cubecc::ir
