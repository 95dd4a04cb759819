//===- bundle.cpp - Writing, mapping, verifying and looking up environment bundles ------------===//
#include "cubecc/environments/bundle.h"

#include "cubecc/codegen/target.h"

#include "cubecc/ir/version.h"
#include "cubecc/runtime/files.h"

#include "bundle_generated.h"
#include "little_endian.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <xxhash.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

namespace cubecc::environments {

namespace fs = std::filesystem;
using runtime::Error;
using runtime::ErrorKind;

namespace {

// The header: every field little-endian at a fixed offset.
constexpr uint64_t kOffFormat = 8;          // u32
constexpr uint64_t kOffHeaderBytes = 12;    // u32
using detail::kOffFileBytes;                // u64
constexpr uint64_t kOffIndexOffset = 24;    // u64
constexpr uint64_t kOffIndexBytes = 32;     // u64
constexpr uint64_t kOffIndexChecksum = 40;  // u64
constexpr uint64_t kOffHeaderChecksum = 56; // u64 over bytes [0, 56)
constexpr uint64_t kEntryAlignment = 16;
/// Far beyond any real bundle; bounds the verifier's work on hostile input.
constexpr flatbuffers::uoffset_t kMaxTables = 1u << 24;

using detail::read_le;
template <class T> void write_le(std::string &out, uint64_t offset, T value) {
  std::memcpy(out.data() + offset, &value, sizeof(T));
}

uint64_t checksum(const uint8_t *data, uint64_t size) {
  return XXH3_64bits(data, size);
}

bool key_less(const fb::EntryRef &a, uint64_t high, uint64_t low) {
  return a.key_high() < high || (a.key_high() == high && a.key_low() < low);
}

/// `n` rounded up to a multiple of kEntryAlignment: where the part after one ending at `n` starts.
constexpr uint64_t padded_to_entry_alignment(uint64_t n) {
  return (n + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;
}

/// Whether the padding after a part of the file that ends at `end` (up to the next multiple of
/// 16) lies in the file and is zero, as written. Checked so that no byte of a bundle can change
/// unnoticed: the parts themselves have checksums.
bool zero_padding(const uint8_t *file, uint64_t end, uint64_t file_bytes) {
  uint64_t padded = padded_to_entry_alignment(end);
  if (end > file_bytes || padded > file_bytes)
    return false;
  return std::all_of(file + end, file + padded, [](uint8_t b) { return b == 0; });
}

/// The FlatBuffers verifier checks a vector's length field for alignment, not its elements: a
/// crafted index could place the 8-byte EntryRef or NameRef structs off their alignment.
/// (An empty table is never read, and the builder does not align one.)
template <class Struct> bool structs_aligned(const flatbuffers::Vector<const Struct *> &table) {
  return table.size() == 0 || reinterpret_cast<uintptr_t>(table.Data()) % alignof(Struct) == 0;
}

bool entries_aligned(const fb::Index *index) {
  return structs_aligned(*index->entries());
}

bool name_less(const fb::NameRef &a, const fb::NameRef &b) {
  return a.key() < b.key() || (a.key() == b.key() && a.entry() < b.entry());
}

/// A kernel library's kernel's key in Index.names: XXH3-64 of the library, kernel name,
/// configuration and options, each followed by a 0 byte.
uint64_t name_key(std::string_view library, std::string_view kernel, std::string_view configuration,
                  std::string_view options) {
  char small[256];
  std::string large;
  const size_t size = library.size() + kernel.size() + configuration.size() + options.size() + 4;
  char *bytes = small;
  if (size > sizeof small) {
    large.resize(size);
    bytes = large.data();
  }
  char *at = bytes;
  for (std::string_view part : {library, kernel, configuration, options}) {
    std::memcpy(at, part.data(), part.size());
    at[part.size()] = '\0';
    at += part.size() + 1;
  }
  return XXH3_64bits(bytes, size);
}

std::string_view view(const flatbuffers::String *s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

//===- ABI <-> FlatBuffers -------------------------------------------------------------------===//

flatbuffers::Offset<fb::Abi> write_abi(flatbuffers::FlatBufferBuilder &b,
                                       const codegen::KernelAbi &abi) {
  std::vector<flatbuffers::Offset<fb::Param>> params;
  for (const codegen::ParamSlot &p : abi.params) {
    bool buffer = p.kind == codegen::ParamSlot::Buffer;
    params.push_back(fb::CreateParam(b, buffer, buffer ? 0 : p.type.lanes(),
                                     b.CreateString(std::string(ir::scalar_name(p.type.element()))),
                                     static_cast<uint8_t>(p.type.access()), p.binding, p.offset,
                                     p.lane_bytes));
  }
  return fb::CreateAbi(b, abi.workgroup_size[0], abi.workgroup_size[1], abi.workgroup_size[2],
                       b.CreateVector(params), abi.num_buffers, abi.param_block_bytes,
                       abi.param_block_in_buffer, abi.shared_bytes);
}

/// Decodes and range-checks launch metadata; an empty optional and `error` when it is not sound.
std::optional<codegen::KernelAbi> read_abi(const fb::Abi *abi, std::string_view name,
                                           std::string &error) {
  if (!abi || !abi->params()) {
    error = "no launch metadata";
    return std::nullopt;
  }
  codegen::KernelAbi out;
  out.name = std::string(name);
  out.workgroup_size = {abi->workgroup_x(), abi->workgroup_y(), abi->workgroup_z()};
  for (uint32_t size : out.workgroup_size)
    if (size == 0 || size > 65536) {
      error = fmt::format("workgroup size {} is out of range", size);
      return std::nullopt;
    }
  out.num_buffers = abi->num_buffers();
  out.param_block_bytes = abi->param_block_bytes();
  out.param_block_in_buffer = abi->param_block_in_buffer();
  out.shared_bytes = abi->shared_bytes();
  uint32_t buffers = 0;
  for (const fb::Param *p : *abi->params()) {
    std::optional<ir::Scalar> element =
        p->element() ? ir::parse_scalar(view(p->element())) : std::nullopt;
    if (!element || p->access() > 2) {
      error = fmt::format("parameter {} has an unknown type", out.params.size());
      return std::nullopt;
    }
    codegen::ParamSlot slot;
    if (p->buffer()) {
      slot.kind = codegen::ParamSlot::Buffer;
      slot.type = ir::Type::buffer(*element, static_cast<ir::Access>(p->access()));
      slot.binding = p->binding();
      ++buffers;
    } else {
      uint32_t lanes = p->vector_lanes();
      if (lanes != 1 && !ir::Type::valid_lanes(lanes)) {
        error = fmt::format("parameter {} has {} lanes", out.params.size(), lanes);
        return std::nullopt;
      }
      if ((p->lane_bytes() != 4 && p->lane_bytes() != 8) ||
          uint64_t(p->offset()) + uint64_t(lanes) * p->lane_bytes() > out.param_block_bytes) {
        error = fmt::format("parameter {} lies outside the parameter block", out.params.size());
        return std::nullopt;
      }
      slot.kind = codegen::ParamSlot::Value;
      slot.type = lanes == 1 ? ir::Type::scalar(*element) : ir::Type::vector(*element, lanes);
      slot.offset = p->offset();
      slot.lane_bytes = p->lane_bytes();
    }
    out.params.push_back(slot);
  }
  if (buffers != out.num_buffers) {
    error = fmt::format("{} buffer parameters, but the metadata says {}", buffers, out.num_buffers);
    return std::nullopt;
  }
  return out;
}

/// Decodes an entry (a copy), or with `out` null only checks that it would decode: the first use
/// of an entry checks it without copying its binaries.
bool decode_entry(const fb::Entry *e, std::string &error, Entry *out) {
  if (!e->name() || e->name()->size() == 0 || !e->options() || !e->artifacts()) {
    error = "the entry lacks its kernel name, options or artifacts";
    return false;
  }
  std::string_view name = view(e->name());
  if (out) {
    out->hash = {e->hash_high(), e->hash_low()};
    out->options = std::string(view(e->options()));
    out->name = std::string(name);
    out->configuration = std::string(view(e->configuration()));
    out->library = std::string(view(e->library()));
    out->library_build = std::string(view(e->library_build()));
    if (e->parameter_names())
      for (const flatbuffers::String *p : *e->parameter_names())
        out->parameter_names.emplace_back(view(p));
    if (e->unread_parameters())
      out->unread_parameters.assign(e->unread_parameters()->begin(), e->unread_parameters()->end());
  }
  for (const fb::Artifact *a : *e->artifacts()) {
    if (!a->target() || !a->format() || !a->data() || a->target()->size() == 0 ||
        a->format()->size() == 0) {
      error = fmt::format("kernel '{}': an artifact lacks its target, format or data", name);
      return false;
    }
    std::string why;
    std::optional<codegen::KernelAbi> abi = read_abi(a->abi(), name, why);
    if (!abi) {
      error = fmt::format("kernel '{}' for {}: {}", name, view(a->target()), why);
      return false;
    }
    if (e->parameter_names() && e->parameter_names()->size() != abi->params.size()) {
      error = fmt::format("kernel '{}' names {} parameters, its {} binary has {}", name,
                          e->parameter_names()->size(), view(a->target()), abi->params.size());
      return false;
    }
    if (const auto *unread = e->unread_parameters()) {
      for (flatbuffers::uoffset_t u = 0; u < unread->size(); ++u)
        if (unread->Get(u) >= abi->params.size() ||
            (u > 0 && unread->Get(u) <= unread->Get(u - 1))) {
          error = fmt::format("kernel '{}': its unread parameters are not ascending indices of "
                              "its {} binary's {} parameters",
                              name, view(a->target()), abi->params.size());
          return false;
        }
    }
    if (!out)
      continue;
    Artifact artifact;
    artifact.target = {std::string(view(a->target())), std::string(view(a->format())),
                       std::string(view(a->features())), std::string(view(a->toolkit()))};
    artifact.entry = std::string(view(a->entry()));
    artifact.abi = std::move(*abi);
    artifact.data.assign(reinterpret_cast<const char *>(a->data()->data()), a->data()->size());
    out->artifacts.push_back(std::move(artifact));
  }
  return true;
}

std::string serialize_entry(const Entry &entry) {
  flatbuffers::FlatBufferBuilder b(1024 + [&] {
    size_t bytes = 0;
    for (const Artifact &a : entry.artifacts)
      bytes += a.data.size() + 256;
    return bytes;
  }());
  std::vector<flatbuffers::Offset<fb::Artifact>> artifacts;
  for (const Artifact &a : entry.artifacts) {
    auto data = b.CreateVector(reinterpret_cast<const uint8_t *>(a.data.data()), a.data.size());
    artifacts.push_back(
        fb::CreateArtifact(b, b.CreateString(a.target.target), b.CreateString(a.target.format),
                           b.CreateString(a.target.features), b.CreateString(a.target.toolkit),
                           b.CreateString(a.entry), write_abi(b, a.abi), data));
  }
  b.Finish(fb::CreateEntry(
      b, entry.hash.high, entry.hash.low, b.CreateString(entry.options), b.CreateString(entry.name),
      b.CreateString(entry.configuration), b.CreateVector(artifacts),
      b.CreateVectorOfStrings(entry.parameter_names), b.CreateString(entry.library),
      b.CreateString(entry.library_build), b.CreateVector(entry.unread_parameters)));
  return std::string(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
}

bool same_binary_kind(const Artifact &a, const Artifact &b) {
  return a.target.target == b.target.target && a.target.format == b.target.format &&
         a.target.features == b.target.features && a.target.toolkit == b.target.toolkit;
}

} // namespace

//===- Keys, metadata, writing --------------------------------------------------------------===//

ir::Hash128 entry_key(const ir::Hash128 &hash, std::string_view options) {
  // xxh3-128 of the hash's 16 bytes then the options': on the stack for the usual short options
  // (every lookup computes one).
  char small[128];
  std::string large;
  char *bytes = small;
  if (16 + options.size() > sizeof small) {
    large.resize(16 + options.size());
    bytes = large.data();
  }
  std::memcpy(bytes, &hash.high, 8);
  std::memcpy(bytes + 8, &hash.low, 8);
  std::memcpy(bytes + 16, options.data(), options.size());
  XXH128_hash_t h = XXH3_128bits(bytes, 16 + options.size());
  return {h.high64, h.low64};
}

std::optional<int64_t> parse_unix_seconds(std::string_view text) {
  int64_t seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || seconds < 0 ||
      seconds > kLatestUnixSeconds)
    return std::nullopt;
  return seconds;
}

Metadata current_metadata(std::string created_by, const Provenance &provenance) {
  Metadata m;
  m.cubecc_version = std::string(cubecc::version());
  if (provenance.created_unix) {
    m.created_unix = *provenance.created_unix;
  } else if (const char *epoch = std::getenv("SOURCE_DATE_EPOCH"); epoch && *epoch) {
    std::optional<int64_t> seconds = parse_unix_seconds(epoch);
    if (!seconds)
      throw runtime::Error(
          runtime::ErrorKind::InvalidArgument,
          fmt::format(
              "SOURCE_DATE_EPOCH is '{}', not a number of seconds since "
              "1970 up to the end of year 9999; set it to one (e.g. the last commit's time: git "
              "log -1 --format=%ct) or unset it",
              epoch));
    m.created_unix = *seconds;
  }
  if (provenance.record_host) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0)
      m.created_host = host;
  }
  m.created_by = std::move(created_by);
  return m;
}

std::string serialize_bundle(const BundleContents &contents) {
  // Entries sorted by key; equal keys are a caller's bug (merge first).
  struct Keyed {
    ir::Hash128 key;
    const Entry *entry;
  };
  std::vector<Keyed> keyed;
  for (const Entry &e : contents.entries)
    keyed.push_back({entry_key(e.hash, e.options), &e});
  std::sort(keyed.begin(), keyed.end(), [](const Keyed &a, const Keyed &b) {
    return std::tie(a.key.high, a.key.low) < std::tie(b.key.high, b.key.low);
  });
  for (size_t i = 1; i < keyed.size(); ++i)
    if (keyed[i].key == keyed[i - 1].key)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("two entries for kernel '{}' ({}, {}): merge them first",
                              keyed[i].entry->name, keyed[i].entry->hash.hex(),
                              keyed[i].entry->options));
  std::vector<const TuningEntry *> tuning;
  for (const TuningEntry &t : contents.tuning)
    tuning.push_back(&t);
  std::sort(tuning.begin(), tuning.end(),
            [](const TuningEntry *a, const TuningEntry *b) { return a->key < b->key; });
  for (size_t i = 1; i < tuning.size(); ++i)
    if (tuning[i]->key == tuning[i - 1]->key)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("two tuning records for '{}': merge them first", tuning[i]->key));

  if (keyed.size() > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{} entries: a bundle holds at most 2^32 - 1", keyed.size()));
  std::vector<fb::NameRef> names; // kernels by (library, name, configuration, options)
  for (size_t i = 0; i < keyed.size(); ++i) {
    const Entry &e = *keyed[i].entry;
    if (!e.library.empty())
      names.emplace_back(name_key(e.library, e.name, e.configuration, e.options),
                         static_cast<uint32_t>(i), 0);
  }
  std::sort(names.begin(), names.end(), name_less);

  std::vector<std::string> blobs;
  blobs.reserve(keyed.size());
  for (const Keyed &k : keyed)
    blobs.push_back(serialize_entry(*k.entry));

  // The index needs the entries' offsets, which depend on the index's size: build it once with
  // placeholder offsets to learn its size (offsets are fixed-size struct fields), then again.
  auto build_index = [&](uint64_t entries_start) {
    flatbuffers::FlatBufferBuilder b(4096 + keyed.size() * 48);
    std::vector<fb::EntryRef> refs;
    uint64_t offset = entries_start;
    for (size_t i = 0; i < keyed.size(); ++i) {
      const std::string &blob = blobs[i];
      refs.emplace_back(keyed[i].key.high, keyed[i].key.low, offset, blob.size(),
                        checksum(reinterpret_cast<const uint8_t *>(blob.data()), blob.size()));
      offset = padded_to_entry_alignment(offset + blob.size());
    }
    std::vector<flatbuffers::Offset<fb::Tuning>> records;
    for (const TuningEntry *t : tuning)
      records.push_back(fb::CreateTuning(b, b.CreateString(t->key), b.CreateString(t->record)));
    std::vector<flatbuffers::Offset<fb::Toolkit>> toolkits;
    for (const auto &[name, version] : contents.metadata.toolkits)
      toolkits.push_back(fb::CreateToolkit(b, b.CreateString(name), b.CreateString(version)));
    const Metadata &m = contents.metadata;
    b.Finish(fb::CreateIndex(
        b,
        b.CreateString(m.cubecc_version.empty() ? std::string(cubecc::version())
                                                : m.cubecc_version),
        m.created_unix, b.CreateString(m.created_host), b.CreateString(m.created_by),
        b.CreateVectorOfStrings(m.targets), b.CreateVector(toolkits), b.CreateVectorOfStructs(refs),
        b.CreateVector(records), b.CreateVectorOfStructs(names)));
    return std::string(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
  };
  auto align = padded_to_entry_alignment;
  std::string index = build_index(0);
  uint64_t entries_start = align(kHeaderBytes + index.size());
  index = build_index(entries_start);
  if (align(kHeaderBytes + index.size()) != entries_start)
    throw Error(ErrorKind::Internal, "bundle index changed size between passes (a bug in cubecc)");

  std::string out(entries_start, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  write_le<uint32_t>(out, kOffFormat, kFormatVersion);
  write_le<uint32_t>(out, kOffHeaderBytes, static_cast<uint32_t>(kHeaderBytes));
  write_le<uint64_t>(out, kOffIndexOffset, kHeaderBytes);
  write_le<uint64_t>(out, kOffIndexBytes, index.size());
  write_le<uint64_t>(out, kOffIndexChecksum,
                     checksum(reinterpret_cast<const uint8_t *>(index.data()), index.size()));
  std::memcpy(out.data() + kHeaderBytes, index.data(), index.size());
  for (const std::string &blob : blobs) {
    out += blob;
    out.resize(align(out.size()), '\0');
  }
  write_le<uint64_t>(out, kOffFileBytes, out.size());
  write_le<uint64_t>(out, kOffHeaderChecksum,
                     checksum(reinterpret_cast<const uint8_t *>(out.data()), kOffHeaderChecksum));
  return out;
}

std::string reseal_for_testing(std::string bytes) {
  if (bytes.size() < kHeaderBytes)
    return bytes;
  auto *data = reinterpret_cast<uint8_t *>(bytes.data());
  write_le<uint64_t>(bytes, kOffFileBytes, bytes.size());
  uint64_t index_offset = read_le<uint64_t>(data + kOffIndexOffset);
  uint64_t index_bytes = read_le<uint64_t>(data + kOffIndexBytes);
  if (index_offset == kHeaderBytes && index_bytes <= bytes.size() - kHeaderBytes &&
      index_bytes <= FLATBUFFERS_MAX_BUFFER_SIZE) {
    // The index is read from an aligned copy; entry checksums are patched in the bytes.
    std::vector<uint64_t> aligned(index_bytes / 8 + 1);
    std::memcpy(aligned.data(), data + kHeaderBytes, index_bytes);
    const auto *base = reinterpret_cast<const uint8_t *>(aligned.data());
    flatbuffers::Verifier verifier(base, index_bytes,
                                   flatbuffers::Verifier::Options{64, kMaxTables, true, true});
    if (verifier.VerifyBuffer<fb::Index>(nullptr) && fb::GetIndex(base)->entries() &&
        entries_aligned(fb::GetIndex(base))) {
      for (const fb::EntryRef *ref : *fb::GetIndex(base)->entries()) {
        if (ref->size() > bytes.size() || ref->offset() > bytes.size() - ref->size())
          continue;
        // The struct's fields are five u64s in schema order: the checksum is the last.
        static_assert(sizeof(fb::EntryRef) == 40);
        uint64_t at = kHeaderBytes + (reinterpret_cast<const uint8_t *>(ref) - base) + 32;
        write_le<uint64_t>(bytes, at, checksum(data + ref->offset(), ref->size()));
      }
    }
    write_le<uint64_t>(bytes, kOffIndexChecksum, checksum(data + kHeaderBytes, index_bytes));
  }
  write_le<uint64_t>(bytes, kOffHeaderChecksum, checksum(data, kOffHeaderChecksum));
  return bytes;
}

std::vector<std::string> merge_contents(BundleContents &into, BundleContents from) {
  std::vector<std::string> notes;
  std::map<std::pair<std::string, std::string>, size_t> at; // (hash, options) -> index in into
  for (size_t i = 0; i < into.entries.size(); ++i)
    at[{into.entries[i].hash.hex(), into.entries[i].options}] = i;
  for (Entry &e : from.entries) {
    auto found = at.find({e.hash.hex(), e.options});
    if (found == at.end()) {
      at[{e.hash.hex(), e.options}] = into.entries.size();
      into.entries.push_back(std::move(e));
      continue;
    }
    Entry &mine = into.entries[found->second];
    for (Artifact &a : e.artifacts) {
      auto same = std::find_if(mine.artifacts.begin(), mine.artifacts.end(),
                               [&](const Artifact &m) { return same_binary_kind(m, a); });
      if (same == mine.artifacts.end()) {
        mine.artifacts.push_back(std::move(a));
      } else if (same->data != a.data) {
        notes.push_back(fmt::format("kernel '{}' ({}): replaced the {} {} binary", mine.name,
                                    mine.options, a.target.target, a.target.format));
        *same = std::move(a);
      }
    }
  }
  std::map<std::string, size_t> record_at; // key -> index in into.tuning
  for (size_t i = 0; i < into.tuning.size(); ++i)
    record_at[into.tuning[i].key] = i;
  for (TuningEntry &t : from.tuning) {
    auto [found, added] = record_at.try_emplace(t.key, into.tuning.size());
    if (added) {
      into.tuning.push_back(std::move(t));
    } else if (into.tuning[found->second].record != t.record) {
      notes.push_back(fmt::format("tuning record '{}': replaced", t.key));
      into.tuning[found->second] = std::move(t);
    }
  }
  for (std::string &target : from.metadata.targets)
    if (std::find(into.metadata.targets.begin(), into.metadata.targets.end(), target) ==
        into.metadata.targets.end())
      into.metadata.targets.push_back(std::move(target));
  // Each entry's binaries in the order a build makes them: by backend, in the order the targets
  // name the backends (a backend's own binaries keep their order). So the merge of a build's
  // shards is that build, byte for byte.
  std::vector<std::string_view> backend_order;
  auto backend_of = [](std::string_view target) { return target.substr(0, target.find(':')); };
  for (const std::string &t : into.metadata.targets)
    if (std::find(backend_order.begin(), backend_order.end(), backend_of(t)) == backend_order.end())
      backend_order.push_back(backend_of(t));
  auto rank = [&](const Artifact &a) {
    return std::find(backend_order.begin(), backend_order.end(), backend_of(a.target.target)) -
           backend_order.begin();
  };
  for (Entry &e : into.entries)
    std::stable_sort(e.artifacts.begin(), e.artifacts.end(),
                     [&](const Artifact &a, const Artifact &b) { return rank(a) < rank(b); });
  for (auto &toolkit : from.metadata.toolkits)
    if (std::find(into.metadata.toolkits.begin(), into.metadata.toolkits.end(), toolkit) ==
        into.metadata.toolkits.end())
      into.metadata.toolkits.push_back(std::move(toolkit));
  return notes;
}

//===- Reading -------------------------------------------------------------------------------===//

/// The file's bytes: a read-only private mapping, or a copy in memory (aligned for FlatBuffers);
/// the header and the index copied out of the file; and what the file was when it was opened.
struct Bundle::Mapping {
  void *address = nullptr;
  size_t length = 0;
  std::unique_ptr<uint64_t[]> memory;
  std::unique_ptr<uint64_t[]> head;
  /// The opened file (kept to notice a change under the mapping); -1 for bytes in memory.
  int fd = -1;
  off_t size = 0;
  timespec modified{};
  /// Set once the file is seen changed; `changed_message` says how (guarded by `mutex`).
  std::atomic<bool> changed{false};
  std::mutex mutex;
  std::string changed_message;
  /// Whether the signature matches the file (computed once, by signature_refusal).
  std::once_flag signature_checked;
  bool signature_valid = false;
  /// Lookups by key: an open-addressing table of entry index + 1 (0: an empty slot), built on
  /// the first lookup; empty when a binary search is used instead (find_entry).
  std::once_flag key_table_built;
  std::vector<uint32_t> key_table;
  ~Mapping() {
    if (address)
      ::munmap(address, length);
    if (fd >= 0)
      ::close(fd);
  }
};

Bundle::~Bundle() = default;

namespace {

/// Reads `size` bytes at `offset` of `fd` into `out`; false when the file is shorter.
bool read_at(int fd, uint64_t offset, uint64_t size, uint8_t *out) {
  while (size > 0) {
    ssize_t got = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    out += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<uint64_t>(got);
  }
  return true;
}

} // namespace

std::shared_ptr<const Bundle> Bundle::open(const std::string &path, OpenMode mode) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; nothing but a regular file is
  // read, and for a regular file the flag changes nothing (it is cleared all the same).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Error(ErrorKind::Environment, fmt::format("{}: cannot open the environment bundle: {}",
                                                    path, std::strerror(errno)));
  std::shared_ptr<Bundle> bundle(new Bundle());
  bundle->name_ = path;
  bundle->mapping_ = std::make_unique<Mapping>();
  Mapping &m = *bundle->mapping_;
  m.fd = fd; // closed with the mapping from here on
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(ErrorKind::Environment, fmt::format("{}: cannot open the environment bundle: {}",
                                                    path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw Error(
        ErrorKind::Environment,
        fmt::format("{}: cannot open the environment bundle: not a regular file ({}); cubecc reads "
                    "only regular files",
                    path, runtime::file_kind(st.st_mode)));
  if (int flags = ::fcntl(fd, F_GETFL); flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (mode == OpenMode::InMemory) {
    uint64_t size = static_cast<uint64_t>(st.st_size);
    auto memory = std::make_unique_for_overwrite<uint64_t[]>(size / 8 + 1); // filled just below
    if (!read_at(fd, 0, size, reinterpret_cast<uint8_t *>(memory.get())))
      throw Error(ErrorKind::Environment,
                  fmt::format("{}: the file shrank while it was read", path));
    return in_memory(std::move(memory), size, path);
  }
  m.size = st.st_size;
  m.modified = st.st_mtim;
  bundle->size_ = static_cast<uint64_t>(st.st_size);

  // The header and the index (with its padding), read (not mapped) into memory: check() sees
  // them, and lookups use them, whatever happens to the file later. The index size is the
  // header's, bounded by the file: check() refuses a header that does not describe this file.
  uint64_t head_bytes = std::min(bundle->size_, kHeaderBytes);
  if (head_bytes == kHeaderBytes) {
    uint8_t header[kHeaderBytes];
    if (!read_at(fd, 0, kHeaderBytes, header))
      throw Error(ErrorKind::Environment,
                  fmt::format("{}: the file shrank while it was opened", path));
    head_bytes += std::min({read_le<uint64_t>(header + kOffIndexBytes),
                            bundle->size_ - kHeaderBytes, uint64_t(FLATBUFFERS_MAX_BUFFER_SIZE)});
    head_bytes = std::min(bundle->size_, padded_to_entry_alignment(head_bytes));
  }
  m.head = std::make_unique_for_overwrite<uint64_t[]>(head_bytes / 8 + 1); // filled just below
  if (!read_at(fd, 0, head_bytes, reinterpret_cast<uint8_t *>(m.head.get())))
    throw Error(ErrorKind::Environment,
                fmt::format("{}: the file shrank while it was opened", path));
  bundle->head_ = reinterpret_cast<const uint8_t *>(m.head.get());
  if (bundle->size_ >= kHeaderBytes + kSignatureTrailerBytes &&
      !read_at(fd, bundle->size_ - kSignatureTrailerBytes, kSignatureTrailerBytes,
               bundle->tail_.data()))
    throw Error(ErrorKind::Environment,
                fmt::format("{}: the file shrank while it was opened", path));
  bundle->check();

  if (st.st_size > 0) {
    void *address = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED)
      throw Error(ErrorKind::Environment, fmt::format("{}: cannot map the environment bundle: {}",
                                                      path, std::strerror(errno)));
    m.address = address;
    m.length = static_cast<size_t>(st.st_size);
    bundle->data_ = static_cast<const uint8_t *>(address);
  }
  return bundle;
}

std::shared_ptr<const Bundle> Bundle::from_bytes(std::string_view bytes, std::string name) {
  auto memory = std::make_unique<uint64_t[]>(bytes.size() / 8 + 1);
  std::memcpy(memory.get(), bytes.data(), bytes.size());
  return in_memory(std::move(memory), bytes.size(), std::move(name));
}

std::shared_ptr<const Bundle> Bundle::in_memory(std::unique_ptr<uint64_t[]> memory, uint64_t size,
                                                std::string name) {
  std::shared_ptr<Bundle> bundle(new Bundle());
  bundle->name_ = std::move(name);
  bundle->mapping_ = std::make_unique<Mapping>();
  bundle->mapping_->memory = std::move(memory);
  bundle->data_ = reinterpret_cast<const uint8_t *>(bundle->mapping_->memory.get());
  bundle->head_ = bundle->data_;
  bundle->size_ = size;
  if (size >= kHeaderBytes + kSignatureTrailerBytes)
    std::memcpy(bundle->tail_.data(), bundle->data_ + size - kSignatureTrailerBytes,
                kSignatureTrailerBytes);
  bundle->check();
  return bundle;
}

std::string Bundle::file_changed() const {
  Mapping &m = *mapping_;
  if (m.fd < 0)
    return {};
  if (!m.changed.load(std::memory_order_acquire)) {
    struct stat st {};
    bool statted = ::fstat(m.fd, &st) == 0;
    if (statted && st.st_size == m.size && st.st_mtim.tv_sec == m.modified.tv_sec &&
        st.st_mtim.tv_nsec == m.modified.tv_nsec)
      return {};
    std::lock_guard lock(m.mutex);
    if (!m.changed.load(std::memory_order_relaxed)) {
      m.changed_message = fmt::format(
          "the file {} since it was opened, so it is no longer used: replace a bundle that "
          "applications may have open by renaming the new file over it (mv), never by copying "
          "over it (cp)",
          !statted ? "cannot be examined"
          : st.st_size != m.size
              ? fmt::format("changed size ({} bytes, now {})", m.size, st.st_size)
              : std::string("was modified"));
      m.changed.store(true, std::memory_order_release);
    }
  }
  std::lock_guard lock(m.mutex);
  return m.changed_message;
}

const void *Bundle::index() const {
  return head_ + kHeaderBytes;
}

uint32_t Bundle::format_version() const {
  return read_le<uint32_t>(head_ + kOffFormat);
}

void Bundle::check() {
  auto fail = [&](const std::string &what) {
    throw Error(ErrorKind::Environment, fmt::format("{}: {}", name_, what));
  };
  if (size_ < kHeaderBytes)
    fail(fmt::format("truncated or not an environment bundle: {} bytes, less than its {}-byte "
                     "header",
                     size_, kHeaderBytes));
  if (std::memcmp(head_, kMagic, sizeof kMagic) != 0)
    fail("not an environment bundle (bad magic at offset 0); build one with `cubecc env build`");
  if (uint32_t version = format_version(); version != kFormatVersion)
    fail(fmt::format("bundle format version {} at offset {}; this cubecc reads version {}: "
                     "rebuild the bundle with this cubecc's `cubecc env build`",
                     version, kOffFormat, kFormatVersion));
  uint64_t stored = read_le<uint64_t>(head_ + kOffHeaderChecksum);
  if (stored != checksum(head_, kOffHeaderChecksum))
    fail(fmt::format("the header is damaged (checksum at offset {} does not match)",
                     kOffHeaderChecksum));
  if (read_le<uint32_t>(head_ + kOffHeaderBytes) != kHeaderBytes)
    fail(fmt::format("header size {} at offset {}; expected {}",
                     read_le<uint32_t>(head_ + kOffHeaderBytes), kOffHeaderBytes, kHeaderBytes));
  // The bundle is the header's size; a signed bundle's file has a signature trailer after it.
  uint64_t file_bytes = read_le<uint64_t>(head_ + kOffFileBytes);
  if (file_bytes != size_) {
    if (file_bytes < kHeaderBytes || file_bytes > size_ ||
        size_ - file_bytes != kSignatureTrailerBytes || !has_signature_magic(tail_))
      fail(fmt::format("truncated or extended: the header says {} bytes, the file has {}",
                       file_bytes, size_));
    signature_ = parse_signature_trailer(tail_, file_bytes, name_);
  }
  bundle_bytes_ = file_bytes;
  uint64_t index_offset = read_le<uint64_t>(head_ + kOffIndexOffset);
  uint64_t index_bytes = read_le<uint64_t>(head_ + kOffIndexBytes);
  if (index_offset != kHeaderBytes || index_bytes > bundle_bytes_ - kHeaderBytes ||
      index_bytes > FLATBUFFERS_MAX_BUFFER_SIZE)
    fail(fmt::format("the index (offset {}, {} bytes) lies outside the file", index_offset,
                     index_bytes));
  if (read_le<uint64_t>(head_ + kOffIndexChecksum) != checksum(head_ + kHeaderBytes, index_bytes))
    fail(fmt::format("the index at offset {} is damaged (its checksum does not match)",
                     kHeaderBytes));
  if (!zero_padding(head_, kHeaderBytes + index_bytes, bundle_bytes_))
    fail(fmt::format("the padding after the index, at offset {}, is not zero (the file was "
                     "changed after it was written); rebuild the bundle",
                     kHeaderBytes + index_bytes));
  flatbuffers::Verifier verifier(head_ + kHeaderBytes, index_bytes,
                                 flatbuffers::Verifier::Options{64, kMaxTables, true, true});
  if (!verifier.VerifyBuffer<fb::Index>(nullptr))
    fail(fmt::format("the index at offset {} is not a valid index", kHeaderBytes));
  const fb::Index *idx = fb::GetIndex(index());
  if (!idx->cubecc_version() || !idx->entries())
    fail("the index lacks its cubecc version or its entries");
  if (!entries_aligned(idx))
    fail(fmt::format("the index's entry table is misaligned"));
  const auto &entries = *idx->entries();
  for (flatbuffers::uoffset_t i = 0; i < entries.size(); ++i) {
    const fb::EntryRef *e = entries.Get(i);
    uint64_t end = kHeaderBytes + index_bytes;
    if (e->offset() < end || e->offset() % kEntryAlignment != 0 || e->size() > bundle_bytes_ ||
        e->offset() > bundle_bytes_ - e->size())
      fail(fmt::format("entry {} (offset {}, {} bytes) lies outside the entries' part of the "
                       "file",
                       i, e->offset(), e->size()));
    if (i > 0 && !key_less(*entries.Get(i - 1), e->key_high(), e->key_low()))
      fail(fmt::format("the index is not sorted at entry {}", i));
  }
  if (const auto *names = idx->names()) {
    if (!structs_aligned(*names))
      fail("the index's name table is misaligned");
    for (flatbuffers::uoffset_t i = 0; i < names->size(); ++i) {
      const fb::NameRef *n = names->Get(i);
      if (n->entry() >= entries.size() || n->reserved() != 0)
        fail(fmt::format("name {} of the index refers to entry {} of {}{}", i, n->entry(),
                         entries.size(),
                         n->reserved() != 0 ? " and its reserved field is not 0" : ""));
      if (i > 0 && !name_less(*names->Get(i - 1), *n))
        fail(fmt::format("the index's name table is not sorted at name {}", i));
    }
  }
  if (idx->tuning())
    for (flatbuffers::uoffset_t i = 0; i < idx->tuning()->size(); ++i) {
      const fb::Tuning *t = idx->tuning()->Get(i);
      if (!t->key() || !t->record() ||
          (i > 0 && !(view(idx->tuning()->Get(i - 1)->key()) < view(t->key()))))
        fail(fmt::format("tuning record {} is unnamed or out of order", i));
    }

  metadata_.cubecc_version = std::string(view(idx->cubecc_version()));
  metadata_.created_unix = idx->created_unix();
  metadata_.created_host = std::string(view(idx->created_host()));
  metadata_.created_by = std::string(view(idx->created_by()));
  if (idx->targets())
    for (const flatbuffers::String *t : *idx->targets())
      metadata_.targets.emplace_back(view(t));
  if (idx->toolkits())
    for (const fb::Toolkit *t : *idx->toolkits())
      metadata_.toolkits.emplace_back(view(t->name()), view(t->version()));
  version_matches_ = metadata_.cubecc_version == cubecc::version();
  entry_state_ = std::make_unique<std::atomic<uint8_t>[]>(entries.size());
}

size_t Bundle::num_entries() const {
  return fb::GetIndex(index())->entries()->size();
}

size_t Bundle::num_tuning_records() const {
  const fb::Index *idx = fb::GetIndex(index());
  return idx->tuning() ? idx->tuning()->size() : 0;
}

uint64_t Bundle::entry_offset(size_t i) const {
  return fb::GetIndex(index())->entries()->Get(static_cast<flatbuffers::uoffset_t>(i))->offset();
}

uint64_t Bundle::entry_bytes(size_t i) const {
  return fb::GetIndex(index())->entries()->Get(static_cast<flatbuffers::uoffset_t>(i))->size();
}

std::string Bundle::verify_entry(size_t i) const {
  const fb::EntryRef *ref =
      fb::GetIndex(index())->entries()->Get(static_cast<flatbuffers::uoffset_t>(i));
  const uint8_t *bytes = data_ + ref->offset();
  uint8_t state = entry_state_[i].load(std::memory_order_acquire);
  if (state == 1)
    return {};
  if (state == 0) {
    bool sound = checksum(bytes, ref->size()) == ref->checksum() &&
                 zero_padding(data_, ref->offset() + ref->size(), bundle_bytes_);
    if (sound) {
      flatbuffers::Verifier verifier(bytes, ref->size(),
                                     flatbuffers::Verifier::Options{64, kMaxTables, true, true});
      sound = verifier.VerifyBuffer<fb::Entry>(nullptr);
      std::string error;
      sound = sound && decode_entry(flatbuffers::GetRoot<fb::Entry>(bytes), error, nullptr);
    }
    state = sound ? 1 : 2;
    entry_state_[i].store(state, std::memory_order_release);
    if (sound)
      return {};
  }
  // Damaged: say how (recomputed; damage is rare and the message is for a human).
  if (checksum(bytes, ref->size()) != ref->checksum())
    return fmt::format("entry {} at offset {} ({} bytes) is damaged: its checksum does not match; "
                       "rebuild the bundle",
                       i, ref->offset(), ref->size());
  if (!zero_padding(data_, ref->offset() + ref->size(), bundle_bytes_))
    return fmt::format("entry {} at offset {}: the padding after it is not zero (the file was "
                       "changed after it was written); rebuild the bundle",
                       i, ref->offset());
  flatbuffers::Verifier verifier(bytes, ref->size(),
                                 flatbuffers::Verifier::Options{64, kMaxTables, true, true});
  if (!verifier.VerifyBuffer<fb::Entry>(nullptr))
    return fmt::format("entry {} at offset {} is not a valid entry", i, ref->offset());
  std::string error;
  decode_entry(flatbuffers::GetRoot<fb::Entry>(bytes), error, nullptr);
  return fmt::format("entry {} at offset {}: {}", i, ref->offset(), error);
}

std::optional<Entry> Bundle::read_entry(size_t i, std::string &error) const {
  if (i >= num_entries()) {
    error = fmt::format("no entry {}", i);
    return std::nullopt;
  }
  if (error = file_changed(); !error.empty())
    return std::nullopt;
  if (error = verify_entry(i); !error.empty())
    return std::nullopt;
  const fb::EntryRef *ref =
      fb::GetIndex(index())->entries()->Get(static_cast<flatbuffers::uoffset_t>(i));
  Entry entry;
  if (!decode_entry(flatbuffers::GetRoot<fb::Entry>(data_ + ref->offset()), error, &entry))
    return std::nullopt;
  return entry;
}

std::vector<TuningEntry> Bundle::tuning_records() const {
  std::vector<TuningEntry> out;
  const fb::Index *idx = fb::GetIndex(index());
  if (idx->tuning())
    for (const fb::Tuning *t : *idx->tuning())
      out.push_back({std::string(view(t->key())), std::string(view(t->record()))});
  return out;
}

BundleContents Bundle::contents() const {
  BundleContents out;
  out.metadata = metadata_;
  for (size_t i = 0; i < num_entries(); ++i) {
    std::string error;
    std::optional<Entry> entry = read_entry(i, error);
    if (!entry)
      throw Error(ErrorKind::Environment, fmt::format("{}: {}", name_, error));
    out.entries.push_back(std::move(*entry));
  }
  out.tuning = tuning_records();
  return out;
}

runtime::NamedKernelLookup
Bundle::find_named_kernel(std::string_view library, std::string_view kernel,
                          std::string_view configuration, std::string_view options,
                          std::span<const runtime::BinaryTarget> targets) const {
  runtime::NamedKernelLookup result;
  auto shown_configuration = [](std::string_view c) {
    return c.empty() ? std::string("no configuration") : fmt::format("configuration '{}'", c);
  };
  // Said only when the kernel is not found: a hit formats nothing.
  auto wanted = [&] {
    return fmt::format("kernel '{}' ({}) of library '{}' compiled with {}", kernel,
                       shown_configuration(configuration), library, options);
  };
  // Before the mapping is touched: a file truncated under it would be SIGBUS.
  if (std::string changed = file_changed(); !changed.empty()) {
    result.lookup.outcome = runtime::EnvironmentLookup::Rejected;
    result.lookup.why = std::move(changed);
    return result;
  }
  auto serve = [&](const fb::Entry *e) {
    result.entry_found = true;
    result.hash = {e->hash_high(), e->hash_low()};
    if (e->parameter_names())
      for (const flatbuffers::String *p : *e->parameter_names())
        result.parameter_names.emplace_back(view(p));
    result.library_build = std::string(view(e->library_build()));
    if (e->unread_parameters())
      result.unread_parameters.assign(e->unread_parameters()->begin(),
                                      e->unread_parameters()->end());
    result.lookup = find_unchanged(result.hash, options, targets);
  };
  // The name table points at the entry: only that one is verified (a lookup in a bundle of
  // thousands of kernels reads no other). It is only a guide: the entry's own strings decide.
  if (const auto *names = fb::GetIndex(index())->names()) {
    const uint64_t key = name_key(library, kernel, configuration, options);
    size_t lo = 0, hi = names->size();
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (names->Get(static_cast<flatbuffers::uoffset_t>(mid))->key() < key)
        lo = mid + 1;
      else
        hi = mid;
    }
    for (; lo < names->size() && names->Get(static_cast<flatbuffers::uoffset_t>(lo))->key() == key;
         ++lo) {
      size_t i = names->Get(static_cast<flatbuffers::uoffset_t>(lo))->entry();
      if (!verify_entry(i).empty())
        continue; // damaged: the scan below says so if nothing else serves
      const auto *e = flatbuffers::GetRoot<fb::Entry>(data_ + entry_offset(i));
      if (view(e->library()) == library && view(e->name()) == kernel &&
          view(e->configuration()) == configuration && view(e->options()) == options) {
        serve(e);
        return result;
      }
    }
  }
  // Not in the name table (or a bundle without one): every entry, to find it or to say what the
  // bundle holds instead.
  std::vector<std::string> libraries, same_library;
  std::string damaged;
  for (size_t i = 0; i < num_entries(); ++i) {
    if (std::string damage = verify_entry(i); !damage.empty()) {
      damaged = std::move(damage); // said only if nothing matches: it may have been the one
      continue;
    }
    const auto *e = flatbuffers::GetRoot<fb::Entry>(data_ + entry_offset(i));
    std::string_view entry_library = view(e->library());
    if (entry_library != library) {
      if (!entry_library.empty() &&
          std::find(libraries.begin(), libraries.end(), entry_library) == libraries.end())
        libraries.emplace_back(entry_library);
      continue;
    }
    if (view(e->name()) != kernel || view(e->configuration()) != configuration ||
        view(e->options()) != options) {
      same_library.push_back(fmt::format("'{}' ({}, {})", view(e->name()),
                                         shown_configuration(view(e->configuration())),
                                         view(e->options())));
      continue;
    }
    serve(e);
    return result;
  }
  std::string has;
  if (!same_library.empty()) {
    std::sort(same_library.begin(), same_library.end());
    has = fmt::format("the bundle's kernels of library '{}' are {}", library,
                      fmt::join(same_library, ", "));
  } else if (!libraries.empty()) {
    std::sort(libraries.begin(), libraries.end());
    has = fmt::format("the bundle holds no kernel of library '{}'; its libraries are '{}'", library,
                      fmt::join(libraries, "', '"));
  } else {
    has = "the bundle records no library names (it was built by an older cubecc, or from IR "
          "files): rebuild it from the kernel library with `cubecc env build`";
  }
  if (!damaged.empty()) {
    // The damaged entry may be the kernel asked for: the bundle is at fault, not the name.
    result.lookup.outcome = runtime::EnvironmentLookup::Rejected;
    result.lookup.why = fmt::format("no sound {}: {}, and it may have been that one; rebuild the "
                                    "bundle ({})",
                                    wanted(), damaged, has);
    return result;
  }
  result.lookup.why = fmt::format("no {}: {}", wanted(), has);
  return result;
}

