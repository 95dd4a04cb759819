//===- printer.cpp - Module to text -----------------------------------------------------------===//
#include "cubecc/ir/printer.h"

#include "cubecc/ir/float16.h"
#include "cubecc/ir/semantics.h"
#include "float_literal.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace cubecc::ir {

namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'))
      return false;
  return true;
}

/// A float constant: NaN as its bit pattern (payloads survive), infinities by name, everything
/// else as the shortest decimal that reads back to the same bits.
std::string format_float(Scalar s, uint64_t bits, double value, int hex_digits) {
  if (std::isnan(value))
    return fmt::format("0x{:0{}x}", bits, hex_digits);
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  return detail::format_shortest_float(bits, s);
}

class Printer {
public:
  Printer(const Module &module, PrintOptions options) : module_(module), options_(options) {}

  std::string module_text() {
    out_ += fmt::format("module {} {{\n", format_symbol(module_.name()));
    for (const auto &kernel : module_.kernels())
      kernel_text(*kernel);
    out_ += "}\n";
    return std::move(out_);
  }

  std::string kernel_only(const Kernel &kernel) {
    kernel_text(kernel);
    return std::move(out_);
  }

private:
  void kernel_text(const Kernel &kernel) {
    names_.clear();
    used_names_.clear();
    scopes_.assign(1, {});
    next_number_ = 0;
    out_ += fmt::format("  kernel {}(", format_symbol(kernel.name()));
    for (unsigned i = 0; i < kernel.num_parameters(); ++i) {
      Value *p = kernel.parameter(i);
      out_ += fmt::format("{}{}: {}", i ? ", " : "", define(p), p->type().str());
    }
    const auto &wg = kernel.workgroup_size();
    out_ += fmt::format(") workgroup({}, {}, {})", wg[0], wg[1], wg[2]);
    if (!kernel.attributes().empty())
      out_ += " attributes " + attributes_text(kernel.attributes());
    out_ += " {\n";
    region_ops(kernel.body(), 2);
    out_ += "  }";
    location(kernel.location());
    out_ += "\n";
  }

  void region_ops(const Region &region, int indent) {
    for (Operation *op : region)
      operation(*op, indent);
  }

  void operation(const Operation &op, int indent) {
    out_.append(static_cast<size_t>(indent) * 2, ' ');
    for (unsigned i = 0; i < op.num_results(); ++i)
      out_ += (i ? ", " : "") + define(op.result(i));
    if (op.num_results())
      out_ += " = ";
    out_ += op.name();
    if (op.opcode() == Opcode::Const) {
      out_ += " ";
      out_ += format_constant(op.result()->type(), op.attributes().get_int("value").value_or(0));
    } else {
      for (unsigned i = 0; i < op.num_operands(); ++i)
        out_ += (i ? ", " : " ") + use(op.operand(i));
      if (!op.attributes().empty())
        out_ += " " + attributes_text(op.attributes());
    }
    for (unsigned i = 0; i < op.num_results(); ++i)
      out_ += (i ? ", " : " : ") + op.result(i)->type().str();
    for (unsigned r = 0; r < op.num_regions(); ++r) {
      const Region &region = op.region(r);
      if (r == 1 && op.opcode() == Opcode::If) {
        // Only an if without results may leave its else out: one with results must yield them,
        // and the parser refuses the short form for it (the module may not verify yet).
        if (op.num_results() == 0 && is_empty_else(region))
          continue;
        out_ += " else";
      }
      if (r == 1 && op.opcode() == Opcode::While)
        out_ += " do";
      scopes_.emplace_back();
      if (region.num_arguments()) {
        out_ += " (";
        for (unsigned i = 0; i < region.num_arguments(); ++i) {
          Value *a = region.argument(i);
          out_ += fmt::format("{}{}: {}", i ? ", " : "", define(a), a->type().str());
        }
        out_ += ")";
      }
      out_ += " {\n";
      region_ops(region, indent + 1);
      out_.append(static_cast<size_t>(indent) * 2, ' ');
      out_ += "}";
      for (const std::string &name : scopes_.back())
        used_names_.erase(name);
      scopes_.pop_back();
    }
    location(op.location());
    out_ += "\n";
  }

