//===- types_test.cpp - Types and the op table ------------------------------------------------===//
#include "cubecc/ir/ops.h"
#include "cubecc/ir/types.h"

#include <gtest/gtest.h>

#include <set>

using namespace cubecc::ir;

TEST(Types, scalar_names_parse_back) {
  for (unsigned i = 0; i <= static_cast<unsigned>(Scalar::F64); ++i) {
    auto s = static_cast<Scalar>(i);
    EXPECT_EQ(parse_scalar(scalar_name(s)), s);
  }
  EXPECT_FALSE(parse_scalar("f128"));
}

TEST(Types, types_print_as_documented) {
  EXPECT_EQ(Type::scalar(Scalar::BF16).str(), "bf16");
  EXPECT_EQ(Type::vector(Scalar::F32, 4).str(), "f32x4");
  EXPECT_EQ(Type::buffer(Scalar::U8, Access::Read).str(), "buffer<u8, read>");
  EXPECT_EQ(Type::buffer(Scalar::I64, Access::ReadWrite).str(), "buffer<i64, readwrite>");
  EXPECT_EQ(Type::shared(Scalar::F16, 256).str(), "shared<f16, 256>");
  EXPECT_EQ(Type::local(Scalar::I32, 16).str(), "local<i32, 16>");
}

TEST(Types, equality_covers_every_field) {
  EXPECT_EQ(Type::vector(Scalar::F32, 4), Type::vector(Scalar::F32, 4));
  EXPECT_NE(Type::vector(Scalar::F32, 4), Type::vector(Scalar::F32, 2));
  EXPECT_NE(Type::vector(Scalar::F32, 4), Type::vector(Scalar::I32, 4));
  EXPECT_NE(Type::buffer(Scalar::F32, Access::Read), Type::buffer(Scalar::F32, Access::Write));
  EXPECT_NE(Type::shared(Scalar::F32, 4), Type::local(Scalar::F32, 4));
  EXPECT_NE(Type::scalar(Scalar::F32), Type::vector(Scalar::F32, 2));
}

TEST(Types, access_rights) {
  EXPECT_TRUE(Type::buffer(Scalar::F32, Access::Read).is_readable());
  EXPECT_FALSE(Type::buffer(Scalar::F32, Access::Read).is_writable());
  EXPECT_FALSE(Type::buffer(Scalar::F32, Access::Write).is_readable());
  EXPECT_TRUE(Type::shared(Scalar::F32, 8).is_writable());
}

TEST(OpTable, names_are_unique_and_parse_back) {
  std::set<std::string_view> names;
  for (const OpInfo &info : all_ops()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate op name " << info.name;
    EXPECT_EQ(parse_opcode(info.name), info.opcode);
    EXPECT_EQ(&op_info(info.opcode), &info);
  }
  EXPECT_FALSE(parse_opcode("frobnicate"));
}

TEST(OpTable, terminators_and_region_ops_are_consistent_with_signatures) {
  for (const OpInfo &info : all_ops()) {
    bool has_regions = region_count(info.signature) > 0;
    EXPECT_EQ(has_regions, (info.flags & HasRegions) != 0) << info.name;
    if (info.flags & Terminator) {
      EXPECT_EQ(fixed_result_count(info.signature), 0) << info.name;
    }
  }
}