namespace {

/// Whether a device that loads `wanted` binaries takes one made for `target`: the same target, or
/// a variant of a family it names ("vulkan" takes "vulkan:nvidia": what the binary relies on is
/// then compared by `takes`).
bool target_accepts(std::string_view wanted, std::string_view target) {
  return target == wanted ||
         (wanted.find(':') == std::string_view::npos && target.size() > wanted.size() &&
          target.starts_with(wanted) && target[wanted.size()] == ':');
}

/// Whether a device with the features `device` takes a binary that relies on `artifact` (both
/// TargetFeatures::fingerprint() strings, "" for targets whose arch decides); if not, `why`.
/// `rank` orders the binaries it takes: those that use more of what sets GPUs apart from the
/// baseline (a fused fma, a subgroup layout or size, matrix shapes) first, then those that rely on
/// fewer flags (the baseline computes an exact fma through f64, which an NVIDIA GPU need not).
/// `has` is the device's features read back once per lookup (nothing for "").
bool takes(std::string_view artifact, std::string_view device,
           const std::optional<codegen::TargetFeatures> &has, size_t &rank, std::string &why) {
  rank = 0;
  if (artifact.empty() && device.empty())
    return true;
  std::optional<codegen::TargetFeatures> relies =
      codegen::TargetFeatures::from_fingerprint(artifact);
  if (!relies) {
    why = "is not one cubecc writes (a damaged or foreign bundle): rebuild it";
    return false;
  }
  if (!has) { // a device describes itself with fingerprint(); cannot happen
    why = "cannot be compared with this device's features";
    return false;
  }
  if (std::string unmet = relies->unmet_on(*has); !unmet.empty()) {
    why = "relies on what this device lacks: " + unmet;
    return false;
  }
  std::string_view flags = artifact.substr(0, artifact.find('.')); // the leading 0s and 1s
  size_t distinct = size_t(relies->fused_fma) + size_t(relies->linear_subgroups) +
                    size_t(relies->subgroup_size != 0) +
                    static_cast<size_t>(std::popcount(relies->matrix_shapes));
  rank = distinct * 64 + (63 - static_cast<size_t>(std::count(flags.begin(), flags.end(), '1')));
  return true;
}

} // namespace

