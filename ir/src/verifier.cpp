//===- verifier.cpp - Structural, type, dominance and barrier checks -------------------------===//
#include "cubecc/ir/verifier.h"

#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/print_format.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/uniformity.h"
#include "value_flags.h"

#include <fmt/format.h>

#include <unordered_set>

namespace cubecc::ir {
namespace {

constexpr size_t kMaxDiagnostics = 50;

bool class_allows(TypeClass cls, Scalar s) {
  switch (cls) {
  case TypeClass::Any:
    return true;
  case TypeClass::Numeric:
    return s != Scalar::Bool && !is_storage_float(s);
  case TypeClass::Signed:
    return is_signed(s) || is_float(s);
  case TypeClass::Integer:
    return is_integer(s);
  case TypeClass::IntegerOrBool:
    return is_integer(s) || s == Scalar::Bool;
  case TypeClass::Float:
    return is_float(s);
  }
  return false;
}

std::string_view class_text(TypeClass cls) {
  switch (cls) {
  case TypeClass::Any:
    return "any type";
  case TypeClass::Numeric:
    return "integer or float types";
  case TypeClass::Signed:
    return "signed integer or float types";
  case TypeClass::Integer:
    return "integer types";
  case TypeClass::IntegerOrBool:
    return "integer or bool types";
  case TypeClass::Float:
    return "float types";
  }
  return "?";
}

/// What a region is, for the terminator and break/continue rules.
enum class RegionRole { KernelBody, IfBranch, ForBody, WhileBefore, WhileAfter };

/// The innermost loop around a point, and the types its break and continue must carry.
struct LoopContext {
  const Operation *loop = nullptr;
  std::vector<Type> break_types;
  std::vector<Type> continue_types;
};

class Verifier {
public:
  Verifier(const Module &module, const SourceMap *map) : module_(module), map_(map) {}

  std::vector<Diagnostic> run() {
    std::unordered_set<std::string_view> names;
    for (const auto &k : module_.kernels()) {
      kernel_ = k.get();
      if (k->name().empty())
        kernel_error("a kernel has an empty name");
      else if (!names.insert(k->name()).second)
        kernel_error(fmt::format("kernel '@{}' is defined more than once", k->name()));
      verify_kernel(*k);
      if (diags_.size() >= kMaxDiagnostics)
        break;
    }
    return std::move(diags_);
  }

  std::vector<Diagnostic> run(const Kernel &k) {
    kernel_ = &k;
    if (k.name().empty())
      kernel_error("a kernel has an empty name");
    verify_kernel(k);
    return std::move(diags_);
  }

private:
  //===- Reporting ---------------------------------------------------------------------------===//

  void locate(Diagnostic &d, Location loc, const TextPosition *text) {
    if (loc.known()) {
      d.file = std::string(module_.file_name(loc.file));
      d.line = loc.line;
      d.col = loc.col;
      if (text && map_)
        d.notes.push_back(
            fmt::format("in the IR text at {}:{}:{}", map_->buffer_name, text->line, text->col));
    } else if (text && map_) {
      d.file = map_->buffer_name;
      d.line = text->line;
      d.col = text->col;
    } else if (map_) {
      d.file = map_->buffer_name;
    }
  }

  void error(const Operation *op, std::string message) {
    if (diags_.size() >= kMaxDiagnostics)
      return;
    Diagnostic d;
    d.message =
        fmt::format("'{}' in kernel {}: {}", op->name(), format_symbol(kernel_->name()), message);
    const TextPosition *text = nullptr;
    if (map_) {
      auto it = map_->ops.find(op);
      if (it != map_->ops.end())
        text = &it->second;
    }
    locate(d, op->location(), text);
    diags_.push_back(std::move(d));
  }

  void kernel_error(std::string message) {
    if (diags_.size() >= kMaxDiagnostics)
      return;
    Diagnostic d;
    d.message = fmt::format("kernel {}: {}", format_symbol(kernel_->name()), message);
    const TextPosition *text = nullptr;
    if (map_) {
      auto it = map_->kernels.find(kernel_);
      if (it != map_->kernels.end())
        text = &it->second;
    }
    locate(d, kernel_->location(), text);
    diags_.push_back(std::move(d));
  }

  //===- Types -------------------------------------------------------------------------------===//

  /// Why `t` is not a well-formed type, or empty.
  static std::string malformed(Type t) {
    switch (t.kind()) {
    case TypeKind::Scalar:
      return {};
    case TypeKind::Vector:
      return Type::valid_lanes(t.lanes()) ? "" : "vectors have 2, 3, 4, 8 or 16 lanes";
    case TypeKind::Buffer:
    case TypeKind::Shared:
    case TypeKind::Local:
      if (t.element() == Scalar::Bool)
        return "memory of bool has no defined layout; use u8";
      if (t.kind() != TypeKind::Buffer && t.count() == 0)
        return "arrays need at least one element";
      if (t.kind() != TypeKind::Buffer && t.access() != Access::ReadWrite)
        return "shared and local arrays are always readwrite";
      return {};
    case TypeKind::Matrix:
      return matrix_type_problem(t);
    }
    return "unknown type kind";
  }

