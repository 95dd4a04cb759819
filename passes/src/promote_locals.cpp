//===- promote_locals.cpp - mem2reg for locals accessed at constant indices ------------------===//
//
// Structured control flow makes SSA construction a single forward walk: each region is visited
// in order with the current value of every promoted element ("slot"). A store sets the slot, a
// load is replaced by it. Where control flow joins, the structure says where the join is:
//  - `if`: the slots stored in either branch (at any depth) become extra results; each branch's
//    `yield` passes its current values.
//  - `for`: the slots stored in the body become extra carried values (init operands, body
//    arguments, `yield` and `continue` operands, `break` operands, results).
//  - `while`: the same slots are carried through the `before` arguments, the `condition`'s
//    forwarded values (the `do` arguments and the results), and `yield`/`continue`/`break`.
// The carried values are appended after the op's own, so existing operand positions keep their
// meaning. A slot whose value after the op is never read (no load follows it, in program order
// or in a later iteration of an enclosing loop) gets no result or carried value: the walk goes
// on with its stale value, which nothing reads. Nothing else moves: `unroll` attributes and
// locations stay on the rebuilt ops.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/passes/promote_locals.h"

#include "cubecc/ir/semantics.h"
#include "rewrite.h"

#include <algorithm>
#include <unordered_map>

namespace cubecc::passes {
namespace {

/// Arrays with more elements than this stay in memory even when every index is a constant: each
/// stored element becomes a value carried through every loop and `if` that stores it.
constexpr uint32_t kMaxPromotedElements = 16;

/// The constant element index of a load or store of a local, if it is a constant in range.
std::optional<uint32_t> constant_index(const ir::Operation &access, uint32_t count) {
  auto bits = detail::constant_bits(access.operand(1));
  if (!bits)
    return std::nullopt;
  ir::Scalar s = access.operand(1)->type().element();
  unsigned width = ir::scalar_bits(s);
  int64_t index = ir::is_signed(s) ? ir::sign_extend(*bits, width)
                                   : static_cast<int64_t>(*bits & ir::width_mask(width));
  if (index < 0 || index >= static_cast<int64_t>(count))
    return std::nullopt;
  return static_cast<uint32_t>(index);
}

/// Whether every use of `alloc`'s array is a scalar access of its element type at a constant
/// in-range index.
bool promotable(const ir::Operation &alloc) {
  ir::Type array = alloc.result()->type();
  if (array.count() > kMaxPromotedElements)
    return false;
  ir::Type element = ir::Type::scalar(array.element());
  for (const ir::Use *use = alloc.result()->first_use(); use; use = use->next()) {
    const ir::Operation &user = *use->user();
    if (use->operand_number() != 0 || !constant_index(user, array.count()))
      return false;
    if (user.opcode() == ir::Opcode::Load) {
      if (user.result()->type() != element)
        return false;
    } else if (user.opcode() != ir::Opcode::Store || user.operand(2)->type() != element) {
      return false;
    }
  }
  return true;
}

class Promoter {
public:
  Promoter(ir::Module &module, PassContext &context) : module_(module), context_(context) {}

  void run(ir::Kernel &kernel) {
    std::vector<ir::Operation *> allocs;
    for (ir::Operation *op : kernel.body())
      if (op->opcode() == ir::Opcode::LocalAlloc && promotable(*op)) {
        first_slot_[op] = static_cast<uint32_t>(slots_.size());
        for (uint32_t i = 0; i < op->result()->type().count(); ++i)
          slots_.push_back(op);
        allocs.push_back(op);
      }
    if (allocs.empty())
      return;
    zeros_.assign(slots_.size(), nullptr);
    last_load_.assign(slots_.size(), -1);
    number(kernel.body(), std::nullopt);
    State state(slots_.size(), nullptr);
    visit(kernel.body(), state);
    for (ir::Operation *alloc : allocs)
      kernel.body().erase(alloc);
    context_.count("locals promoted", allocs.size());
  }

private:
  /// The current value of each slot; null while it has not been stored yet.
  using State = std::vector<ir::Value *>;

