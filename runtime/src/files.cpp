//===- files.cpp ------------------------------------------------------------------------------===//
#include "cubecc/runtime/files.h"

#include "cubecc/runtime/device.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace cubecc::runtime {

namespace {

/// Writes all of `data` to `fd`; false (errno set) on failure.
bool write_all(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// A name no other writer uses: the process, a per-process counter and random bits (O_EXCL
/// still guards against the unlikely clash).
std::string temporary_name(const std::string &final_name) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format(".{}.{}.{}.{:016x}.tmp", final_name, ::getpid(), counter++, random());
}

} // namespace

void write_file_atomically(const std::string &path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  for (int attempt = 0;; ++attempt) {
    const fs::path temporary = folder / temporary_name(target.filename().string());
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && attempt < 8)
      continue;
    if (fd < 0)
      throw Error(fmt::format("{}: cannot create a temporary file in {}: {}", path, folder.string(),
                              std::strerror(errno)));
    std::string failure;
    if (!write_all(fd, bytes))
      failure = fmt::format("write: {}", std::strerror(errno));
    else if (::fsync(fd) != 0)
      failure = fmt::format("fsync: {}", std::strerror(errno));
    if (::close(fd) != 0 && failure.empty())
      failure = fmt::format("close: {}", std::strerror(errno));
    if (failure.empty() && ::rename(temporary.c_str(), path.c_str()) != 0)
      failure = fmt::format("rename: {}", std::strerror(errno));
    if (failure.empty())
      break;
    ::unlink(temporary.c_str());
    throw Error(fmt::format("{}: cannot write the file: {}", path, failure));
  }
  // The rename itself reaches the disk with the folder.
  int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

} // namespace cubecc::runtime