runtime::EnvironmentLookup
Bundle::find_kernel(const ir::Hash128 &hash, std::string_view options,
                    std::span<const runtime::BinaryTarget> targets) const {
  // Before the mapping is touched: a file truncated under it would be SIGBUS.
  if (std::string changed = file_changed(); !changed.empty()) {
    runtime::EnvironmentLookup result;
    result.outcome = runtime::EnvironmentLookup::Rejected;
    result.why = std::move(changed);
    return result;
  }
  return find_unchanged(hash, options, targets);
}

runtime::EnvironmentLookup
Bundle::find_unchanged(const ir::Hash128 &hash, std::string_view options,
                       std::span<const runtime::BinaryTarget> targets) const {
  runtime::EnvironmentLookup result;
  if (!version_matches_) {
    result.outcome = runtime::EnvironmentLookup::Rejected;
    result.why = fmt::format("the bundle was built by cubecc {}, this is cubecc {}: rebuild it",
                             metadata_.cubecc_version, cubecc::version());
    return result;
  }
  const auto &entries = *fb::GetIndex(index())->entries();
  size_t lo = find_entry(entry_key(hash, options));
  if (lo == entries.size()) {
    result.why = "no entry for this kernel and options";
    return result;
  }
  if (std::string damage = verify_entry(lo); !damage.empty()) {
    result.outcome = runtime::EnvironmentLookup::Rejected;
    result.why = std::move(damage);
    return result;
  }
  const fb::Entry *entry = flatbuffers::GetRoot<fb::Entry>(
      data_ + entries.Get(static_cast<flatbuffers::uoffset_t>(lo))->offset());
  if (entry->hash_high() != hash.high || entry->hash_low() != hash.low ||
      view(entry->options()) != options) {
    result.outcome = runtime::EnvironmentLookup::Rejected;
    result.why = fmt::format("entry {} is filed under this kernel's key but holds another", lo);
    return result;
  }
  std::string rejected, held;
  for (const runtime::BinaryTarget &want : targets) {
    // Of the binaries whose needs the device meets, the best ranked (`takes`: vulkan:nvidia's
    // before vulkan's on an NVIDIA GPU); the first in the entry on a tie.
    const fb::Artifact *best = nullptr;
    size_t best_rank = 0;
    const std::optional<codegen::TargetFeatures> device =
        codegen::TargetFeatures::from_fingerprint(want.features);
    for (const fb::Artifact *a : *entry->artifacts()) {
      if (!target_accepts(want.target, view(a->target())) || view(a->format()) != want.format)
        continue;
      size_t rank = 0;
      std::string why;
      if (!takes(view(a->features()), want.features, device, rank, why)) {
        rejected = fmt::format("its {} binary {}", view(a->target()), why);
        continue;
      }
      if (!want.toolkit.empty() && view(a->toolkit()) != want.toolkit) {
        rejected = fmt::format("its {} {} was built by {}, this runtime compiles with {}",
                               view(a->target()), want.format, view(a->toolkit()), want.toolkit);
        continue;
      }
      if (!best || rank > best_rank) {
        best = a;
        best_rank = rank;
      }
    }
    if (!best)
      continue;
    std::string why;
    std::optional<codegen::KernelAbi> abi = read_abi(best->abi(), view(entry->name()), why);
    if (!abi) { // cannot happen after verify_entry, which decoded it
      rejected = why;
      continue;
    }
    result.outcome = runtime::EnvironmentLookup::Hit;
    result.binary.target = want;
    result.binary.target.target = std::string(view(best->target()));
    result.binary.target.features = std::string(view(best->features()));
    result.binary.target.toolkit = std::string(view(best->toolkit()));
    result.binary.bytes = std::string_view(reinterpret_cast<const char *>(best->data()->data()),
                                           best->data()->size());
    result.binary.entry = std::string(view(best->entry()));
    result.binary.abi = std::move(*abi);
    return result;
  }
  for (const fb::Artifact *a : *entry->artifacts())
    held += fmt::format("{}{} {}", held.empty() ? "" : ", ", view(a->target()), view(a->format()));
  if (!rejected.empty()) {
    // A binary for this device exists but is unusable: stale, never silently used.
    result.outcome = runtime::EnvironmentLookup::Rejected;
    result.why = rejected;
  } else {
    result.why = fmt::format("no binary for this device (the entry holds: {})",
                             held.empty() ? "nothing" : held);
  }
  return result;
}

