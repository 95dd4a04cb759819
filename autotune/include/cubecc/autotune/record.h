//===- record.h - What tuning found, kept as data that outlives the binaries ------------------===//
//
// A TuningRecord says which configuration won for one (tunable, bucket, device model). It keeps
// the configuration (not a compiled binary), so a record stays valid when cubecc is upgraded and
// the variants are compiled again. Records are serialized as JSON (to_json / parse_record) and
// stored under record_key() in the per-user cache (cache.h) and in environment bundles.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/device.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::autotune {

/// How one variant did.
struct VariantTiming {
  std::string configuration;
  double median_ns = 0; ///< of the samples taken (0 when none)
  double min_ns = 0;
  uint32_t samples = 0;
  bool eliminated = false; ///< dropped early: clearly slower than the leader
  bool invalid = false;    ///< cannot run the problem (its predicate, or it failed to load)
  std::string note;        ///< why it is invalid, when known; else ""

  bool operator==(const VariantTiming &) const = default;
};

struct TuningRecord {
  std::string tunable;
  std::string bucket;
  std::string device;                 ///< device_fingerprint() of the device it was tuned on
  std::string configuration;          ///< the winner's
  std::vector<VariantTiming> timings; ///< one per variant, in the tunable's order
  std::string cubecc_version;         ///< cubecc::version() of the tuner
  std::string created;                ///< UTC, ISO 8601: "2026-11-30T14:03:12Z"

  bool operator==(const TuningRecord &) const = default;
};

/// The device model a record is valid for: backend, vendor, model name, architecture and driver
/// version — never an index, so records move between machines with the same device.
std::string device_fingerprint(const runtime::DeviceInfo &info);

/// The key a record is stored under (cache file names, environment bundles): a stable string of
/// the tunable, the bucket and the device fingerprint, injective in the three.
std::string record_key(std::string_view tunable, std::string_view bucket,
                       std::string_view device_fingerprint);
inline std::string record_key(const TuningRecord &record) {
  return record_key(record.tunable, record.bucket, record.device);
}

/// The current UTC time as TuningRecord::created spells it.
std::string utc_timestamp();

/// The record as a JSON object (docs/autotune.md), one line per field.
std::string to_json(const TuningRecord &record);

/// Parses what to_json wrote. Strict: malformed JSON, trailing text, a missing, unknown or
/// ill-typed field, or a winner that is not one of the valid timed variants gives nullopt and
/// sets `error` to what is wrong. Never throws.
std::optional<TuningRecord> parse_record(std::string_view text, std::string &error);

} // namespace cubecc::autotune
