//===- cse.cpp - Common subexpression elimination over the region tree -----------------------===//
//
// In structured IR an op dominates everything after it in its region and everything nested
// there, so a scoped table walked in region order finds every redundant pure op: entries made in
// a region are dropped when it ends.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/passes/cse.h"

#include "rewrite.h"

#include <fmt/format.h>

#include <unordered_map>

namespace cubecc::passes {
namespace {

/// What makes two pure ops compute the same thing: opcode, operands, attributes, result types.
std::string key_of(const ir::Operation &op) {
  std::string key = fmt::format("{}", static_cast<unsigned>(op.opcode()));
  std::vector<const ir::Value *> operands(op.operands().begin(), op.operands().end());
  if (op.has_flag(ir::Commutative) && operands.size() == 2 && operands[1] < operands[0])
    std::swap(operands[0], operands[1]); // only which op matches depends on this, not the output
  for (const ir::Value *v : operands)
    key += fmt::format(",{}", static_cast<const void *>(v));
  for (const ir::NamedAttribute &a : op.attributes().entries()) {
    key += ";" + a.name + "=";
    if (const auto *i = std::get_if<int64_t>(&a.value))
      key += std::to_string(*i);
    else
      key += std::get<std::string>(a.value);
  }
  for (unsigned i = 0; i < op.num_results(); ++i)
    key += ":" + op.result(i)->type().str();
  return key;
}

class Cse {
public:
  explicit Cse(PassContext &ctx) : ctx_(ctx) {}

  void region(ir::Region &r) {
    std::vector<std::string> added;
    for (auto it = r.begin(); it != r.end();) {
      ir::Operation *op = *it++;
      for (unsigned i = 0; i < op->num_regions(); ++i)
        region(op->region(i));
      if (!op->has_flag(ir::Pure) || op->num_regions() || op->num_results() != 1)
        continue;
      std::string key = key_of(*op);
      auto [found, inserted] = table_.emplace(key, op->result());
      if (inserted) {
        added.push_back(std::move(key));
        continue;
      }
      detail::replace_op(op, {found->second});
      ctx_.count("ops eliminated");
    }
    for (const std::string &k : added)
      table_.erase(k);
  }

private:
  PassContext &ctx_;
  std::unordered_map<std::string, ir::Value *> table_;
};

} // namespace

void cse(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels())
    Cse(context).region(k->body());
}

} // namespace cubecc::passes
