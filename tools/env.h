//===- env.h - `cubecc env build|inspect|verify|merge`: environment bundles -------------------===//
#pragma once

#include <string>
#include <vector>

namespace cubecc::tools {

struct EnvBuildOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> targets;
  std::string output;
  int opt_level = 2;
  unsigned jobs = 0;
  std::string command_line; ///< recorded in the bundle
};

/// Each returns the process exit code (tool_support.h).
int env_build_command(const EnvBuildOptions &options);
int env_inspect_command(const std::string &bundle, bool json);
int env_verify_command(const std::string &bundle, bool json);
int env_merge_command(const std::vector<std::string> &inputs, const std::string &output,
                      const std::string &command_line);

} // namespace cubecc::tools
