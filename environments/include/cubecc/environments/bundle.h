//===- bundle.h - Environment bundles: compiled kernels and tuning records in one file
//---------===//
//
// An environment bundle lets an application start without JIT compilation or tuning. It is one
// file (docs/environments.md has the layout):
//   - a fixed 64-byte header: magic, format version, sizes, checksums of the header and index;
//   - the index (a FlatBuffer): the cubecc version and toolkits that built it, creation metadata,
//     entry references sorted by key, tuning records sorted by key;
//   - one entry per kernel and compile options (a FlatBuffer each, with its own checksum): the
//     kernel's name and configuration, and its artifacts — a binary per target (CUBIN per sm_XX,
//     PTX, HIP code object per gfx arch, SPIR-V, IR text) with launch metadata.
// An entry's key is the kernel's structural hash (as traced, before optimization) with its
// compile options; each artifact also names its target, the feature fingerprint its code assumes
// and the backend compiler that made it, so a changed kernel, option, device feature set or
// toolkit never gets a stale binary.
//
// Opening reads the header and the index into memory and checks them (O(entries) bytes hashed,
// nothing decoded), and maps the rest of the file; an entry is verified (checksum, FlatBuffers
// verifier, decoded metadata) on its first use. Lookups are binary searches in the copy of the
// index. Nothing in a damaged or hostile file can crash the reader: it is an Error at open, or a
// rejected entry at lookup. A file changed under an open bundle (copied over rather than renamed
// over) is noticed before the mapping is touched: from then on every kernel lookup is rejected,
// saying so, and no tuning record is found (docs/environments.md, "Deploying a bundle").
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/environments/signature.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/runtime/environment_source.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::environments {

/// The bundle format this cubecc reads and writes.
inline constexpr uint32_t kFormatVersion = 1;
/// The bytes every bundle starts with.
inline constexpr char kMagic[8] = {'\x7f', 'C', 'U', 'B', 'E', 'E', 'N', 'V'};
inline constexpr uint64_t kHeaderBytes = 64;

/// One compiled form of a kernel.
struct Artifact {
  runtime::BinaryTarget target;
  std::string entry; ///< the entry symbol (C-family targets)
  codegen::KernelAbi abi;
  std::string data;
};

/// One kernel compiled with one set of options.
struct Entry {
  ir::Hash128 hash;          ///< structural hash of the kernel as given (before optimization)
  std::string options;       ///< "-O2"
  std::string name;          ///< the kernel's name
  std::string configuration; ///< its comptime configuration, when registered with one
  std::vector<Artifact> artifacts;
  /// The IR parameters' names, in order: with the artifacts' launch metadata, all a runtime
  /// needs to check launches of a kernel it loads by name (Runtime::kernel_from_environment).
  /// Empty in bundles built before they were recorded.
  std::vector<std::string> parameter_names;
  /// The kernel library it was traced from (library_name_of_input) and which build of it
  /// (library_build_of); both "" when the kernel did not come from a library.
  std::string library;
  std::string library_build;
  /// The parameters the kernel never reads, ascending (a launch refuses a strided tensor for a
  /// tensor whose strides are all unread). Empty in bundles built before it was recorded.
  std::vector<uint32_t> unread_parameters;
};

struct TuningEntry {
  std::string key;    ///< autotune::record_key
  std::string record; ///< autotune's serialized record
};

struct Metadata {
  std::string cubecc_version; ///< of the cubecc that built it
  int64_t created_unix = 0;   ///< 0: not recorded
  std::string created_host;   ///< empty: not recorded
  std::string created_by;     ///< the tool ("cubecc env build"), or its command line if asked
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, std::string>> toolkits; ///< (name, version)
};

struct BundleContents {
  Metadata metadata;
  std::vector<Entry> entries;
  std::vector<TuningEntry> tuning;
};

/// The index key of an entry: xxh3-128 of the kernel hash and the options.
ir::Hash128 entry_key(const ir::Hash128 &hash, std::string_view options);

/// What a bundle records about its making beyond its contents. The defaults record nothing that
/// differs between two builds of the same inputs with the same options and toolkits, so those
/// two bundles are byte-identical (reproducible builds).
struct Provenance {
  /// The creation time, in seconds since 1970. Unset: $SOURCE_DATE_EPOCH where it is set (the
  /// reproducible-builds.org convention), else not recorded (0).
  std::optional<int64_t> created_unix;
  bool record_host = false; ///< this machine's host name
};

/// Metadata for a bundle made by `created_by` in this process: this cubecc's version, and the
/// time and host as `provenance` says. Throws runtime::Error (InvalidArgument) when
/// $SOURCE_DATE_EPOCH is needed but is not a non-negative number of seconds.
Metadata current_metadata(std::string created_by, const Provenance &provenance = {});

/// The last second of year 9999 (UTC): the latest creation time a bundle records.
inline constexpr int64_t kLatestUnixSeconds = 253402300799;

/// `text` as a creation time: a number of seconds since 1970, from 0 to kLatestUnixSeconds,
/// nothing else.
std::optional<int64_t> parse_unix_seconds(std::string_view text);

/// The file's bytes. Throws runtime::Error when two entries have the same key or two tuning
/// records the same key (merge_contents combines them first).
std::string serialize_bundle(const BundleContents &contents);
/// Writes atomically: a temporary file in the same directory, fsync, rename over `path`; readers
/// (other processes with the old file mapped) are never torn. Throws runtime::Error.
void write_bundle(const std::string &path, const BundleContents &contents);

/// `bytes` with every checksum recomputed (the header's, the index's, and each entry's that lies
/// inside the file) and the size field set: damaged in any way but its checksums. For fuzzing and
/// tests of the checks behind the checksums; never for repairing a real bundle.
std::string reseal_for_testing(std::string bytes);

/// Merges `from` into `into`: entries with the same key gain the artifacts they lack (an artifact
/// for the same target, format, features and toolkit is replaced), tuning records with the same
/// key are replaced. Each entry's artifacts are then ordered by backend, in the order the merged
/// targets name the backends (as a build orders them), so merging the shards of a build
/// (BuildOptions::shard_index) gives that build's contents. Returns one line per replacement,
/// for the user.
std::vector<std::string> merge_contents(BundleContents &into, BundleContents from);

/// An opened bundle. Thread-safe: lookups from many threads may run at once.
class Bundle final : public runtime::EnvironmentSource {
public:
  enum class OpenMode {
    /// The header and the index are read; the rest is mapped and read as entries are used.
    Mapped,
    /// The whole file is read into memory: what a signature was verified over is what runs,
    /// whatever later happens to the file (what a runtime requiring signatures opens).
    InMemory,
  };
  /// Reads (and maps) and checks `path`. Throws runtime::Error naming the file and, for damage,
  /// the offset; anything but a regular file (a FIFO, a directory, a device) is refused without
  /// waiting on it. A signature trailer is checked for form, not verified (signature_refusal).
  static std::shared_ptr<const Bundle> open(const std::string &path,
                                            OpenMode mode = OpenMode::Mapped);
  /// A bundle over bytes in memory (copied), for tests and the fuzzer; `name` is for messages.
  static std::shared_ptr<const Bundle> from_bytes(std::string_view bytes, std::string name);
  ~Bundle() override;

  const Metadata &metadata() const { return metadata_; }
  /// The file's size, and the bundle's: the file without its signature trailer, if signed.
  uint64_t file_bytes() const { return size_; }
  uint64_t bundle_bytes() const { return bundle_bytes_; }

  /// The file's bytes. A mapped bundle's are valid while the file is not changed (file_changed);
  /// open it InMemory to hold bytes that cannot change.
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  /// The signature trailer when the file has one, as read (verified by signature_refusal).
  const std::optional<SignatureTrailer> &signature() const { return signature_; }
  /// Empty when the bundle is signed by one of `trusted` and the signature matches every byte of
  /// the file; else why not (not signed, signed by another key, or changed since it was signed),
  /// without the bundle's name. The first call hashes the whole file (BLAKE2b, about 1 ms per
  /// MiB).
  std::string signature_refusal(std::span<const PublicKey> trusted) const;
  uint32_t format_version() const;
  size_t num_entries() const;
  size_t num_tuning_records() const;

  /// Entry `i` in index order, verified and decoded (a copy); nullopt with `error` when damaged.
  std::optional<Entry> read_entry(size_t i, std::string &error) const;
  /// Where entry `i` is stored: its offset in the file and its byte size.
  uint64_t entry_offset(size_t i) const;
  uint64_t entry_bytes(size_t i) const;
  std::vector<TuningEntry> tuning_records() const;
  /// Everything decoded (for merging); throws runtime::Error on the first damaged entry.
  BundleContents contents() const;

  //===- EnvironmentSource -----------------------------------------------------------------===//
  runtime::EnvironmentLookup
  find_kernel(const ir::Hash128 &hash, std::string_view options,
              std::span<const runtime::BinaryTarget> targets) const override;
  std::optional<std::string> find_tuning(std::string_view key) const override;
  const std::string &name() const override { return name_; }
  /// signature_refusal with the keys `options` trust (trusted_keys, $CUBECC_TRUSTED_KEYS).
  std::string refusal(const runtime::EnvironmentOptions &options) const override;
  /// Finds the kernel `kernel` of `library` with `configuration`, compiled with `options`,
  /// through the index's name table (a binary search; that entry alone is verified, its binaries
  /// are not copied); then answers as find_kernel does for its hash. A miss, or a bundle without
  /// a name table, scans every entry (each verified once) and says what the bundle holds for
  /// that library; Rejected (not a miss) when an entry was too damaged to read, since it may
  /// have been the kernel's.
  runtime::NamedKernelLookup
  find_named_kernel(std::string_view library, std::string_view kernel,
                    std::string_view configuration, std::string_view options,
                    std::span<const runtime::BinaryTarget> targets) const override;

  /// Empty while the file is the one opened; once its size or modification time differs (it was
  /// copied over or edited in place, not replaced by a rename), a message saying so, for good.
  /// Always empty for a bundle from bytes.
  std::string file_changed() const;

private:
  struct Mapping;
  Bundle() = default;
  /// A bundle over `size` bytes at `memory`, named `name`.
  static std::shared_ptr<const Bundle> in_memory(std::unique_ptr<uint64_t[]> memory, uint64_t size,
                                                 std::string name);
  void check(); // the header and the index; throws
  /// The index of the entry with `key`, or num_entries() when none: a hash table over the
  /// index's keys (built on the first lookup), or a binary search where one would not serve.
  size_t find_entry(const ir::Hash128 &key) const;
  /// Verifies entry `i` once (the checksum and the FlatBuffer); empty when sound.
  std::string verify_entry(size_t i) const;
  /// find_kernel after its check that the file did not change (find_named_kernel made it).
  runtime::EnvironmentLookup find_unchanged(const ir::Hash128 &hash, std::string_view options,
                                            std::span<const runtime::BinaryTarget> targets) const;
  const void *index() const;

  std::string name_;
  std::unique_ptr<Mapping> mapping_;
  /// The header and the index: a copy in memory, read before anything is checked, so that a
  /// file changed under the mapping can never change what was checked.
  const uint8_t *head_ = nullptr;
  /// The whole file (entries are read from here): the mapping, or the bytes in memory.
  const uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t bundle_bytes_ = 0;
  /// The file's last bytes (where a signature trailer is), read before check().
  std::array<uint8_t, kSignatureTrailerBytes> tail_{};
  std::optional<SignatureTrailer> signature_;
  Metadata metadata_;
  bool version_matches_ = true;
  /// Per entry: 0 not yet verified, 1 sound, 2 damaged (the message is recomputed on demand).
  std::unique_ptr<std::atomic<uint8_t>[]> entry_state_;
};

} // namespace cubecc::environments
