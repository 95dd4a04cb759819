//===- detail.h - The tracing machinery under the DSL (not for kernel authors) ---------------===//
//
// While a kernel is traced, a thread-local TraceState holds the module, the kernel and the IR
// builder. The DSL's templates call the non-template functions here to emit ops; they live in
// dsl/src/trace.cpp so that kernel sources do not instantiate the IR's machinery.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ops.h"
#include "cubecc/ir/types.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <source_location>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace cubecc::ir {
class Value;
class Module;
class Kernel;
} // namespace cubecc::ir

namespace cubecc::dsl {

/// A mistake in kernel code that C++ cannot catch at compile time (a statement after break_, a
/// DSL call outside a kernel being traced). Carries the user's source location.
class TraceError : public std::runtime_error {
public:
  TraceError(const std::string &message, const std::source_location &where)
      : std::runtime_error(message), where_(where) {}
  const std::source_location &where() const { return where_; }

private:
  std::source_location where_;
};

namespace detail {

using Loc = std::source_location;

/// Emits a one-result op of the given result type at the user's location.
ir::Value *emit(ir::Opcode op, std::initializer_list<ir::Value *> operands, ir::Type result,
                const Loc &loc);
/// Emits a one-result op whose result type the op table implies.
ir::Value *emit_inferred(ir::Opcode op, std::initializer_list<ir::Value *> operands,
                         const Loc &loc);
/// Emits an op without results (store, barrier, ...).
void emit_void(ir::Opcode op, std::initializer_list<ir::Value *> operands, const Loc &loc);
/// As emit_void, with one integer attribute.
void emit_void(ir::Opcode op, std::initializer_list<ir::Value *> operands,
               std::string_view attribute, int64_t value, const Loc &loc);
/// A `print` op with `format` (checked against the values here, naming the user's line).
void emit_print(std::string_view format, std::span<ir::Value *const> values, const Loc &loc);
ir::Value *emit_int_constant(ir::Type type, int64_t value, const Loc &loc);
ir::Value *emit_float_constant(ir::Type type, double value, const Loc &loc);
ir::Value *emit_extract(ir::Value *vector, uint32_t lane, const Loc &loc);
/// An op with any number of operands and one result of `type`.
ir::Value *emit_n(ir::Opcode op, std::span<ir::Value *const> operands, ir::Type type,
                  const Loc &loc);
/// A copy of `vector` with lane `lane` replaced by `value`.
ir::Value *emit_insert(ir::Value *vector, ir::Value *value, uint32_t lane, const Loc &loc);
/// Lane `lane` of a builtin vector, extracted once, right after the builtin (so that every use
/// the builtin dominates can share it).
ir::Value *builtin_component(ir::Value *vector, uint32_t lane);
/// shared.alloc / local.alloc at the top of the kernel body, so that it dominates every use.
ir::Value *emit_alloc(ir::Opcode op, ir::Type type, const Loc &loc);

/// Adds a kernel parameter of the given type and name.
ir::Value *add_parameter(ir::Type type, const char *name);

// Structured control flow. Each `begin_*` opens a region for the body to fill; the matching
// `end_*` closes it with a terminator (unless the body already ended with break_/continue_).
void begin_if(ir::Value *condition, const Loc &loc);
/// An if with one result of `type`: `then_value()` emitted in the then-branch and
/// `else_value()` in the else-branch give the value each yields (dsl::load with a mask).
ir::Value *emit_if_value(ir::Value *condition, ir::Type type,
                         const std::function<ir::Value *()> &then_value,
                         const std::function<ir::Value *()> &else_value, const Loc &loc);
void end_then();
void begin_else(const Loc &loc);
void end_if();
ir::Value *begin_for(ir::Value *lo, ir::Value *hi, ir::Value *step, int unroll, const Loc &loc);
void end_for();
/// A for_carry loop: `inits` become its carried values. Returns the body's arguments (the
/// induction variable, then one per carried value). end_for_carry yields `next` and returns the
/// loop's results.
std::vector<ir::Value *> begin_for_carry(ir::Value *lo, ir::Value *hi, ir::Value *step,
                                         std::span<ir::Value *const> inits, int unroll,
                                         const Loc &loc);
std::vector<ir::Value *> end_for_carry(std::span<ir::Value *const> next, const Loc &loc);
void begin_while(const Loc &loc);
void while_condition(ir::Value *condition, const Loc &loc);
void end_while();
void emit_break(const Loc &loc);
void emit_continue(const Loc &loc);
void emit_return(const Loc &loc);
void emit_break_levels(int levels, const Loc &loc);
/// Whether the statement being traced is inside a for_ or while_ (its body or condition), so may
/// run more than once.
bool inside_loop(const Loc &loc);
/// The invocations of the workgroup of the kernel being traced (x * y * z of its size).
uint32_t workgroup_invocations(const Loc &loc);

/// Starts tracing `name` into `module` (one kernel at a time per thread) and ends it.
void begin_kernel(ir::Module &module, const std::string &name, uint32_t wg_x, uint32_t wg_y,
                  uint32_t wg_z, const Loc &loc);
ir::Kernel &end_kernel();
/// Drops a kernel whose trace threw.
void abandon_kernel();

} // namespace detail
} // namespace cubecc::dsl
