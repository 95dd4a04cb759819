//===- test_support.h - Helpers shared by the unit tests --------------------------------------===//
#pragma once

#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace cubecc::test {

/// Sets (or, with null, unsets) an environment variable for the life of the object.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
  std::optional<std::string> old_;
};

/// Parses and verifies `text`, failing the current test with the diagnostics if either fails.
inline std::unique_ptr<ir::Module> parse_valid(std::string_view text) {
  ir::ParseResult r = ir::parse_module(text, "test.cir");
  EXPECT_TRUE(r.module) << ir::to_string(r.errors);
  if (!r.module)
    return nullptr;
  auto problems = ir::verify(*r.module, &r.source_map);
  EXPECT_TRUE(problems.empty()) << ir::to_string(problems);
  return std::move(r.module);
}

/// The first error message from parsing and verifying `text` (empty when it is valid).
inline std::string first_error(std::string_view text) {
  ir::ParseResult r = ir::parse_module(text, "test.cir");
  if (!r.module)
    return r.errors.empty() ? "<parse failed without a diagnostic>" : r.errors.front().str();
  auto problems = ir::verify(*r.module, &r.source_map);
  return problems.empty() ? "" : problems.front().str();
}

/// The bytes of the file at `path` ("" when it cannot be read).
inline std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

#ifdef CUBECC_SOURCE_DIR
/// examples/ir/<name>, parsed and verified (failing the current test if it is not).
inline std::unique_ptr<ir::Module> example_module(const char *name) {
  return parse_valid(read_file(std::string(CUBECC_SOURCE_DIR "/examples/ir/") + name));
}
#endif

} // namespace cubecc::test
