//===- toolkit_support.h - Running the CUDA toolkit's standalone tools from tests -------------===//
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace cubecc::test {

/// Runs `command` through the shell; returns its exit status and sets `output`.
inline int run_command(const std::string &command, std::string &output) {
  output.clear();
  FILE *pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe)
    return -1;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe))
    output.append(buffer, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Writes `contents` to a temporary file (mkstemp's template below), runs `before` + its path +
/// `after` through the shell and removes the file; returns the exit status (-1 when the file
/// cannot be made) and fills `output`.
inline int run_on_temporary_file(const std::string &contents, const std::string &before,
                                 const std::string &after, std::string &output) {
  char path[] = "/tmp/cubecc-test-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    output = "cannot create a temporary file";
    return -1;
  }
  close(fd);
  { std::ofstream(path, std::ios::binary) << contents; }
  int rc = run_command(before + path + after, output);
  std::filesystem::remove(path);
  return rc;
}

/// Runs the toolkit's ptxas (CUBECC_PTXAS) with `options` on `ptx`; returns its exit status and
/// fills `output`.
inline int run_ptxas(const std::string &ptx, const std::string &options, std::string &output) {
  return run_on_temporary_file(ptx, std::string("'") + CUBECC_PTXAS + "' " + options + " ",
                               " -o /dev/null", output);
}

/// Empty when ptxas accepts `ptx` for sm_90; otherwise `what` and ptxas's complaint.
inline std::string ptxas(const std::string &ptx, const std::string &what) {
  std::string output;
  int rc = run_ptxas(ptx, "-arch=sm_90", output);
  return rc == 0 ? "" : what + ": ptxas exited with " + std::to_string(rc) + ":\n" + output;
}

/// What `ptxas -v -arch=<arch>` reports for `ptx` (registers, spills), or its error output.
inline std::string ptxas_verbose(const std::string &ptx, const std::string &arch) {
  std::string output;
  run_ptxas(ptx, "-v -arch=" + arch, output);
  return output;
}

} // namespace cubecc::test
