//===- select.h - Which variant a launch uses ------------------------------------------------===//
//
// select_variant() answers from the first of these that knows the problem's bucket on this
// device model:
//   1. the runtime's environment bundle (Runtime::find_tuning_record), built ahead of time;
//   2. the per-user cache (cache.h);
//   3. tuning now, when the options allow it and a Benchmark is given (the record is stored in
//      the cache for the next process);
//   4. the first variant valid for the problem.
// A record that does not parse, names a configuration the tunable does not have, or one that is
// not valid for the problem is skipped with a warning (CUBECC_LOG) and the next source asked.
// Selection reads files: call it once per bucket and keep the answer.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/autotune/cache.h"
#include "cubecc/autotune/record.h"
#include "cubecc/autotune/tunable.h"
#include "cubecc/autotune/tuner.h"

#include <optional>
#include <string>
#include <string_view>

namespace cubecc::autotune {

enum class SelectionSource { Environment, Cache, Tuned, Default };
std::string_view source_name(SelectionSource source); ///< "environment", "cache", ...

struct Selection {
  size_t variant = 0;
  std::string configuration;
  SelectionSource source = SelectionSource::Default;
  std::string key;                    ///< record_key of the problem's bucket on this device
  std::optional<TuningRecord> record; ///< the record that answered (not for Default)
};

struct SelectOptions {
  bool use_environment = true;
  /// The cache to read (and store into after tuning); nullopt: none.
  std::optional<TuningCache> cache;
  bool tune_on_miss = false; ///< tune when neither the environment nor the cache knows
  TuneOptions tune;
};

/// Options with the per-user cache (TuningCache::open_default) when the environment names one.
SelectOptions default_select_options();

/// Chooses a variant of `tunable` for `problem` on `rt` (see the file comment). `benchmark` is
/// used only when tuning. Throws runtime::Error when no variant is valid for the problem, and
/// what tune() throws.
Selection select_variant(runtime::Runtime &rt, const Tunable &tunable, const Problem &problem,
                         const SelectOptions &options, Benchmark *benchmark = nullptr);

} // namespace cubecc::autotune