  //===- Kernels and regions -----------------------------------------------------------------===//

  void verify_kernel(const Kernel &k) {
    size_t errors_before = diags_.size();
    local_bytes_ = 0;
    const auto &wg = k.workgroup_size();
    uint64_t invocations = uint64_t{wg[0]} * wg[1] * wg[2]; // meaningful once each dim <= 1024
    if (wg[0] == 0 || wg[1] == 0 || wg[2] == 0)
      kernel_error("every workgroup dimension must be at least 1");
    else if (wg[0] > 1024 || wg[1] > 1024 || wg[2] > 1024)
      kernel_error(fmt::format("workgroup({}, {}, {}) has a dimension over the portable limit of "
                               "1024 invocations",
                               wg[0], wg[1], wg[2]));
    else if (invocations > 1024)
      kernel_error(fmt::format("workgroup({}, {}, {}) has {} invocations; the portable limit is "
                               "1024",
                               wg[0], wg[1], wg[2], invocations));
    if (k.attributes().find(kSubgroupSizeAttribute)) {
      std::optional<int64_t> sg = k.attributes().get_int(kSubgroupSizeAttribute);
      if (!sg || *sg < 1 || *sg > 128 || (*sg & (*sg - 1)) != 0)
        kernel_error("the subgroup_size attribute must be a power of two from 1 to 128");
      else if (invocations <= 1024 && invocations % static_cast<uint64_t>(*sg) != 0)
        kernel_error(fmt::format("workgroup({}, {}, {}) is not whole subgroups of the {} "
                                 "invocations its subgroup_size attribute requires",
                                 wg[0], wg[1], wg[2], *sg));
    }
    visible_.clear();
    for (unsigned i = 0; i < k.num_parameters(); ++i) {
      Type t = k.parameter(i)->type();
      if (std::string why = malformed(t); !why.empty())
        kernel_error(fmt::format("parameter {} has type {}: {}", i, t.str(), why));
      else if (t.kind() == TypeKind::Shared || t.kind() == TypeKind::Local)
        kernel_error(fmt::format("parameter {} has type {}: shared and local arrays are made "
                                 "with shared.alloc and local.alloc, not passed in",
                                 i, t.str()));
      else if (t.is_matrix())
        kernel_error(fmt::format("parameter {} has type {}: a matrix lives in the subgroup's "
                                 "registers; pass a buffer and matrix.load it",
                                 i, t.str()));
      visible_.set(k.parameter(i));
    }
    if (!k.attributes().empty())
      for (const NamedAttribute &a : k.attributes().entries())
        if (a.name.empty())
          kernel_error("an attribute has an empty name");
    if (k.body().empty()) {
      kernel_error("the body is empty; it must end with 'return'");
      return;
    }
    verify_region(k.body(), RegionRole::KernelBody, nullptr, 0);
    if (diags_.size() == errors_before)
      check_barriers(k); // its analysis assumes the kernel is otherwise well formed
  }

  void verify_region(const Region &region, RegionRole role, const LoopContext *loop,
                     unsigned depth) {
    std::vector<const Value *> added;
    const Operation *parent = region.parent_op();
    for (unsigned i = 0; i < region.num_arguments(); ++i) {
      visible_.set(region.argument(i));
      added.push_back(region.argument(i));
      Type t = region.argument(i)->type();
      if (parent && t.is_memory())
        error(parent,
              fmt::format("region argument {} has type {}; loops carry scalars, vectors and "
                          "matrices, not memory objects",
                          i, t.str()));
      else if (std::string why = malformed(t); parent && !why.empty())
        error(parent, fmt::format("region argument {} has type {}: {}", i, t.str(), why));
    }
    if (region.empty()) {
      error(parent, "a region is empty; every region ends with a terminator");
    }
    for (Operation *op : region) {
      if (op->is_terminator() && op != region.back())
        error(op, "a terminator must be the last op of its region");
      if (op == region.back() && !op->is_terminator())
        error(op, "the last op of a region must be a terminator (yield, condition, break, "
                  "continue or return)");
      verify_op(*op, role, loop, depth);
      for (unsigned i = 0; i < op->num_results(); ++i) {
        visible_.set(op->result(i));
        added.push_back(op->result(i));
      }
    }
    for (const Value *v : added)
      visible_.reset(v);
  }

