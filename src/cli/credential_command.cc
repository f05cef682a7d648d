// kvpool credential issue: a tenant's credential (common/shared_secret.h), derived from the
// pool's secret, for a client that may use only the namespaces it names.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/security_flags.h"
#include "common/shared_secret.h"

namespace kvpool::cli {
namespace {

// Writes `text` to a new file `path`, mode 600; refuses to replace one.
Status WriteNewPrivateFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return InvalidArgument(fmt::format("--out {}: {}", path, std::strerror(errno)));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) return Internal(fmt::format("--out {}: write failed", path));
  return Status::Ok();
}

}  // namespace

void AddCredentialCommand(CLI::App& app) {
  auto* credential = app.add_subcommand("credential", "tenants' credentials")->require_subcommand(1);
  auto* issue = credential->add_subcommand(
      "issue", "write a tenant's credential: a client given it as --auth-file reads, writes and removes only the "
               "namespaces named (a key's part before its first '/')");
  static std::string pool_file, tenant, out;
  static std::vector<std::string> namespaces;
  issue->add_option("--auth-file", pool_file, "the pool's secret (env KVPOOL_AUTH_FILE)")
      ->envname("KVPOOL_AUTH_FILE")
      ->required();
  issue->add_option("--tenant", tenant, "the tenant's name (letters, digits, '.', '_', '-')")->required();
  issue->add_option("--namespace", namespaces, "a namespace it may use (repeat for several)")->required();
  issue->add_option("--out", out, "write it to this new file (mode 600) instead of stdout");
  issue->callback([] {
    const auto fail = [](const Status& why) {
      spdlog::error("kvpool credential issue: {}", why.ToString());
      ExitCode() = 2;
    };
    auto pool = LoadPoolSecret(pool_file);
    if (!pool.ok()) return fail(pool.status());
    if (!*pool) return fail(InvalidArgument("--auth-file is empty"));
    std::string text = tenant + ":";
    for (size_t i = 0; i < namespaces.size(); ++i) text += (i ? "," : "") + namespaces[i];
    auto claim = TenantClaim::Parse(text);
    if (!claim.ok()) return fail(claim.status());
    const std::string credential = (*pool)->ForTenant(std::move(claim).value()).CredentialText();
    if (out.empty()) {
      std::cout << credential;
      return;
    }
    if (Status written = WriteNewPrivateFile(out, credential); !written.ok()) return fail(written);
  });
}

}  // namespace kvpool::cli
