//===- signature.cpp - Ed25519 signatures over environment bundles ----------------------------===//
#include "cubecc/environments/signature.h"

#include "cubecc/environments/bundle.h"
#include "cubecc/runtime/files.h"
#include "little_endian.h"

#include <fmt/format.h>
#include <sodium.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cubecc::environments {

using runtime::Error;
using runtime::ErrorKind;

namespace {

constexpr uint32_t kTrailerVersion = 1;
constexpr uint32_t kAlgorithmEd25519Blake2b = 1;
// The trailer's fields.
constexpr size_t kOffVersion = 8;
constexpr size_t kOffAlgorithm = 12;
constexpr size_t kOffSignedBytes = 16;
constexpr size_t kOffSigner = 24;
constexpr size_t kOffReserved = 56;
constexpr size_t kOffSignature = 64;

static_assert(crypto_sign_PUBLICKEYBYTES == 32 && crypto_sign_SEEDBYTES == 32 &&
              crypto_sign_BYTES == 64 && crypto_generichash_BYTES_MAX == 64);

void ensure_sodium() {
  static const int initialized = sodium_init(); // thread-safe, and idempotent besides
  if (initialized < 0)
    throw Error(ErrorKind::Internal, "libsodium failed to initialize (sodium_init)");
}

using detail::read_le;

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// 64 hexadecimal digits as 32 bytes; nullopt for anything else.
std::optional<std::array<uint8_t, 32>> from_hex32(std::string_view text) {
  if (text.size() != 64)
    return std::nullopt;
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 32; ++i) {
    int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// The one line of 64 hexadecimal digits in a key file's text.
std::array<uint8_t, 32> parse_key_text(std::string_view text, std::string_view where,
                                       std::string_view kind) {
  auto fail = [&](const std::string &what) -> std::array<uint8_t, 32> {
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: not a cubecc {} key file: {} (`cubecc env keygen` writes them)",
                            where, kind, what));
  };
  std::optional<std::array<uint8_t, 32>> key;
  size_t line_number = 0;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_number;
    if (line.empty() || line.front() == '#')
      continue;
    if (key)
      return fail(fmt::format("line {} is a second key", line_number));
    key = from_hex32(line);
    if (!key)
      return fail(fmt::format("line {} is not 64 hexadecimal digits", line_number));
  }
  if (!key)
    return fail("it holds no key (one line of 64 hexadecimal digits)");
  return *key;
}

