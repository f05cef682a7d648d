#include "common/shared_secret.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace kvpool {
namespace {

constexpr std::string_view kCredentialPrefix = "kvpool-tenant v1 ";

std::string Hex(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

}  // namespace

Result<SharedSecret> SharedSecret::Load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return InvalidArgument(fmt::format("auth file {}: cannot open it: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  std::string secret;
  Status status;
  if (::fstat(fd, &st) != 0) {
    status = Internal(fmt::format("auth file {}: stat: {}", path, std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    status = InvalidArgument(fmt::format("auth file {}: not a regular file", path));
  } else if ((st.st_mode & 077) != 0) {
    status = InvalidArgument(fmt::format(
        "auth file {}: others may read or change it (mode {:o}); restrict it with `chmod 600 {}`", path,
        st.st_mode & 0777, path));
  } else if (st.st_size > 4096) {
    status = InvalidArgument(fmt::format("auth file {}: {} bytes; a secret is at most 4096", path, st.st_size));
  } else {
    secret.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < secret.size()) {
      const ssize_t n = ::read(fd, secret.data() + got, secret.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    secret.resize(got);
  }
  ::close(fd);
  if (!status.ok()) return status;
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ' ||
                             secret.back() == '\t')) {
    secret.pop_back();
  }
  if (secret.starts_with(kCredentialPrefix)) return ParseCredential(secret, path);
  if (secret.size() < kMinBytes) {
    return InvalidArgument(fmt::format(
        "auth file {}: the secret has {} bytes, at least {} are needed (e.g. `openssl rand -hex 32 > {}`)", path,
        secret.size(), kMinBytes, path));
  }
  return SharedSecret(std::move(secret));
}

SharedSecret SharedSecret::FromBytes(std::string secret) {
  if (secret.size() < kMinBytes) std::abort();
  return SharedSecret(std::move(secret));
}

SharedSecret::Challenge SharedSecret::NewChallenge() {
  Challenge c{};
  size_t got = 0;
  while (got < c.size()) {
    const ssize_t n = ::getrandom(c.data() + got, c.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();  // the kernel's random source is gone: nothing safe to do
    got += static_cast<size_t>(n);
  }
  return c;
}

SharedSecret::Proof SharedSecret::Prove(std::string_view purpose, const Challenge& challenge) const {
  // purpose ‖ 0 ‖ challenge: the separator keeps "ab"+"c..." apart from "a"+"bc...".
  std::string message(purpose);
  message.push_back('\0');
  message.append(reinterpret_cast<const char*>(challenge.data()), challenge.size());
  Proof proof{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), proof.data(), &length);
  if (length != proof.size()) std::abort();
  return proof;
}

bool SharedSecret::Check(std::string_view purpose, const Challenge& challenge, const Proof& proof) const {
  const Proof expected = Prove(purpose, challenge);
  return ConstantTimeEqual(std::string_view(reinterpret_cast<const char*>(expected.data()), expected.size()),
                           std::string_view(reinterpret_cast<const char*>(proof.data()), proof.size()));
}

SharedSecret SharedSecret::ForTenant(TenantClaim claim) const {
  if (tenant_) std::abort();  // a tenant's key derives nothing
  const Proof key = Prove(fmt::format("kvpool-tenant\n{}", claim.ToString()), Challenge{});
  return SharedSecret(std::string(reinterpret_cast<const char*>(key.data()), key.size()), std::move(claim));
}

Result<SharedSecret> SharedSecret::KeyFor(std::string_view claim) const {
  if (tenant_) return Unauthenticated("a tenant's credential vouches for no one: this needs the pool's secret");
  if (claim.empty()) return *this;
  auto parsed = TenantClaim::Parse(claim);
  if (!parsed.ok()) return parsed.status();
  // The claim as sent must be the canonical text the tenant's key was derived from.
  if (parsed->ToString() != claim) return InvalidArgument("tenant claim is not in canonical form (sorted namespaces)");
  return ForTenant(std::move(parsed).value());
}

std::string SharedSecret::CredentialText() const {
  if (!tenant_) std::abort();
  return fmt::format("{}{} {}\n", kCredentialPrefix, tenant_->ToString(), Hex(secret_));
}

Result<SharedSecret> SharedSecret::ParseCredential(std::string_view text, const std::string& path) {
  text.remove_prefix(kCredentialPrefix.size());
  const size_t space = text.find(' ');
  const auto bad = [&](std::string_view what) {
    return InvalidArgument(fmt::format("credential file {}: {} (expected one line `kvpool-tenant v1 NAME:NS[,NS...] "
                                       "HEXKEY`, as `kvpool credential issue` writes it)",
                                       path, what));
  };
  if (space == std::string_view::npos) return bad("no key after the claim");
  auto claim = TenantClaim::Parse(text.substr(0, space));
  if (!claim.ok()) return bad(claim.status().message());
  const std::string_view hex = text.substr(space + 1);
  if (hex.size() != 2 * kProofBytes) return bad(fmt::format("the key has {} hex digits, not {}", hex.size(), 2 * kProofBytes));
  std::string key;
  for (size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    for (size_t k = i; k < i + 2; ++k) {
      const char c = hex[k];
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return bad("the key is not lowercase hex");
      value = value * 16 + static_cast<unsigned>(digit);
    }
    key.push_back(static_cast<char>(value));
  }
  return SharedSecret(std::move(key), std::move(claim).value());
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::optional<SharedSecret>> LoadAuthFile(const std::string& path) {
  if (path.empty()) return std::optional<SharedSecret>();
  auto secret = SharedSecret::Load(path);
  if (!secret.ok()) return secret.status();
  return std::optional<SharedSecret>(std::move(secret).value());
}

}  // namespace kvpool
