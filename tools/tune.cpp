//===- tune.cpp - `cubecc tune`: every tunable of the inputs, on one device, into a bundle ----===//
#include "tune.h"

#include "compile.h"
#include "library_tunable.h"
#include "tool_support.h"

#include "cubecc/autotune/library.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/runtime/runtime.h"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <map>

namespace cubecc::tools {

int tune_command(const TuneCommandOptions &options) {
  // The output is checked before tuning, which takes minutes.
  if (int code = check_output(options.output))
    return code;
  std::vector<std::unique_ptr<dsl::KernelLibrary>> libraries;
  std::vector<ir::Diagnostic> errors;
  for (const std::string &input : options.inputs) {
    libraries.push_back(open_kernel_library(input, errors));
    if (!libraries.back())
      return report(errors);
  }
  // What can fail without tuning fails first: the provenance options, the tunables to tune
  // (none, or one declared by two inputs: their records would have the same keys).
  environments::BundleContents contents;
  if (!provenance_metadata(options.provenance, contents.metadata))
    return kUserError;
  std::vector<std::pair<size_t, size_t>> selected; // (library, tunable), in order
  std::map<std::string, size_t> declared_by;
  for (size_t l = 0; l < libraries.size(); ++l)
    for (size_t t = 0; t < libraries[l]->tunables().size(); ++t) {
      const std::string &name = libraries[l]->tunables()[t].name;
      if (!options.tunable.empty() && name != options.tunable)
        continue;
      auto [at, fresh] = declared_by.emplace(name, l);
      if (!fresh) {
        std::cerr << fmt::format("cubecc: error: tunable '{}' is declared by {} and by {}; tune "
                                 "one input at a time (or name one with --tunable)\n",
                                 shown(name), shown(options.inputs[at->second]),
                                 shown(options.inputs[l]));
        return kUserError;
      }
      selected.emplace_back(l, t);
    }
  if (selected.empty()) {
    std::cerr << (options.tunable.empty()
                      ? std::string("cubecc: error: the inputs declare no tunables "
                                    "(dsl::register_tunable)\n")
                      : fmt::format("cubecc: error: no tunable named '{}'\n",
                                    shown(options.tunable)));
    return kUserError;
  }
  std::optional<runtime::Runtime> rt;
  try {
    rt.emplace(runtime::Runtime::open(options.device));
  } catch (const runtime::Error &e) {
    return report_error(e);
  }
  std::cerr << fmt::format("cubecc: tuning on {} ({})\n", rt->info().backend, rt->info().name);

  autotune::TuneOptions tune;
  tune.samples = options.samples;
  tune.warmup_runs = options.warmup;
  for (auto [l, t] : selected) {
    const dsl::KernelLibrary &library = *libraries[l];
    const std::string &name = library.tunables()[t].name;
    auto start = std::chrono::steady_clock::now();
    std::vector<autotune::TuningRecord> records;
    try {
      autotune::LibraryTunable tunable = library_tunable(library, t);
      tune.relative_tolerance = tunable.relative_tolerance;
      records = autotune::tune_library(*rt, tunable, tune);
    } catch (const runtime::Error &e) {
      return report_error(e,
                          fmt::format("{}: tunable '{}'", shown(options.inputs[l]), shown(name)));
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const autotune::TuningRecord &r : records) {
      std::string timings;
      for (const autotune::VariantTiming &v : r.timings)
        timings +=
            fmt::format("{}{} {}", timings.empty() ? "" : "; ", v.configuration,
                        v.invalid      ? "invalid"
                        : v.eliminated ? fmt::format("eliminated ({:.1f} us)", v.min_ns / 1e3)
                                       : fmt::format("{:.1f} us", v.median_ns / 1e3));
      std::cerr << fmt::format("cubecc: {} [{}] -> {}   ({})\n", r.tunable, r.bucket,
                               r.configuration, timings);
      contents.tuning.push_back({autotune::record_key(r), autotune::to_json(r)});
    }
    std::cerr << fmt::format("cubecc: tuned '{}' at {} shapes in {:.1f} s\n", name, records.size(),
                             seconds);
  }
  if (int code = write_output("cubecc", options.output, environments::serialize_bundle(contents)))
    return code;
  std::cerr << fmt::format("cubecc: {}: {} tuning records (merge them with compiled kernels: "
                           "cubecc env merge kernels.cubeenv {} -o app.cubeenv)\n",
                           shown(options.output), contents.tuning.size(), shown(options.output));
  return kSuccess;
}

} // namespace cubecc::tools
