//===- builder.h - Creating ops at an insertion point ----------------------------------------===//
//
// The DSL and the passes build IR through this class: it keeps an insertion point (a region and
// an op to insert before) and a current location, infers result types where the op table fixes
// them, and checks cheap invariants (operand types agree) as ops are made.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <initializer_list>
#include <vector>

namespace cubecc::ir {

class Builder {
public:
  explicit Builder(Module &module) : module_(module) {}

  Module &module() const { return module_; }

  /// New ops go at the end of `region`.
  void set_insertion_point_to_end(Region &region) {
    region_ = &region;
    before_ = nullptr;
  }
  /// New ops go just before `op`.
  void set_insertion_point_before(Operation *op) {
    region_ = op->parent_region();
    before_ = op;
  }
  Region *insertion_region() const { return region_; }

  void set_location(Location loc) { loc_ = loc; }
  void set_location(std::string_view file, uint32_t line, uint32_t col) {
    loc_ = module_.location(file, line, col);
  }
  Location location() const { return loc_; }

  /// The general form: any op, explicit result types.
  Operation *create(Opcode opcode, std::span<Value *const> operands,
                    std::span<const Type> result_types,
                    std::vector<NamedAttribute> attributes = {});
  Operation *create(Opcode opcode, std::initializer_list<Value *> operands,
                    std::initializer_list<Type> result_types = {},
                    std::vector<NamedAttribute> attributes = {}) {
    return create(opcode, std::span<Value *const>(operands.begin(), operands.size()),
                  std::span<const Type>(result_types.begin(), result_types.size()),
                  std::move(attributes));
  }

  /// The result type the op table implies for these operands (unary, binary, ternary, compare,
  /// select, subgroup and builtin ops). Throws std::logic_error for ops whose result type must be
  /// given.
  static Type infer_result_type(Opcode opcode, std::span<Value *const> operands);
  /// Creates a one-result op whose result type is inferred; returns the result.
  Value *op(Opcode opcode, std::initializer_list<Value *> operands);

  Value *const_int(Type type, int64_t value);
  Value *const_float(Type type, double value);
  Value *const_bool(bool value);
  Value *cast(Value *v, Type to) { return create(Opcode::Cast, {v}, {to})->result(); }
  Value *load(Value *memory, Value *index, Type result);
  void store(Value *memory, Value *index, Value *value) {
    create(Opcode::Store, {memory, index, value});
  }
  Value *extract(Value *vector, uint32_t lane);

  /// An `if` with the given result types; its branches are empty (fill them and end each with a
  /// yield).
  Operation *create_if(Value *condition, std::span<const Type> result_types);
  /// A `for` from lo to hi by step carrying `inits`; the body has the induction variable and one
  /// argument per carried value, and is empty.
  Operation *create_for(Value *lo, Value *hi, Value *step, std::span<Value *const> inits);
  void yield(std::span<Value *const> values = {}) { create(Opcode::Yield, values, {}); }
  void ret() { create(Opcode::Return, {}, {}); }

private:
  /// A const op of `type` whose value attribute is `bits`.
  Value *constant(Type type, int64_t bits);

  Module &module_;
  Region *region_ = nullptr;
  Operation *before_ = nullptr;
  Location loc_;
};

} // namespace cubecc::ir
