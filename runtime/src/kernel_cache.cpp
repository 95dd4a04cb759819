//===- kernel_cache.cpp - Compiled kernels by structural hash and by caller key ---------------===//
#include "kernel_cache.h"

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

} // namespace cubecc::runtime
