//===- spirv_tools.cpp - Validation, disassembly and cross-compilation of emitted SPIR-V
//-------===//
//
// Thin wrappers around the Khronos libraries: SPIRV-Tools (validator and disassembler, in
// process) and SPIRV-Cross through its C API (GLSL 450 for Vulkan, MSL 2.3).
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/spirv.h"

#include <spirv-tools/libspirv.hpp>
#include <spirv_cross/spirv_cross_c.h>

namespace cubecc::codegen {

std::string spirv_tools_version() {
  return spvSoftwareVersionDetailsString();
}

std::string spirv_cross_version() {
  unsigned major = 0, minor = 0, patch = 0;
  spvc_get_version(&major, &minor, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string validate_spirv(const std::vector<uint32_t> &words) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string messages;
  tools.SetMessageConsumer(
      [&](spv_message_level_t, const char *, const spv_position_t &position, const char *message) {
        messages += "word " + std::to_string(position.index) + ": " + message + "\n";
      });
  spvtools::ValidatorOptions options;
  options.SetScalarBlockLayout(false);
  if (!tools.Validate(words.data(), words.size(), options) && messages.empty())
    messages = "invalid SPIR-V (no message from the validator)\n";
  return messages;
}

std::string disassemble_spirv(const std::vector<uint32_t> &words, bool header) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string text;
  uint32_t options = SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT;
  if (!header)
    options |= SPV_BINARY_TO_TEXT_OPTION_NO_HEADER;
  if (!tools.Disassemble(words, &text, options))
    return "; (the module could not be disassembled)\n";
  return text;
}

namespace {

/// One SPIRV-Cross compilation to `backend`; `configure` sets backend options.
template <class Configure>
std::optional<std::string> cross_compile(const std::vector<uint32_t> &words, spvc_backend backend,
                                         Configure &&configure, std::string &error) {
  spvc_context context = nullptr;
  if (spvc_context_create(&context) != SPVC_SUCCESS) {
    error = "SPIRV-Cross: cannot create a context";
    return std::nullopt;
  }
  std::optional<std::string> result;
  spvc_parsed_ir ir = nullptr;
  spvc_compiler compiler = nullptr;
  spvc_compiler_options options = nullptr;
  const char *source = nullptr;
  if (spvc_context_parse_spirv(context, words.data(), words.size(), &ir) == SPVC_SUCCESS &&
      spvc_context_create_compiler(context, backend, ir, SPVC_CAPTURE_MODE_TAKE_OWNERSHIP,
                                   &compiler) == SPVC_SUCCESS &&
      spvc_compiler_create_compiler_options(compiler, &options) == SPVC_SUCCESS) {
    configure(options);
    if (spvc_compiler_install_compiler_options(compiler, options) == SPVC_SUCCESS &&
        spvc_compiler_compile(compiler, &source) == SPVC_SUCCESS)
      result = source;
  }
  if (!result)
    error = std::string("SPIRV-Cross: ") + spvc_context_get_last_error_string(context);
  spvc_context_destroy(context);
  return result;
}

} // namespace

std::optional<std::string> spirv_to_glsl(const std::vector<uint32_t> &words, std::string &error) {
  return cross_compile(
      words, SPVC_BACKEND_GLSL,
      [](spvc_compiler_options o) {
        spvc_compiler_options_set_uint(o, SPVC_COMPILER_OPTION_GLSL_VERSION, 450);
        spvc_compiler_options_set_bool(o, SPVC_COMPILER_OPTION_GLSL_VULKAN_SEMANTICS, SPVC_TRUE);
        spvc_compiler_options_set_bool(o, SPVC_COMPILER_OPTION_GLSL_ES, SPVC_FALSE);
      },
      error);
}

std::optional<std::string> spirv_to_msl(const std::vector<uint32_t> &words, std::string &error) {
  return cross_compile(
      words, SPVC_BACKEND_MSL,
      [](spvc_compiler_options o) {
        spvc_compiler_options_set_uint(o, SPVC_COMPILER_OPTION_MSL_VERSION,
                                       SPVC_MAKE_MSL_VERSION(2, 3, 0));
      },
      error);
}

} // namespace cubecc::codegen
