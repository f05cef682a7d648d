// Authentication through a real pool (a master and a storage service in this process): with
// the pool's secret every call and every transfer is served; without it, or with another one,
// the master refuses the client and the store, each saying why. And TLS on the master's gRPC,
// with throwaway certificates made by openssl.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/client.h"
#include "embedded/embedded_pool.h"
#include "master/master_server.h"
#include "store/storage_service.h"

namespace kvpool::client {
namespace {

using namespace std::chrono_literals;

const SharedSecret kPoolSecret = SharedSecret::FromBytes("this pool's secret: 32 bytes ...");
const SharedSecret kOtherSecret = SharedSecret::FromBytes("another pool's secret, 32 bytes.");

ValueView View(const std::string& s) { return std::as_bytes(std::span(s)); }

Result<std::unique_ptr<Client>> ConnectWith(const std::string& master, std::optional<SharedSecret> secret,
                                            std::string tls_ca_pem = "") {
  ClientOptions o;
  o.pool = PoolParts::Single(master);
  o.rpc_timeout = 2s;
  o.credentials.secret = std::move(secret);
  o.credentials.tls_ca_pem = std::move(tls_ca_pem);
  return Client::Connect(o);
}

// A small store that means to join the pool of `master` with `secret`.
store::StorageOptions StoreJoining(const std::string& master, std::optional<SharedSecret> secret) {
  store::StorageOptions so;
  so.master_address = master;
  so.memory_bytes = 4 << 20;
  so.use_huge_pages = false;
  so.rpc_timeout = 2s;
  so.credentials.secret = std::move(secret);
  return so;
}

TEST(ClientAuthTest, OnlyHoldersOfThePoolsSecretAreServed) {
  auto pool = embedded::EmbeddedPool::Start({.memory_bytes = 8 << 20, .secret = kPoolSecret});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();  // its store proved the secret to mount

  auto holder = ConnectWith((*pool)->address(), kPoolSecret);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  const std::string value(1 << 20, 'v');
  ASSERT_TRUE((*holder)->Put("k", View(value)).ok());
  auto read = (*holder)->Get("k");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, value);

  auto stranger = ConnectWith((*pool)->address(), std::nullopt);
  ASSERT_EQ(stranger.status().code(), StatusCode::kUnauthenticated) << stranger.status().ToString();
  EXPECT_NE(stranger.status().message().find("--auth-file"), std::string::npos) << stranger.status().ToString();
  auto impostor = ConnectWith((*pool)->address(), kOtherSecret);
  ASSERT_EQ(impostor.status().code(), StatusCode::kUnauthenticated) << impostor.status().ToString();
  EXPECT_NE(impostor.status().message().find("another secret"), std::string::npos) << impostor.status().ToString();

  // A store without the secret cannot join, and nothing of it is left behind.
  auto store = store::StorageService::Start(StoreJoining((*pool)->address(), std::nullopt));
  EXPECT_EQ(store.status().code(), StatusCode::kUnauthenticated) << store.status().ToString();

  // The holder is still served, and its value is intact.
  read = (*holder)->Get("k");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, value);
}

// A client holding the secret trusts only stores that ask for it: a pool whose store does not
// would get the client's bytes without anyone vouching for it.
TEST(ClientAuthTest, AClientHoldingTheSecretDoesNotWriteToAStoreThatDoesNotAskForIt) {
  auto pool = embedded::EmbeddedPool::Start({.memory_bytes = 8 << 20});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto holder = ConnectWith((*pool)->address(), kPoolSecret);  // the open master answers it
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  const Status put = (*holder)->Put("k", View(std::string(4096, 'v')));
  EXPECT_EQ(put.code(), StatusCode::kUnauthenticated) << put.ToString();
}

