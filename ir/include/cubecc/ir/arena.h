//===- arena.h - The bump allocator a Module keeps its operations in --------------------------===//
//
// Tracing and the passes create and destroy many small objects; with one malloc for each (and
// several per op before), the allocator was most of the cost of building IR. A Module owns an
// Arena: operations built into the module (by a Builder, the parser or a clone into it) and
// their region arguments take their storage from it by bumping a pointer, and none of that is
// freed before the module dies, when all of it goes at once. Storage of an op erased earlier stays
// allocated until then: a pass that rewrites a kernel many times grows the arena by what it
// created, which is bounded by the work it did.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>

namespace cubecc::ir {

class Arena {
public:
  Arena() = default;
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  /// `bytes` of storage aligned to 16, valid until the arena dies.
  void *allocate(size_t bytes) {
    bytes = (bytes + 15) & ~size_t{15};
    if (static_cast<size_t>(end_ - cursor_) < bytes)
      return allocate_slow(bytes);
    void *p = cursor_;
    cursor_ += bytes;
    return p;
  }
  /// Takes every chunk of `other` (which is left empty), so that storage allocated from `other`
  /// lives as long as this arena.
  void adopt(Arena &other);
  /// Bytes taken from the system so far.
  size_t bytes_reserved() const { return reserved_; }

private:
  struct Chunk {
    Chunk *next;
    size_t size;
  };
  void *allocate_slow(size_t bytes);

  Chunk *chunks_ = nullptr;
  char *cursor_ = nullptr;
  char *end_ = nullptr;
  size_t reserved_ = 0;
};

} // namespace cubecc::ir
