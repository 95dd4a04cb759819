//===- pass_manager.cpp -----------------------------------------------------------------------===//
#include "cubecc/passes/pass_manager.h"

#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <ostream>

namespace cubecc::passes {

std::optional<std::string> PassManager::add_pipeline(std::string_view names) {
  while (!names.empty()) {
    size_t comma = names.find(',');
    std::string_view name = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view{} : names.substr(comma + 1);
    if (name.empty())
      continue;
    const PassInfo *pass = find_pass(name);
    if (!pass) {
      std::string known;
      for (const PassInfo &p : registered_passes())
        known += (known.empty() ? "" : ", ") + std::string(p.name);
      return fmt::format("unknown pass '{}' (known passes: {})", name, known);
    }
    passes_.push_back(pass);
  }
  return std::nullopt;
}

std::vector<ir::Diagnostic> PassManager::run(ir::Module &module, std::ostream &out,
                                             std::ostream &err) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string_view, double>> timings;
  for (const PassInfo *pass : passes_) {
    PassContext context{out, {}, {}};
    auto start = Clock::now();
    pass->run(module, context);
    timings.emplace_back(pass->name,
                         std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!context.errors.empty())
      return context.errors;
    if (options_.statistics)
      for (const auto &[what, n] : context.statistics)
        fmt::print(err, "{:>8} {} ({})\n", n, what, pass->name);
    if (options_.verify_each) {
      auto problems = ir::verify(module);
      if (!problems.empty()) {
        for (ir::Diagnostic &d : problems)
          d.notes.push_back(fmt::format("the module was valid before pass '{}' and not after it; "
                                        "this is a bug in that pass",
                                        pass->name));
        return problems;
      }
    }
    bool print = options_.print_after_all ||
                 std::find(options_.print_after.begin(), options_.print_after.end(), pass->name) !=
                     options_.print_after.end();
    if (print)
      out << "// ----- IR after " << pass->name << " -----\n" << ir::to_string(module);
  }
  if (options_.time_passes) {
    double total = 0;
    for (auto &[name, ms] : timings)
      total += ms;
    fmt::print(err, "===== pass execution timing =====\n");
    for (auto &[name, ms] : timings)
      fmt::print(err, "{:>10.3f} ms  {}\n", ms, name);
    fmt::print(err, "{:>10.3f} ms  total\n", total);
  }
  return {};
}

} // namespace cubecc::passes
