//===- clone.cpp ------------------------------------------------------------------------------===//
#include "cubecc/ir/clone.h"

namespace cubecc::ir {

std::unique_ptr<Operation> clone(const Operation &op, ValueMap &map, Arena *arena) {
  std::vector<Value *> operands;
  for (Value *v : op.operands()) {
    auto it = map.find(v);
    operands.push_back(it == map.end() ? v : it->second);
  }
  std::vector<Type> types;
  for (unsigned i = 0; i < op.num_results(); ++i)
    types.push_back(op.result(i)->type());
  auto copy =
      Operation::create(op.opcode(), operands, types, op.num_regions(), op.location(), arena);
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
      to.push_back(clone(*inner, map, arena));
  }
  return copy;
}

std::unique_ptr<Module> copy_kernel(const Kernel &kernel) {
  auto module = std::make_unique<Module>(kernel.module() ? kernel.module()->name() : "kernel");
  // Interning the source's file names in order gives them the same ids, so the locations that
  // clone() copies stay valid without rewriting.
  if (const Module *source = kernel.module())
    for (uint32_t id = 1; !source->file_name(id).empty(); ++id)
      module->intern_file(source->file_name(id));
  Kernel &copy = module->add_kernel(kernel.name());
  copy.set_workgroup_size(kernel.workgroup_size());
  copy.attributes() = kernel.attributes();
  copy.set_location(kernel.location());
  ValueMap map;
  for (unsigned i = 0; i < kernel.num_parameters(); ++i) {
    const Value *p = kernel.parameter(i);
    map[p] = copy.add_parameter(p->type(), p->name());
  }
  for (const Operation *op : kernel.body())
    copy.body().push_back(clone(*op, map, &module->arena()));
  return module;
}

} // namespace cubecc::ir