  /// The slot a load or store of a promoted local accesses, if any.
  std::optional<uint32_t> slot_of(const ir::Operation &access) const {
    const ir::Operation *def = access.operand(0)->defining_op();
    auto it = def ? first_slot_.find(def) : first_slot_.end();
    if (it == first_slot_.end())
      return std::nullopt;
    return it->second + *constant_index(access, def->result()->type().count());
  }

  ir::Type slot_type(uint32_t slot) const {
    return ir::Type::scalar(slots_[slot]->result()->type().element());
  }

  /// The slot's current value; before any store, zero of its type (made once, where the
  /// allocation was, so that it dominates every use).
  ir::Value *current(const State &state, uint32_t slot) {
    if (state[slot])
      return state[slot];
    if (!zeros_[slot])
      zeros_[slot] = detail::insert_constant(module_, slots_[slot], slot_type(slot), 0);
    return zeros_[slot];
  }

  /// Numbers the ops in pre-order, records the last position where each slot is loaded and,
  /// for each op with regions, its horizon: a load after that position may read a value the op
  /// leaves in a slot. That is a load after the op; or, for a loop, in it too (the next
  /// iteration); or, inside an enclosing loop, anywhere in the outermost one.
  void number(ir::Region &region, std::optional<int64_t> outer_loop) {
    for (ir::Operation *op : region) {
      int64_t at = counter_++;
      if (op->opcode() == ir::Opcode::Load)
        if (auto slot = slot_of(*op))
          last_load_[*slot] = std::max(last_load_[*slot], at);
      bool loop = op->opcode() == ir::Opcode::For || op->opcode() == ir::Opcode::While;
      std::optional<int64_t> inner = outer_loop ? outer_loop
                                     : loop     ? std::optional(at)
                                                : std::nullopt;
      for (unsigned r = 0; r < op->num_regions(); ++r)
        number(op->region(r), inner);
      if (op->num_regions())
        horizon_[op] = inner ? *inner : counter_ - 1;
    }
  }

  /// The promoted slots stored anywhere inside `op`'s regions whose value after `op` may be
  /// read (the others need no result or carried value), in slot order.
  std::vector<uint32_t> stored_inside(ir::Operation &op) const {
    std::vector<uint32_t> stored;
    for (unsigned r = 0; r < op.num_regions(); ++r)
      for (ir::Operation *inner : op.region(r))
        inner->walk([&](ir::Operation *o) {
          if (o->opcode() == ir::Opcode::Store)
            if (auto slot = slot_of(*o))
              stored.push_back(*slot);
        });
    std::sort(stored.begin(), stored.end());
    stored.erase(std::unique(stored.begin(), stored.end()), stored.end());
    int64_t horizon = horizon_.at(&op);
    std::erase_if(stored, [&](uint32_t slot) { return last_load_[slot] <= horizon; });
    return stored;
  }

  void append_current(ir::Operation &terminator, const State &state,
                      const std::vector<uint32_t> &slots) {
    for (uint32_t slot : slots)
      terminator.append_operand(current(state, slot));
  }

  /// Gives `region` one argument per slot and makes them the slots' current values in `state`.
  void add_arguments(ir::Region &region, State &state, const std::vector<uint32_t> &slots) {
    for (uint32_t slot : slots)
      state[slot] = region.add_argument(slot_type(slot));
  }

  /// Replaces `op` by the same op with one more result per slot (regions, operands, attributes
  /// and location carried over) and makes those results the slots' current values.
  void add_results(ir::Operation *op, State &state, const std::vector<uint32_t> &slots) {
    if (slots.empty())
      return;
    std::vector<ir::Type> types;
    for (uint32_t slot : slots)
      types.push_back(slot_type(slot));
    unsigned first = op->num_results();
    ir::Operation *rebuilt = detail::append_results(op, types);
    for (size_t i = 0; i < slots.size(); ++i)
      state[slots[i]] = rebuilt->result(first + static_cast<unsigned>(i));
  }

