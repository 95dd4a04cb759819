//===- cpu_elf.cpp - Checking an ELF shared object's headers before dlopen -------------------===//
#include "cubecc/codegen/cpu_elf.h"

#include <fmt/format.h>

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

namespace cubecc::codegen {

namespace {

/// Limits well above what a kernel's object needs, so that a garbled count is refused before
/// anything is sized by it.
constexpr uint64_t kMaxProgramHeaders = 256;
constexpr uint64_t kMaxSectionHeaders = 65280; // below SHN_LORESERVE: no extended numbering
constexpr uint64_t kMaxSegmentBytes = uint64_t(1) << 30;

/// Whether [offset, offset + size) lies inside `total` bytes, without overflow.
bool inside(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

/// A table of `count` entries of `entry_size` bytes at `offset`: its problem, or "".
std::string table_problem(const char *what, uint64_t offset, uint64_t count, uint64_t entry_size,
                          uint64_t total) {
  uint64_t bytes = count * entry_size; // count and entry_size are already small
  if (offset % 8)
    return fmt::format("the {} table at byte {} is not 8-byte aligned", what, offset);
  if (!inside(offset, bytes, total))
    return fmt::format("the {} table [{}, {}) lies outside the {} bytes", what, offset,
                       offset + bytes, total);
  return "";
}

template <class T> T read_at(std::string_view bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T)); // the bytes need not be aligned
  return value;
}

/// The file offset of `size` bytes at address `address`, if one PT_LOAD holds them in its file
/// bytes.
std::optional<uint64_t> file_offset(const std::vector<Elf64_Phdr> &loads, uint64_t address,
                                    uint64_t size) {
  for (const Elf64_Phdr &load : loads)
    if (address >= load.p_vaddr && address - load.p_vaddr <= load.p_filesz &&
        size <= load.p_filesz - (address - load.p_vaddr))
      return load.p_offset + (address - load.p_vaddr);
  return std::nullopt;
}

/// Whether `size` bytes at `address` lie in one PT_LOAD's memory.
bool in_memory(const std::vector<Elf64_Phdr> &loads, uint64_t address, uint64_t size) {
  for (const Elf64_Phdr &load : loads)
    if (address >= load.p_vaddr && address - load.p_vaddr <= load.p_memsz &&
        size <= load.p_memsz - (address - load.p_vaddr))
      return true;
  return false;
}

/// The dynamic section, walked once as the loader walks it (to DT_NULL, which it must have), and
/// the tables the loader reads through it before any check of its own: the hash tables (glibc
/// asserts on a malformed GNU hash header) and the relocations (each one a write into the
/// object's memory). Each must lie in the object's loaded bytes.
std::string dynamic_tables_problem(std::string_view bytes, const Elf64_Phdr &dynamic,
                                   const std::vector<Elf64_Phdr> &loads) {
  uint64_t rela = 0, rela_size = 0, jmprel = 0, jmprel_size = 0;
  bool has_rela = false, has_jmprel = false, ended = false;
  // The loader walks the dynamic section until DT_NULL, which must come within its bytes.
  for (uint64_t at = dynamic.p_offset; !ended && at < dynamic.p_offset + dynamic.p_filesz;
       at += sizeof(Elf64_Dyn)) {
    const auto entry = read_at<Elf64_Dyn>(bytes, at);
    const uint64_t value = entry.d_un.d_val;
    switch (entry.d_tag) {
    case DT_NULL:
      ended = true;
      break;
    case DT_GNU_HASH: {
      std::optional<uint64_t> header = file_offset(loads, value, 16);
      if (!header)
        return fmt::format("DT_GNU_HASH {:#x} lies outside the loaded bytes", value);
      const uint32_t buckets = read_at<uint32_t>(bytes, *header),
                     bloom_words = read_at<uint32_t>(bytes, *header + 8),
                     bloom_shift = read_at<uint32_t>(bytes, *header + 12);
      if (buckets == 0 || bloom_words == 0 || (bloom_words & (bloom_words - 1)) != 0 ||
          bloom_shift >= 64 ||
          !file_offset(loads, value, 16 + 8 * uint64_t(bloom_words) + 4 * uint64_t(buckets)))
        return fmt::format("the GNU hash table at {:#x} is malformed ({} buckets, {} bloom words, "
                           "shift {})",
                           value, buckets, bloom_words, bloom_shift);
      break;
    }
    case DT_HASH:
      if (std::optional<uint64_t> header = file_offset(loads, value, 8);
          !header || !file_offset(loads, value,
                                  8 + 4 * (uint64_t(read_at<uint32_t>(bytes, *header)) +
                                           read_at<uint32_t>(bytes, *header + 4))))
        return fmt::format("the hash table at {:#x} lies outside the loaded bytes", value);
      break;
    case DT_SYMTAB:
    case DT_STRTAB:
      if (!file_offset(loads, value, 1))
        return fmt::format("the dynamic {} at {:#x} lies outside the loaded bytes",
                           entry.d_tag == DT_SYMTAB ? "symbol table" : "string table", value);
      break;
    case DT_RELA:
      rela = value, has_rela = true;
      break;
    case DT_RELASZ:
      rela_size = value;
      break;
    case DT_JMPREL:
      jmprel = value, has_jmprel = true;
      break;
    case DT_PLTRELSZ:
      jmprel_size = value;
      break;
    default:
      break;
    }
  }
  if (!ended)
    return "the dynamic section has no DT_NULL entry to end it";
  for (auto [has, address, size, what] :
       {std::tuple{has_rela, rela, rela_size, "DT_RELA"},
        std::tuple{has_jmprel, jmprel, jmprel_size, "DT_JMPREL"}}) {
    if (!has)
      continue;
    std::optional<uint64_t> table = file_offset(loads, address, size);
    if (!table || size % sizeof(Elf64_Rela) != 0)
      return fmt::format("the {} relocations [{:#x}, +{}) lie outside the loaded bytes", what,
                         address, size);
    for (uint64_t r = 0; r < size; r += sizeof(Elf64_Rela))
      if (const auto rel = read_at<Elf64_Rela>(bytes, *table + r);
          !in_memory(loads, rel.r_offset, 8))
        return fmt::format("a {} relocation writes at {:#x}, outside the object's memory", what,
                           rel.r_offset);
  }
  return "";
}

const char *segment_name(uint32_t type) {
  switch (type) {
  case PT_LOAD:
    return "PT_LOAD";
  case PT_DYNAMIC:
    return "PT_DYNAMIC";
  default:
    return "a segment";
  }
}

} // namespace

