//===- kernel_cache.cpp - Compiled kernels by structural hash and by caller key ---------------===//
#include "kernel_cache.h"

#include <fmt/format.h>

namespace cubecc::runtime {

namespace {
/// Part of every hash key: a different pipeline must never return another's binary.
constexpr std::string_view kPipeline = "O2";
} // namespace

std::string KernelCache::hash_key(const ir::Hash128 &hash) const {
  return hash.hex() + "/" + std::string(kPipeline) + "/" + device_key_;
}

std::shared_ptr<const LoadedKernel> KernelCache::find(const ir::Hash128 &hash) const {
  auto it = by_hash_.find(hash_key(hash));
  return it == by_hash_.end() ? nullptr : it->second;
}

std::shared_ptr<const LoadedKernel> KernelCache::find_keyed(std::string_view key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

void KernelCache::insert(std::shared_ptr<const LoadedKernel> kernel) {
  by_hash_[hash_key(kernel->hash)] = std::move(kernel);
}

void KernelCache::insert_keyed(std::string_view key, std::shared_ptr<const LoadedKernel> kernel) {
  by_key_[std::string(key)] = std::move(kernel);
}

std::vector<KernelParameter> group_parameters(std::span<const ParameterInfo> params) {
  std::vector<KernelParameter> grouped;
  auto is_u32 = [&](size_t i, const std::string &name) {
    return i < params.size() && params[i].name == name && params[i].type.is_scalar(ir::Scalar::U32);
  };
  for (size_t i = 0; i < params.size();) {
    const ParameterInfo &p = params[i];
    KernelParameter g;
    g.name = p.name;
    g.type = p.type;
    g.first = static_cast<uint32_t>(i);
    if (p.type.is_value()) {
      grouped.push_back(std::move(g));
      ++i;
      continue;
    }
    // A DSL tensor: its shapes follow the buffer, then as many strides.
    uint32_t rank = 0;
    while (!p.name.empty() && is_u32(i + 1 + rank, p.name + ".shape" + std::to_string(rank)))
      ++rank;
    bool strides = rank > 0;
    for (uint32_t d = 0; d < rank && strides; ++d)
      strides = is_u32(i + 1 + rank + d, p.name + ".stride" + std::to_string(d));
    g.kind = strides ? KernelParameter::Kind::Tensor : KernelParameter::Kind::Array;
    g.rank = strides ? rank : 0;
    if (strides) {
      g.reads_strides = false;
      for (uint32_t d = 0; d < rank; ++d)
        g.reads_strides |= params[i + 1 + rank + d].read;
    }
    i += strides ? 1 + 2 * size_t{rank} : 1;
    grouped.push_back(std::move(g));
  }
  return grouped;
}

std::string KernelParameter::describe() const {
  std::string name_part = name.empty() ? fmt::format("%{}", first) : name;
  switch (kind) {
  case Kind::Tensor:
    return fmt::format("{}: Tensor[{}, {}]", name_part, ir::scalar_name(type.element()), rank);
  case Kind::Array:
    return fmt::format("{}: Array[{}]", name_part, ir::scalar_name(type.element()));
  case Kind::Value:
    break;
  }
  return fmt::format("{}: {}", name_part, type.str());
}

} // namespace cubecc::runtime
