//===- cache.h - The per-user cache of tuning records -----------------------------------------===//
//
// Records live one per file, `<dir>/tuning/<xxh3-128 of the record key, 32 hex digits>.json`,
// where <dir> is CUBECC_CACHE_DIR, else $XDG_CACHE_HOME/cubecc, else $HOME/.cache/cubecc.
// A store writes a temporary file of its own in the same folder, flushes it to disk and renames
// it over the record's file, so readers see the old record or the new one, never a torn file,
// whatever number of threads and processes write at once (the last rename wins). A file that
// does not parse, or holds a record of another key, is a miss with a warning (CUBECC_LOG).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/autotune/record.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::autotune {

class TuningCache {
public:
  /// The cache folder the environment names (see above); throws runtime::Error when none of
  /// the variables is set.
  static std::string default_directory();
  /// The cache in default_directory().
  static TuningCache open_default();
  /// The cache rooted at `directory` (created on the first store).
  explicit TuningCache(std::string directory);

  const std::string &directory() const { return directory_; }
  /// The file that holds the record of `key`.
  std::string path_of(std::string_view key) const;

  /// The record stored under `key`, or nullopt (missing, unreadable or corrupt: logged).
  std::optional<TuningRecord> find(std::string_view key) const;
  /// Stores `record` under record_key(record), atomically. Throws runtime::Error when the file
  /// cannot be written.
  void store(const TuningRecord &record) const;
  /// Every record in the cache that parses (corrupt files are logged and skipped), in no
  /// particular order.
  std::vector<TuningRecord> list() const;

private:
  std::string directory_;
};

} // namespace cubecc::autotune