namespace {

// The key table: linear probing at a load of at most 1/2. Keys are XXH3 values, so they spread
// on their own; a hostile index whose keys collide makes some key lie further than kMaxProbes
// from its slot, and then the table is not built and lookups use a binary search.
constexpr size_t kMaxProbes = 32;
constexpr size_t kMaxTableEntries = size_t(1) << 22;

size_t home_slot(uint64_t key_high, uint64_t key_low, size_t mask) {
  return static_cast<size_t>(key_high ^ (key_low >> 17)) & mask;
}

std::vector<uint32_t> build_key_table(const flatbuffers::Vector<const fb::EntryRef *> &entries) {
  size_t n = entries.size();
  if (n == 0 || n > kMaxTableEntries)
    return {};
  size_t slots = 1;
  while (slots < 2 * n)
    slots <<= 1;
  std::vector<uint32_t> table(slots, 0);
  for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
    const fb::EntryRef *e = entries.Get(i);
    size_t slot = home_slot(e->key_high(), e->key_low(), slots - 1);
    size_t probes = 0;
    while (table[slot] != 0) {
      if (++probes == kMaxProbes)
        return {};
      slot = (slot + 1) & (slots - 1);
    }
    table[slot] = i + 1;
  }
  return table;
}

} // namespace

size_t Bundle::find_entry(const ir::Hash128 &key) const {
  const auto &entries = *fb::GetIndex(index())->entries();
  Mapping &m = *mapping_;
  std::call_once(m.key_table_built, [&] { m.key_table = build_key_table(entries); });
  auto is_key = [&](size_t i) {
    const fb::EntryRef *e = entries.Get(static_cast<flatbuffers::uoffset_t>(i));
    return e->key_high() == key.high && e->key_low() == key.low;
  };
  if (!m.key_table.empty()) {
    // Every key lies within kMaxProbes of its home slot (the table was built so): a key not
    // met by then, or an empty slot, is not there.
    size_t mask = m.key_table.size() - 1;
    size_t slot = home_slot(key.high, key.low, mask);
    for (size_t probes = 0; probes < kMaxProbes; ++probes, slot = (slot + 1) & mask) {
      uint32_t at = m.key_table[slot];
      if (at == 0)
        break;
      if (is_key(at - 1))
        return at - 1;
    }
    return entries.size();
  }
  size_t lo = 0, hi = entries.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (key_less(*entries.Get(static_cast<flatbuffers::uoffset_t>(mid)), key.high, key.low))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < entries.size() && is_key(lo) ? lo : entries.size();
}

