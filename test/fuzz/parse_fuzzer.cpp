//===- parse_fuzzer.cpp - libFuzzer target for the .cir parser --------------------------------===//
//
// Any input: parsing must not crash, hang or leak. Inputs that parse and verify must also hold
// the text form's contract: printing, re-parsing and printing again gives the same text, and the
// re-parsed module has the same structural hash.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

using namespace cubecc::ir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  ParseResult parsed = parse_module(text, "fuzz.cir");
  if (!parsed.module) {
    if (parsed.errors.empty()) {
      std::fprintf(stderr, "parse failed without a diagnostic\n");
      std::abort();
    }
    return 0;
  }
  std::string once = to_string(*parsed.module);
  ParseResult again = parse_module(once, "printed.cir");
  if (!again.module) {
    std::fprintf(stderr, "the printed form does not parse:\n%s\n%s", once.c_str(),
                 to_string(again.errors).c_str());
    std::abort();
  }
  std::string twice = to_string(*again.module);
  if (once != twice) {
    std::fprintf(stderr, "printing is not stable:\n--- once\n%s--- twice\n%s", once.c_str(),
                 twice.c_str());
    std::abort();
  }
  if (!(structural_hash(*parsed.module) == structural_hash(*again.module))) {
    std::fprintf(stderr, "the hash changed across a round trip:\n%s", once.c_str());
    std::abort();
  }
  // The verifier must cope with anything the parser accepts.
  (void)verify(*parsed.module, &parsed.source_map);
  return 0;
}