std::string elf_shared_object_problem(std::string_view bytes) {
  const uint64_t total = bytes.size();
  if (total < sizeof(Elf64_Ehdr))
    return fmt::format("{} bytes are too few for an ELF header ({} bytes)", total,
                       sizeof(Elf64_Ehdr));
  const auto header = read_at<Elf64_Ehdr>(bytes, 0);
  const unsigned char *ident = header.e_ident;
  if (std::memcmp(ident, ELFMAG, SELFMAG) != 0)
    return "not an ELF file (bad magic)";
  if (ident[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF file";
  if (ident[EI_DATA] != ELFDATA2LSB)
    return "not a little-endian ELF file";
  if (ident[EI_VERSION] != EV_CURRENT || header.e_version != EV_CURRENT)
    return "an unknown ELF version";
  if (header.e_machine != EM_X86_64)
    return fmt::format("an ELF file for machine {}, not x86-64 ({})", header.e_machine, EM_X86_64);
  if (header.e_type != ET_DYN)
    return fmt::format("an ELF file of type {}, not a shared object (ET_DYN)", header.e_type);
  if (header.e_ehsize != sizeof(Elf64_Ehdr))
    return fmt::format("an ELF header of {} bytes, not {}", header.e_ehsize, sizeof(Elf64_Ehdr));

  // The program header table.
  if (header.e_phentsize != sizeof(Elf64_Phdr))
    return fmt::format("program headers of {} bytes, not {}", header.e_phentsize,
                       sizeof(Elf64_Phdr));
  if (header.e_phnum == 0 || header.e_phnum > kMaxProgramHeaders)
    return fmt::format("{} program headers (a shared object has 1 to {})", header.e_phnum,
                       kMaxProgramHeaders);
  if (std::string why = table_problem("program header", header.e_phoff, header.e_phnum,
                                      sizeof(Elf64_Phdr), total);
      !why.empty())
    return why;

  // The section header table: absent (offset and count 0), or inside the bytes.
  if (header.e_shoff != 0 || header.e_shnum != 0) {
    if (header.e_shentsize != sizeof(Elf64_Shdr))
      return fmt::format("section headers of {} bytes, not {}", header.e_shentsize,
                         sizeof(Elf64_Shdr));
    if (header.e_shnum == 0 || header.e_shnum > kMaxSectionHeaders)
      return fmt::format("{} section headers (extended numbering is not accepted)", header.e_shnum);
    if (std::string why = table_problem("section header", header.e_shoff, header.e_shnum,
                                        sizeof(Elf64_Shdr), total);
        !why.empty())
      return why;
    if (header.e_shstrndx != SHN_UNDEF && header.e_shstrndx >= header.e_shnum)
      return fmt::format("the section name table is section {} of {}", header.e_shstrndx,
                         header.e_shnum);
    for (uint64_t i = 0; i < header.e_shnum; ++i) {
      const auto section = read_at<Elf64_Shdr>(bytes, header.e_shoff + i * sizeof(Elf64_Shdr));
      if (section.sh_type != SHT_NOBITS && section.sh_type != SHT_NULL &&
          !inside(section.sh_offset, section.sh_size, total))
        return fmt::format("section {} [{}, {}) lies outside the {} bytes", i, section.sh_offset,
                           section.sh_offset + section.sh_size, total);
    }
  }

  // The segments.
  std::vector<Elf64_Phdr> loads;
  std::vector<Elf64_Phdr> dynamics;
  for (uint64_t i = 0; i < header.e_phnum; ++i) {
    const auto segment = read_at<Elf64_Phdr>(bytes, header.e_phoff + i * sizeof(Elf64_Phdr));
    if (segment.p_type == PT_GNU_STACK && (segment.p_flags & PF_X))
      return "the object asks for an executable stack (PT_GNU_STACK with PF_X)";
    if (segment.p_type == PT_INTERP)
      return "the object names a program interpreter (PT_INTERP): an executable, not a kernel";
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC)
      continue;
    const char *name = segment_name(segment.p_type);
    if (!inside(segment.p_offset, segment.p_filesz, total))
      return fmt::format("{} (program header {}) [{}, {}) lies outside the {} bytes", name, i,
                         segment.p_offset, segment.p_offset + segment.p_filesz, total);
    if (segment.p_filesz > segment.p_memsz)
      return fmt::format("{} (program header {}) has {} bytes in the file but {} in memory", name,
                         i, segment.p_filesz, segment.p_memsz);
    if (segment.p_memsz > kMaxSegmentBytes || segment.p_vaddr > ~uint64_t(0) - segment.p_memsz)
      return fmt::format("{} (program header {}) of {} bytes at address {:#x} is too large", name,
                         i, segment.p_memsz, segment.p_vaddr);
    if (segment.p_type == PT_LOAD) {
      uint64_t align = segment.p_align;
      if (align > 1 && ((align & (align - 1)) != 0 || align > kMaxSegmentBytes))
        return fmt::format("PT_LOAD (program header {}) has alignment {}, not a power of two", i,
                           align);
      if (align > 1 && segment.p_offset % align != segment.p_vaddr % align)
        return fmt::format("PT_LOAD (program header {}) has offset {:#x} and address {:#x}, "
                           "which disagree modulo its alignment {}",
                           i, segment.p_offset, segment.p_vaddr, align);
      if (!loads.empty() && segment.p_vaddr < loads.back().p_vaddr)
        return fmt::format("PT_LOAD (program header {}) is not in address order", i);
      loads.push_back(segment);
    } else {
      dynamics.push_back(segment);
    }
  }
  if (loads.empty())
    return "the object has no loadable segment (PT_LOAD)";
  if (dynamics.size() != 1)
    return fmt::format("the object has {} PT_DYNAMIC segments, not one", dynamics.size());
  const Elf64_Phdr &dynamic = dynamics.front();
  if (dynamic.p_filesz == 0 || dynamic.p_filesz % sizeof(Elf64_Dyn))
    return fmt::format("PT_DYNAMIC holds {} bytes, not a whole number of entries ({} bytes each)",
                       dynamic.p_filesz, sizeof(Elf64_Dyn));
  bool within_a_load = false;
  for (const Elf64_Phdr &load : loads) {
    bool in_memory = dynamic.p_vaddr >= load.p_vaddr &&
                     dynamic.p_vaddr - load.p_vaddr <= load.p_memsz &&
                     dynamic.p_memsz <= load.p_memsz - (dynamic.p_vaddr - load.p_vaddr);
    bool in_file = dynamic.p_offset >= load.p_offset &&
                   dynamic.p_offset - load.p_offset <= load.p_filesz &&
                   dynamic.p_filesz <= load.p_filesz - (dynamic.p_offset - load.p_offset);
    within_a_load |= in_memory && in_file;
  }
  if (!within_a_load)
    return fmt::format("PT_DYNAMIC [{:#x}, {:#x}) lies inside no PT_LOAD", dynamic.p_vaddr,
                       dynamic.p_vaddr + dynamic.p_memsz);
  return dynamic_tables_problem(bytes, dynamic, loads);
}

} // namespace cubecc::codegen
