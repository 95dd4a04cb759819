//===- print_format.cpp - The `print` op's format ---------------------------------------------===//
#include "cubecc/ir/print_format.h"

#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/semantics.h"

#include <fmt/format.h>

#include <cinttypes>
#include <cstdio>
#include <stdexcept>

namespace cubecc::ir {

PrintClass print_class(Scalar s) {
  if (is_float(s))
    return PrintClass::Float;
  if (s == Scalar::Bool || !is_signed(s))
    return PrintClass::Unsigned;
  return PrintClass::Signed;
}

std::optional<PrintFormat> parse_print_format(std::string_view format, std::span<const Type> types,
                                              std::string &error) {
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i].kind() != TypeKind::Scalar && types[i].kind() != TypeKind::Vector) {
      error = fmt::format("operand {} is {}; print takes numbers and bools, scalars or vectors", i,
                          types[i].str());
      return std::nullopt;
    } else if (is_storage_float(types[i].element())) {
      error = fmt::format("operand {} is {}, a storage float; cast it to f32 to print it", i,
                          types[i].str());
      return std::nullopt;
    }
  PrintFormat out;
  out.texts.emplace_back();
  size_t operand = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '{' && i + 1 < format.size() && format[i + 1] == '{') {
      out.texts.back() += '{';
      ++i;
    } else if (c == '}' && i + 1 < format.size() && format[i + 1] == '}') {
      out.texts.back() += '}';
      ++i;
    } else if (c == '{' && i + 1 < format.size() && format[i + 1] == '}') {
      if (operand == types.size()) {
        error = fmt::format("the format has more '{{}}' than the {} operand(s) (at byte {})",
                            types.size(), i);
        return std::nullopt;
      }
      const Type t = types[operand];
      const unsigned lanes = t.kind() == TypeKind::Vector ? t.lanes() : 1;
      if (lanes > 1)
        out.texts.back() += '(';
      for (unsigned l = 0; l < lanes; ++l) {
        if (l)
          out.texts.back() += ", ";
        out.args.push_back({static_cast<unsigned>(operand), l, t.element()});
        out.texts.emplace_back();
      }
      if (lanes > 1)
        out.texts.back() += ')';
      ++operand;
      ++i;
    } else if (c == '\0') {
      error = fmt::format("a NUL byte at byte {} of the format: printf would stop there", i);
      return std::nullopt;
    } else if (c == '{' || c == '}') {
      error = fmt::format("a lone '{}' at byte {} of the format: write '{{}}' for a value, '{}{}' "
                          "for the character",
                          c, i, c, c);
      return std::nullopt;
    } else {
      out.texts.back() += c;
    }
  }
  if (operand != types.size()) {
    error = fmt::format("the format has {} '{{}}' for {} operand(s)", operand, types.size());
    return std::nullopt;
  }
  if (out.args.size() > kMaxPrintValues) {
    error = fmt::format("it prints {} values (a vector's lanes count one each); a print takes at "
                        "most {}, as CUDA's printf does: split it",
                        out.args.size(), kMaxPrintValues);
    return std::nullopt;
  }
  return out;
}

std::string PrintFormat::printf_string(bool debug_printf) const {
  std::string out;
  for (size_t i = 0; i < texts.size(); ++i) {
    for (char c : texts[i]) {
      out += c;
      if (c == '%')
        out += '%';
    }
    if (i == args.size())
      break;
    const char *length = !debug_printf ? "ll" : scalar_bits(args[i].type) == 64 ? "l" : "";
    switch (print_class(args[i].type)) {
    case PrintClass::Signed:
      out += fmt::format("%{}d", length);
      break;
    case PrintClass::Unsigned:
      out += fmt::format("%{}u", length);
      break;
    case PrintClass::Float:
      out += "%g";
      break;
    }
  }
  return out;
}

PrintFormat print_format_of(const Operation &op) {
  const AttributeValue *format = op.attributes().find("format");
  const std::string *text = format ? std::get_if<std::string>(format) : nullptr;
  std::vector<Type> types;
  for (const Value *v : op.operands())
    types.push_back(v->type());
  std::string error;
  std::optional<PrintFormat> parsed;
  if (text)
    parsed = parse_print_format(*text, types, error);
  if (!parsed)
    throw std::logic_error("print_format_of: an unverified print op: " +
                           (text ? error : std::string("no string attribute 'format'")));
  return std::move(*parsed);
}

std::string format_print_value(Scalar s, uint64_t bits) {
  char buffer[64];
  switch (print_class(s)) {
  case PrintClass::Signed:
    std::snprintf(buffer, sizeof buffer, "%lld",
                  static_cast<long long>(sign_extend(bits, scalar_bits(s))));
    break;
  case PrintClass::Unsigned:
    std::snprintf(buffer, sizeof buffer, "%llu",
                  static_cast<unsigned long long>(bits & width_mask(scalar_bits(s))));
    break;
  case PrintClass::Float:
    std::snprintf(buffer, sizeof buffer, "%g", to_double(s, bits));
    break;
  }
  return buffer;
}

} // namespace cubecc::ir
