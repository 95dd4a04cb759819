//===- structural_hash_test.cpp - The hash ignores names and locations, sees everything else
//---===//
#include "cubecc/ir/structural_hash.h"
#include "test_support.h"

#include <fstream>
#include <regex>
#include <sstream>

using namespace cubecc;
using namespace cubecc::ir;

namespace {

/// A module touching every kind of token the hash must see: op names, types of every kind,
/// access modes, constants, attributes, workgroup sizes, region arguments, operand order.
const char *kSample = R"(module @m {
  kernel @k(%in: buffer<f32, read>, %out: buffer<f32, readwrite>, %n: u32, %s: f16) workgroup(64, 2, 1) attributes {tile = 16} {
    %tile = shared.alloc : shared<f32, 128>
    %priv = local.alloc : local<i32, 4>
    %gid = global_id : u32x3
    %i = vec.extract %gid {lane = 0} : u32
    %j = vec.extract %gid {lane = 1} : u32
    %d = sub %i, %j : u32
    %zero = const 0.0 : f32
    %two = const 2.5 : f32
    %one = const 1 : u32
    %flag = const true : bool
    %half = const -1.5 : f16
    %hs = mul %s, %half : f16
    %in_range = lt %i, %n : bool
    %both = and %in_range, %flag : bool
    %v = if %both : f32 {
      %x = load %in, %d : f32
      %y = fma %x, %two, %zero : f32
      yield %y
    } else {
      yield %zero
    }
    %sum = for %one, %n, %one, %v {unroll = 2} : f32 (%k: u32, %acc: f32) {
      %t = load %tile, %k : f32
      %next = add %acc, %t : f32
      yield %next
    }
    %v4 = splat %sum : f32x4
    %m = subgroup.max %sum : f32
    store %tile, %i, %m
    barrier
    store %out, %i, %sum
    return
  }
}
)";

Hash128 hash_of(const std::string &text) {
  ParseResult r = parse_module(text, "sample.cir");
  EXPECT_TRUE(r.module) << to_string(r.errors);
  return r.module ? structural_hash(*r.module->kernels()[0]) : Hash128{};
}

struct Word {
  size_t pos;
  std::string text;
};

/// The words of `line` that carry meaning: not value names (%x), symbols (@k), strings or
/// locations, which the hash ignores or which have their own tests.
std::vector<Word> semantic_words(const std::string &line) {
  std::vector<Word> words;
  size_t end = line.find(" loc(");
  end = end == std::string::npos ? line.size() : end;
  size_t i = 0;
  auto ident = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  };
  while (i < end) {
    char c = line[i];
    if (c == '%' || c == '@') {
      for (++i; i < end && ident(line[i]); ++i) {
      }
    } else if (c == '"') {
      for (++i; i < end && line[i] != '"'; ++i) {
      }
      ++i;
    } else if (ident(c) ||
               (c == '-' && i + 1 < end && std::isdigit(static_cast<unsigned char>(line[i + 1])))) {
      size_t start = i;
      for (++i; i < end && ident(line[i]); ++i) {
      }
      words.push_back({start, line.substr(start, i - start)});
    } else {
      ++i;
    }
  }
  return words;
}

/// A different word of the same kind, or empty when the word is structure (kernel, yield...).
std::string mutate(const std::string &word) {
  if (std::isdigit(static_cast<unsigned char>(word[0])) || word[0] == '-')
    return word[0] == '-' ? "-1" + word.substr(1) : "1" + word;
  if (word == "true" || word == "false")
    return word == "true" ? "false" : "true";
  if (word == "read" || word == "readwrite")
    return word == "read" ? "readwrite" : "read";
  if (auto op = parse_opcode(word)) {
    for (const OpInfo &other : all_ops())
      if (other.signature == op_info(*op).signature && other.opcode != *op)
        return std::string(other.name);
    return {};
  }
  std::smatch m;
  static const std::regex scalar_or_vector("(bool|[iuf][0-9]+|bf16)(x[0-9]+)?");
  if (std::regex_match(word, m, scalar_or_vector) && parse_scalar(m[1].str())) {
    std::string other = m[1].str() == "f32" ? "f64" : m[1].str() == "u32" ? "i32" : "f32";
    return other + m[2].str();
  }
  return {};
}

} // namespace

