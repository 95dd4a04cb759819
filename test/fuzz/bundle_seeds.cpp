//===- bundle_seeds.cpp - Seed bundles for the bundle fuzzer ----------------------------------===//
//
// bundle_seeds DIR IR_FILE: writes small valid bundles into DIR — empty; one kernel (IR_FILE's
// text for interp, a CUBIN-like and a SPIR-V-like blob, launch metadata with buffers and values)
// with a tuning record; two kernels with two records — so that the fuzzer starts from inputs
// that open and reach the entries.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/target.h"
#include "cubecc/environments/bundle.h"

#include <fstream>
#include <iostream>
#include <sstream>

using namespace cubecc;

namespace {

environments::Entry entry(uint64_t hash, const std::string &name, const std::string &ir) {
  environments::Entry e;
  e.hash = {hash, ~hash};
  e.options = "-O2";
  e.name = name;
  e.configuration = "width=1";
  e.library = "examples"; // so that the index has a name table
  codegen::KernelAbi abi;
  abi.name = name;
  abi.workgroup_size = {256, 1, 1};
  abi.num_buffers = 2;
  abi.param_block_bytes = 8;
  abi.params = {
      {codegen::ParamSlot::Buffer, ir::Type::buffer(ir::Scalar::F32, ir::Access::Read), 0, 0, 0},
      {codegen::ParamSlot::Buffer, ir::Type::buffer(ir::Scalar::F32, ir::Access::ReadWrite), 1, 0,
       0},
      {codegen::ParamSlot::Value, ir::Type::scalar(ir::Scalar::F32), 0, 0, 4},
      {codegen::ParamSlot::Value, ir::Type::scalar(ir::Scalar::U32), 0, 4, 4}};
  e.artifacts.push_back({{"interp", "ir", "", ""}, "", abi, ir});
  e.artifacts.push_back({{"cuda:sm_90", "cubin", "", "NVRTC 13.0"},
                         name + "_kernel",
                         abi,
                         std::string("\x7f"
                                     "ELF\2\1\1\0",
                                     8) +
                             std::string(56, '\0')});
  // What the SPIR-V writer records: the features the module relies on (a real fingerprint, so
  // that the fuzzer mutates what a reader parses), for the baseline and for an NVIDIA GPU.
  codegen::TargetFeatures portable = codegen::TargetFeatures::vulkan_baseline();
  portable.subgroup_size = 0;
  e.artifacts.push_back(
      {{"vulkan", "spirv", portable.fingerprint(), ""}, "", abi, std::string(20, '\x03')});
  e.artifacts.push_back(
      {{"vulkan:nvidia", "spirv", codegen::TargetFeatures::vulkan_nvidia().fingerprint(), ""},
       "",
       abi,
       std::string(20, '\x04')});
  return e;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: bundle_seeds DIR IR_FILE\n";
    return 2;
  }
  std::ifstream file(argv[2]);
  std::ostringstream ir;
  ir << file.rdbuf();
  std::string dir = argv[1];
  // Each seed twice: as is, and behind a byte that tells the fuzzer to reseal it.
  auto write = [&](const std::string &name, const environments::BundleContents &contents) {
    std::string bytes = environments::serialize_bundle(contents);
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    std::ofstream(dir + "/resealed-" + name, std::ios::binary) << 'R' << bytes;
  };
  environments::BundleContents contents;
  write("empty.cubeenv", contents);
  contents.entries.push_back(entry(1, "axpy", ir.str()));
  contents.tuning.push_back({"tuning/v1|axpy|n=1024;f32|dev", R"({"configuration":"width=1"})"});
  write("one.cubeenv", contents);
  contents.entries.push_back(entry(2, "scale", "module @m {\n}\n"));
  contents.tuning.push_back({"tuning/v1|axpy|n=2048;f32|dev", R"({"configuration":"width=4"})"});
  write("two.cubeenv", contents);
  // Signed (with a fixed key: the seeds are the same every run), so the trailer is fuzzed too.
  environments::SecretKey key;
  key.seed.fill(7);
  std::ofstream(dir + "/signed-two.cubeenv", std::ios::binary)
      << environments::sign_bundle(environments::serialize_bundle(contents), key);
  return 0;
}
