//===- object_cache.cpp - Compiled CPU kernel objects, one file each, written atomically ------===//
#include "cpu/object_cache.h"

#include "cubecc/runtime/files.h"
#include "cubecc/runtime/log.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cubecc::runtime {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "cubecc-cpu-object 1\n";

/// The next line of `text` from `at` (without its '\n'); nothing when there is no '\n'.
std::optional<std::string_view> next_line(std::string_view text, size_t &at) {
  size_t end = text.find('\n', at);
  if (end == std::string_view::npos)
    return std::nullopt;
  std::string_view line = text.substr(at, end - at);
  at = end + 1;
  return line;
}

} // namespace

CpuObjectCache::CpuObjectCache(std::string directory)
    : folder_((fs::path(directory) / "cpu").string()) {}

std::string CpuObjectCache::path_of(std::string_view key) const {
  XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
  return (fs::path(folder_) / fmt::format("{:016x}{:016x}.so", h.high64, h.low64)).string();
}

std::string CpuObjectCache::encode(std::string_view key, std::string_view object) {
  return fmt::format("{}{}\n{} {:016x}\n", kMagic, key, object.size(),
                     XXH3_64bits(object.data(), object.size())) +
         std::string(object);
}

std::optional<std::string> CpuObjectCache::decode(std::string_view file, std::string_view key,
                                                  std::string &why) {
  if (!file.starts_with(kMagic)) {
    why = "not a cubecc CPU object cache file (bad header)";
    return std::nullopt;
  }
  size_t at = kMagic.size();
  std::optional<std::string_view> stored_key = next_line(file, at);
  if (!stored_key || *stored_key != key) {
    why = "it holds the object of another key";
    return std::nullopt;
  }
  std::optional<std::string_view> sizes = next_line(file, at);
  uint64_t size = 0, checksum = 0;
  size_t space = sizes ? sizes->find(' ') : std::string_view::npos;
  if (space == std::string_view::npos) {
    why = "its size line is missing";
    return std::nullopt;
  }
  std::string_view size_text = sizes->substr(0, space), checksum_text = sizes->substr(space + 1);
  auto size_parse = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size);
  auto sum_parse = std::from_chars(checksum_text.data(),
                                   checksum_text.data() + checksum_text.size(), checksum, 16);
  if (size_parse.ec != std::errc() || size_parse.ptr != size_text.data() + size_text.size() ||
      sum_parse.ec != std::errc() || sum_parse.ptr != checksum_text.data() + checksum_text.size() ||
      checksum_text.size() != 16) {
    why = "its size line does not parse";
    return std::nullopt;
  }
  std::string_view object = file.substr(at);
  if (object.size() != size) {
    why = fmt::format("it holds {} bytes of object, its header says {} (truncated?)", object.size(),
                      size);
    return std::nullopt;
  }
  if (XXH3_64bits(object.data(), object.size()) != checksum) {
    why = "its object does not match its checksum (damaged)";
    return std::nullopt;
  }
  return std::string(object);
}

std::optional<std::string> CpuObjectCache::find(std::string_view key) const {
  const std::string path = path_of(key);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt; // not cached (or unreadable: then the store below says why)
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) {
    log_warning("cpu object cache: cannot read {}: {} (ignored)", path, std::strerror(errno));
    return std::nullopt;
  }
  std::string why;
  std::optional<std::string> object = decode(bytes.str(), key, why);
  if (!object)
    log_warning("cpu object cache: {}: {} (ignored; the kernel is compiled again)", path, why);
  return object;
}

void CpuObjectCache::store(std::string_view key, std::string_view object) const {
  std::error_code ec;
  fs::create_directories(folder_, ec); // another process may create it at the same time
  if (!fs::is_directory(folder_))
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("cpu object cache: cannot create {}: {}", folder_,
                            ec ? ec.message() : "not a folder"));
  try {
    write_file_atomically(path_of(key), encode(key, object));
  } catch (const Error &e) {
    throw Error(e.kind(), fmt::format("cpu object cache: {}", e.what()));
  }
}

} // namespace cubecc::runtime