/// A key file's text; a secret one must not be readable by others.
std::string read_key_file(const std::string &path, bool secret) {
  auto fail = [&](const std::string &what) {
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: {}", path, what));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    fail(fmt::format("cannot read the key file: {}", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    fail(fmt::format("cannot read the key file: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    fail(fmt::format("not a key file: {}", runtime::file_kind(st.st_mode)));
  if (st.st_size > 4096)
    fail(fmt::format("not a key file: {} bytes (a key file is one "
                     "line of 64 hexadecimal digits and comments)",
                     st.st_size));
  if (secret && (st.st_mode & 077) != 0)
    fail(fmt::format("the secret key file may be read by others (mode {:03o}): restrict it "
                     "with `chmod 600 {}`",
                     st.st_mode & 0777, path));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

/// The trailer's first 64 bytes, the fields before the signature, as this cubecc writes them.
std::array<uint8_t, kOffSignature> trailer_head(uint64_t signed_bytes, const PublicKey &signer) {
  std::array<uint8_t, kOffSignature> head{}; // the reserved field stays zero
  std::memcpy(head.data(), kSignatureMagic, sizeof kSignatureMagic);
  std::memcpy(head.data() + kOffVersion, &kTrailerVersion, 4);
  std::memcpy(head.data() + kOffAlgorithm, &kAlgorithmEd25519Blake2b, 4);
  std::memcpy(head.data() + kOffSignedBytes, &signed_bytes, 8);
  std::memcpy(head.data() + kOffSigner, signer.bytes.data(), 32);
  return head;
}

/// What the signature signs: the trailer's first 64 bytes, then the bundle's digest.
std::array<uint8_t, 128> signed_message(const std::array<uint8_t, kOffSignature> &trailer_head,
                                        std::span<const uint8_t> bundle) {
  std::array<uint8_t, 128> message{};
  std::memcpy(message.data(), trailer_head.data(), kOffSignature);
  crypto_generichash(message.data() + kOffSignature, 64, bundle.data(), bundle.size(), nullptr, 0);
  return message;
}

} // namespace

std::string PublicKey::hex() const {
  return to_hex(bytes);
}

PublicKey SecretKey::public_key() const {
  ensure_sodium();
  PublicKey out;
  unsigned char secret[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(out.bytes.data(), secret, seed.data());
  sodium_memzero(secret, sizeof secret);
  return out;
}

SecretKey generate_secret_key() {
  ensure_sodium();
  SecretKey key;
  randombytes_buf(key.seed.data(), key.seed.size());
  return key;
}

std::string secret_key_file_text(const SecretKey &key) {
  return fmt::format("# cubecc Ed25519 secret key {}: keep it secret; `cubecc env sign --key` "
                     "reads it\n{}\n",
                     key.public_key().id(), to_hex(key.seed));
}

std::string public_key_file_text(const PublicKey &key) {
  return fmt::format("# cubecc Ed25519 public key {}: runtimes trust it through "
                     "CUBECC_TRUSTED_KEYS or EnvironmentOptions::trusted_keys\n{}\n",
                     key.id(), key.hex());
}

PublicKey parse_public_key(std::string_view text, std::string_view where) {
  return PublicKey{parse_key_text(text, where, "public")};
}

SecretKey parse_secret_key(std::string_view text, std::string_view where) {
  return SecretKey{parse_key_text(text, where, "secret")};
}

PublicKey read_public_key(const std::string &path) {
  return parse_public_key(read_key_file(path, false), path);
}

SecretKey read_secret_key(const std::string &path) {
  return parse_secret_key(read_key_file(path, true), path);
}

PublicKey trusted_key(const std::string &item) {
  if (std::optional<std::array<uint8_t, 32>> key = from_hex32(item))
    return PublicKey{*key};
  if (item.empty())
    throw Error(ErrorKind::InvalidArgument,
                "an empty trusted key: give 64 hexadecimal digits or a public key file's path");
  return read_public_key(item);
}

std::vector<PublicKey> trusted_keys(const runtime::EnvironmentOptions &options) {
  std::vector<PublicKey> keys;
  for (const std::string &item : options.trusted_keys)
    keys.push_back(trusted_key(item));
  if (const char *list = std::getenv("CUBECC_TRUSTED_KEYS"); list && *list) {
    std::string_view rest = list;
    while (true) {
      size_t colon = rest.find(':');
      std::string item(rest.substr(0, colon));
      if (!item.empty()) { // "a::b" and a trailing ':' are forgiven, as in PATH
        try {
          keys.push_back(trusted_key(item));
        } catch (const Error &e) {
          throw Error(ErrorKind::InvalidArgument, fmt::format("CUBECC_TRUSTED_KEYS: {}", e.what()));
        }
      }
      if (colon == std::string_view::npos)
        break;
      rest.remove_prefix(colon + 1);
    }
  }
  return keys;
}

bool has_signature_magic(std::span<const uint8_t> tail) {
  return tail.size() >= sizeof kSignatureMagic &&
         std::memcmp(tail.data(), kSignatureMagic, sizeof kSignatureMagic) == 0;
}

SignatureTrailer parse_signature_trailer(std::span<const uint8_t, kSignatureTrailerBytes> trailer,
                                         uint64_t bundle_bytes, std::string_view name) {
  auto fail = [&](size_t field, const std::string &what) {
    throw Error(ErrorKind::Environment,
                fmt::format("{}: the signature trailer at offset {}: {}; sign the bundle again "
                            "with `cubecc env sign`",
                            name, bundle_bytes + field, what));
  };
  if (!has_signature_magic(trailer))
    fail(0, "bad magic");
  if (uint32_t v = read_le<uint32_t>(trailer.data() + kOffVersion); v != kTrailerVersion)
    fail(kOffVersion,
         fmt::format("trailer version {}; this cubecc reads version {}", v, kTrailerVersion));
  if (uint32_t a = read_le<uint32_t>(trailer.data() + kOffAlgorithm); a != kAlgorithmEd25519Blake2b)
    fail(kOffAlgorithm, fmt::format("algorithm {}; this cubecc knows only {} (Ed25519)", a,
                                    kAlgorithmEd25519Blake2b));
  SignatureTrailer out;
  out.signed_bytes = read_le<uint64_t>(trailer.data() + kOffSignedBytes);
  if (out.signed_bytes != bundle_bytes)
    fail(kOffSignedBytes,
         fmt::format("it signs {} bytes, the bundle has {}", out.signed_bytes, bundle_bytes));
  if (read_le<uint64_t>(trailer.data() + kOffReserved) != 0)
    fail(kOffReserved, "the reserved field is not zero");
  std::memcpy(out.signer.bytes.data(), trailer.data() + kOffSigner, 32);
  std::memcpy(out.signature.data(), trailer.data() + kOffSignature, 64);
  return out;
}

bool signature_matches(std::span<const uint8_t> bundle, const SignatureTrailer &signature) {
  ensure_sodium();
  if (signature.signed_bytes != bundle.size())
    return false;
  std::array<uint8_t, 128> message =
      signed_message(trailer_head(signature.signed_bytes, signature.signer), bundle);
  return crypto_sign_verify_detached(signature.signature.data(), message.data(), message.size(),
                                     signature.signer.bytes.data()) == 0;
}

std::string_view unsigned_part(std::string_view file) {
  if (file.size() < 24 || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    return file;
  uint64_t bundle_bytes =
      read_le<uint64_t>(reinterpret_cast<const uint8_t *>(file.data()) + detail::kOffFileBytes);
  if (bundle_bytes <= file.size() && file.size() - bundle_bytes == kSignatureTrailerBytes &&
      has_signature_magic(std::span(reinterpret_cast<const uint8_t *>(file.data()) + bundle_bytes,
                                    kSignatureTrailerBytes)))
    return file.substr(0, bundle_bytes);
  return file;
}

std::string sign_bundle(std::string_view file, const SecretKey &key) {
  ensure_sodium();
  std::string_view bundle = unsigned_part(file);
  unsigned char secret[crypto_sign_SECRETKEYBYTES];
  PublicKey signer;
  crypto_sign_seed_keypair(signer.bytes.data(), secret, key.seed.data());
  std::array<uint8_t, kOffSignature> head = trailer_head(bundle.size(), signer);
  std::array<uint8_t, 128> message = signed_message(
      head, std::span(reinterpret_cast<const uint8_t *>(bundle.data()), bundle.size()));
  std::array<uint8_t, crypto_sign_BYTES> signature{};
  crypto_sign_detached(signature.data(), nullptr, message.data(), message.size(), secret);
  sodium_memzero(secret, sizeof secret);
  std::string out(bundle);
  out.append(reinterpret_cast<const char *>(head.data()), head.size());
  out.append(reinterpret_cast<const char *>(signature.data()), signature.size());
  return out;
}

} // namespace cubecc::environments
