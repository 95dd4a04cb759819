//===- bundle_file.cpp - Writing a bundle file ------------------------------------------------===//
//
// Apart from bundle.cpp so that the format library (cubecc_bundle_format, which the fuzz build
// links alone) needs nothing from the runtime library.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/environments/bundle.h"
#include "cubecc/runtime/files.h"

namespace cubecc::environments {

void write_bundle(const std::string &path, const BundleContents &contents) {
  runtime::write_file_atomically(path, serialize_bundle(contents));
}

} // namespace cubecc::environments