  /// An else region holding only a plain `yield` is left out of the text; the parser restores it.
  static bool is_empty_else(const Region &region) {
    Operation *only = region.front();
    return region.size() == 1 && region.num_arguments() == 0 && only->opcode() == Opcode::Yield &&
           only->num_operands() == 0 && !only->location().known();
  }

  void location(Location loc) {
    if (!options_.locations || !loc.known())
      return;
    out_ +=
        fmt::format(" loc({}:{}:{})", quote_string(module_.file_name(loc.file)), loc.line, loc.col);
  }

  std::string define(const Value *v) {
    std::string name;
    if (v->name().empty()) {
      name = std::to_string(next_number_++);
    } else {
      std::string base = printable_name(v->name());
      name = base;
      for (unsigned n = 1; used_names_.count(name); ++n)
        name = fmt::format("{}_{}", base, n);
      used_names_.insert(name);
      scopes_.back().push_back(name);
    }
    names_[v] = name;
    return "%" + name;
  }

  /// A name hint as the text form can hold it: letters, digits, '_' and '.', starting with a
  /// letter or '_' (names from the API may hold anything; numbered names are the printer's own).
  static std::string printable_name(const std::string &hint) {
    std::string out;
    for (char c : hint)
      out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' ? c : '_';
    if (!std::isalpha(static_cast<unsigned char>(out[0])) && out[0] != '_')
      out.insert(0, "v");
    return out;
  }

  std::string use(const Value *v) {
    auto it = names_.find(v);
    // A value printed before its definition is malformed IR (the verifier says so); print
    // something recognisable instead of failing.
    return it == names_.end() ? "%<undefined>" : "%" + it->second;
  }

  static std::string attributes_text(const AttributeList &attrs) {
    std::string s = "{";
    bool first = true;
    for (const NamedAttribute &a : attrs.entries()) {
      s += first ? "" : ", ";
      first = false;
      s += a.name + " = ";
      if (const auto *i = std::get_if<int64_t>(&a.value))
        s += std::to_string(*i);
      else
        s += quote_string(std::get<std::string>(a.value));
    }
    return s + "}";
  }

  const Module &module_;
  PrintOptions options_;
  std::string out_;
  std::unordered_map<const Value *, std::string> names_;
  /// Names visible at the current point; a name leaves when its region ends, so sibling regions
  /// may reuse it (the parser scopes names the same way).
  std::unordered_set<std::string> used_names_;
  std::vector<std::vector<std::string>> scopes_;
  unsigned next_number_ = 0;
};

} // namespace

std::string format_constant(Type t, int64_t bits) {
  uint64_t u = static_cast<uint64_t>(bits);
  Scalar s = t.element();
  unsigned width = scalar_bits(s);
  switch (scalar_class(s)) {
  case ScalarClass::Bool:
    return (u & 1) ? "true" : "false";
  case ScalarClass::Unsigned:
    return std::to_string(width == 64 ? u : u & ((uint64_t{1} << width) - 1));
  case ScalarClass::Signed: {
    // Sign-extend from the type's width.
    unsigned shift = 64 - width;
    return std::to_string(static_cast<int64_t>(u << shift) >> shift);
  }
  case ScalarClass::Float:
  case ScalarClass::StorageFloat: {
    uint64_t bits = u & width_mask(width);
    return format_float(s, bits, to_double(s, bits), static_cast<int>(width / 4));
  }
  }
  return "?";
}

std::string quote_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", static_cast<char>(c));
    else if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\{:02X}", c);
  }
  return out + "\"";
}

std::string format_symbol(std::string_view name) {
  return is_identifier(name) ? "@" + std::string(name) : "@" + quote_string(name);
}

std::string to_string(const Module &module, PrintOptions options) {
  return Printer(module, options).module_text();
}

std::string to_string(const Kernel &kernel, PrintOptions options) {
  return Printer(*kernel.module(), options).kernel_only(kernel);
}

} // namespace cubecc::ir
