//===- little_endian.h - Fixed fields of the bundle files (private to environments/src) -------===//
#pragma once

#include <cstdint>
#include <cstring>

namespace cubecc::environments::detail {

/// A little-endian field at `p` (the formats are little-endian, like every supported host).
template <class T> T read_le(const uint8_t *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

/// The header's file-size field: the bundle's size, without a signature trailer (u64).
inline constexpr uint64_t kOffFileBytes = 16;

} // namespace cubecc::environments::detail
