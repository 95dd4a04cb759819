//===- cpu_elf.h - Is this a shared object the cpu device may hand to dlopen? -----------------===//
//
// A compiled CPU kernel reaches the cpu device as bytes from outside the process (an environment
// bundle entry, the per-user object cache). glibc's loader trusts the headers it maps, so the
// device checks them first: an x86-64 little-endian ELF64 shared object (ET_DYN) whose program and
// section header tables lie inside the bytes, whose loadable segments have sane sizes and
// alignments and lie inside the bytes, whose PT_DYNAMIC lies inside a PT_LOAD, and which asks for
// no executable stack. This does not make a hostile object safe to run (signed bundles do that);
// it keeps a truncated or garbled one from reaching the loader.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>

namespace cubecc::codegen {

/// Empty when `bytes` passes the checks above, else what is wrong ("the program header table
/// [64, 624) lies outside the 500 bytes", "not an ELF file (bad magic)").
std::string elf_shared_object_problem(std::string_view bytes);

} // namespace cubecc::codegen
