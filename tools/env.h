//===- env.h - `cubecc env build|inspect|verify|merge`: environment bundles -------------------===//
#pragma once

#include <string>
#include <vector>

namespace cubecc::environments {
struct Metadata;
}

namespace cubecc::tools {

/// How a bundle that a command writes records its making. By default nothing that differs
/// between two runs on the same inputs (paths, host, time), so the bundles are byte-identical.
struct ProvenanceOptions {
  std::string tool;            ///< what made the bundle: "cubecc env build", ...
  std::string command_line;    ///< the whole command line: recorded with --record-command
  std::string created_at;      ///< --created-at: seconds since 1970 or "now"; empty: none, or
                               ///< $SOURCE_DATE_EPOCH
  bool record_host = false;    ///< --record-host
  bool record_command = false; ///< --record-command
  /// Whether any of the three was given (a merge keeps its inputs' provenance otherwise).
  bool asked() const { return !created_at.empty() || record_host || record_command; }
};

/// The metadata a bundle written under `options` records (this cubecc's version, the creation
/// time and host as asked); false after printing the error for a bad --created-at or
/// $SOURCE_DATE_EPOCH.
bool provenance_metadata(const ProvenanceOptions &options, environments::Metadata &out);

struct EnvBuildOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> targets;
  std::string output;
  int opt_level = 2;
  unsigned jobs = 0;
  std::string shard;             ///< "I/N": build share I (1 .. N) of the work; empty: all of it
  bool skip_unsupported = false; ///< leave a kernel out of a target that cannot run it
  ProvenanceOptions provenance;
};

struct EnvPruneOptions {
  std::string input, output;
  std::vector<std::string> drop_targets; ///< binaries for these targets go
  std::vector<std::string> drop_kernels; ///< entries of kernels with these names go
};

/// Each returns the process exit code (tool_support.h).
int env_build_command(const EnvBuildOptions &options);
int env_inspect_command(const std::string &bundle, bool json);
/// `keys`: public keys (files or 64 hexadecimal digits) of which one must have signed the
/// bundle; empty: a signature, if any, is checked against its own signer only.
int env_verify_command(const std::string &bundle, bool json, const std::vector<std::string> &keys);
/// Writes `name`.key (the secret key, mode 600) and `name`.pub; never overwrites either.
int env_keygen_command(const std::string &name);
/// Signs `bundle` (every entry checked first) with the secret key file `key`; writes `output`,
/// or the bundle itself when empty.
int env_sign_command(const std::string &bundle, const std::string &key, const std::string &output);
int env_diff_command(const std::string &a, const std::string &b, bool json);
int env_prune_command(const EnvPruneOptions &options);
int env_merge_command(const std::vector<std::string> &inputs, const std::string &output,
                      const ProvenanceOptions &provenance);

} // namespace cubecc::tools
