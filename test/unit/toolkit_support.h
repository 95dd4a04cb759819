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

/// ptxas (CUBECC_PTXAS) -arch=sm_90 on `ptx`: empty on success, else its output.
inline std::string ptxas(const std::string &ptx, const std::string &what) {
  char path[] = "/tmp/cubecc-ptx-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return "cannot create a temporary file";
  close(fd);
  { std::ofstream(path, std::ios::binary) << ptx; }
  std::string output;
  int rc = run_command(std::string("'") + CUBECC_PTXAS + "' -arch=sm_90 " + path + " -o /dev/null",
                       output);
  std::filesystem::remove(path);
  return rc == 0 ? "" : what + ": ptxas exited with " + std::to_string(rc) + ":\n" + output;
}

/// What `ptxas -v -arch=<arch>` reports for `ptx` (registers, spills), or its error output.
inline std::string ptxas_verbose(const std::string &ptx, const std::string &arch) {
  char path[] = "/tmp/cubecc-ptx-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return "cannot create a temporary file";
  close(fd);
  { std::ofstream(path, std::ios::binary) << ptx; }
  std::string output;
  run_command(std::string("'") + CUBECC_PTXAS + "' -v -arch=" + arch + " " + path + " -o /dev/null",
              output);
  std::filesystem::remove(path);
  return output;
}

} // namespace cubecc::test
