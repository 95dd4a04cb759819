//===- log.h - CUBECC_LOG: what the runtime tells the user on stderr --------------------------===//
//
// CUBECC_LOG=debug|info|warning|error|off (default: warning; case does not matter; another value
// is said once on stderr, naming these, and the default used). Messages go to stderr as
// "cubecc: <level>: <message>". Environment hits and misses are logged at debug level, a rejected
// environment entry at warning level.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace cubecc::runtime {

enum class LogLevel { Debug, Info, Warning, Error, Off };

/// The level set by CUBECC_LOG (read once).
LogLevel log_level();
void log_message(LogLevel level, std::string_view message);

template <class... Args> void log_debug(fmt::format_string<Args...> format, Args &&...args) {
  if (log_level() <= LogLevel::Debug)
    log_message(LogLevel::Debug, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args> void log_warning(fmt::format_string<Args...> format, Args &&...args) {
  if (log_level() <= LogLevel::Warning)
    log_message(LogLevel::Warning, fmt::format(format, std::forward<Args>(args)...));
}

} // namespace cubecc::runtime
