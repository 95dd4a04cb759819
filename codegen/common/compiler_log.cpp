//===- compiler_log.cpp - The logs of NVRTC and hipRTC as located diagnostics -----------------===//
#include "compiler_log.h"

#include <fmt/format.h>

#include <regex>

namespace cubecc::codegen {

namespace {

uint32_t to_u32(const std::string &digits) {
  uint64_t v = 0;
  for (char c : digits) {
    v = v * 10 + static_cast<uint64_t>(c - '0');
    if (v > UINT32_MAX)
      return 0;
  }
  return static_cast<uint32_t>(v);
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.remove_suffix(1);
  return s;
}

} // namespace

std::optional<CompilerMessage> first_compiler_error(std::string_view log) {
  // NVRTC: `kernel.cu(12): error: ...`; clang: `kernel.hip:12:5: error: ...`.
  static const std::regex nvrtc(R"(^(.*)\((\d+)\): (catastrophic error|error): (.*)$)");
  static const std::regex clang(R"(^(.*):(\d+):(\d+): (fatal error|error): (.*)$)");
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string_view::npos)
      end = log.size();
    std::string line(trim_right(log.substr(start, end - start)));
    start = end + 1;
    std::smatch m;
    if (std::regex_match(line, m, nvrtc))
      return CompilerMessage{m[1], to_u32(m[2]), 0, m[3], m[4]};
    if (std::regex_match(line, m, clang))
      return CompilerMessage{m[1], to_u32(m[2]), to_u32(m[3]), m[4], m[5]};
  }
  return std::nullopt;
}

std::optional<CompilerMessage> source_comment_location(std::string_view source, uint32_t line) {
  static const std::regex comment(R"(// ([^\s:]+):(\d+)(?::(\d+))?\s*$)");
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= source.size() && lines.size() < line) {
    size_t end = source.find('\n', start);
    if (end == std::string_view::npos)
      end = source.size();
    lines.push_back(source.substr(start, end - start));
    start = end + 1;
  }
  for (size_t i = lines.size(); i-- > 0;) {
    std::string text(trim_right(lines[i]));
    if (text.starts_with("#line"))
      break; // a #line directive above: the compiler would have reported the user's file
    std::smatch m;
    if (std::regex_search(text, m, comment))
      return CompilerMessage{m[1], to_u32(m[2]), m[3].matched ? to_u32(m[3]) : 0, "", ""};
    if (!text.empty() && text[0] != ' ' && text[0] != '\t' && !text.starts_with("//"))
      break; // not past a top-level line: the kernel's or a helper function's start or end
  }
  return std::nullopt;
}

ir::Diagnostic compiler_error(std::string_view compiler, std::string_view target,
                              std::string_view kernel, std::string_view program,
                              std::string_view source, std::string_view log) {
  ir::Diagnostic d;
  d.internal = true; // the toolkit rejected the source cubecc wrote
  auto first = first_compiler_error(log);
  if (first) {
    d.message = fmt::format("kernel '{}': {} failed for target '{}': {}: {}", kernel, compiler,
                            target, first->severity, first->text);
    if (first->file == program) {
      if (auto where = source_comment_location(source, first->line)) {
        d.file = where->file;
        d.line = where->line;
        d.col = where->col;
      }
      d.notes.push_back(fmt::format("at line {} of the generated {} source", first->line,
                                    compiler == "NVRTC" ? "CUDA" : "HIP"));
    } else {
      d.file = first->file;
      d.line = first->line;
      d.col = first->col;
    }
  } else {
    d.message = fmt::format("kernel '{}': {} failed for target '{}'", kernel, compiler, target);
  }
  std::string_view text = trim_right(log);
  d.notes.push_back(text.empty() ? fmt::format("{} wrote no log", compiler)
                                 : fmt::format("{} log:\n{}", compiler, text));
  return d;
}

} // namespace cubecc::codegen
