//===- cache.cpp - One file per record, written atomically ------------------------------------===//
#include "cubecc/autotune/cache.h"

#include "cubecc/runtime/files.h"
#include "cubecc/runtime/log.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace cubecc::autotune {

namespace fs = std::filesystem;

namespace {

std::string tuning_folder(const std::string &directory) {
  return (fs::path(directory) / "tuning").string();
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
  return runtime::user_cache_directory();
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
    throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                         fmt::format("tuning cache: cannot create {}: {}", folder.string(),
                                     ec ? ec.message() : "not a folder"));
  try {
    runtime::write_file_atomically(path.string(), to_json(record));
  } catch (const runtime::Error &e) {
    throw runtime::Error(e.kind(), fmt::format("tuning cache: {}", e.what()));
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
