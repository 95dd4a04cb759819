//===- version.cpp ----------------------------------------------------------------------------===//
#include "cubecc/ir/version.h"

namespace cubecc {

std::string_view version() {
  return CUBECC_VERSION_STRING;
}

} // namespace cubecc
