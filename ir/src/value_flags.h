//===- value_flags.h - A flag per value over dense ids (internal to ir/) ----------------------===//
#pragma once

#include "cubecc/ir/ir.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace cubecc::ir::detail {

/// A set of values as flags over dense ids: the verifier asks "is this value visible / varying"
/// once per operand, so a hash set's node allocations would dominate its cost. Ids come from an
/// insert-only open-addressing table keyed by the value's address (only membership is asked,
/// never iteration order, so addresses do not leak into any result).
class ValueFlags {
public:
  bool test(const Value *v) const {
    uint32_t id = find(v);
    return id != kNone && flags_[id];
  }
  /// Sets the flag; returns true if it was clear.
  bool set(const Value *v) {
    uint32_t id = intern(v);
    bool was = flags_[id];
    flags_[id] = 1;
    return !was;
  }
  void reset(const Value *v) {
    uint32_t id = find(v);
    if (id != kNone)
      flags_[id] = 0;
  }
  void clear() { std::fill(flags_.begin(), flags_.end(), 0); }

private:
  static constexpr uint32_t kNone = ~0u;
  size_t slot(const Value *v) const {
    uint64_t h = (reinterpret_cast<uintptr_t>(v) >> 3) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> 32) & (keys_.size() - 1);
  }
  uint32_t find(const Value *v) const {
    if (keys_.empty())
      return kNone;
    for (size_t i = slot(v);; i = (i + 1) & (keys_.size() - 1)) {
      if (keys_[i] == v)
        return ids_[i];
      if (!keys_[i])
        return kNone;
    }
  }
  uint32_t intern(const Value *v) {
    if ((flags_.size() + 1) * 2 > keys_.size())
      grow();
    size_t i = slot(v);
    while (keys_[i] && keys_[i] != v)
      i = (i + 1) & (keys_.size() - 1);
    if (!keys_[i]) {
      keys_[i] = v;
      ids_[i] = static_cast<uint32_t>(flags_.size());
      flags_.push_back(0);
    }
    return ids_[i];
  }
  void grow() {
    std::vector<const Value *> keys = std::move(keys_);
    std::vector<uint32_t> ids = std::move(ids_);
    keys_.assign(std::max<size_t>(64, keys.size() * 2), nullptr);
    ids_.assign(keys_.size(), 0);
    for (size_t k = 0; k < keys.size(); ++k) {
      if (!keys[k])
        continue;
      size_t i = slot(keys[k]);
      while (keys_[i])
        i = (i + 1) & (keys_.size() - 1);
      keys_[i] = keys[k];
      ids_[i] = ids[k];
    }
  }
  std::vector<const Value *> keys_;
  std::vector<uint32_t> ids_;
  std::vector<uint8_t> flags_;
};

} // namespace cubecc::ir::detail