std::optional<std::string> Bundle::find_tuning(std::string_view key) const {
  // The records are in the copy of the index, safe whatever happens to the file; but a bundle
  // seen changed (by a kernel lookup, which says why) answers nothing more.
  if (mapping_->changed.load(std::memory_order_acquire))
    return std::nullopt;
  const fb::Index *idx = fb::GetIndex(index());
  if (!idx->tuning())
    return std::nullopt;
  const auto &records = *idx->tuning();
  size_t lo = 0, hi = records.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (view(records.Get(static_cast<flatbuffers::uoffset_t>(mid))->key()) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == records.size() ||
      view(records.Get(static_cast<flatbuffers::uoffset_t>(lo))->key()) != key)
    return std::nullopt;
  return std::string(view(records.Get(static_cast<flatbuffers::uoffset_t>(lo))->record()));
}

//===- Signatures ----------------------------------------------------------------------------===//

std::string Bundle::signature_refusal(std::span<const PublicKey> trusted) const {
  if (!signature_)
    return fmt::format("the bundle is not signed: sign it where it is built (`cubecc env sign {} "
                       "--key KEY.key`)",
                       name_);
  const PublicKey &signer = signature_->signer;
  if (std::find(trusted.begin(), trusted.end(), signer) == trusted.end()) {
    std::vector<std::string> ids;
    for (const PublicKey &k : trusted)
      ids.push_back(k.id());
    return fmt::format(
        "signed by key {}, which is not trusted here ({}): trust its public key "
        "(CUBECC_TRUSTED_KEYS, EnvironmentOptions::trusted_keys), or sign the bundle with a "
        "trusted one",
        signer.id(),
        ids.empty() ? std::string("no key is trusted")
                    : fmt::format("the trusted keys are {}", fmt::join(ids, ", ")));
  }
  Mapping &m = *mapping_;
  if (std::string changed = file_changed(); !changed.empty()) // before the mapping is read
    return changed;
  std::call_once(m.signature_checked, [&] {
    m.signature_valid = signature_matches(std::span(data_, bundle_bytes_), *signature_);
  });
  if (!m.signature_valid)
    return fmt::format("the signature by key {} does not match the file: it was changed after it "
                       "was signed (or signed wrongly); rebuild and sign it again",
                       signer.id());
  return {};
}

std::string Bundle::refusal(const runtime::EnvironmentOptions &options) const {
  std::vector<PublicKey> trusted;
  try {
    trusted = trusted_keys(options);
  } catch (const Error &e) {
    return fmt::format("{}: cannot check its signature: {}", name_, e.what());
  }
  std::string why = signature_refusal(trusted);
  return why.empty() ? why
                     : fmt::format("{}: {}; only bundles signed by a trusted key are used here",
                                   name_, why);
}

} // namespace cubecc::environments
