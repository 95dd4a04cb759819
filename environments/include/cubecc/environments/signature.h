//===- signature.h - Ed25519 signatures over environment bundles --------------------*- C++ -*-===//
//
// A signed bundle is an unsigned bundle followed by a 128-byte signature trailer
// (docs/bundle-format.md, "The signature trailer"):
//
//   offset  size  field
//   0       8     magic "\x7fCUBESIG"
//   8       4     trailer version (u32) = 1
//   12      4     algorithm (u32) = 1: Ed25519 over the BLAKE2b-512 digest below
//   16      8     signed bytes (u64): the bundle's size, which its header records
//   24      32    the signer's Ed25519 public key
//   56      8     reserved, zero
//   64      64    the Ed25519 signature of: trailer bytes [0, 64) || BLAKE2b-512(bundle bytes)
//
// so the signature covers every byte of the file but its own 64. The keys are libsodium's
// (crypto_sign_*); a key file is one line of hexadecimal digits after `#` comment lines: the
// 32-byte seed for a secret key, the 32-byte public key for a public one.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/environment_source.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubecc::environments {

inline constexpr uint64_t kSignatureTrailerBytes = 128;
inline constexpr char kSignatureMagic[8] = {'\x7f', 'C', 'U', 'B', 'E', 'S', 'I', 'G'};

struct PublicKey {
  std::array<uint8_t, 32> bytes{};
  /// Its 64 hexadecimal digits.
  std::string hex() const;
  /// The first 16 of them: what messages call the key.
  std::string id() const { return hex().substr(0, 16); }
  bool operator==(const PublicKey &) const = default;
};

struct SecretKey {
  std::array<uint8_t, 32> seed{}; ///< libsodium's crypto_sign_seed_keypair seed
  PublicKey public_key() const;
};

/// A new key from the system's random source (libsodium's randombytes).
SecretKey generate_secret_key();

/// The contents of the key files `cubecc env keygen` writes: a comment naming the key, then its
/// hexadecimal digits.
std::string secret_key_file_text(const SecretKey &key);
std::string public_key_file_text(const PublicKey &key);

/// Parses a key file's text: `#` lines and blank lines are skipped, and exactly one line of 64
/// hexadecimal digits must remain. Throws runtime::Error (InvalidArgument) naming `where` (the
/// file) and what is wrong.
PublicKey parse_public_key(std::string_view text, std::string_view where);
SecretKey parse_secret_key(std::string_view text, std::string_view where);
/// Reads and parses a key file; throws runtime::Error naming it. A secret key file that others
/// may read is refused (its mode must deny group and other access, as keygen writes it).
PublicKey read_public_key(const std::string &path);
SecretKey read_secret_key(const std::string &path);

/// A trusted key as a runtime is given it (EnvironmentOptions::trusted_keys, CUBECC_TRUSTED_KEYS):
/// 64 hexadecimal digits, or the path of a public key file. Throws runtime::Error.
PublicKey trusted_key(const std::string &item);
/// Every key `options` trusts: its trusted_keys, then those $CUBECC_TRUSTED_KEYS names (items
/// separated by ':'). Throws runtime::Error on the first that is not a key.
std::vector<PublicKey> trusted_keys(const runtime::EnvironmentOptions &options);

/// The trailer of a signed bundle, as read (not verified).
struct SignatureTrailer {
  uint64_t signed_bytes = 0; ///< the bundle's size, without the trailer
  PublicKey signer;
  std::array<uint8_t, 64> signature{};
};

/// Whether `tail` (the bytes after a bundle's end) starts with the trailer's magic.
bool has_signature_magic(std::span<const uint8_t> tail);
/// Parses the trailer after a bundle of `bundle_bytes` bytes. Throws runtime::Error naming `name`
/// and the field's offset when a field is not what this cubecc writes.
SignatureTrailer parse_signature_trailer(std::span<const uint8_t, kSignatureTrailerBytes> trailer,
                                         uint64_t bundle_bytes, std::string_view name);

/// Whether `signature` is a valid signature of `bundle` (its unsigned bytes) by its signer.
bool signature_matches(std::span<const uint8_t> bundle, const SignatureTrailer &signature);

/// `bundle` (the unsigned bytes: a signed bundle's trailer is dropped first) followed by a
/// trailer signing it with `key`.
std::string sign_bundle(std::string_view bundle, const SecretKey &key);

/// The bundle's bytes without a signature trailer (those of an unsigned bundle unchanged).
std::string_view unsigned_part(std::string_view file);

} // namespace cubecc::environments
