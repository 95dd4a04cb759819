//===- clone.cpp ------------------------------------------------------------------------------===//
#include "cubecc/ir/clone.h"

namespace cubecc::ir {

std::unique_ptr<Operation> clone(const Operation &op, ValueMap &map) {
  std::vector<Value *> operands;
  for (Value *v : op.operands()) {
    auto it = map.find(v);
    operands.push_back(it == map.end() ? v : it->second);
  }
  std::vector<Type> types;
  for (unsigned i = 0; i < op.num_results(); ++i)
    types.push_back(op.result(i)->type());
  auto copy = Operation::create(op.opcode(), operands, types, op.num_regions(), op.location());
  copy->attributes() = op.attributes();
  for (unsigned i = 0; i < op.num_results(); ++i) {
    copy->result(i)->set_name(op.result(i)->name());
    map[op.result(i)] = copy->result(i);
  }
  for (unsigned r = 0; r < op.num_regions(); ++r) {
    const Region &from = op.region(r);
    Region &to = copy->region(r);
    for (unsigned a = 0; a < from.num_arguments(); ++a)
      map[from.argument(a)] = to.add_argument(from.argument(a)->type(), from.argument(a)->name());
    for (const Operation *inner : from)
      to.push_back(clone(*inner, map));
  }
  return copy;
}

} // namespace cubecc::ir
