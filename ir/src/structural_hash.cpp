//===- structural_hash.cpp --------------------------------------------------------------------===//
#include "cubecc/ir/structural_hash.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cubecc::ir {
namespace {

/// Values numbered in the order they are defined: an open-addressing table keyed by address
/// (one probe on average, no allocation per value).
class ValueNumbers {
public:
  ValueNumbers() : slots_(1024) {}
  /// Numbers `v` next, unless it already has a number (malformed IR defines it twice).
  void insert(const Value *v) {
    if (2 * (count_ + 1) > slots_.size())
      grow();
    if (place(v, count_))
      ++count_;
  }
  /// The number of `v`, or ~0u if it was never defined.
  uint32_t find(const Value *v) const {
    for (size_t i = slot_of(v);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].value == v)
        return slots_[i].number;
      if (!slots_[i].value)
        return ~0u;
    }
  }

private:
  struct Slot {
    const Value *value = nullptr;
    uint32_t number = 0;
  };
  size_t slot_of(const Value *v) const {
    auto bits = reinterpret_cast<uintptr_t>(v);
    return static_cast<size_t>((bits >> 4) * 0x9E3779B97F4A7C15ull >> 32) & (slots_.size() - 1);
  }
  bool place(const Value *v, uint32_t number) {
    size_t i = slot_of(v);
    while (slots_[i].value && slots_[i].value != v)
      i = (i + 1) & (slots_.size() - 1);
    if (slots_[i].value)
      return false;
    slots_[i] = {v, number};
    return true;
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot &s : old)
      if (s.value)
        place(s.value, s.number);
  }

  std::vector<Slot> slots_;
  uint32_t count_ = 0;
};

/// Feeds a canonical, unambiguous byte stream into XXH3-128: every field has a fixed width or a
/// length prefix, and values are numbered in definition order. The fields are a few bytes each,
/// so they are packed into 64-bit words (bytes in little-endian order, the stream's order) in a
/// buffer that XXH3 reads in large pieces; a streaming update per field cost four times the whole
/// trace of a kernel, and a byte buffer made the compiler reload its fill level after every byte
/// written (a char store may alias anything). The digest is the same either way.
class Hasher {
public:
  Hasher() : state_(XXH3_createState()) {
    XXH3_128bits_reset(state_);
    u32(kStructuralHashVersion);
  }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher &) = delete;
  Hasher &operator=(const Hasher &) = delete;

  void kernel(const Kernel &k) {
    tag('K');
    str(k.name());
    for (uint32_t d : k.workgroup_size())
      u32(d);
    attributes(k.attributes());
    region(k.body());
  }

  void raw(const void *data, size_t size) {
    const auto *bytes = static_cast<const uint8_t *>(data);
    for (; size >= 8; size -= 8, bytes += 8) {
      uint64_t word;
      std::memcpy(&word, bytes, 8);
      if constexpr (std::endian::native == std::endian::big)
        word = __builtin_bswap64(word);
      put(word, 8);
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < size; ++i)
      tail |= uint64_t{bytes[i]} << (8 * i);
    put(tail, static_cast<unsigned>(size));
  }

  Hash128 digest() {
    flush();
    uint8_t last[8]; // the partial word's bytes, in stream order
    for (unsigned i = 0; i < pending_bytes_; ++i)
      last[i] = static_cast<uint8_t>(pending_ >> (8 * i));
    XXH3_128bits_update(state_, last, pending_bytes_);
    XXH128_hash_t h = XXH3_128bits_digest(state_);
    return Hash128{h.high64, h.low64};
  }

