//===- tunable.cpp - Tunables and the power-of-two bucket key ---------------------------------===//
#include "cubecc/autotune/tunable.h"

#include <fmt/format.h>

#include <bit>

namespace cubecc::autotune {

uint64_t round_up_to_power_of_two(uint64_t value) {
  if (value == 0 || value > (uint64_t{1} << 63))
    return value;
  return std::bit_ceil(value);
}

std::string power_of_two_bucket(std::span<const std::string> dimensions, const Problem &problem) {
  if (problem.shape.size() != dimensions.size())
    throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                         fmt::format("a problem of {} extents for {} dimensions",
                                     problem.shape.size(), dimensions.size()));
  std::string out;
  for (size_t d = 0; d < dimensions.size(); ++d)
    out += fmt::format("{}{}={}", d ? "," : "", dimensions[d],
                       round_up_to_power_of_two(problem.shape[d]));
  for (size_t t = 0; t < problem.types.size(); ++t)
    out += fmt::format("{}{}", t ? "," : ";", ir::scalar_name(problem.types[t]));
  return out;
}

Tunable::Tunable(std::string name, std::vector<std::string> dimensions,
                 std::vector<Variant> variants, KeyFunction key)
    : name_(std::move(name)), dimensions_(std::move(dimensions)), variants_(std::move(variants)),
      key_(std::move(key)) {
  if (name_.empty())
    throw runtime::Error(runtime::ErrorKind::InvalidArgument, "a tunable needs a name");
  if (variants_.empty())
    throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                         fmt::format("tunable '{}' has no variants", name_));
  for (size_t i = 0; i < variants_.size(); ++i) {
    if (!variants_[i].load)
      throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                           fmt::format("tunable '{}': variant '{}' has no load function", name_,
                                       variants_[i].configuration));
    for (size_t j = 0; j < i; ++j)
      if (variants_[j].configuration == variants_[i].configuration)
        throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                             fmt::format("tunable '{}': two variants have the configuration '{}'",
                                         name_, variants_[i].configuration));
  }
}

std::string Tunable::bucket(const Problem &problem) const {
  return key_ ? key_(dimensions_, problem) : power_of_two_bucket(dimensions_, problem);
}

bool Tunable::valid(size_t index, const Problem &problem) const {
  const Variant &v = variants_.at(index);
  return !v.valid || v.valid(problem);
}

std::optional<size_t> Tunable::find(std::string_view configuration) const {
  for (size_t i = 0; i < variants_.size(); ++i)
    if (variants_[i].configuration == configuration)
      return i;
  return std::nullopt;
}

} // namespace cubecc::autotune