  void verify_op(const Operation &op, RegionRole role, const LoopContext *loop, unsigned depth) {
    const OpInfo &info = op.info();
    // Counts first: the type rules below index operands and results.
    int operands = fixed_operand_count(info.signature);
    if (operands >= 0 && op.num_operands() != static_cast<unsigned>(operands))
      return error(&op, fmt::format("takes {} operand(s), has {}", operands, op.num_operands()));
    int results = fixed_result_count(info.signature);
    if (results >= 0 && op.num_results() != static_cast<unsigned>(results))
      return error(&op, fmt::format("has {} result(s), must have {}", op.num_results(), results));
    if (op.num_regions() != region_count(info.signature))
      return error(&op, fmt::format("has {} region(s), must have {}", op.num_regions(),
                                    region_count(info.signature)));
    bool operands_ok = true;
    for (unsigned i = 0; i < op.num_operands(); ++i) {
      if (!visible_.test(op.operand(i))) {
        error(&op, fmt::format("operand {} does not dominate this use (it is defined later, in "
                               "another region, or in another kernel)",
                               i));
        operands_ok = false;
      }
    }
    for (unsigned i = 0; i < op.num_results(); ++i) {
      Type t = op.result(i)->type();
      if (std::string why = malformed(t); !why.empty()) {
        error(&op, fmt::format("result {} has type {}: {}", i, t.str(), why));
        operands_ok = false;
      } else if (t.is_memory() && info.signature != Signature::SharedAlloc &&
                 info.signature != Signature::LocalAlloc) {
        error(&op, fmt::format("result {} has memory type {}; only shared.alloc and local.alloc "
                               "make memory objects",
                               i, t.str()));
        operands_ok = false;
      }
    }
    verify_attributes(op);
    if (!operands_ok)
      return;
    verify_types(op, role, loop);

    if (op.num_regions())
      verify_nested(op, loop, depth);
  }

  void verify_attributes(const Operation &op) {
    std::string_view allowed;
    bool is_string = false; // the allowed attribute's kind: a string, else an integer
    switch (op.opcode()) {
    case Opcode::Const:
      allowed = "value";
      break;
    case Opcode::VecExtract:
    case Opcode::VecInsert:
      allowed = "lane";
      break;
    case Opcode::For:
      allowed = "unroll";
      break;
    case Opcode::MatrixLoad:
    case Opcode::MatrixStore:
      allowed = "col_major";
      break;
    case Opcode::AsyncCopy:
      allowed = "lanes";
      break;
    case Opcode::AsyncWait:
      allowed = "pending";
      break;
    case Opcode::Print:
      allowed = "format"; // its text is checked with the operands (verify_types)
      is_string = true;
      break;
    default:
      break;
    }
    for (const NamedAttribute &a : op.attributes().entries()) {
      if (a.name != allowed) {
        error(&op, allowed.empty()
                       ? fmt::format("takes no attributes, has '{}'", a.name)
                       : fmt::format("does not take attribute '{}' (only '{}')", a.name, allowed));
      } else if (std::holds_alternative<std::string>(a.value) != is_string) {
        error(&op, fmt::format("attribute '{}' must be {}", a.name,
                               is_string ? "a string" : "an integer"));
      }
    }
  }

  //===- Type rules, one per signature -------------------------------------------------------===//

  bool check_class(const Operation &op, Type t) {
    TypeClass cls = op.info().type_class;
    if (class_allows(cls, t.element()))
      return true;
    error(&op, fmt::format("works on {}, not {}", class_text(cls), t.str()));
    return false;
  }

  bool same_types(const Operation &op, std::string_view what, std::span<Value *const> values,
                  std::span<const Type> expected) {
    if (values.size() != expected.size()) {
      error(&op, fmt::format("{} {} value(s), expected {}", what, values.size(), expected.size()));
      return false;
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i]->type() != expected[i]) {
        error(&op, fmt::format("{} value {} of type {}, expected {}", what, i,
                               values[i]->type().str(), expected[i].str()));
        return false;
      }
    }
    return true;
  }

  static std::vector<Type> types_of(std::span<Value *const> values) {
    std::vector<Type> out;
    for (Value *v : values)
      out.push_back(v->type());
    return out;
  }

  static std::vector<Type> result_types(const Operation &op) {
    std::vector<Type> out;
    for (unsigned i = 0; i < op.num_results(); ++i)
      out.push_back(op.result(i)->type());
    return out;
  }

  static std::vector<Type> argument_types(const Region &r) {
    std::vector<Type> out;
    for (unsigned i = 0; i < r.num_arguments(); ++i)
      out.push_back(r.argument(i)->type());
    return out;
  }

  bool want_value(const Operation &op, unsigned i, Type t) {
    if (t.is_value())
      return true;
    error(&op, fmt::format("operand {} has {} type {}; expected a scalar or vector", i,
                           t.is_matrix() ? "matrix" : "memory", t.str()));
    return false;
  }

  /// A load reads readable memory, a store writes writable memory.
  bool check_access(const Operation &op, Type mem, bool is_load) {
    if (is_load && !mem.is_readable()) {
      error(&op, fmt::format("loads from a write-only buffer ({})", mem.str()));
      return false;
    }
    if (!is_load && !mem.is_writable()) {
      error(&op, fmt::format("stores to a read-only buffer ({}); declare it buffer<{}, "
                             "readwrite> or buffer<{}, write>",
                             mem.str(), scalar_name(mem.element()), scalar_name(mem.element())));
      return false;
    }
    return true;
  }

