//===- types.cpp - Scalar and type names ------------------------------------------------------===//
#include "cubecc/ir/types.h"

#include <fmt/format.h>

namespace cubecc::ir {
namespace {
struct ScalarFacts {
  std::string_view name;
  unsigned bits;
  ScalarClass cls;
};
constexpr ScalarFacts kScalars[] = {
#define X(id, name, bits, cls) {name, bits, ScalarClass::cls},
    CUBECC_SCALAR_TYPES(X)
#undef X
};
} // namespace

std::string_view scalar_name(Scalar s) {
  return kScalars[static_cast<unsigned>(s)].name;
}
unsigned scalar_bits(Scalar s) {
  return kScalars[static_cast<unsigned>(s)].bits;
}
ScalarClass scalar_class(Scalar s) {
  return kScalars[static_cast<unsigned>(s)].cls;
}

std::optional<Scalar> parse_scalar(std::string_view name) {
  for (unsigned i = 0; i < std::size(kScalars); ++i)
    if (kScalars[i].name == name)
      return static_cast<Scalar>(i);
  return std::nullopt;
}

std::string_view access_name(Access a) {
  switch (a) {
  case Access::Read:
    return "read";
  case Access::Write:
    return "write";
  case Access::ReadWrite:
    return "readwrite";
  }
  return "?";
}

std::string Type::str() const {
  switch (kind_) {
  case TypeKind::Scalar:
    return std::string(scalar_name(element_));
  case TypeKind::Vector:
    return fmt::format("{}x{}", scalar_name(element_), count_);
  case TypeKind::Buffer:
    return fmt::format("buffer<{}, {}>", scalar_name(element_), access_name(access_));
  case TypeKind::Shared:
    return fmt::format("shared<{}, {}>", scalar_name(element_), count_);
  case TypeKind::Local:
    return fmt::format("local<{}, {}>", scalar_name(element_), count_);
  }
  return "?";
}

} // namespace cubecc::ir
