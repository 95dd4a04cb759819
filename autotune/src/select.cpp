//===- select.cpp - Environment, then cache, then tuning, then the first valid variant --------===//
#include "cubecc/autotune/select.h"

#include "cubecc/runtime/log.h"

#include <fmt/format.h>

namespace cubecc::autotune {

std::string_view source_name(SelectionSource source) {
  switch (source) {
  case SelectionSource::Environment:
    return "environment";
  case SelectionSource::Cache:
    return "cache";
  case SelectionSource::Tuned:
    return "tuned";
  case SelectionSource::Default:
    return "default";
  }
  return "?";
}

SelectOptions default_select_options() {
  SelectOptions options;
  try {
    options.cache = TuningCache::open_default();
  } catch (const runtime::Error &e) {
    runtime::log_warning("no tuning cache: {}", e.what());
  }
  return options;
}

namespace {

/// The variant `record` names, when it is usable for `problem`; else nullopt (logged).
std::optional<size_t> usable_variant(const Tunable &tunable, const Problem &problem,
                                     const TuningRecord &record, std::string_view where) {
  std::optional<size_t> variant = tunable.find(record.configuration);
  if (!variant) {
    runtime::log_warning("tunable '{}': the {} record names configuration '{}', which the "
                         "tunable does not have (ignored)",
                         tunable.name(), where, record.configuration);
    return std::nullopt;
  }
  if (!tunable.valid(*variant, problem)) {
    runtime::log_warning("tunable '{}': the {} record's configuration '{}' is not valid for "
                         "this problem (ignored)",
                         tunable.name(), where, record.configuration);
    return std::nullopt;
  }
  return variant;
}

Selection answer(size_t variant, const Tunable &tunable, SelectionSource source, std::string key,
                 std::optional<TuningRecord> record) {
  runtime::log_debug("tunable '{}': configuration '{}' from the {}", tunable.name(),
                     tunable.variants()[variant].configuration, source_name(source));
  return {variant, tunable.variants()[variant].configuration, source, std::move(key),
          std::move(record)};
}

} // namespace

Selection select_variant(runtime::Runtime &rt, const Tunable &tunable, const Problem &problem,
                         const SelectOptions &options, Benchmark *benchmark) {
  const std::string bucket = tunable.bucket(problem);
  std::string key = record_key(tunable.name(), bucket, device_fingerprint(rt.info()));

  if (options.use_environment) {
    if (std::optional<std::string> text = rt.find_tuning_record(key)) {
      std::string error;
      std::optional<TuningRecord> record = parse_record(*text, error);
      if (!record)
        runtime::log_warning("tunable '{}': the environment's record for {} does not parse: {} "
                             "(ignored)",
                             tunable.name(), bucket, error);
      else if (record_key(*record) != key)
        runtime::log_warning("tunable '{}': the environment holds another key's record under "
                             "the key of {} (ignored)",
                             tunable.name(), bucket);
      else if (std::optional<size_t> v = usable_variant(tunable, problem, *record, "environment"))
        return answer(*v, tunable, SelectionSource::Environment, std::move(key), std::move(record));
    }
  }
  if (options.cache) {
    if (std::optional<TuningRecord> record = options.cache->find(key))
      if (std::optional<size_t> v = usable_variant(tunable, problem, *record, "cache"))
        return answer(*v, tunable, SelectionSource::Cache, std::move(key), std::move(record));
  }
  if (options.tune_on_miss && benchmark) {
    TuningRecord record = tune(rt, tunable, problem, *benchmark, options.tune);
    if (options.cache) {
      try {
        options.cache->store(record);
      } catch (const runtime::Error &e) {
        runtime::log_warning("{} (the tuning result is used, not kept)", e.what());
      }
    }
    size_t v = *tunable.find(record.configuration);
    return answer(v, tunable, SelectionSource::Tuned, std::move(key), std::move(record));
  }
  for (size_t v = 0; v < tunable.variants().size(); ++v)
    if (tunable.valid(v, problem))
      return answer(v, tunable, SelectionSource::Default, std::move(key), std::nullopt);
  throw runtime::Error(
      runtime::ErrorKind::Unsupported,
      fmt::format("tunable '{}': no variant is valid for the problem {}", tunable.name(), bucket));
}

} // namespace cubecc::autotune
