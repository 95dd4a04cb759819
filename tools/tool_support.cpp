//===- tool_support.cpp -----------------------------------------------------------------------===//
#include "tool_support.h"

#include "cubecc/runtime/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

namespace cubecc::tools {

namespace {

/// Whether a failure of standard output was already reported (so that it is said once).
bool standard_output_failure_reported = false;

void report_standard_output_failure(const char *tool, int error) {
  if (standard_output_failure_reported)
    return;
  standard_output_failure_reported = true;
  std::cerr << fmt::format("{}: error: cannot write to standard output{}\n", tool,
                           error ? std::string(": ") + std::strerror(error) : std::string());
}

std::string not_regular(mode_t mode) {
  return fmt::format("not a regular file ({}); cubecc reads only regular files",
                     runtime::file_kind(mode));
}

std::string too_long(size_t bytes) {
  return fmt::format("the path is {} bytes, longer than the system's limit (PATH_MAX, {} bytes)",
                     bytes, PATH_MAX);
}

std::string too_large(const char *what) {
  return fmt::format("{} is larger than {} MiB, the most IR text cubecc reads", what,
                     kMaxIrTextBytes >> 20);
}

} // namespace

void say_left_out(std::string_view kernel, std::string_view target, std::string_view why) {
  std::cerr << fmt::format("cubecc: {} left out of {}: {}\n", shown(kernel), target,
                           why.empty() ? "the target cannot run it" : shown_message(why));
}

int report(const std::vector<ir::Diagnostic> &diagnostics) {
  std::vector<ir::Diagnostic> shortened = diagnostics;
  for (ir::Diagnostic &d : shortened) {
    d.file = shown(d.file);
    d.message = runtime::shorten_for_message(d.message, 64 << 10);
  }
  std::cerr << ir::to_string(shortened);
  for (const ir::Diagnostic &d : diagnostics)
    if (d.internal) {
      std::cerr << "cubecc: internal error: the code cubecc wrote does not compile. This is a bug "
                   "in cubecc; please report it with the input that caused it.\n";
      return kInternalError;
    }
  return kUserError;
}

ExitCode exit_code_of(runtime::ErrorKind kind) {
  switch (kind) {
  case runtime::ErrorKind::Internal:
    return kInternalError;
  case runtime::ErrorKind::NoDevice:
  case runtime::ErrorKind::OutOfMemory:
  case runtime::ErrorKind::InvalidArgument:
  case runtime::ErrorKind::NotFound:
  case runtime::ErrorKind::Compile:
  case runtime::ErrorKind::Unsupported:
  case runtime::ErrorKind::Environment:
  case runtime::ErrorKind::DeviceFailure:
    return kUserError;
  }
  return kInternalError;
}

int report_error(const runtime::Error &error, std::string_view context, const char *tool) {
  std::string message = shown_message(error.what());
  if (!context.empty())
    message = fmt::format("{}: {}", context, message);
  ExitCode code = exit_code_of(error.kind());
  if (code == kInternalError)
    std::cerr << tool << ": internal error: " << message
              << "\nThis is a bug in cubecc; please report it with the input that caused it.\n";
  else
    std::cerr << tool << ": error: " << message << "\n";
  return code;
}

int write_output(const char *tool, const std::string &output, std::string_view text) {
  if (output == "-" || output == "/dev/stdout") {
    errno = 0;
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      report_standard_output_failure(tool, errno);
      return kUserError;
    }
    return kSuccess;
  }
  try {
    runtime::write_file_atomically(output, text);
  } catch (const runtime::FileError &e) {
    std::cerr << fmt::format("{}: error: {}\n", e.path(), e.reason());
    return kUserError;
  }
  return kSuccess;
}

int check_output(const std::string &output) {
  if (output == "-" || output == "/dev/stdout")
    return kSuccess;
  try {
    runtime::check_writable(output);
  } catch (const runtime::FileError &e) {
    std::cerr << fmt::format("{}: error: {}\n", e.path(), e.reason());
    return kUserError;
  }
  return kSuccess;
}

std::optional<std::string> input_problem(const std::string &path, bool missing_ok) {
  if (path.empty())
    return "cannot open the file: the path is empty";
  if (path.size() >= PATH_MAX)
    return "cannot open the file: " + too_long(path.size());
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && missing_ok)
      return std::nullopt;
    return fmt::format("cannot open the file: {}", std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    return not_regular(st.st_mode);
  if (::access(path.c_str(), R_OK) != 0)
    return fmt::format("cannot open the file: {}", std::strerror(errno));
  return std::nullopt;
}

bool read_ir_text(const std::string &path, std::string &text, std::string &error) {
  text.clear();
  int fd = STDIN_FILENO;
  if (path != "-") {
    if (auto problem = input_problem(path)) {
      error = *problem;
      return false;
    }
    // O_NONBLOCK: should a FIFO have taken the file's place since, open() does not wait for a
    // writer, and fstat refuses it.
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      error = fmt::format("cannot open the file: {}", std::strerror(errno));
      return false;
    }
    struct stat st {};
    errno = 0;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error = errno ? fmt::format("cannot open the file: {}", std::strerror(errno))
                    : not_regular(st.st_mode);
      ::close(fd);
      return false;
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxIrTextBytes) {
      error = too_large(fmt::format("the file ({} bytes)", st.st_size).c_str());
      ::close(fd);
      return false;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    text.reserve(static_cast<size_t>(st.st_size));
  } else if (struct stat st; ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                             static_cast<uint64_t>(st.st_size) > kMaxIrTextBytes) {
    error = too_large(fmt::format("standard input ({} bytes)", st.st_size).c_str());
    return false;
  }
  constexpr size_t kChunk = size_t{1} << 20;
  std::string chunk(kChunk, '\0');
  bool ok = true;
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = fmt::format("cannot read the {}: {}", path == "-" ? "input" : "file",
                          std::strerror(errno));
      ok = false;
      break;
    }
    if (n == 0)
      break;
    if (const void *nul = std::memchr(chunk.data(), '\0', static_cast<size_t>(n))) {
      error = fmt::format("binary data (a NUL byte at offset {}): not IR text",
                          text.size() +
                              static_cast<size_t>(static_cast<const char *>(nul) - chunk.data()));
      ok = false;
      break;
    }
    if (text.size() + static_cast<size_t>(n) > kMaxIrTextBytes) {
      error = too_large(path == "-" ? "standard input" : "the file");
      ok = false;
      break;
    }
    text.append(chunk.data(), static_cast<size_t>(n));
  }
  if (fd != STDIN_FILENO)
    ::close(fd);
  if (!ok)
    text.clear();
  return ok;
}

int finish_standard_output(const char *tool, int code) {
  errno = 0;
  std::cout.flush();
  bool failed = !std::cout;
  int error = errno;
  if (std::fflush(stdout) != 0) {
    failed = true;
    error = errno;
  }
  if (std::ferror(stdout))
    failed = true;
  // Closing reports what the last write could not (a full disk on NFS, say): a duplicate is
  // closed, which flushes the same way and leaves stdout valid for what runs after main (the
  // standard library flushes std::cout at exit). A descriptor closed before the tool started,
  // with nothing written to it, is no failure.
  if (int copy = ::dup(STDOUT_FILENO); copy >= 0 && ::close(copy) != 0) {
    failed = true;
    error = errno;
  }
  if (!failed)
    return code;
  report_standard_output_failure(tool, error);
  return code == kSuccess ? kUserError : code;
}

} // namespace cubecc::tools
