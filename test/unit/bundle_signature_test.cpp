//===- bundle_signature_test.cpp - Signed bundles and the runtime's signature policy ----------===//
//
// Keys (their files, their errors), signing and verifying, and the policy a runtime applies
// where signatures are required (EnvironmentOptions::trusted_keys / require_signature,
// CUBECC_TRUSTED_KEYS): a bundle signed by a trusted key loads and its kernels run; an unsigned
// one, one signed by another key, and one with any single byte flipped (every byte of a small
// bundle, trailer included) are refused before anything of them is used.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/environments/signature.h"
#include "environment_test_support.h"
#include "test_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>

using namespace cubecc;
using environments::Bundle;
using environments::PublicKey;
using environments::SecretKey;
using test::build;
using test::temp_file;

namespace {

void write_file(const std::string &path, std::string_view bytes, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  ::chmod(path.c_str(), mode);
}

/// The message of the Error `f` throws; fails the test when it throws none.
template <class F> std::string error_of(F &&f) {
  try {
    f();
  } catch (const runtime::Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

/// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const std::string &value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

struct Signed {
  std::unique_ptr<ir::Module> module = test::traced_examples();
  const ir::Kernel &axpy = *module->find_kernel("axpy");
  SecretKey key = environments::generate_secret_key();
  PublicKey public_key = key.public_key();
  std::string bundle = environments::serialize_bundle(build({&axpy}, {"interp"}));
  std::string signed_bundle = environments::sign_bundle(bundle, key);
};

runtime::EnvironmentOptions trusting(const PublicKey &key) {
  return {.fallback_to_jit = false, .trusted_keys = {key.hex()}};
}

/// Loads axpy through `rt`, checks where it came from (environment hits, compiles) and that it
/// computes the host reference.
void expect_axpy_runs(runtime::Runtime &rt, const ir::Kernel &axpy, uint64_t hits,
                      uint64_t compiles) {
  runtime::KernelHandle handle = rt.load(axpy);
  EXPECT_EQ(rt.environment_statistics().hits, hits);
  EXPECT_EQ(rt.cache_statistics().compiles, compiles);
  EXPECT_EQ(test::run_axpy(rt, handle), test::expected_axpy());
}

} // namespace

//===- Keys ----------------------------------------------------------------------------------===//

TEST(BundleSignature, key_files_round_trip_and_bad_ones_name_the_file_and_line) {
  SecretKey key = environments::generate_secret_key();
  EXPECT_NE(key.seed, environments::generate_secret_key().seed);
  PublicKey pub = key.public_key();
  EXPECT_EQ(environments::parse_secret_key(environments::secret_key_file_text(key), "k").seed,
            key.seed);
  EXPECT_EQ(environments::parse_public_key(environments::public_key_file_text(pub), "p"), pub);
  EXPECT_EQ(pub.hex().size(), 64u);
  EXPECT_EQ(environments::trusted_key(pub.hex()), pub);

  auto parse_error = [](std::string text) {
    return error_of([&] { environments::parse_public_key(text, "ci.pub"); });
  };
  EXPECT_NE(parse_error("").find("ci.pub: not a cubecc public key file: it holds no key"),
            std::string::npos);
  EXPECT_NE(parse_error("# comment\nxyz\n").find("line 2 is not 64 hexadecimal digits"),
            std::string::npos);
  EXPECT_NE(parse_error(pub.hex() + "\n" + pub.hex()).find("line 2 is a second key"),
            std::string::npos);
  EXPECT_NE(parse_error(pub.hex().substr(1)).find("not 64 hexadecimal digits"), std::string::npos);

  // Files: a secret key others may read is refused; a missing file is named.
  std::string secret = temp_file("loose.key"), public_file = temp_file("loose.pub");
  write_file(secret, environments::secret_key_file_text(key), 0644);
  EXPECT_NE(error_of([&] { environments::read_secret_key(secret); }).find("chmod 600"),
            std::string::npos);
  ::chmod(secret.c_str(), 0600);
  EXPECT_EQ(environments::read_secret_key(secret).seed, key.seed);
  write_file(public_file, environments::public_key_file_text(pub));
  EXPECT_EQ(environments::trusted_key(public_file), pub);
  EXPECT_NE(error_of([&] {
              environments::trusted_key("/nonexistent/ci.pub");
            }).find("/nonexistent/ci.pub: cannot read the key file"),
            std::string::npos);

  // CUBECC_TRUSTED_KEYS: ':'-separated files and keys; a bad item is named with the variable.
  {
    ScopedEnv env("CUBECC_TRUSTED_KEYS", public_file + "::" + pub.hex() + ":");
    EXPECT_EQ(environments::trusted_keys({}), (std::vector<PublicKey>{pub, pub}));
    EXPECT_TRUE(runtime::requires_signature({}));
  }
  {
    ScopedEnv env("CUBECC_TRUSTED_KEYS", "/nonexistent/other.pub");
    EXPECT_NE(error_of([] {
                environments::trusted_keys({});
              }).find("CUBECC_TRUSTED_KEYS: /nonexistent/other.pub"),
              std::string::npos);
  }
  EXPECT_FALSE(runtime::requires_signature({}));
  EXPECT_TRUE(runtime::requires_signature({.require_signature = true}));
}

//===- Signing and verifying -----------------------------------------------------------------===//

TEST(BundleSignature, a_signature_covers_the_whole_bundle_and_resigning_replaces_it) {
  Signed s;
  ASSERT_EQ(s.signed_bundle.size(), s.bundle.size() + environments::kSignatureTrailerBytes);
  EXPECT_EQ(s.signed_bundle.substr(0, s.bundle.size()), s.bundle);
  EXPECT_EQ(environments::unsigned_part(s.signed_bundle), s.bundle);
  EXPECT_EQ(environments::unsigned_part(s.bundle), s.bundle);
  // Ed25519 is deterministic: signing the signed bundle again gives the same bytes.
  EXPECT_EQ(environments::sign_bundle(s.signed_bundle, s.key), s.signed_bundle);
  SecretKey other = environments::generate_secret_key();
  std::string resigned = environments::sign_bundle(s.signed_bundle, other);
  EXPECT_EQ(resigned.size(), s.signed_bundle.size());

  auto bundle = Bundle::from_bytes(s.signed_bundle, "signed.cubeenv");
  ASSERT_TRUE(bundle->signature());
  EXPECT_EQ(bundle->signature()->signer, s.public_key);
  EXPECT_EQ(bundle->bundle_bytes(), s.bundle.size());
  EXPECT_EQ(bundle->file_bytes(), s.signed_bundle.size());
  EXPECT_EQ(bundle->signature_refusal(std::vector{s.public_key}), "");
  EXPECT_NE(bundle->signature_refusal(std::vector{other.public_key()})
                .find("signed by key " + s.public_key.id() + ", which is not trusted here"),
            std::string::npos);
  auto resigned_bundle = Bundle::from_bytes(resigned, "resigned.cubeenv");
  EXPECT_EQ(resigned_bundle->signature_refusal(std::vector{other.public_key()}), "");
  EXPECT_NE(Bundle::from_bytes(s.bundle, "app.cubeenv")
                ->signature_refusal(std::vector{s.public_key})
                .find("the bundle is not signed"),
            std::string::npos);

  // A signed bundle is a bundle: its kernels are found without any policy, and its contents
  // written again (a merge, a prune) are the unsigned bundle: new bytes need a new signature.
  auto found = bundle->find_kernel(ir::structural_hash(s.axpy), "-O2", std::vector{test::kInterp});
  EXPECT_EQ(found.outcome, runtime::EnvironmentLookup::Hit) << found.why;
  EXPECT_EQ(environments::serialize_bundle(bundle->contents()), s.bundle);
}

//===- The runtime's policy ------------------------------------------------------------------===//

TEST(BundleSignature, a_bundle_signed_by_a_trusted_key_loads_and_runs_under_the_policy) {
  Signed s;
  std::string path = temp_file("trusted.cubeenv");
  write_file(path, s.signed_bundle);
  // The key given to the runtime, and the key named by CUBECC_TRUSTED_KEYS with no options.
  for (bool by_variable : {false, true}) {
    SCOPED_TRACE(by_variable ? "CUBECC_TRUSTED_KEYS" : "EnvironmentOptions::trusted_keys");
    std::optional<ScopedEnv> env;
    runtime::EnvironmentOptions options = trusting(s.public_key);
    if (by_variable) {
      env.emplace("CUBECC_TRUSTED_KEYS", s.public_key.hex());
      options = {.fallback_to_jit = false};
    }
    runtime::Runtime rt = runtime::Runtime::open("interp");
    rt.use_environment(path, options);
    ASSERT_NE(rt.environment(), nullptr);
    expect_axpy_runs(rt, s.axpy, 1, 0);
  }
}

TEST(BundleSignature, unsigned_and_untrusted_bundles_are_refused_before_anything_is_used) {
  Signed s;
  SecretKey other = environments::generate_secret_key();
  std::string unsigned_path = temp_file("unsigned.cubeenv");
  std::string untrusted_path = temp_file("untrusted.cubeenv");
  write_file(unsigned_path, s.bundle);
  write_file(untrusted_path, environments::sign_bundle(s.bundle, other));

  runtime::Runtime rt = runtime::Runtime::open("interp");
  auto refusal = [&](const std::string &path, runtime::EnvironmentOptions options) {
    return error_of([&] { rt.use_environment(path, options); });
  };
  EXPECT_NE(refusal(unsigned_path, trusting(s.public_key)).find("the bundle is not signed"),
            std::string::npos);
  EXPECT_NE(refusal(untrusted_path, trusting(s.public_key))
                .find("signed by key " + other.public_key().id() + ", which is not trusted here"),
            std::string::npos);
  // Required with no key trusted at all; a trusted key that is not a key.
  EXPECT_NE(refusal(untrusted_path, {.fallback_to_jit = false, .require_signature = true})
                .find("no key is trusted"),
            std::string::npos);
  EXPECT_NE(refusal(untrusted_path, {.fallback_to_jit = false, .trusted_keys = {"/nope.pub"}})
                .find("cannot check its signature: /nope.pub: cannot read the key file"),
            std::string::npos);
  {
    ScopedEnv env("CUBECC_TRUSTED_KEYS", s.public_key.hex());
    EXPECT_NE(refusal(unsigned_path, {.fallback_to_jit = false}).find("not signed"),
              std::string::npos);
  }
  EXPECT_EQ(rt.environment(), nullptr);

  // An already opened bundle, and a source that is not a bundle file, are checked alike.
  EXPECT_NE(error_of([&] {
              rt.use_environment(Bundle::from_bytes(s.bundle, "mem.cubeenv"),
                                 trusting(s.public_key));
            }).find("mem.cubeenv: the bundle is not signed"),
            std::string::npos);

  // With fallback on, a refused bundle is not used at all: the kernel is compiled and right.
  runtime::Runtime lenient = runtime::Runtime::open("interp");
  lenient.use_environment(untrusted_path, {.trusted_keys = {s.public_key.hex()}});
  EXPECT_EQ(lenient.environment(), nullptr);
  expect_axpy_runs(lenient, s.axpy, 0, 1);
}

TEST(BundleSignature, every_single_byte_flip_of_a_signed_bundle_is_refused_under_the_policy) {
  Signed s;
  const std::string &good = s.signed_bundle;
  std::string path = temp_file("flipped.cubeenv");
  runtime::Runtime rt = runtime::Runtime::open("interp");
  std::map<std::string, size_t> reasons; // how each flip was refused, for the log
  auto reason_of = [](const std::string &message) {
    for (const char *r : {"does not match the file", "which is not trusted", "signature trailer",
                          "truncated or extended", "header", "index", "not an environment bundle",
                          "bundle format version"})
      if (message.find(r) != std::string::npos)
        return std::string(r);
    return message;
  };
  for (size_t i = 0; i < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x01);
    write_file(path, flipped);
    try {
      rt.use_environment(path, trusting(s.public_key));
      ADD_FAILURE() << "byte " << i << " of " << good.size() << " flipped, and the bundle was used";
      break;
    } catch (const runtime::Error &e) {
      ASSERT_EQ(e.kind(), runtime::ErrorKind::Environment) << e.what();
      ++reasons[reason_of(e.what())];
    }
    ASSERT_EQ(rt.environment(), nullptr);
  }
  size_t refused = 0;
  for (const auto &[reason, count] : reasons) {
    std::cout << fmt::format("[          ] {} flips refused: {}\n", count, reason);
    refused += count;
  }
  EXPECT_EQ(refused, good.size());
  // The unflipped bundle is used (the test above would pass for a policy refusing everything).
  write_file(path, good);
  rt.use_environment(path, trusting(s.public_key));
  EXPECT_NE(rt.environment(), nullptr);
  expect_axpy_runs(rt, s.axpy, 1, 0);
}
