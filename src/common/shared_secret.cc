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
