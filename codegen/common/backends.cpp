//===- backends.cpp - The registered backends and the target lists they parse ----------------===//
#include "cubecc/codegen/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace cubecc::codegen {

/// The table codegen/CMakeLists.txt generates from the registered backend folders.
std::span<const Backend *const> registered_backends();

std::span<const Backend *const> backends() {
  return registered_backends();
}

bool Backend::check_support(const ir::Kernel &kernel, std::string_view target,
                            std::vector<ir::Diagnostic> &why) const {
  return check_target_support(kernel, features(target), why);
}

const Backend *find_backend(std::string_view target) {
  std::string_view prefix = target.substr(0, target.find(':'));
  for (const Backend *backend : backends())
    if (backend->name() == prefix)
      return backend;
  return nullptr;
}

namespace {

/// The first `max` bytes of a name from the command line, marked when cut.
std::string shortened(std::string_view text, size_t max = 64) {
  if (text.size() <= max)
    return std::string(text);
  return fmt::format("{}… ({} bytes)", text.substr(0, max), text.size());
}

} // namespace

std::string unknown_target_message(std::string_view target) {
  std::string grammars;
  for (const Backend *backend : backends())
    grammars += (grammars.empty() ? "" : ", ") + std::string(backend->grammar());
  return fmt::format("unknown target '{}' (targets: {})", shortened(target), grammars);
}

std::optional<std::vector<std::string>> parse_targets(std::span<const std::string> lists,
                                                      std::string &error) {
  std::vector<std::string> targets;
  for (const std::string &list : lists) {
    for (size_t start = 0; start <= list.size();) {
      size_t end = std::min(list.find(',', start), list.size());
      std::string_view name = std::string_view(list).substr(start, end - start);
      start = end + 1;
      if (name.empty())
        continue;
      if (name.size() > kMaxTargetNameBytes) { // before any backend's regular expression
        error = fmt::format("unknown target '{}…' ({} bytes; no target name is over {})",
                            name.substr(0, kMaxTargetNameBytes), name.size(), kMaxTargetNameBytes);
        return std::nullopt;
      }
      const Backend *backend = find_backend(name);
      if (!backend) {
        error = unknown_target_message(name);
        return std::nullopt;
      }
      std::optional<std::string> target = backend->parse_target(name, error);
      if (!target)
        return std::nullopt;
      if (std::find(targets.begin(), targets.end(), *target) == targets.end())
        targets.push_back(std::move(*target));
    }
  }
  if (targets.empty()) {
    std::string examples;
    for (const Backend *backend : backends())
      for (const std::string &t : backend->example_targets())
        if (t != "interp")
          examples += (examples.empty() ? "" : ",") + t;
    error = fmt::format("no target given (e.g. --target {})", examples);
    return std::nullopt;
  }
  return targets;
}

std::string check_elf_machine(std::string_view bytes, uint16_t machine) {
  // ELF64 (class 2), little-endian (data 1); e_machine at offset 18.
  if (bytes.size() < 64 || bytes.substr(0, 4) != "\x7f"
                                                 "ELF")
    return "not an ELF file";
  if (bytes[4] != 2 || bytes[5] != 1)
    return "not a little-endian 64-bit ELF file";
  uint16_t found = 0;
  std::memcpy(&found, bytes.data() + 18, 2);
  return found == machine ? "" : fmt::format("ELF machine {}, expected {}", found, machine);
}

} // namespace cubecc::codegen