  /// "1, 2 or 4" for a 32-bit element: the lane counts an async.copy of it may have.
  static std::string bytes_to_lanes_text(Scalar s) {
    std::vector<std::string> counts;
    for (unsigned bytes : {4u, 8u, 16u})
      if (bytes * 8 >= scalar_bits(s))
        counts.push_back(std::to_string(bytes * 8 / scalar_bits(s)));
    if (counts.size() == 1)
      return counts[0];
    std::string text;
    for (size_t i = 0; i < counts.size(); ++i)
      text += (i == 0 ? "" : i + 1 == counts.size() ? " or " : ", ") + counts[i];
    return text;
  }

  /// An atomic's value type: the memory's element, or a vector of it (one atomic per lane).
  static bool atomic_type_fits(Type t, Type elem) {
    return t == elem || (t.is_vector() && t.element_type() == elem);
  }

  bool want_index(const Operation &op, unsigned i) {
    Type t = op.operand(i)->type();
    if (t.is_scalar() && is_integer(t.element()))
      return true;
    error(&op,
          fmt::format("operand {} is the index and must be an integer scalar, not {}", i, t.str()));
    return false;
  }

  void verify_types(const Operation &op, RegionRole role, const LoopContext *loop) {
    auto operand = [&](unsigned i) { return op.operand(i)->type(); };
    auto result = [&](unsigned i = 0) { return op.result(i)->type(); };
    switch (op.info().signature) {
    case Signature::Constant: {
      auto value = op.attributes().get_int("value");
      if (!value)
        return error(&op, "needs an integer attribute 'value' (the bit pattern)");
      if (!result().is_scalar())
        return error(&op, fmt::format("makes scalars, not {}", result().str()));
      Scalar s = result().element();
      unsigned width = is_storage_float(s) ? float_format(s).bits() : scalar_bits(s);
      if (width < 64 && (static_cast<uint64_t>(*value) >> width) != 0)
        return error(
            &op, fmt::format("value has bits set beyond the {} bits of {}", width, result().str()));
      return;
    }
    case Signature::Unary:
    case Signature::Binary:
    case Signature::Ternary:
    case Signature::SubgroupUnary: {
      Type t = operand(0);
      if (!want_value(op, 0, t))
        return;
      for (unsigned i = 1; i < op.num_operands(); ++i)
        if (operand(i) != t)
          return error(&op,
                       fmt::format("operand types differ: {} and {}", t.str(), operand(i).str()));
      if (result() != t)
        return error(&op, fmt::format("result type {} differs from operand type {}", result().str(),
                                      t.str()));
      check_class(op, t);
      return;
    }
    case Signature::Compare: {
      Type t = operand(0);
      if (!want_value(op, 0, t))
        return;
      if (operand(1) != t)
        return error(&op,
                     fmt::format("operand types differ: {} and {}", t.str(), operand(1).str()));
      if (!check_class(op, t))
        return;
      if (is_storage_float(t.element()))
        return error(&op, fmt::format("cannot compare {}: cast storage floats to f32 first (or "
                                      "bitcast them to u8 to compare encodings)",
                                      t.str()));
      Type expected = t.with_element(Scalar::Bool);
      if (result() != expected)
        return error(&op, fmt::format("result must be {}, not {}", expected.str(), result().str()));
      return;
    }
    case Signature::Classify: {
      Type t = operand(0);
      if (!want_value(op, 0, t) || !check_class(op, t))
        return;
      Type expected = t.with_element(Scalar::Bool);
      if (result() != expected)
        return error(&op, fmt::format("result must be {}, not {}", expected.str(), result().str()));
      return;
    }
    case Signature::Select: {
      Type c = operand(0), t = operand(1);
      if (!want_value(op, 1, t))
        return;
      if (!c.is_bool() || (c.is_vector() && c.lanes() != t.lanes()))
        return error(&op, fmt::format("condition must be bool or a bool vector with the lanes of "
                                      "{}, not {}",
                                      t.str(), c.str()));
      if (operand(2) != t || result() != t)
        return error(&op, fmt::format("both choices and the result must have one type; found {}, "
                                      "{} -> {}",
                                      t.str(), operand(2).str(), result().str()));
      return;
    }
    case Signature::Cast:
    case Signature::Bitcast: {
      Type from = operand(0), to = result();
      if (!want_value(op, 0, from))
        return;
      if (op.info().signature == Signature::Cast) {
        if (from.lanes() != to.lanes() || from.kind() != to.kind())
          return error(&op, fmt::format("cannot cast {} to {}: the lane counts differ", from.str(),
                                        to.str()));
        auto floatish = [](Scalar s) { return is_float(s) || is_storage_float(s); };
        if ((is_storage_float(from.element()) || is_storage_float(to.element())) &&
            !(floatish(from.element()) && floatish(to.element())))
          return error(&op, fmt::format("cannot cast {} to {}: storage floats convert only to and "
                                        "from float types; cast through f32",
                                        from.str(), to.str()));
        return;
      }
      if (from.element() == Scalar::Bool || to.element() == Scalar::Bool)
        return error(&op, "bool has no bit pattern to reinterpret; use select or cast");
      if (scalar_bits(from.element()) * from.lanes() != scalar_bits(to.element()) * to.lanes())
        return error(
            &op, fmt::format("cannot bitcast {} to {}: the sizes differ", from.str(), to.str()));
      return;
    }
    case Signature::Splat:
      if (!operand(0).is_scalar() || !result().is_vector() ||
          result().element() != operand(0).element())
        return error(&op, fmt::format("makes a vector of its scalar operand; {} -> {} does not fit",
                                      operand(0).str(), result().str()));
      return;
    case Signature::VecBuild: {
      if (!result().is_vector())
        return error(&op, fmt::format("result must be a vector, not {}", result().str()));
      if (op.num_operands() != result().lanes())
        return error(&op, fmt::format("{} needs {} operands, has {}", result().str(),
                                      result().lanes(), op.num_operands()));
      for (unsigned i = 0; i < op.num_operands(); ++i)
        if (operand(i) != result().element_type())
          return error(&op, fmt::format("operand {} is {}, expected {}", i, operand(i).str(),
                                        result().element_type().str()));
      return;
    }
    case Signature::VecExtract:
    case Signature::VecInsert: {
      Type v = operand(0);
      if (!v.is_vector())
        return error(&op, fmt::format("operand 0 must be a vector, not {}", v.str()));
      auto lane = op.attributes().get_int("lane");
      if (!lane)
        return error(&op, "needs an integer attribute 'lane'");
      if (*lane < 0 || static_cast<uint64_t>(*lane) >= v.lanes())
        return error(&op, fmt::format("lane {} is out of range for {}", *lane, v.str()));
      if (op.info().signature == Signature::VecExtract) {
        if (result() != v.element_type())
          return error(&op, fmt::format("result must be {}, not {}", v.element_type().str(),
                                        result().str()));
      } else if (operand(1) != v.element_type() || result() != v) {
        return error(&op, fmt::format("inserts a {} into {} giving {}; expected ({}, {}) -> {}",
                                      operand(1).str(), v.str(), result().str(), v.str(),
                                      v.element_type().str(), v.str()));
      }
      return;
    }
    case Signature::Load:
    case Signature::Store: {
      bool is_load = op.info().signature == Signature::Load;
      Type mem = operand(0);
      if (!mem.is_memory())
        return error(&op, fmt::format("operand 0 must be a buffer, shared or local array, not {}",
                                      mem.str()));
      if (!want_index(op, 1))
        return;
      Type value = is_load ? result() : operand(2);
      if (!value.is_value() || value.element() != mem.element())
        return error(&op, fmt::format("{} {} from memory of {}; expected {} or a vector of it",
                                      is_load ? "loads" : "stores", value.str(),
                                      scalar_name(mem.element()), scalar_name(mem.element())));
      check_access(op, mem, is_load);
      return;
    }
    case Signature::BufferSize:
      if (operand(0).kind() != TypeKind::Buffer)
        return error(&op, fmt::format("operand must be a buffer, not {}", operand(0).str()));
      if (!result().is_scalar() || !is_integer(result().element()) ||
          scalar_bits(result().element()) < 32)
        return error(&op,
                     fmt::format("result must be i32, u32, i64 or u64, not {}", result().str()));
      return;
    case Signature::SharedAlloc:
    case Signature::LocalAlloc: {
      TypeKind want =
          op.info().signature == Signature::SharedAlloc ? TypeKind::Shared : TypeKind::Local;
      if (result().kind() != want)
        return error(&op,
                     fmt::format("result must be a {} array type, not {}",
                                 want == TypeKind::Shared ? "shared" : "local", result().str()));
      if (role != RegionRole::KernelBody)
        return error(&op, "must be at the top level of the kernel body (memory is allocated "
                          "once per workgroup or invocation, not per branch or iteration)");
      if (want == TypeKind::Local) {
        // Every invocation holds its own copy: a kernel over the limit would fail at launch on
        // every device (out of memory, or no code at all), so it is refused here.
        const uint64_t before = local_bytes_;
        local_bytes_ += result().array_bytes();
        if (before <= kMaxLocalBytes && local_bytes_ > kMaxLocalBytes)
          return error(&op, fmt::format("the kernel's local arrays reach {} bytes per invocation "
                                        "with this one; the limit is {} (512 KiB, CUDA's local "
                                        "memory): keep large arrays in shared memory or a buffer",
                                        local_bytes_, kMaxLocalBytes));
      }
      return;
    }
    case Signature::Builtin3:
      if (result() != Type::vector(Scalar::U32, 3))
        return error(&op, fmt::format("result must be u32x3, not {}", result().str()));
      return;
    case Signature::Builtin1:
      if (result() != Type::scalar(Scalar::U32))
        return error(&op, fmt::format("result must be u32, not {}", result().str()));
      return;
    case Signature::Sync:
      return;
    case Signature::Print: {
      const AttributeValue *format = op.attributes().find("format");
      if (!format)
        return error(&op, "needs a string attribute 'format' (the text, with '{}' for each "
                          "operand: print %x {format = \"x = {}\\n\"})");
      const std::string *text = std::get_if<std::string>(format);
      if (!text)
        return; // verify_attributes said so
      std::vector<Type> types;
      for (unsigned i = 0; i < op.num_operands(); ++i)
        types.push_back(operand(i));
      std::string why;
      if (!parse_print_format(*text, types, why))
        return error(&op, why);
      return;
    }
    case Signature::AsyncCopy: {
      // async.copy dst, dst_index, src, src_index, inside {lanes = N}: N elements, 4, 8 or 16
      // bytes, from a buffer into a shared array (docs/ir.md §4.14).
      Type dst = operand(0), src = operand(2);
      if (dst.kind() != TypeKind::Shared)
        return error(&op, fmt::format("operand 0 (the destination) must be a shared array, not {}",
                                      dst.str()));
      if (src.kind() != TypeKind::Buffer)
        return error(&op,
                     fmt::format("operand 2 (the source) must be a buffer, not {}", src.str()));
      if (!want_index(op, 1) || !want_index(op, 3))
        return;
      if (src.element() != dst.element())
        return error(&op, fmt::format("copies {} into a shared array of {}; the element types "
                                      "must be the same",
                                      src.str(), dst.str()));
      if (operand(4) != Type::scalar(Scalar::Bool))
        return error(&op, fmt::format("operand 4 (whether to read the source; zeros where not) "
                                      "must be bool, not {}",
                                      operand(4).str()));
      if (!check_access(op, src, true))
        return;
      if (dst.element() == Scalar::Bool)
        return error(&op, "copies bool, whose size in memory is the target's; copy a u8 array");
      auto lanes = op.attributes().get_int("lanes");
      uint64_t bytes = lanes ? static_cast<uint64_t>(*lanes) * scalar_bits(dst.element()) / 8 : 0;
      if (!lanes || *lanes < 1 || (bytes != 4 && bytes != 8 && bytes != 16))
        return error(&op,
                     fmt::format("needs an attribute 'lanes': the elements copied, 4, 8 or "
                                 "16 bytes of {} ({} elements)",
                                 scalar_name(dst.element()), bytes_to_lanes_text(dst.element())));
      return;
    }
    case Signature::AsyncGroup:
      if (auto pending = op.attributes().get_int("pending");
          pending && (*pending < 0 || *pending > 8))
        return error(&op, fmt::format("attribute 'pending' is the number of newest groups left "
                                      "in flight, 0 to 8, not {}",
                                      *pending));
      return;
    case Signature::AtomicLoad:
    case Signature::AtomicStore: {
      Type mem = operand(0);
      bool load = op.info().signature == Signature::AtomicLoad;
      bool buffer =
          mem.kind() == TypeKind::Buffer && (mem.access() == Access::ReadWrite ||
                                             mem.access() == (load ? Access::Read : Access::Write));
      if (!buffer && mem.kind() != TypeKind::Shared)
        return error(&op, fmt::format("needs a {} buffer or a shared array, not {}",
                                      load ? "readable" : "writable", mem.str()));
      if (!want_index(op, 1))
        return;
      Type elem = mem.element_type();
      Type t = load ? result() : operand(2);
      if (!atomic_type_fits(t, elem))
        return error(&op,
                     fmt::format("the {} is {}, expected the element type {} or a vector of it",
                                 load ? "result" : "value", t.str(), elem.str()));
      check_class(op, elem);
      return;
    }
    case Signature::AtomicRmw:
    case Signature::AtomicCmpXchg: {
      Type mem = operand(0);
      bool buffer_rw = mem.kind() == TypeKind::Buffer && mem.access() == Access::ReadWrite;
      if (!buffer_rw && mem.kind() != TypeKind::Shared)
        return error(&op,
                     fmt::format("needs a readwrite buffer or a shared array, not {}", mem.str()));
      if (!want_index(op, 1))
        return;
      Type elem = mem.element_type();
      bool cmpxchg = op.info().signature == Signature::AtomicCmpXchg;
      if (cmpxchg ? result() != elem : !atomic_type_fits(result(), elem))
        return error(&op, fmt::format("result must be the element type {}{}, not {}", elem.str(),
                                      cmpxchg ? "" : " or a vector of it", result().str()));
      for (unsigned i = 2; i < op.num_operands(); ++i)
        if (operand(i) != result())
          return error(&op, fmt::format("operand {} is {}, expected {}", i, operand(i).str(),
                                        result() == elem ? "the element type " + elem.str()
                                                         : result().str() + " (the result type)"));
      check_class(op, elem);
      return;
    }
    case Signature::SubgroupShuffle:
      if (!want_value(op, 0, operand(0)))
        return;
      if (operand(1) != Type::scalar(Scalar::U32))
        return error(&op, fmt::format("operand 1 (lane, mask or delta) must be u32, not {}",
                                      operand(1).str()));
      if (result() != operand(0))
        return error(&op, fmt::format("result type {} differs from operand type {}", result().str(),
                                      operand(0).str()));
      return;
    case Signature::SubgroupBallot:
    case Signature::SubgroupVote: {
      if (operand(0) != Type::scalar(Scalar::Bool))
        return error(&op, fmt::format("operand must be bool, not {}", operand(0).str()));
      Type want = op.info().signature == Signature::SubgroupBallot ? Type::vector(Scalar::U32, 4)
                                                                   : Type::scalar(Scalar::Bool);
      if (result() != want)
        return error(&op, fmt::format("result must be {}, not {}", want.str(), result().str()));
      return;
    }
    case Signature::SubgroupElect:
      if (result() != Type::scalar(Scalar::Bool))
        return error(&op, fmt::format("result must be bool, not {}", result().str()));
      return;
    case Signature::MatrixFill:
      if (!result().is_matrix() || operand(0) != result().element_type())
        return error(&op, fmt::format("fills a matrix with its scalar operand; {} -> {} does not "
                                      "fit",
                                      operand(0).str(), result().str()));
      return;
    case Signature::MatrixLoad:
    case Signature::MatrixStore: {
      bool is_load = op.info().signature == Signature::MatrixLoad;
      Type mem = operand(0);
      if (mem.kind() != TypeKind::Buffer && mem.kind() != TypeKind::Shared)
        return error(&op, fmt::format("operand 0 must be a buffer or a shared array (the "
                                      "subgroup shares the matrix, so not a local array), not {}",
                                      mem.str()));
      if (!want_index(op, 1))
        return;
      if (operand(2) != operand(1))
        return error(&op, fmt::format("the stride (operand 2) must have the index's type {}, "
                                      "not {}",
                                      operand(1).str(), operand(2).str()));
      Type m = is_load ? result() : operand(3);
      if (!m.is_matrix() || m.element() != mem.element())
        return error(&op, fmt::format("{} {} from memory of {}; expected a matrix of {}",
                                      is_load ? "loads" : "stores", m.str(),
                                      scalar_name(mem.element()), scalar_name(mem.element())));
      if (!check_access(op, mem, is_load))
        return;
      if (auto col = op.attributes().get_int("col_major"); col && *col != 0 && *col != 1)
        return error(&op, fmt::format("attribute 'col_major' is 0 or 1, not {}", *col));
      return;
    }
    case Signature::MatrixMma: {
      Type a = operand(0), b = operand(1), c = operand(2);
      if (!matrix_shape_index(a, b, c))
        return error(&op, fmt::format("cannot multiply {} by {} into {}: operands are an 'a' "
                                      "(m x k), a 'b' (k x n) and an 'acc' (m x n) of one of "
                                      "the shapes m x n x k {}",
                                      a.str(), b.str(), c.str(), matrix_shapes_text()));
      if (result() != c)
        return error(&op, fmt::format("result must be the accumulator type {}, not {}", c.str(),
                                      result().str()));
      return;
    }
    case Signature::MatrixConvert: {
      Type from = operand(0), to = result();
      if (!from.is_matrix() || !to.is_matrix() || from.rows() != to.rows() ||
          from.cols() != to.cols())
        return error(&op, fmt::format("converts a matrix to one of the same rows and columns; "
                                      "{} -> {} does not fit",
                                      from.str(), to.str()));
      if (from.role() != to.role() && from.role() != MatrixRole::Accumulator)
        return error(&op, fmt::format("cannot turn {} into {}: only an accumulator changes its "
                                      "role (into an 'a' or 'b' operand)",
                                      from.str(), to.str()));
      if (is_integer(from.element()) || is_integer(to.element()))
        return error(&op, fmt::format("cannot convert {} to {}: integer fragments are only "
                                      "loaded, multiplied and stored (requantize the elements "
                                      "in memory)",
                                      from.str(), to.str()));
      return;
    }
    case Signature::If:
      if (operand(0) != Type::scalar(Scalar::Bool))
        return error(&op, fmt::format("condition must be bool, not {}", operand(0).str()));
      return;
    case Signature::For: {
      if (op.num_operands() < 3)
        return error(&op, "takes lower bound, upper bound and step, then the initial values");
      Type iv = operand(0);
      if (!iv.is_scalar() || !is_integer(iv.element()))
        return error(&op, fmt::format("bounds must be integer scalars, not {}", iv.str()));
      if (operand(1) != iv || operand(2) != iv)
        return error(&op, fmt::format("bounds and step must have one type; found {}, {}, {}",
                                      iv.str(), operand(1).str(), operand(2).str()));
      std::vector<Type> carried = result_types(op);
      if (!same_types(op, "gives initial", op.operands().subspan(3), carried))
        return;
      std::vector<Type> args = {iv};
      args.insert(args.end(), carried.begin(), carried.end());
      std::vector<Type> actual = argument_types(op.region(0));
      if (actual.size() != args.size())
        return error(&op, fmt::format("the body has {} argument(s); it needs {}: the induction "
                                      "variable, then one per result",
                                      actual.size(), args.size()));
      for (size_t i = 0; i < args.size(); ++i)
        if (actual[i] != args[i])
          return error(&op, fmt::format("body argument {} ({}) has type {}, expected {}", i,
                                        i == 0 ? "the induction variable" : "a carried value",
                                        actual[i].str(), args[i].str()));
      if (auto unroll = op.attributes().get_int("unroll"); unroll && *unroll < 1)
        return error(&op, fmt::format("unroll factor must be at least 1, not {}", *unroll));
      return;
    }
    case Signature::While: {
      std::vector<Type> carried = argument_types(op.region(0));
      if (!same_types(op, "gives initial", op.operands(), carried))
        return;
      if (argument_types(op.region(1)) != result_types(op))
        return error(&op, "the 'do' region's arguments must match the results in number and type");
      return;
    }
    case Signature::Yield:
    case Signature::Condition: {
      const Operation *parent = op.parent_op();
      bool is_condition = op.info().signature == Signature::Condition;
      if (role == RegionRole::KernelBody || !parent)
        return error(&op, "cannot end a kernel body; use 'return'");
      if (is_condition != (role == RegionRole::WhileBefore))
        return error(&op, is_condition ? "ends only the first region of a 'while'"
                                       : "cannot end the first region of a 'while'; use "
                                         "'condition'");
      if (is_condition) {
        if (op.num_operands() == 0 || operand(0) != Type::scalar(Scalar::Bool))
          return error(&op, "takes a bool condition first, then the values for the 'do' region");
        same_types(op, "forwards", op.operands().subspan(1), result_types(*parent));
        return;
      }
      if (role == RegionRole::IfBranch || role == RegionRole::ForBody)
        same_types(op, "yields", op.operands(), result_types(*parent));
      else // WhileAfter: values for the next evaluation of the condition
        same_types(op, "yields", op.operands(), argument_types(parent->region(0)));
      return;
    }
    case Signature::Break:
    case Signature::Continue: {
      bool is_break = op.info().signature == Signature::Break;
      if (!loop || role == RegionRole::WhileBefore)
        return error(&op, "must be inside the body of a 'for' or the 'do' region of a 'while'");
      same_types(op, is_break ? "breaks with" : "continues with", op.operands(),
                 is_break ? loop->break_types : loop->continue_types);
      return;
    }
    case Signature::Return:
      if (role != RegionRole::KernelBody)
        return error(&op, "ends only the kernel body (kernels have no early return; branch "
                          "around the rest instead)");
      return;
    }
  }

