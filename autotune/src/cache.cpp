//===- cache.cpp - One file per record, written atomically ------------------------------------===//
#include "cubecc/autotune/cache.h"

#include "cubecc/runtime/log.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace cubecc::autotune {

namespace fs = std::filesystem;

namespace {

std::string non_empty_env(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : "";
}

std::string tuning_folder(const std::string &directory) {
  return (fs::path(directory) / "tuning").string();
}

/// Writes all of `data` to `fd`; false (errno set) on failure.
bool write_all(int fd, const std::string &data) {
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

std::optional<std::string> read_file(const std::string &path, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    error = "read error";
    return std::nullopt;
  }
  return std::move(text).str();
}

} // namespace

std::string TuningCache::default_directory() {
  if (std::string dir = non_empty_env("CUBECC_CACHE_DIR"); !dir.empty())
    return dir;
  if (std::string dir = non_empty_env("XDG_CACHE_HOME"); !dir.empty())
    return (fs::path(dir) / "cubecc").string();
  if (std::string dir = non_empty_env("HOME"); !dir.empty())
    return (fs::path(dir) / ".cache" / "cubecc").string();
  throw runtime::Error("no cache folder: set CUBECC_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

TuningCache TuningCache::open_default() {
  return TuningCache(default_directory());
}

TuningCache::TuningCache(std::string directory) : directory_(std::move(directory)) {}

std::string TuningCache::path_of(std::string_view key) const {
  XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
  return (fs::path(tuning_folder(directory_)) /
          fmt::format("{:016x}{:016x}.json", h.high64, h.low64))
      .string();
}

std::optional<TuningRecord> TuningCache::find(std::string_view key) const {
  const std::string path = path_of(key);
  std::error_code ec;
  if (!fs::exists(path, ec))
    return std::nullopt;
  std::string error;
  std::optional<std::string> text = read_file(path, error);
  if (!text) {
    runtime::log_warning("tuning cache: cannot read {}: {} (ignored)", path, error);
    return std::nullopt;
  }
  std::optional<TuningRecord> record = parse_record(*text, error);
  if (!record) {
    runtime::log_warning("tuning cache: {}: {} (ignored)", path, error);
    return std::nullopt;
  }
  if (record_key(*record) != key) {
    runtime::log_warning("tuning cache: {} holds the record of another key (ignored)", path);
    return std::nullopt;
  }
  return record;
}

void TuningCache::store(const TuningRecord &record) const {
  const fs::path path = path_of(record_key(record));
  const fs::path folder = path.parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec); // another process may create it at the same time
  if (!fs::is_directory(folder))
    throw runtime::Error(fmt::format("tuning cache: cannot create {}: {}", folder.string(),
                                     ec ? ec.message() : "not a folder"));
  const std::string text = to_json(record);
  for (int attempt = 0;; ++attempt) {
    const fs::path temporary = folder / temporary_name(path.filename().string());
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && attempt < 8)
      continue;
    if (fd < 0)
      throw runtime::Error(fmt::format("tuning cache: cannot create {}: {}", temporary.string(),
                                       std::strerror(errno)));
    std::string failure;
    if (!write_all(fd, text))
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
    throw runtime::Error(fmt::format("tuning cache: cannot write {}: {}", path.string(), failure));
  }
  // The rename itself reaches the disk with the folder.
  int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::vector<TuningRecord> TuningCache::list() const {
  std::vector<TuningRecord> out;
  std::error_code ec;
  fs::directory_iterator it(tuning_folder(directory_), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path &path = it->path();
    std::string name = path.filename().string();
    if (name.starts_with(".") || path.extension() != ".json")
      continue; // another writer's temporary file, or not ours
    std::string error;
    std::optional<std::string> text = read_file(path.string(), error);
    std::optional<TuningRecord> record;
    if (text)
      record = parse_record(*text, error);
    if (!record) {
      runtime::log_warning("tuning cache: {}: {} (ignored)", path.string(), error);
      continue;
    }
    if (path_of(record_key(*record)) != path.string()) {
      runtime::log_warning("tuning cache: {} holds the record of another key (ignored)",
                           path.string());
      continue;
    }
    out.push_back(std::move(*record));
  }
  return out;
}

} // namespace cubecc::autotune