TEST(StructuralHash, renaming_every_value_keeps_the_hash) {
  std::string renamed =
      std::regex_replace(kSample, std::regex("%([A-Za-z_][A-Za-z0-9_]*)"), "%renamed_$1");
  ASSERT_NE(renamed, kSample);
  EXPECT_EQ(hash_of(renamed), hash_of(kSample));
  // Unnamed (numbered) values hash like named ones.
  std::string numbered = kSample;
  auto m = test::parse_valid(kSample);
  ASSERT_TRUE(m);
  m->kernels()[0]->walk([](Operation *op) {
    for (unsigned i = 0; i < op->num_results(); ++i)
      op->result(i)->set_name("");
  });
  EXPECT_EQ(structural_hash(*m->kernels()[0]), hash_of(kSample));
}

TEST(StructuralHash, locations_do_not_change_the_hash) {
  std::string located =
      std::regex_replace(kSample, std::regex(" : f32\n"), " : f32 loc(\"other.cpp\":99:7)\n");
  ASSERT_NE(located, kSample);
  EXPECT_EQ(hash_of(located), hash_of(kSample));
}

TEST(StructuralHash, changing_any_op_type_constant_or_attribute_changes_the_hash) {
  Hash128 original = hash_of(kSample);
  std::vector<std::string> lines;
  std::istringstream in(kSample);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  int mutations = 0;
  for (size_t l = 0; l < lines.size(); ++l) {
    for (const Word &w : semantic_words(lines[l])) {
      std::string replacement = mutate(w.text);
      if (replacement.empty())
        continue;
      std::vector<std::string> changed = lines;
      changed[l].replace(w.pos, w.text.size(), replacement);
      std::string text;
      for (const std::string &s : changed)
        text += s + "\n";
      ParseResult r = parse_module(text, "mutant.cir");
      if (!r.module)
        continue; // e.g. a literal grown past its type's range
      ++mutations;
      EXPECT_NE(structural_hash(*r.module->kernels()[0]), original)
          << "line " << l + 1 << ": '" << w.text << "' -> '" << replacement << "'\n"
          << changed[l];
    }
  }
  EXPECT_GE(mutations, 45) << "the mutation test exercised too little of the sample";
}

TEST(StructuralHash, swapping_operands_of_a_non_commutative_op_changes_the_hash) {
  std::string swapped = kSample;
  swapped.replace(swapped.find("sub %i, %j"), 10, "sub %j, %i");
  EXPECT_NE(hash_of(swapped), hash_of(kSample));
}

TEST(StructuralHash, kernel_name_and_parameter_order_are_part_of_the_identity) {
  std::string renamed = kSample;
  renamed.replace(renamed.find("@k("), 3, "@q(");
  EXPECT_NE(hash_of(renamed), hash_of(kSample));
  std::string reordered = kSample;
  reordered.replace(reordered.find("%in: buffer<f32, read>, %out: buffer<f32, readwrite>"), 52,
                    "%out: buffer<f32, readwrite>, %in: buffer<f32, read>");
  EXPECT_NE(hash_of(reordered), hash_of(kSample));
}

TEST(StructuralHash, is_stable_across_runs_and_builds) {
  // A stability pin, not a correctness check: the hash is an identity stored in caches and
  // bundles, so it must not drift with the compiler, the platform or the run. The value was
  // recorded from version 1 of the byte stream; if it changes, every cached kernel goes stale, so
  // change the stream only together with kStructuralHashVersion.
  auto m =
      test::parse_valid("module @m {\n  kernel @k() workgroup(1, 1, 1) {\n    return\n  }\n}\n");
  ASSERT_TRUE(m);
  ASSERT_EQ(kStructuralHashVersion, 1u) << "pin the new version's hash below";
  EXPECT_EQ(structural_hash(*m->kernels()[0]).hex(), "320d7cb4a08a5353bafef8a5c44e284e");
}

TEST(StructuralHash, module_hash_follows_its_kernels_not_its_name) {
  auto a = test::parse_valid("module @a {\n  kernel @k() {\n    return\n  }\n}\n");
  auto b = test::parse_valid("module @b {\n  kernel @k() {\n    return\n  }\n}\n");
  auto c =
      test::parse_valid("module @a {\n  kernel @k() workgroup(2, 1, 1) {\n    return\n  }\n}\n");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(structural_hash(*a), structural_hash(*b));
  EXPECT_NE(structural_hash(*a), structural_hash(*c));
}
