//===- vectorize.cpp - Merging adjacent scalar loads and stores into vector ones -------------===//
#include "cubecc/passes/vectorize.h"

#include "cubecc/ir/dominance.h"
#include "rewrite.h"

#include <map>

namespace cubecc::passes {
namespace {

/// An index split as base + offset (offset a constant).
struct Address {
  ir::Value *base;
  int64_t offset;
};

Address split(ir::Value *index) {
  const ir::Operation *def = index->defining_op();
  if (def && def->opcode() == ir::Opcode::Add)
    if (auto c = detail::constant_bits(def->operand(1)); c && *c < (uint64_t{1} << 20))
      return {def->operand(0), static_cast<int64_t>(*c)};
  return {index, 0};
}

/// Whether `v` is provably a multiple of n (a power of two).
bool multiple_of(const ir::Value *v, uint64_t n, int depth = 0) {
  if (depth > 8)
    return false;
  if (auto c = detail::constant_bits(v))
    return *c % n == 0;
  const ir::Operation *def = v->defining_op();
  if (!def)
    return false;
  auto c1 = def->num_operands() > 1 ? detail::constant_bits(def->operand(1)) : std::nullopt;
  switch (def->opcode()) {
  case ir::Opcode::Mul:
    return (c1 && *c1 % n == 0) || multiple_of(def->operand(0), n, depth + 1) ||
           multiple_of(def->operand(1), n, depth + 1);
  case ir::Opcode::Shl:
    return c1 && *c1 < 64 && (uint64_t{1} << *c1) % n == 0;
  case ir::Opcode::And:
    return c1 && (*c1 & (n - 1)) == 0;
  case ir::Opcode::Add:
  case ir::Opcode::Sub:
    return multiple_of(def->operand(0), n, depth + 1) && multiple_of(def->operand(1), n, depth + 1);
  default:
    return false;
  }
}

struct Group {
  ir::Value *memory;
  ir::Value *base;
  std::map<int64_t, ir::Operation *> ops; ///< offset -> access
};

class Vectorizer {
public:
  Vectorizer(ir::Module &m, PassContext &ctx) : module_(m), ctx_(ctx) {}

  void region(ir::Region &r) {
    std::vector<Group> loads, stores;
    for (ir::Operation *op = r.front(); op;) {
      ir::Operation *next = op->next();
      for (unsigned i = 0; i < op->num_regions(); ++i)
        region(op->region(i));
      ir::Signature sig = op->info().signature;
      bool scalar_load = sig == ir::Signature::Load && op->result()->type().is_scalar();
      bool scalar_store = sig == ir::Signature::Store && op->operand(2)->type().is_scalar();
      if (scalar_load || scalar_store) {
        // An access ends the other kind's runs on the same memory.
        flush(scalar_load ? stores : loads, op->operand(0));
        add(scalar_load ? loads : stores, op);
      } else if (op->has_flag(ir::WritesMemory) || op->has_flag(ir::ReadsMemory) ||
                 op->has_flag(ir::Synchronizes) || op->num_regions()) {
        flush(loads, nullptr);
        flush(stores, nullptr);
      }
      op = next;
    }
    flush(loads, nullptr);
    flush(stores, nullptr);
  }

private:
  void add(std::vector<Group> &groups, ir::Operation *op) {
    Address a = split(op->operand(1));
    for (Group &g : groups)
      if (g.memory == op->operand(0) && g.base == a.base) {
        if (g.ops.count(a.offset)) { // the same element again: end the run first
          emit(g);
          g.ops.clear();
        }
        g.ops[a.offset] = op;
        return;
      }
    groups.push_back({op->operand(0), a.base, {{a.offset, op}}});
  }

  /// Emits every complete run of the groups on `memory` (all memories when null) and drops them.
  void flush(std::vector<Group> &groups, const ir::Value *memory) {
    for (auto it = groups.begin(); it != groups.end();) {
      if (memory && it->memory != memory) {
        ++it;
        continue;
      }
      emit(*it);
      it = groups.erase(it);
    }
  }

  void emit(Group &g) {
    for (uint64_t n : {4u, 2u}) {
      if (!multiple_of(g.base, n))
        continue;
      for (auto it = g.ops.begin(); it != g.ops.end();) {
        int64_t first = it->first;
        bool complete = first % static_cast<int64_t>(n) == 0;
        for (uint64_t k = 0; complete && k < n; ++k)
          complete = g.ops.count(first + static_cast<int64_t>(k)) != 0;
        if (!complete) {
          ++it;
          continue;
        }
        std::vector<ir::Operation *> run;
        for (uint64_t k = 0; k < n; ++k)
          run.push_back(g.ops.at(first + static_cast<int64_t>(k)));
        if (merge(g, run, first))
          for (uint64_t k = 0; k < n; ++k)
            g.ops.erase(first + static_cast<int64_t>(k));
        it = g.ops.upper_bound(first);
      }
    }
  }

  /// The earliest and latest op of `run` in their region.
  static std::pair<ir::Operation *, ir::Operation *> span(const std::vector<ir::Operation *> &run) {
    ir::Operation *first = nullptr, *last = nullptr;
    for (ir::Operation *op = run[0]->parent_region()->front(); op; op = op->next())
      if (std::find(run.begin(), run.end(), op) != run.end()) {
        if (!first)
          first = op;
        last = op;
      }
    return {first, last};
  }

  bool merge(Group &g, const std::vector<ir::Operation *> &run, int64_t offset) {
    bool is_load = run[0]->opcode() == ir::Opcode::Load;
    auto [first, last] = span(run);
    ir::Operation *at = is_load ? first : last;
    if (!ir::dominates(g.base, at))
      return false;
    ir::Builder b(module_);
    b.set_insertion_point_before(at);
    b.set_location(at->location());
    ir::Type index_type = g.base->type();
    ir::Value *index =
        offset == 0 ? g.base : b.op(ir::Opcode::Add, {g.base, b.const_int(index_type, offset)});
    ir::Type scalar = is_load ? run[0]->result()->type() : run[0]->operand(2)->type();
    ir::Type vector = ir::Type::vector(scalar.element(), static_cast<uint32_t>(run.size()));
    if (is_load) {
      ir::Value *v = b.load(g.memory, index, vector);
      std::vector<ir::Value *> lanes;
      for (uint32_t k = 0; k < run.size(); ++k) // all before erasing: `at` is one of the loads
        lanes.push_back(b.extract(v, k));
      for (uint32_t k = 0; k < run.size(); ++k)
        detail::replace_op(run[k], {lanes[k]});
      ctx_.count("loads merged into vector loads");
    } else {
      std::vector<ir::Value *> lanes;
      for (ir::Operation *s : run)
        lanes.push_back(s->operand(2));
      ir::Value *v =
          b.create(ir::Opcode::VecBuild, lanes, std::span<const ir::Type>(&vector, 1))->result();
      b.store(g.memory, index, v);
      for (ir::Operation *s : run)
        s->parent_region()->erase(s);
      ctx_.count("stores merged into vector stores");
    }
    return true;
  }

  ir::Module &module_;
  PassContext &ctx_;
};

} // namespace

void vectorize(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels())
    Vectorizer(module, context).region(k->body());
}

} // namespace cubecc::passes
