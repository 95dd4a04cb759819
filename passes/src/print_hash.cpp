//===- print_hash.cpp -------------------------------------------------------------------------===//
#include "cubecc/passes/print_hash.h"

#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"

#include <ostream>

namespace cubecc::passes {

void print_hash(ir::Module &module, PassContext &context) {
  for (const auto &kernel : module.kernels())
    context.out << "// hash " << ir::format_symbol(kernel->name()) << ": "
                << ir::structural_hash(*kernel).hex() << "\n";
  context.out << "// hash module: " << ir::structural_hash(module).hex() << "\n";
}

} // namespace cubecc::passes