private:
  /// Appends the low `n` bytes of `v` (n <= 8) to the stream.
  void put(uint64_t v, unsigned n) {
    if (n == 0)
      return;
    pending_ |= v << (8 * pending_bytes_); // bits beyond the word fall off; kept below
    unsigned total = pending_bytes_ + n;
    if (total < 8) {
      pending_bytes_ = total;
      return;
    }
    words_[used_words_++] = pending_;
    if (used_words_ == kWords)
      flush();
    pending_bytes_ = total - 8;
    // The bytes of v that did not fit (none when the word was empty before).
    pending_ = pending_bytes_ ? v >> (8 * (n - pending_bytes_)) : 0;
  }

  void flush() {
    if constexpr (std::endian::native == std::endian::big)
      for (uint32_t i = 0; i < used_words_; ++i)
        words_[i] = __builtin_bswap64(words_[i]);
    XXH3_128bits_update(state_, words_, used_words_ * sizeof(uint64_t));
    used_words_ = 0;
  }

  void tag(char c) { put(static_cast<uint8_t>(c), 1); }
  // Integers go in as little-endian bytes whatever the host's byte order.
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void str(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }

  // Types and ops go in by name, not by their position in a table, so that adding or reordering
  // rows of ops.def or of the scalar list leaves every existing kernel's hash unchanged.
  void type(Type t) {
    static constexpr char kKindTags[] = {'s', 'v', 'b', 'h', 'l', 'm'};
    tag(kKindTags[static_cast<unsigned>(t.kind())]);
    str(scalar_name(t.element()));
    if (t.kind() == TypeKind::Buffer) {
      str(access_name(t.access()));
    } else if (t.kind() == TypeKind::Matrix) {
      str(matrix_role_name(t.role()));
      u32(t.rows());
      u32(t.cols());
    } else if (t.kind() != TypeKind::Scalar)
      u32(t.kind() == TypeKind::Vector ? t.lanes() : t.count());
  }

  void define(const Value *v) {
    numbers_.insert(v);
    type(v->type());
  }

  void attributes(const AttributeList &attrs) {
    u32(static_cast<uint32_t>(attrs.entries().size()));
    for (const NamedAttribute &a : attrs.entries()) {
      str(a.name);
      if (const auto *i = std::get_if<int64_t>(&a.value)) {
        tag('i');
        u64(static_cast<uint64_t>(*i));
      } else {
        tag('s');
        str(std::get<std::string>(a.value));
      }
    }
  }

  void region(const Region &r) {
    tag('R');
    u32(r.num_arguments());
    for (unsigned i = 0; i < r.num_arguments(); ++i)
      define(r.argument(i));
    u64(r.size());
    for (const Operation *op : r)
      operation(*op);
  }

  void operation(const Operation &op) {
    tag('O');
    str(op.name());
    u32(op.num_operands());
    // A use that does not see its definition (malformed IR) still hashes deterministically.
    for (Value *v : op.operands())
      u32(numbers_.find(v));
    attributes(op.attributes());
    u32(op.num_regions());
    for (unsigned r = 0; r < op.num_regions(); ++r)
      region(op.region(r));
    u32(op.num_results());
    for (unsigned i = 0; i < op.num_results(); ++i)
      define(op.result(i));
  }

  static constexpr uint32_t kWords = 1024;
  XXH3_state_t *state_;
  uint64_t words_[kWords];
  uint32_t used_words_ = 0;    ///< a uint32_t: stores to words_ cannot alias it
  uint64_t pending_ = 0;       ///< the partial word, its first byte lowest
  unsigned pending_bytes_ = 0; ///< bytes in pending_ (0..7)
  ValueNumbers numbers_;
};

} // namespace

std::string Hash128::hex() const {
  return fmt::format("{:016x}{:016x}", high, low);
}

Hash128 structural_hash(const Kernel &kernel) {
  Hasher h;
  h.kernel(kernel);
  return h.digest();
}

Hash128 structural_hash(const Module &module) {
  Hasher h;
  for (const auto &k : module.kernels()) {
    Hash128 kh = structural_hash(*k);
    h.raw(&kh.high, sizeof kh.high);
    h.raw(&kh.low, sizeof kh.low);
  }
  return h.digest();
}

} // namespace cubecc::ir
