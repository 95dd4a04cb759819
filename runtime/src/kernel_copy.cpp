//===- kernel_copy.cpp - A kernel copied into a module of its own -----------------------------===//
#include "kernel_copy.h"

#include "cubecc/ir/clone.h"

namespace cubecc::runtime {

std::unique_ptr<ir::Module> copy_kernel(const ir::Kernel &kernel) {
  auto module = std::make_unique<ir::Module>(kernel.module() ? kernel.module()->name() : "kernel");
  // Interning the source's file names in order gives them the same ids, so the locations that
  // clone() copies stay valid without rewriting.
  if (const ir::Module *source = kernel.module())
    for (uint32_t id = 1; !source->file_name(id).empty(); ++id)
      module->intern_file(source->file_name(id));
  ir::Kernel &copy = module->add_kernel(kernel.name());
  copy.set_workgroup_size(kernel.workgroup_size());
  copy.attributes() = kernel.attributes();
  copy.set_location(kernel.location());
  ir::ValueMap map;
  for (unsigned i = 0; i < kernel.num_parameters(); ++i) {
    const ir::Value *p = kernel.parameter(i);
    map[p] = copy.add_parameter(p->type(), p->name());
  }
  for (const ir::Operation *op : kernel.body())
    copy.body().push_back(ir::clone(*op, map));
  return module;
}

} // namespace cubecc::runtime
