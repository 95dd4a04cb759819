//===- files.h - Writing files so that no reader ever sees half of one ------------------------===//
//
// Tuning caches and environment bundles are written by many processes and read (or mapped) by
// others at the same time. write_file_atomically writes a uniquely named temporary file in the
// target's folder (O_EXCL), fsyncs it, renames it over the target and fsyncs the folder: a reader
// sees the old file or the new one, never a torn one, and a mapping of the old file stays valid.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>

namespace cubecc::runtime {

/// Throws Error naming `path` and the failing step. The folder must exist.
void write_file_atomically(const std::string &path, std::string_view bytes);

} // namespace cubecc::runtime
