//===- tool_support.h - What cubecc and cubecc-opt share: exit codes, inputs, outputs, errors -===//
//
// Every output goes through write_output: standard output (checked, and checked again when the
// tool ends: finish_standard_output), or a file written by runtime::write_file_atomically
// (symbolic links followed, non-regular targets refused, temporary + rename). Every input path
// is checked before it is opened: a FIFO or a device would block in open() or never end, so only
// regular files are read (and IR text up to kMaxIrTextBytes). docs/cli.md, "How outputs are
// written" and "Exit codes".
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/diagnostic.h"
#include "cubecc/runtime/files.h"

#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cubecc::tools {

/// The command-line contract's exit codes.
enum ExitCode { kSuccess = 0, kUserError = 1, kUsageError = 2, kInternalError = 3 };

/// The most IR text a tool reads from one file or from standard input (256 MiB).
constexpr uint64_t kMaxIrTextBytes = uint64_t{256} << 20;
/// The longest kernel name the tools compile (64 KiB): every backend takes names this long (a
/// SPIR-V string must fit one instruction of at most 65535 words).
constexpr size_t kMaxKernelNameBytes = size_t{64} << 10;

/// A user's name or path, shortened for a message (runtime::shorten_for_message).
inline std::string shown(std::string_view text) {
  return runtime::shorten_for_message(text);
}
/// A whole message that may hold such names, shortened to 4000 bytes.
inline std::string shown_message(std::string_view text) {
  return runtime::shorten_for_message(text, 4000);
}

/// "1 kernel", "2 kernels": `n` and the noun, plural unless n is 1 (`plural` when not noun + s).
inline std::string counted(size_t n, std::string_view noun, std::string_view plural = {}) {
  if (n == 1)
    return fmt::format("1 {}", noun);
  return plural.empty() ? fmt::format("{} {}s", n, noun) : fmt::format("{} {}", n, plural);
}

/// Prints to standard output (std::cout: a failure is found by finish_standard_output, where
/// fmt::print would throw).
template <class... Args> void print_out(fmt::format_string<Args...> format, Args &&...args) {
  std::cout << fmt::format(format, std::forward<Args>(args)...);
}

/// The exit code of an error of `kind`: kInternalError for cubecc's own bug, kUserError for every
/// other kind (usage errors are the command-line parser's, found before anything can fail).
ExitCode exit_code_of(runtime::ErrorKind kind);

/// Prints `error` to standard error as `<tool>: error: [<context>: ]<message>`, or for an
/// internal error as `<tool>: internal error: ...` with a request to report it, and returns
/// exit_code_of(error.kind()): every subcommand reports an error of one kind the same way.
int report_error(const runtime::Error &error, std::string_view context = {},
                 const char *tool = "cubecc");

/// Prints the diagnostics to standard error (each message at most 64 KiB); returns kUserError,
/// or kInternalError (with a request to report it) when one of them is cubecc's own bug
/// (ir::Diagnostic::internal: a toolkit rejected code cubecc wrote).
int report(const std::vector<ir::Diagnostic> &diagnostics);

/// Says on standard error that `kernel` is left out of `target` (`compile` and `env build` with
/// --skip-unsupported), and why (check_target_support's first diagnostic; empty: none given).
void say_left_out(std::string_view kernel, std::string_view target, std::string_view why);

/// Writes `text` to `output` ("-" or /dev/stdout: standard output, every write checked; else a
/// file, atomically). A failure is printed ("<path>: error: <reason>") and is kUserError.
int write_output(const char *tool, const std::string &output, std::string_view text);

/// kSuccess if `output` ("-" or a file) could be written now (runtime::check_writable); else
/// prints why and returns kUserError. For commands that work long before they write.
int check_output(const std::string &output);

/// Why `path` cannot be an input, or nothing: too long, missing, unreadable, a directory, a FIFO,
/// a device. Checked without opening it (a FIFO would block). `missing_ok`: a missing file is
/// left for the caller to report in its own words.
std::optional<std::string> input_problem(const std::string &path, bool missing_ok = false);

/// Reads an IR text input: a regular file, or standard input for "-". Fails on anything else, on
/// more than kMaxIrTextBytes, and on a NUL byte (binary data is never IR text: it fails fast
/// instead of after reading gigabytes). On failure `error` is the reason, without the path.
bool read_ir_text(const std::string &path, std::string &text, std::string &error);

/// Flushes standard output and closes a duplicate of it; a failure (a full disk, /dev/full, a
/// closed descriptor after something was written) turns kSuccess into kUserError, with a message.
int finish_standard_output(const char *tool, int code);

/// Runs a tool's body; an escaping runtime::Error is reported by its kind (report_error), any
/// other exception is a bug in cubecc and exits with kInternalError. Standard output is checked
/// at the end either way.
template <class F> int run_tool(const char *tool, F &&body) {
  int code;
  try {
    code = body();
  } catch (const runtime::Error &e) {
    code = report_error(e, {}, tool);
  } catch (const std::exception &e) {
    std::cerr << tool << ": internal error: " << shown_message(e.what())
              << "\nThis is a bug in cubecc; please report it with the input that caused it.\n";
    code = kInternalError;
  }
  return finish_standard_output(tool, code);
}

} // namespace cubecc::tools
