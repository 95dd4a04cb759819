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
  case TypeKind::Matrix:
    return fmt::format("matrix<subgroup, {}, {}, {}, {}>", matrix_role_name(role_),
                       scalar_name(element_), rows(), cols());
  }
  return "?";
}

std::string_view matrix_role_name(MatrixRole r) {
  switch (r) {
  case MatrixRole::A:
    return "a";
  case MatrixRole::B:
    return "b";
  case MatrixRole::Accumulator:
    return "acc";
  }
  return "?";
}

std::string MatrixShape::str() const {
  if (a == Scalar::F32 && b == Scalar::F32)
    return fmt::format("{}x{}x{} tf32->{}", m, n, k, scalar_name(accumulator));
  if (a != b)
    return fmt::format("{}x{}x{} {}*{}->{}", m, n, k, scalar_name(a), scalar_name(b),
                       scalar_name(accumulator));
  return fmt::format("{}x{}x{} {}->{}", m, n, k, scalar_name(a), scalar_name(accumulator));
}

std::string matrix_shapes_text(uint32_t mask) {
  std::string out;
  for (size_t i = 0; i < std::size(kMatrixShapes); ++i)
    if (mask >> i & 1)
      out += (out.empty() ? "" : ", ") + kMatrixShapes[i].str();
  return out;
}

std::optional<size_t> matrix_shape_index(Type a, Type b, Type c) {
  if (!a.is_matrix() || !b.is_matrix() || !c.is_matrix() || a.role() != MatrixRole::A ||
      b.role() != MatrixRole::B || c.role() != MatrixRole::Accumulator || a.cols() != b.rows() ||
      a.rows() != c.rows() || b.cols() != c.cols())
    return std::nullopt;
  for (size_t i = 0; i < std::size(kMatrixShapes); ++i) {
    const MatrixShape &s = kMatrixShapes[i];
    if (s.m == c.rows() && s.n == c.cols() && s.k == a.cols() && s.a == a.element() &&
        s.b == b.element() && s.accumulator == c.element())
      return i;
  }
  return std::nullopt;
}

std::string matrix_type_problem(Type t) {
  auto dim_ok = [](uint32_t d) { return d == 8 || d == 16 || d == 32; };
  if (!dim_ok(t.rows()) || !dim_ok(t.cols()))
    return "matrix rows and columns are 8, 16 or 32";
  Scalar e = t.element();
  if (t.role() == MatrixRole::Accumulator) {
    if (e != Scalar::F32 && e != Scalar::F16 && e != Scalar::I32)
      return "accumulators hold f32, f16 or i32";
  } else if (e != Scalar::F16 && e != Scalar::BF16 && e != Scalar::E4M3 && e != Scalar::E5M2 &&
             e != Scalar::I8 && e != Scalar::U8 && e != Scalar::F32) {
    return "matrix operands a and b hold f16, bf16, e4m3, e5m2, i8, u8 or f32 (multiplied as "
           "tf32)";
  }
  return {};
}

} // namespace cubecc::ir
