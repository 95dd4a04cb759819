//===- trace.cpp - The tracing state and the emission functions the DSL calls ----------------===//
#include "cubecc/dsl/trace.h"
#include "cubecc/dsl/detail.h"
#include "cubecc/dsl/matrix.h"

#include "cubecc/ir/builder.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/print_format.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"

#include <fmt/format.h>

#include <bit>
#include <map>
#include <optional>

namespace cubecc::dsl::detail {
namespace {

/// What an open region is, for return_ and break_(levels).
enum class RegionKind {
  Body,      ///< the kernel body
  Branch,    ///< an if_ or else_ branch
  Loop,      ///< a for_ or while_ body
  Condition, ///< a while_ condition, or a value-producing branch: no return_ inside
  Guard,     ///< `if (!returned)` around what follows an if_ that may return_ (closed with
             ///< its parent)
};

/// A return_ or break_(levels) on its way out of the loops it leaves: after each loop closes,
/// the enclosing body checks `flag` and breaks again, until `depth` loops remain open.
struct PendingExit {
  ir::Value *flag; ///< local<u8, 1>: 1 once the exit is taken
  int depth;       ///< the loop depth to resume at (return_: 0)
  bool is_return;  ///< resume under a guard: the rest of the kernel is skipped
};

struct OpenRegion {
  OpenRegion(ir::Region *r, RegionKind k) : region(r), kind(k) {}
  ir::Region *region;
  RegionKind kind;
  /// A return_ happened in it or below (outside loops): what follows its parent's statement
  /// runs under a guard, and its own remaining statements are unreachable.
  bool returns = false;
  /// The next statement here first opens a guard (a return_ happened in a statement before).
  bool pending_guard = false;
  std::vector<PendingExit> exits; ///< Loop only: exits leaving this loop
  /// Loop only: a for_carry body, whose exits would need its carried values (refused).
  bool carries = false;
  /// The constants made in this region so far: a later use of the same constant here or in a
  /// region nested here reuses the op (it dominates them), so that a kernel's `16`s are one op.
  struct Constant {
    ir::Type type;
    uint64_t key; ///< the integer, or the double's bits
    ir::Value *value;
  };
  std::vector<Constant> constants;
};

/// Everything about the kernel being traced on this thread.
struct TraceState {
  TraceState(ir::Module &m, ir::Kernel &k) : module(m), kernel(k), builder(m) {}
  ir::Module &module;
  ir::Kernel &kernel;
  ir::Builder builder;
  /// The regions being filled, innermost last; the builder appends to the last one.
  std::vector<OpenRegion> regions;
  /// Open for_ and while_ bodies (break_ and continue_ need one).
  int loop_depth = 0;
  /// The flag of return_ (local<u8, 1>, 0 at the kernel's start), made at the first return_.
  ir::Value *return_flag = nullptr;
  /// The last allocation hoisted to the top of the kernel body.
  ir::Operation *last_alloc = nullptr;
  /// The if_ that an else_ may follow.
  ir::Operation *last_if = nullptr;
  /// Components extracted from builtin vectors: (vector, lane) -> the extract's result.
  std::map<std::pair<ir::Value *, uint32_t>, ir::Value *> components;
  /// The source files interned so far, by the address of their name (std::source_location's
  /// file names are string literals): a kernel's ops come from a handful of files (the kernel's
  /// own and the DSL's headers), and comparing pointers is cheaper than comparing paths.
  std::vector<std::pair<const char *, uint32_t>> files;
};

thread_local TraceState *current = nullptr;

TraceState &state(const Loc &loc) {
  if (!current)
    throw TraceError("a DSL operation was used outside a kernel being traced (call it from a "
                     "kernel function passed to dsl::trace or dsl::register_kernel)",
                     loc);
  return *current;
}

/// The module's id of the source file `file`.
uint32_t file_id(TraceState &s, const char *file) {
  for (const auto &[name, id] : s.files)
    if (name == file)
      return id;
  uint32_t id = s.module.intern_file(file);
  s.files.emplace_back(file, id);
  return id;
}

// Inlined: returned by value, the Location is packed into two registers and read back through
// a stack slot that the CPU cannot forward, costing more than the rest of an op's emission.
[[gnu::always_inline]] inline ir::Location location(TraceState &s, const Loc &loc) {
  return ir::Location{file_id(s, loc.file_name()), loc.line(), loc.column()};
}

void open_guard(TraceState &s);

/// The builder, positioned at the end of the innermost open region, after checking that code
/// there is reachable (and opening the guard a return_ before it asked for).
ir::Builder &builder_at(const Loc &loc) {
  TraceState &s = state(loc);
  if (s.regions.back().pending_guard)
    open_guard(s);
  ir::Region *region = s.regions.back().region;
  if (region->terminator())
    throw TraceError("this statement follows a break_, continue_ or return_ in the same block "
                     "and can never run; remove it or put the break_ in an if_",
                     loc);
  s.builder.set_insertion_point_to_end(*region);
  s.builder.set_location(location(s, loc));
  return s.builder;
}

void push_region(ir::Region &r, RegionKind kind) {
  current->regions.emplace_back(&r, kind);
}

/// The structure's own ops (terminators, guards, flag checks): no user location.
ir::Builder &structural_builder(ir::Region &r) {
  current->builder.set_insertion_point_to_end(r);
  current->builder.set_location({});
  return current->builder;
}

/// Closes the innermost region with `terminator` unless a break_/continue_ already ended it.
void pop_region(ir::Opcode terminator) {
  ir::Region *r = current->regions.back().region;
  if (!r->terminator())
    structural_builder(*r).create(terminator, {});
  current->regions.pop_back();
}

/// Closes the guards opened in the innermost user region: it is about to close.
void propagate_return(const OpenRegion &closed);

void close_guards() {
  while (current->regions.back().kind == RegionKind::Guard) {
    OpenRegion closed = current->regions.back();
    pop_region(ir::Opcode::Yield);
    propagate_return(closed);
  }
}

/// A local<u8, 1> flag at the top of the kernel body, 0 from the kernel's start.
ir::Value *new_flag(TraceState &s) {
  ir::Region &body = s.kernel.body();
  ir::Operation *before = s.last_alloc ? s.last_alloc->next() : body.front();
  ir::Type type = ir::Type::local(ir::Scalar::U8, 1);
  ir::Location none{};
  auto alloc = ir::Operation::create(
      ir::Opcode::LocalAlloc, {}, std::span<const ir::Type>(&type, 1), 0, none, &s.module.arena());
  ir::Operation *alloc_op = body.insert(before, std::move(alloc));
  if (alloc_op->next())
    s.builder.set_insertion_point_before(alloc_op->next());
  else
    s.builder.set_insertion_point_to_end(body);
  s.builder.set_location({});
  ir::Value *zero = s.builder.const_int(ir::Type::scalar(ir::Scalar::U8), 0);
  ir::Value *index = s.builder.const_int(ir::Type::scalar(ir::Scalar::U32), 0);
  s.builder.store(alloc_op->result(), index, zero);
  s.last_alloc = index->defining_op()->next(); // the store: later allocations go after it
  return alloc_op->result();
}

void set_flag(ir::Builder &b, ir::Value *flag, uint64_t value) {
  b.store(flag, b.const_int(ir::Type::scalar(ir::Scalar::U32), 0),
          b.const_int(ir::Type::scalar(ir::Scalar::U8), static_cast<int64_t>(value)));
}

/// `flag != 0` (taken) or `flag == 0` (not taken), read at the builder's position.
ir::Value *flag_test(ir::Builder &b, ir::Value *flag, bool taken) {
  ir::Value *v = b.load(flag, b.const_int(ir::Type::scalar(ir::Scalar::U32), 0),
                        ir::Type::scalar(ir::Scalar::U8));
  return b.op(taken ? ir::Opcode::Ne : ir::Opcode::Eq,
              {v, b.const_int(ir::Type::scalar(ir::Scalar::U8), 0)});
}

/// Opens `if (!returned)` in the innermost region: its statements from here on run only when
/// no return_ was taken.
void open_guard(TraceState &s) {
  OpenRegion &here = s.regions.back();
  here.pending_guard = false;
  ir::Builder &b = structural_builder(*here.region);
  ir::Value *not_returned = flag_test(b, s.return_flag, false);
  ir::Operation *guard = b.create_if(not_returned, {});
  structural_builder(guard->region(1)).yield();
  push_region(guard->region(0), RegionKind::Guard);
}

/// A branch or guard that may have returned closed: its parent continues under a guard.
void propagate_return(const OpenRegion &closed) {
  if (!closed.returns)
    return;
  OpenRegion &parent = current->regions.back();
  parent.returns = true;
  parent.pending_guard = true;
}

/// A loop body closed: the exits leaving further break out of the enclosing loop too, or resume
/// here (break_(levels): the flag is cleared; return_: the rest runs under a guard).
void continue_exits(std::vector<PendingExit> exits) {
  for (const PendingExit &exit : exits) {
    OpenRegion &parent = current->regions.back();
    if (current->loop_depth > exit.depth) {
      ir::Builder &b = structural_builder(*parent.region);
      ir::Operation *check = b.create_if(flag_test(b, exit.flag, true), {});
      structural_builder(check->region(0)).create(ir::Opcode::Break, {});
      structural_builder(check->region(1)).yield();
      for (auto it = current->regions.rbegin(); it != current->regions.rend(); ++it)
        if (it->kind == RegionKind::Loop) {
          it->exits.push_back(exit);
          break;
        }
    } else if (exit.is_return) {
      parent.returns = true;
      parent.pending_guard = true;
    } else {
      set_flag(structural_builder(*parent.region), exit.flag, 0);
    }
  }
}

} // namespace

ir::Value *emit(ir::Opcode op, std::initializer_list<ir::Value *> operands, ir::Type result,
                const Loc &loc) {
  return builder_at(loc)
      .create(op, std::span<ir::Value *const>(operands.begin(), operands.size()),
              std::span<const ir::Type>(&result, 1))
      ->result();
}

ir::Value *emit_inferred(ir::Opcode op, std::initializer_list<ir::Value *> operands,
                         const Loc &loc) {
  return builder_at(loc).op(op, operands);
}

void emit_void(ir::Opcode op, std::initializer_list<ir::Value *> operands, const Loc &loc) {
  builder_at(loc).create(op, std::span<ir::Value *const>(operands.begin(), operands.size()), {});
}

void emit_void(ir::Opcode op, std::initializer_list<ir::Value *> operands,
               std::string_view attribute, int64_t value, const Loc &loc) {
  builder_at(loc).create(op, std::span<ir::Value *const>(operands.begin(), operands.size()), {},
                         {{std::string(attribute), value}});
}

/// The constant `make` builds, or the same one (type and key) made before where it dominates the
/// builder's position: in the innermost open region or one enclosing it. Only each region's
/// kMaxReusedConstants most recent constants are searched, so that a kernel with thousands of
/// distinct constants (a large comptime-unrolled loop) traces in linear time.
template <class Make>
ir::Value *reused_constant(ir::Type type, uint64_t key, const Loc &loc, Make &&make) {
  constexpr size_t kMaxReusedConstants = 64;
  ir::Builder &b = builder_at(loc); // first: it checks reachability and may open a guard
  std::vector<OpenRegion> &open = current->regions;
  for (auto r = open.rbegin(); r != open.rend(); ++r) {
    const std::vector<OpenRegion::Constant> &seen = r->constants;
    size_t first = seen.size() > kMaxReusedConstants ? seen.size() - kMaxReusedConstants : 0;
    for (size_t i = seen.size(); i-- > first;)
      if (seen[i].key == key && seen[i].type == type)
        return seen[i].value;
  }
  ir::Value *made = make(b);
  open.back().constants.push_back({type, key, made});
  return made;
}

ir::Value *emit_int_constant(ir::Type type, int64_t value, const Loc &loc) {
  return reused_constant(type, static_cast<uint64_t>(value), loc,
                         [&](ir::Builder &b) { return b.const_int(type, value); });
}

ir::Value *emit_float_constant(ir::Type type, double value, const Loc &loc) {
  return reused_constant(type, std::bit_cast<uint64_t>(value), loc,
                         [&](ir::Builder &b) { return b.const_float(type, value); });
}

ir::Value *emit_extract(ir::Value *vector, uint32_t lane, const Loc &loc) {
  return builder_at(loc).extract(vector, lane);
}

ir::Value *emit_n(ir::Opcode op, std::span<ir::Value *const> operands, ir::Type type,
                  const Loc &loc) {
  return builder_at(loc).create(op, operands, std::span<const ir::Type>(&type, 1))->result();
}

void emit_print(std::string_view format, std::span<ir::Value *const> values, const Loc &loc) {
  std::vector<ir::Type> types;
  for (const ir::Value *v : values)
    types.push_back(v->type());
  std::string why;
  if (!ir::parse_print_format(format, types, why))
    throw TraceError(fmt::format("print({:?}, ...): {}", format, why), loc);
  builder_at(loc).create(ir::Opcode::Print, values, {}, {{"format", std::string(format)}});
}

ir::Value *emit_insert(ir::Value *vector, ir::Value *value, uint32_t lane, const Loc &loc) {
  ir::Operation *op =
      builder_at(loc).create(ir::Opcode::VecInsert, {vector, value}, {vector->type()});
  op->attributes().set("lane", int64_t{lane});
  return op->result();
}

ir::Value *builtin_component(ir::Value *vector, uint32_t lane) {
  TraceState &s = state(Loc::current());
  ir::Value *&slot = s.components[{vector, lane}];
  if (!slot) {
    ir::Operation *def = vector->defining_op();
    // Insert after the builtin and any components already extracted from it.
    ir::Operation *after = def;
    while (after->next() && after->next()->opcode() == ir::Opcode::VecExtract &&
           after->next()->operand(0) == vector)
      after = after->next();
    ir::Value *operands[] = {vector};
    ir::Type types[] = {vector->type().element_type()};
    auto extract = ir::Operation::create(ir::Opcode::VecExtract, operands, types, 0,
                                         def->location(), &s.module.arena());
    extract->attributes().set("lane", int64_t{lane});
    slot = def->parent_region()->insert(after->next(), std::move(extract))->result();
  }
  return slot;
}

ir::Value *emit_alloc(ir::Opcode op, ir::Type type, const Loc &loc) {
  TraceState &s = state(loc);
  // Allocations go to the top of the kernel body, in order, so that they dominate every use
  // wherever the declaration was written (the IR allows them only there).
  ir::Region &body = s.kernel.body();
  ir::Operation *before = s.last_alloc ? s.last_alloc->next() : body.front();
  auto alloc = ir::Operation::create(op, {}, std::span<const ir::Type>(&type, 1), 0,
                                     location(s, loc), &s.module.arena());
  s.last_alloc = body.insert(before, std::move(alloc));
  return s.last_alloc->result();
}

ir::Value *emit_matrix_access(ir::Opcode op, ir::Value *memory, ir::Value *index, ir::Value *stride,
                              ir::Value *matrix, ir::Type type, Layout layout, const Loc &loc) {
  ir::Builder &b = builder_at(loc);
  ir::Value *operands[] = {memory, index, stride, matrix};
  ir::Operation *access = op == ir::Opcode::MatrixStore
                              ? b.create(op, operands, {})
                              : b.create(op, std::span<ir::Value *const>(operands, 3),
                                         std::span<const ir::Type>(&type, 1));
  if (layout == Layout::ColMajor)
    access->attributes().set("col_major", int64_t{1});
  return access->num_results() ? access->result() : nullptr;
}

ir::Value *add_parameter(ir::Type type, const char *name) {
  return state(Loc::current()).kernel.add_parameter(type, name);
}

void begin_if(ir::Value *condition, const Loc &loc) {
  ir::Operation *op = builder_at(loc).create_if(condition, {});
  push_region(op->region(0), RegionKind::Branch);
}

ir::Value *emit_if_value(ir::Value *condition, ir::Type type,
                         const std::function<ir::Value *()> &then_value,
                         const std::function<ir::Value *()> &else_value, const Loc &loc) {
  ir::Operation *op = builder_at(loc).create_if(condition, std::span<const ir::Type>(&type, 1));
  for (unsigned branch = 0; branch < 2; ++branch) {
    push_region(op->region(branch), RegionKind::Condition);
    ir::Value *value = branch == 0 ? then_value() : else_value();
    builder_at(loc).create(ir::Opcode::Yield, {value});
    close_guards();
    current->regions.pop_back();
  }
  return op->result();
}

void end_then() {
  // The if_ whose then-branch closes here: the owner of the innermost region (an if_ nested in
  // the branch has closed already, so it is not necessarily the last if_ begun).
  close_guards();
  OpenRegion closed = current->regions.back();
  ir::Operation *op = closed.region->parent_op();
  pop_region(ir::Opcode::Yield);
  propagate_return(closed);
  current->builder.set_insertion_point_to_end(op->region(1));
  current->builder.set_location({});
  current->builder.yield();
  current->last_if = op;
}

ir::Operation *current_if_for_else(const Loc &loc) {
  return state(loc).last_if;
}

void begin_else_of(ir::Operation *if_op, const Loc &loc) {
  TraceState &s = state(loc);
  if (s.regions.back().region->back() != if_op || if_op->region(1).size() != 1)
    throw TraceError("else_ must directly follow its if_ (if_(c, ...).else_(...))", loc);
  if_op->region(1).erase(if_op->region(1).front());
  push_region(if_op->region(1), RegionKind::Branch);
}

void end_if() {
  close_guards();
  OpenRegion closed = current->regions.back();
  pop_region(ir::Opcode::Yield);
  propagate_return(closed);
}

ir::Value *begin_for(ir::Value *lo, ir::Value *hi, ir::Value *step, int unroll, const Loc &loc) {
  ir::Operation *op = builder_at(loc).create_for(lo, hi, step, {});
  if (unroll > 0)
    op->attributes().set("unroll", int64_t{unroll});
  push_region(op->region(0), RegionKind::Loop);
  ++current->loop_depth;
  return op->region(0).argument(0);
}

std::vector<ir::Value *> begin_for_carry(ir::Value *lo, ir::Value *hi, ir::Value *step,
                                         std::span<ir::Value *const> inits, int unroll,
                                         const Loc &loc) {
  ir::Operation *op = builder_at(loc).create_for(lo, hi, step, inits);
  if (unroll > 0)
    op->attributes().set("unroll", int64_t{unroll});
  push_region(op->region(0), RegionKind::Loop);
  current->regions.back().carries = true;
  ++current->loop_depth;
  ir::Region &body = op->region(0);
  std::vector<ir::Value *> arguments;
  for (unsigned i = 0; i < body.num_arguments(); ++i)
    arguments.push_back(body.argument(i));
  return arguments;
}

/// Closes a for_ or while_ body, then sends its pending exits on.
void end_loop() {
  close_guards();
  std::vector<PendingExit> exits = std::move(current->regions.back().exits);
  --current->loop_depth;
  pop_region(ir::Opcode::Yield);
  continue_exits(std::move(exits));
}

void end_for() {
  end_loop();
}

std::vector<ir::Value *> end_for_carry(std::span<ir::Value *const> next, const Loc &loc) {
  // No exit leaves a carrying loop (emit_break and check_exit_place refuse them), so the body
  // ends here, with its values: a guard inside closes first, as end_loop would.
  close_guards();
  ir::Region *body = current->regions.back().region;
  builder_at(loc).yield(next);
  --current->loop_depth;
  current->regions.pop_back();
  ir::Operation *op = body->parent_op();
  std::vector<ir::Value *> results;
  for (unsigned i = 0; i < op->num_results(); ++i)
    results.push_back(op->result(i));
  return results;
}

void begin_while(const Loc &loc) {
  ir::Operation *op = builder_at(loc).create(ir::Opcode::While, {}, {});
  // The body's region follows once the condition is emitted.
  push_region(op->region(0), RegionKind::Condition);
}

void while_condition(ir::Value *condition, const Loc &loc) {
  builder_at(loc).create(ir::Opcode::Condition, {condition});
  close_guards();
  ir::Operation *loop = current->regions.back().region->parent_op();
  current->regions.pop_back();
  push_region(loop->region(1), RegionKind::Loop);
  ++current->loop_depth;
}

void end_while() {
  end_loop();
}

uint32_t workgroup_invocations(const Loc &loc) {
  auto size = state(loc).kernel.workgroup_size();
  return size[0] * size[1] * size[2];
}

bool inside_loop(const Loc &loc) {
  for (const OpenRegion &r : state(loc).regions)
    if (const ir::Operation *op = r.region->parent_op();
        op && (op->opcode() == ir::Opcode::For || op->opcode() == ir::Opcode::While))
      return true;
  return false;
}

/// Refuses `what` (break_, continue_, return_) when it would leave or skip to the end of one of
/// the innermost `loops` open loops that is a for_carry: its carried values would need a value
/// at the exit.
void check_not_carrying(TraceState &s, int loops, const char *what, const Loc &loc) {
  for (auto it = s.regions.rbegin(); it != s.regions.rend() && loops > 0; ++it) {
    if (it->kind != RegionKind::Loop)
      continue;
    --loops;
    if (it->carries)
      throw TraceError(fmt::format("{} inside a for_carry body cannot leave its iteration early "
                                   "(the carried values would have no next value); compute the "
                                   "next values with dsl::select instead",
                                   what),
                       loc);
  }
}

void emit_break(const Loc &loc) {
  TraceState &s = state(loc);
  if (s.loop_depth == 0)
    throw TraceError("break_ is outside any for_ or while_ body", loc);
  check_not_carrying(s, 1, "break_", loc);
  emit_void(ir::Opcode::Break, {}, loc);
}

/// Checks that return_ or break_(levels) is not inside a while_ condition or a value branch,
/// and that the `loops` innermost loops it leaves carry no values.
void check_exit_place(TraceState &s, const char *what, int loops, const Loc &loc) {
  for (const OpenRegion &r : s.regions)
    if (r.kind == RegionKind::Condition)
      throw TraceError(fmt::format("{} inside a while_ condition cannot leave the loop; compute "
                                   "the condition, and {} in the body",
                                   what, what),
                       loc);
  check_not_carrying(s, loops, what, loc);
}

/// The innermost open loop body.
OpenRegion &innermost_loop(TraceState &s) {
  for (auto it = s.regions.rbegin(); it != s.regions.rend(); ++it)
    if (it->kind == RegionKind::Loop)
      return *it;
  throw std::logic_error("innermost_loop: no loop is open");
}

void emit_return(const Loc &loc) {
  TraceState &s = state(loc);
  check_exit_place(s, "return_", s.loop_depth, loc);
  ir::Builder &b = builder_at(loc);
  OpenRegion &here = s.regions.back();
  if (here.kind == RegionKind::Body) { // the kernel's own end: nothing needs skipping
    b.create(ir::Opcode::Return, {});
    return;
  }
  if (!s.return_flag)
    s.return_flag = new_flag(s);
  ir::Builder &at = builder_at(loc);
  set_flag(at, s.return_flag, 1);
  if (s.loop_depth > 0) { // leave the loops, one break at a time (each body checks the flag)
    at.create(ir::Opcode::Break, {});
    innermost_loop(s).exits.push_back({s.return_flag, 0, true});
    return;
  }
  at.create(ir::Opcode::Yield, {}); // the rest of this branch never runs
  here.returns = true;
}

void emit_break_levels(int levels, const Loc &loc) {
  TraceState &s = state(loc);
  if (levels < 1 || levels > s.loop_depth)
    throw TraceError(fmt::format("break_({}) leaves {} loop{}, but {} {} open here", levels, levels,
                                 levels == 1 ? "" : "s", s.loop_depth,
                                 s.loop_depth == 1 ? "is" : "are"),
                     loc);
  if (levels == 1)
    return emit_break(loc);
  check_exit_place(s, "break_(levels)", levels, loc);
  ir::Value *flag = new_flag(s);
  ir::Builder &b = builder_at(loc);
  set_flag(b, flag, 1);
  b.create(ir::Opcode::Break, {});
  innermost_loop(s).exits.push_back({flag, s.loop_depth - levels, false});
}

void emit_continue(const Loc &loc) {
  TraceState &s = state(loc);
  if (s.loop_depth == 0)
    throw TraceError("continue_ is outside any for_ or while_ body", loc);
  check_not_carrying(s, 1, "continue_", loc);
  emit_void(ir::Opcode::Continue, {}, loc);
}

void begin_kernel(ir::Module &module, const std::string &name, uint32_t wg_x, uint32_t wg_y,
                  uint32_t wg_z, const Loc &loc) {
  if (current)
    throw TraceError("a kernel is already being traced on this thread (kernels cannot trace "
                     "other kernels)",
                     loc);
  ir::Kernel &kernel = module.add_kernel(name);
  kernel.set_workgroup_size({wg_x, wg_y, wg_z});
  current = new TraceState(module, kernel);
  current->regions.emplace_back(&kernel.body(), RegionKind::Body);
}

ir::Kernel &end_kernel() {
  ir::Kernel &kernel = current->kernel;
  close_guards();
  pop_region(ir::Opcode::Return);
  delete current;
  current = nullptr;
  return kernel;
}

void abandon_kernel() {
  if (!current)
    return;
  ir::Module &module = current->module;
  const ir::Kernel *kernel = &current->kernel;
  delete current;
  current = nullptr;
  module.remove_kernel(kernel);
}

std::unique_ptr<ir::Module> new_module(const std::string &name) {
  return std::make_unique<ir::Module>(name);
}

void trace_kernel_into(ir::Module &module, const std::string &name, const KernelOptions &options,
                       const std::function<void()> &body, std::vector<ir::Diagnostic> &errors) {
  const auto &wg = options.workgroup;
  try {
    begin_kernel(module, name, wg[0], wg[1], wg[2], Loc::current());
    if (options.subgroup_size != 0)
      current->kernel.attributes().set(ir::kSubgroupSizeAttribute, int64_t{options.subgroup_size});
    body();
    ir::Kernel &kernel = end_kernel();
    if (options.verify) {
      std::vector<ir::Diagnostic> problems = ir::verify(kernel);
      errors.insert(errors.end(), problems.begin(), problems.end());
    }
  } catch (const TraceError &e) {
    abandon_kernel();
    errors.push_back({e.where().file_name(),
                      e.where().line(),
                      e.where().column(),
                      fmt::format("in kernel {}: {}", ir::format_symbol(name), e.what()),
                      {}});
  } catch (...) {
    abandon_kernel();
    throw;
  }
}

} // namespace cubecc::dsl::detail
