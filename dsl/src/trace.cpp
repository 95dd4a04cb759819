//===- trace.cpp - The tracing state and the emission functions the DSL calls ----------------===//
#include "cubecc/dsl/trace.h"
#include "cubecc/dsl/detail.h"

#include "cubecc/ir/builder.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"

#include <fmt/format.h>

#include <map>
#include <optional>

namespace cubecc::dsl::detail {
namespace {

/// Everything about the kernel being traced on this thread.
struct TraceState {
  TraceState(ir::Module &m, ir::Kernel &k) : module(m), kernel(k), builder(m) {}
  ir::Module &module;
  ir::Kernel &kernel;
  ir::Builder builder;
  /// The regions being filled, innermost last; the builder appends to the last one.
  std::vector<ir::Region *> regions;
  /// Open for_ and while_ bodies (break_ and continue_ need one).
  int loop_depth = 0;
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

/// The builder, positioned at the end of the innermost open region, after checking that code
/// there is reachable.
ir::Builder &builder_at(const Loc &loc) {
  TraceState &s = state(loc);
  ir::Region *region = s.regions.back();
  if (region->terminator())
    throw TraceError("this statement follows a break_ or continue_ in the same block and can "
                     "never run; remove it or put the break_ in an if_",
                     loc);
  s.builder.set_insertion_point_to_end(*region);
  s.builder.set_location(location(s, loc));
  return s.builder;
}

void push_region(ir::Region &r) {
  current->regions.push_back(&r);
}

/// Closes the innermost region with `terminator` unless a break_/continue_ already ended it.
void pop_region(ir::Opcode terminator) {
  ir::Region *r = current->regions.back();
  if (!r->terminator()) {
    // The closing terminator is implied by the structure, not written by the user: no location.
    current->builder.set_insertion_point_to_end(*r);
    current->builder.set_location({});
    current->builder.create(terminator, {});
  }
  current->regions.pop_back();
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

ir::Value *emit_int_constant(ir::Type type, int64_t value, const Loc &loc) {
  return builder_at(loc).const_int(type, value);
}

ir::Value *emit_float_constant(ir::Type type, double value, const Loc &loc) {
  return builder_at(loc).const_float(type, value);
}

ir::Value *emit_extract(ir::Value *vector, uint32_t lane, const Loc &loc) {
  return builder_at(loc).extract(vector, lane);
}

ir::Value *emit_n(ir::Opcode op, std::span<ir::Value *const> operands, ir::Type type,
                  const Loc &loc) {
  return builder_at(loc).create(op, operands, std::span<const ir::Type>(&type, 1))->result();
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

ir::Value *add_parameter(ir::Type type, const char *name) {
  return state(Loc::current()).kernel.add_parameter(type, name);
}

void begin_if(ir::Value *condition, const Loc &loc) {
  ir::Operation *op = builder_at(loc).create_if(condition, {});
  push_region(op->region(0));
}

ir::Value *emit_if_value(ir::Value *condition, ir::Type type,
                         const std::function<ir::Value *()> &then_value,
                         const std::function<ir::Value *()> &else_value, const Loc &loc) {
  ir::Operation *op = builder_at(loc).create_if(condition, std::span<const ir::Type>(&type, 1));
  for (unsigned branch = 0; branch < 2; ++branch) {
    push_region(op->region(branch));
    ir::Value *value = branch == 0 ? then_value() : else_value();
    builder_at(loc).create(ir::Opcode::Yield, {value});
    current->regions.pop_back();
  }
  return op->result();
}

void end_then() {
  // The if_ whose then-branch closes here: the owner of the innermost region (an if_ nested in
  // the branch has closed already, so it is not necessarily the last if_ begun).
  ir::Operation *op = current->regions.back()->parent_op();
  pop_region(ir::Opcode::Yield);
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
  if (s.regions.back()->back() != if_op || if_op->region(1).size() != 1)
    throw TraceError("else_ must directly follow its if_ (if_(c, ...).else_(...))", loc);
  if_op->region(1).erase(if_op->region(1).front());
  push_region(if_op->region(1));
}

void end_if() {
  pop_region(ir::Opcode::Yield);
}

ir::Value *begin_for(ir::Value *lo, ir::Value *hi, ir::Value *step, int unroll, const Loc &loc) {
  ir::Operation *op = builder_at(loc).create_for(lo, hi, step, {});
  if (unroll > 0)
    op->attributes().set("unroll", int64_t{unroll});
  push_region(op->region(0));
  ++current->loop_depth;
  return op->region(0).argument(0);
}

void end_for() {
  --current->loop_depth;
  pop_region(ir::Opcode::Yield);
}

void begin_while(const Loc &loc) {
  ir::Operation *op = builder_at(loc).create(ir::Opcode::While, {}, {});
  push_region(op->region(0)); // the body's region follows once the condition is emitted
}

void while_condition(ir::Value *condition, const Loc &loc) {
  builder_at(loc).create(ir::Opcode::Condition, {condition});
  ir::Operation *loop = current->regions.back()->parent_op();
  current->regions.pop_back();
  push_region(loop->region(1));
  ++current->loop_depth;
}

void end_while() {
  --current->loop_depth;
  pop_region(ir::Opcode::Yield);
}

void emit_break(const Loc &loc) {
  if (state(loc).loop_depth == 0)
    throw TraceError("break_ is outside any for_ or while_ body", loc);
  emit_void(ir::Opcode::Break, {}, loc);
}

void emit_continue(const Loc &loc) {
  if (state(loc).loop_depth == 0)
    throw TraceError("continue_ is outside any for_ or while_ body", loc);
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
  current->regions.push_back(&kernel.body());
}

ir::Kernel &end_kernel() {
  ir::Kernel &kernel = current->kernel;
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