  /// Rewrites `region` in order, `state` holding the slots' values on entry and on exit.
  void visit(ir::Region &region, State &state) {
    for (ir::Operation *op = region.front(); op;) {
      ir::Operation *next = op->next();
      switch (op->opcode()) {
      case ir::Opcode::Load:
        if (auto slot = slot_of(*op)) {
          op->result()->replace_all_uses_with(current(state, *slot));
          region.erase(op);
          context_.count("loads removed");
        }
        break;
      case ir::Opcode::Store:
        if (auto slot = slot_of(*op)) {
          state[*slot] = op->operand(2);
          region.erase(op);
          context_.count("stores removed");
        }
        break;
      case ir::Opcode::If:
        visit_if(op, state);
        break;
      case ir::Opcode::For:
        visit_for(op, state);
        break;
      case ir::Opcode::While:
        visit_while(op, state);
        break;
      case ir::Opcode::Break:
      case ir::Opcode::Continue:
        append_current(*op, state, loops_.back());
        break;
      default:
        break;
      }
      op = next;
    }
  }

  void visit_if(ir::Operation *op, State &state) {
    std::vector<uint32_t> stored = stored_inside(*op);
    for (unsigned r = 0; r < 2; ++r) {
      State branch = state;
      visit(op->region(r), branch);
      ir::Operation *term = op->region(r).terminator();
      if (term->opcode() == ir::Opcode::Yield) // else a break/continue, which visit extended
        append_current(*term, branch, stored);
    }
    add_results(op, state, stored);
  }

  void visit_for(ir::Operation *op, State &state) {
    std::vector<uint32_t> stored = stored_inside(*op);
    ir::Region &body = op->region(0);
    for (uint32_t slot : stored)
      op->append_operand(current(state, slot));
    State inside = state;
    add_arguments(body, inside, stored);
    visit_loop_region(body, inside, stored);
    add_results(op, state, stored);
  }

  void visit_while(ir::Operation *op, State &state) {
    std::vector<uint32_t> stored = stored_inside(*op);
    ir::Region &before = op->region(0), &after = op->region(1);
    for (uint32_t slot : stored)
      op->append_operand(current(state, slot));
    State in_before = state;
    add_arguments(before, in_before, stored);
    visit(before, in_before); // no break or continue may sit here
    append_current(*before.terminator(), in_before, stored);
    State in_after = state;
    add_arguments(after, in_after, stored);
    visit_loop_region(after, in_after, stored);
    add_results(op, state, stored);
  }

  /// A `for` body or `while` `do` region: break/continue inside carry `stored`, and so does the
  /// closing yield.
  void visit_loop_region(ir::Region &region, State &state, const std::vector<uint32_t> &stored) {
    loops_.push_back(stored);
    visit(region, state);
    loops_.pop_back();
    ir::Operation *term = region.terminator();
    if (term->opcode() == ir::Opcode::Yield)
      append_current(*term, state, stored);
  }

  ir::Module &module_;
  PassContext &context_;
  std::vector<ir::Operation *> slots_;                             ///< slot -> its allocation
  std::unordered_map<const ir::Operation *, uint32_t> first_slot_; ///< allocation -> element 0
  std::vector<ir::Value *> zeros_;           ///< slot -> its zero constant, once made
  std::vector<std::vector<uint32_t>> loops_; ///< the enclosing loops' carried slots
  std::vector<int64_t> last_load_;           ///< slot -> pre-order position of its last load
  std::unordered_map<const ir::Operation *, int64_t> horizon_; ///< see number()
  int64_t counter_ = 0;
};

} // namespace

void promote_locals(ir::Module &module, PassContext &context) {
  for (const auto &k : module.kernels())
    Promoter(module, context).run(*k);
}

} // namespace cubecc::passes