  void verify_nested(const Operation &op, const LoopContext *loop, unsigned depth) {
    if (depth >= kMaxRegionDepth)
      return error(&op, fmt::format("regions nested deeper than {} levels", kMaxRegionDepth));
    switch (op.opcode()) {
    case Opcode::If:
      for (unsigned r = 0; r < 2; ++r) {
        if (op.region(r).num_arguments())
          return error(&op, "the branches of an 'if' take no arguments");
        verify_region(op.region(r), RegionRole::IfBranch, loop, depth + 1);
      }
      return;
    case Opcode::For: {
      LoopContext inner{&op, result_types(op), result_types(op)};
      verify_region(op.region(0), RegionRole::ForBody, &inner, depth + 1);
      return;
    }
    case Opcode::While: {
      LoopContext inner{&op, result_types(op), argument_types(op.region(0))};
      // The condition region cannot leave the loop: no break or continue there, even in an if.
      verify_region(op.region(0), RegionRole::WhileBefore, nullptr, depth + 1);
      verify_region(op.region(1), RegionRole::WhileAfter, &inner, depth + 1);
      return;
    }
    default:
      return;
    }
  }

  //===- Barrier placement -------------------------------------------------------------------===//

  void check_barriers(const Kernel &k) {
    bool has_barrier = false, has_subgroup_barrier = false;
    const_cast<Kernel &>(k).walk([&](Operation *op) {
      has_barrier |= op->opcode() == Opcode::Barrier;
      has_subgroup_barrier |= op->opcode() == Opcode::SubgroupBarrier;
    });
    if (!has_barrier && !has_subgroup_barrier)
      return;
    UniformityAnalysis uniformity(k);
    for (const Operation *barrier : uniformity.divergent_barriers())
      error(barrier, "is reached under control flow that depends on the invocation (a varying "
                     "branch condition, loop bound or loop exit); every invocation of the "
                     "workgroup must reach each barrier");
    if (has_subgroup_barrier)
      for (const Operation *barrier : uniformity.divergent_subgroup_barriers())
        error(barrier, "is reached under control flow that may differ within a subgroup (a "
                       "branch condition, loop bound or loop exit computed from the invocation's "
                       "own index); every invocation of the subgroup must reach each "
                       "subgroup.barrier");
  }

  const Module &module_;
  const SourceMap *map_;
  const Kernel *kernel_ = nullptr;
  std::vector<Diagnostic> diags_;
  detail::ValueFlags visible_;
  /// The bytes of the local arrays met so far in the kernel being verified.
  uint64_t local_bytes_ = 0;
};

} // namespace

std::vector<Diagnostic> verify(const Module &module, const SourceMap *source_map) {
  return Verifier(module, source_map).run();
}

std::vector<Diagnostic> verify(const Kernel &kernel, const SourceMap *source_map) {
  return Verifier(*kernel.module(), source_map).run(kernel);
}

} // namespace cubecc::ir
