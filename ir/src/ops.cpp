//===- ops.cpp - The op table as data ---------------------------------------------------------===//
#include "cubecc/ir/ops.h"

#include <algorithm>
#include <array>

namespace cubecc::ir {
using detail::kOps;

std::span<const OpInfo> all_ops() {
  return kOps;
}

std::optional<Opcode> parse_opcode(std::string_view name) {
  auto it = std::find_if(std::begin(kOps), std::end(kOps),
                         [&](const OpInfo &info) { return info.name == name; });
  if (it == std::end(kOps))
    return std::nullopt;
  return it->opcode;
}

int fixed_operand_count(Signature sig) {
  switch (sig) {
  case Signature::Constant:
  case Signature::SharedAlloc:
  case Signature::LocalAlloc:
  case Signature::Builtin3:
  case Signature::Builtin1:
  case Signature::Sync:
  case Signature::AsyncGroup:
  case Signature::SubgroupElect:
  case Signature::Return:
    return 0;
  case Signature::Unary:
  case Signature::Classify:
  case Signature::Cast:
  case Signature::Bitcast:
  case Signature::Splat:
  case Signature::VecExtract:
  case Signature::BufferSize:
  case Signature::SubgroupUnary:
  case Signature::SubgroupBallot:
  case Signature::SubgroupVote:
  case Signature::If:
  case Signature::MatrixFill:
  case Signature::MatrixConvert:
    return 1;
  case Signature::Binary:
  case Signature::Compare:
  case Signature::VecInsert:
  case Signature::Load:
  case Signature::SubgroupShuffle:
  case Signature::AtomicLoad:
    return 2;
  case Signature::Ternary:
  case Signature::Select:
  case Signature::Store:
  case Signature::AtomicRmw:
  case Signature::AtomicStore:
  case Signature::MatrixLoad:
  case Signature::MatrixMma:
    return 3;
  case Signature::AtomicCmpXchg:
  case Signature::MatrixStore:
    return 4;
  case Signature::AsyncCopy:
    return 5;
  case Signature::VecBuild:
  case Signature::Print:
  case Signature::For:
  case Signature::While:
  case Signature::Yield:
  case Signature::Condition:
  case Signature::Break:
  case Signature::Continue:
    return -1;
  }
  return -1;
}

int fixed_result_count(Signature sig) {
  switch (sig) {
  case Signature::Store:
  case Signature::AtomicStore:
  case Signature::MatrixStore:
  case Signature::Sync:
  case Signature::Print:
  case Signature::AsyncCopy:
  case Signature::AsyncGroup:
  case Signature::Yield:
  case Signature::Condition:
  case Signature::Break:
  case Signature::Continue:
  case Signature::Return:
    return 0;
  case Signature::If:
  case Signature::For:
  case Signature::While:
    return -1;
  default:
    return 1;
  }
}

} // namespace cubecc::ir
