//===- kernel_cache.h - Compiled kernels by structural hash and by caller key -----------------===//
//
// The in-process cache of one Runtime (compiled kernels belong to its device, so the device is
// part of every key). Two indexes point at the same entries: the structural hash of the kernel as
// the caller gave it (before optimization, with the pipeline level), so an equal kernel from any
// source hits; and a caller's stable key (a DSL kernel's name and configuration), so a warm
// launch needs no trace at all.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/structural_hash.h"
#include "cubecc/runtime/runtime.h"

#include <map>
#include <memory>
#include <string>

namespace cubecc::runtime {

/// One parameter as the launch checks see it.
struct ParameterInfo {
  std::string name;
  ir::Type type;
  bool read = true; ///< whether the kernel reads it (true when unknown)
};

struct LoadedKernel {
  std::string name;
  ir::Hash128 hash; ///< of the kernel before optimization
  std::vector<ParameterInfo> params;
  std::vector<KernelParameter> parameters; ///< `params` grouped (group_parameters)
  std::unique_ptr<CompiledKernel> compiled;
};

/// `params` grouped into the DSL function's parameters by their names (KernelParameter).
std::vector<KernelParameter> group_parameters(std::span<const ParameterInfo> params);

class KernelCache {
public:
  /// `device_key` names the device in every key ("vulkan:llvmpipe (...)").
  explicit KernelCache(std::string device_key) : device_key_(std::move(device_key)) {}

  std::shared_ptr<const LoadedKernel> find(const ir::Hash128 &hash) const;
  std::shared_ptr<const LoadedKernel> find_keyed(std::string_view key) const;
  void insert(std::shared_ptr<const LoadedKernel> kernel);
  void insert_keyed(std::string_view key, std::shared_ptr<const LoadedKernel> kernel);

  KernelCacheStatistics statistics;

private:
  std::string hash_key(const ir::Hash128 &hash) const;

  std::string device_key_;
  std::map<std::string, std::shared_ptr<const LoadedKernel>, std::less<>> by_hash_;
  std::map<std::string, std::shared_ptr<const LoadedKernel>, std::less<>> by_key_;
};

} // namespace cubecc::runtime
