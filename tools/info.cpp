//===- info.cpp - `cubecc --version` and `cubecc kernels` -------------------------------------===//
#include "info.h"

#include "cubecc/codegen/backend.h"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/environments/bundle.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/version.h"
#include "tool_support.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <iostream>

namespace cubecc::tools {

namespace {

/// A toolkit found at run time ({"found": true, "version": ...}) or not (with the reason).
nlohmann::json toolkit(std::string version, const std::string &why) {
  if (version.empty())
    return {{"found", false}, {"why", why}};
  return {{"found", true}, {"version", std::move(version)}};
}

} // namespace

int version_command(bool json) {
  // The compilers the backends drive, as found at run time.
  std::vector<codegen::Toolkit> found;
  for (const codegen::Backend *backend : codegen::backends())
    for (codegen::Toolkit &t : backend->toolkits())
      found.push_back(std::move(t));
  if (json) {
    nlohmann::json toolkits = nlohmann::json::object();
    for (const codegen::Toolkit &t : found) {
      std::string key = t.name;
      std::transform(key.begin(), key.end(), key.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      toolkits[key] = toolkit(t.version, t.why_not);
    }
    nlohmann::json out = {{"cubecc", std::string(version())},
                          {"ir_text_format", 1},
                          {"structural_hash_version", ir::kStructuralHashVersion},
                          {"bundle_format", environments::kFormatVersion},
                          {"toolkits", toolkits}};
    print_out("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return kSuccess;
  }
  print_out("cubecc {}\nIR text format 1, structural hash version {}, environment bundle "
            "format {}\n",
            version(), ir::kStructuralHashVersion, environments::kFormatVersion);
  for (const codegen::Toolkit &t : found)
    print_out("{} {}\n", t.name, t.version.empty() ? "not available: " + t.why_not : t.version);
  return kSuccess;
}

int kernels_command(const std::string &path, bool hashes, bool json) {
  // A missing file is the loader's to report; a FIFO or a device would block dlopen.
  if (auto problem = input_problem(path, /*missing_ok=*/true)) {
    std::cerr << fmt::format("{}: error: cannot load the kernel library: {}\n", shown(path),
                             *problem);
    return kUserError;
  }
  std::string error;
  auto library = dsl::KernelLibrary::open(path, error);
  if (!library) {
    std::cerr << shown_message(error) << "\n";
    return kUserError;
  }
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < library->kernels().size(); ++i) {
    const auto &entry = library->kernels()[i];
    std::string hash;
    if (hashes) {
      ir::Module module;
      std::vector<ir::Diagnostic> errors;
      if (!library->trace(i, module, errors))
        return report(errors);
      hash = ir::structural_hash(*module.kernels()[0]).hex();
    }
    if (json) {
      nlohmann::json k = {{"name", entry.name}, {"configuration", entry.configuration}};
      if (hashes)
        k["hash"] = hash;
      list.push_back(std::move(k));
    } else {
      print_out("{:<24} {}{}\n", entry.name, entry.configuration, hash.empty() ? "" : "  " + hash);
    }
  }
  if (json)
    print_out("{}\n", list.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  return kSuccess;
}

} // namespace cubecc::tools