// Tenants (common/tenant_claim.h): team A's credential covers namespace "a" only. It reads and
// writes its own keys (over tcp, inside the master's grants, even on the store's host); it
// can neither read, find, overwrite, remove nor group itself with team B's; and it cannot act
// as a store.
TEST(ClientAuthTest, ATenantReachesOnlyItsOwnNamespaces) {
  auto pool = embedded::EmbeddedPool::Start({.memory_bytes = 8 << 20, .secret = kPoolSecret});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto admin = ConnectWith((*pool)->address(), kPoolSecret);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string theirs(64 << 10, 'b');
  ASSERT_TRUE((*admin)->Put("b/history", View(theirs)).ok());

  auto team_a = ConnectWith((*pool)->address(), kPoolSecret.ForTenant(TenantClaim::Parse("team-a:a").value()));
  ASSERT_TRUE(team_a.ok()) << team_a.status().ToString();
  const std::string ours(1 << 20, 'a');
  ASSERT_TRUE((*team_a)->Put("a/history", View(ours)).ok());
  auto read = (*team_a)->Get("a/history");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, ours);
  const std::vector<std::string> own{"a/history"};
  LookupResult lookup = (*team_a)->BatchLookup(own);
  ASSERT_TRUE(lookup.length(0).ok());
  EXPECT_EQ((*team_a)->MapLookedUp(lookup, 0).status().code(), StatusCode::kUnavailable);  // never mapped

  const auto denied = [](const Status& s) { return s.code() == StatusCode::kPermissionDenied; };
  EXPECT_TRUE(denied((*team_a)->Get("b/history").status())) << (*team_a)->Get("b/history").status().ToString();
  EXPECT_TRUE(denied((*team_a)->Exists("b/history").status()));
  EXPECT_TRUE(denied((*team_a)->Remove("b/history")));
  EXPECT_TRUE(denied((*team_a)->Put("b/history", View(ours))));
  EXPECT_TRUE(denied((*team_a)->Put("history", View(ours))));  // the "" namespace is no tenant's
  EXPECT_TRUE(denied((*team_a)->Put("a/grouped", View(ours), {.group = "b/group"})));
  const std::vector<std::string> mixed{"a/history", "b/history"};
  EXPECT_TRUE(denied((*team_a)->BatchLookup(mixed).length(1).status()));

  // A credential whose claim was widened after issue proves nothing.
  auto forged = SharedSecret::FromBytes(std::string(32, 'x')).ForTenant(TenantClaim::Parse("team-a:a,b").value());
  EXPECT_EQ(ConnectWith((*pool)->address(), forged).status().code(), StatusCode::kUnauthenticated);

  // A tenant cannot join the pool as a store.
  auto store = store::StorageService::Start(
      StoreJoining((*pool)->address(), kPoolSecret.ForTenant(TenantClaim::Parse("team-a:a").value())));
  EXPECT_EQ(store.status().code(), StatusCode::kPermissionDenied) << store.status().ToString();

  // Team B's value is untouched; the pool's own secret reads both.
  auto b = (*admin)->Get("b/history");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, theirs);
  EXPECT_EQ(*(*admin)->Get("a/history"), ours);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// TLS on the master's port, with certificates made here: a client that trusts the CA is
// served; one that speaks plaintext or trusts another CA is not.
TEST(ClientAuthTest, TlsMasterServesClientsThatTrustItsCertificate) {
  if (std::system("openssl version >/dev/null 2>&1") != 0) GTEST_SKIP() << "openssl is not installed";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kvpool-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string d = dir.string();
  // A CA, a master certificate it signs (for 127.0.0.1), and a second CA nobody uses.
  const std::string make =
      "cd " + d + " && "
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=kvpool-test-ca -keyout ca.key -out ca.pem && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout master.key -out master.csr && "
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext && "
      "openssl x509 -req -in master.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile san.ext "
      "-out master.pem && "
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=other-ca -keyout other.key -out other.pem";
  ASSERT_EQ(std::system((make + " >/dev/null 2>&1").c_str()), 0) << make;

  master::MasterOptions mo;
  mo.listen = "127.0.0.1:0";
  mo.metrics_listen = "";
  mo.security.secret = kPoolSecret;
  mo.security.tls_cert_pem = ReadFile(dir / "master.pem");
  mo.security.tls_key_pem = ReadFile(dir / "master.key");
  auto master = master::MasterServer::Start(mo);
  ASSERT_TRUE(master.ok()) << master.status().ToString();

  store::StorageOptions so;
  so.master_address = (*master)->address();
  so.memory_bytes = 4 << 20;
  so.use_huge_pages = false;
  so.credentials.secret = kPoolSecret;
  so.credentials.tls_ca_pem = ReadFile(dir / "ca.pem");
  auto store = store::StorageService::Start(so);
  ASSERT_TRUE(store.ok()) << store.status().ToString();

  auto trusting = ConnectWith((*master)->address(), kPoolSecret, ReadFile(dir / "ca.pem"));
  ASSERT_TRUE(trusting.ok()) << trusting.status().ToString();
  const std::string value(64 << 10, 't');
  ASSERT_TRUE((*trusting)->Put("k", View(value)).ok());
  auto read = (*trusting)->Get("k");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, value);

  EXPECT_FALSE(ConnectWith((*master)->address(), kPoolSecret).ok());  // plaintext
  EXPECT_FALSE(ConnectWith((*master)->address(), kPoolSecret, ReadFile(dir / "other.pem")).ok());

  (*store)->Stop();
  (*master)->Shutdown();
  std::filesystem::remove_all(dir);
}

TEST(ClientAuthTest, TlsNeedsBothCertificateAndKey) {
  master::MasterOptions mo;
  mo.listen = "127.0.0.1:0";
  mo.metrics_listen = "";
  mo.security.tls_cert_pem = "-----BEGIN CERTIFICATE-----\n";
  EXPECT_EQ(master::MasterServer::Start(mo).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvpool::client
