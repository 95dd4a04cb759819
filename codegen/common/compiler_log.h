//===- compiler_log.h - The logs of NVRTC and hipRTC as located diagnostics -------------------===//
//
// What the CUDA and HIP backends share about the C++ compilers they drive: finding the first error
// of a compiler log (NVRTC writes `file(LINE): error: ...`, hipRTC's clang `file:LINE:COL: error:
// ...`) and turning it into a Diagnostic at the user's source location. The C-family emitter
// writes `#line N "file"` directives (then the compiler reports the user's file and line itself)
// or `// file:line[:col]` comments at the end of a statement (then a line of the program is
// mapped to the nearest such comment at or above it). The whole log goes into a note.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cubecc::codegen {

/// One message of a compiler log.
struct CompilerMessage {
  std::string file;
  uint32_t line = 0;
  uint32_t col = 0;
  std::string severity; ///< "error", "catastrophic error", "fatal error"
  std::string text;
};

/// The first error of an NVRTC- or clang-style log; nothing when no line looks like one.
std::optional<CompilerMessage> first_compiler_error(std::string_view log);

/// The `// file:line[:col]` location nearest at or above line `line` (1-based) of `source`.
std::optional<CompilerMessage> source_comment_location(std::string_view source, uint32_t line);

/// An error for a failed compile of `kernel` by `compiler` ("NVRTC") for `target`
/// ("cuda:sm_90"): located at the user's source where the log's first error can be mapped back
/// (`program` is the name the compiler was given for the generated translation unit), with
/// the first error in the message and the full log in a note.
ir::Diagnostic compiler_error(std::string_view compiler, std::string_view target,
                              std::string_view kernel, std::string_view program,
                              std::string_view source, std::string_view log);

} // namespace cubecc::codegen
