//===- register.cpp - Runtime::use_environment(path) and CUBECC_ENV open bundles --------------===//
#include "cubecc/environments/bundle.h"

namespace cubecc::environments {
namespace {

const bool registered = [] {
  runtime::register_environment_opener(
      [](const std::string &path, const runtime::EnvironmentOptions &options)
          -> std::shared_ptr<const runtime::EnvironmentSource> {
        return Bundle::open(path, runtime::requires_signature(options) ? Bundle::OpenMode::InMemory
                                                                       : Bundle::OpenMode::Mapped);
      });
  return true;
}();

} // namespace
} // namespace cubecc::environments

/// Referenced by the link options of cubecc::environments, so that linking the library always
/// pulls in this file and its registration, even when nothing else refers to it.
extern "C" {
extern const bool cubecc_environments_link_anchor;
const bool cubecc_environments_link_anchor = cubecc::environments::registered;
}
