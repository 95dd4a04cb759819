//===- pass_manager.h - Named passes, pipelines and the debugging knobs -----------------------===//
//
// Every pass is registered once under its CLI name (see pass_registry.cpp, a straight list). A
// pipeline is a comma-separated list of names or an -O level. The manager runs the passes in
// order and, as asked, verifies after each one, prints the module after each one or after named
// ones, and times them.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::passes {

/// What a pass may use besides the module: a stream for what it reports (print-hash writes
/// there), and a way to report user-facing errors.
struct PassContext {
  std::ostream &out;
  std::vector<ir::Diagnostic> errors;
  /// Counters a pass keeps ("ops folded", ...), reported by --pass-statistics.
  std::vector<std::pair<std::string, uint64_t>> statistics;
  void count(const std::string &what, uint64_t n = 1) {
    for (auto &[name, value] : statistics)
      if (name == what) {
        value += n;
        return;
      }
    statistics.emplace_back(what, n);
  }
};

struct PassInfo {
  std::string_view name;        ///< the CLI name, e.g. "print-hash"
  std::string_view description; ///< one line for --help
  std::function<void(ir::Module &, PassContext &)> run;
};

/// Every registered pass, in a stable order.
const std::vector<PassInfo> &registered_passes();
const PassInfo *find_pass(std::string_view name);

/// The pass names run at -O<level> (0 to 3).
std::vector<std::string_view> optimization_pipeline(int level);

struct PassManagerOptions {
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true; ///< debug and test builds verify after every pass
#endif
  bool print_after_all = false;
  std::vector<std::string> print_after; ///< pass names
  bool time_passes = false;
  bool statistics = false; ///< report each pass's counters
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}

  /// Adds the passes of "a,b,c". Returns an error message naming an unknown pass, if any.
  std::optional<std::string> add_pipeline(std::string_view names);
  void add(const PassInfo &pass) { passes_.push_back(&pass); }
  const std::vector<const PassInfo *> &passes() const { return passes_; }

  /// Runs the pipeline. Module printouts (print-after) and pass reports go to `out`, timings to
  /// `err`. Returns the errors that stopped it: a pass's own, or a failed verification naming
  /// the pass that broke the module.
  std::vector<ir::Diagnostic> run(ir::Module &module, std::ostream &out, std::ostream &err);

private:
  PassManagerOptions options_;
  std::vector<const PassInfo *> passes_;
};

/// Runs the -O<level> pipeline on `module` with default options (pass output discarded). Returns
/// the errors that stopped it; empty on success.
std::vector<ir::Diagnostic> optimize(ir::Module &module, int level);

} // namespace cubecc::passes
