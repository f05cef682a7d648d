// Tenants: claims, keys derived from the pool's secret, credential files, and the grants a
// master gives a tenant for one range of one segment.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/access_grant.h"
#include "common/shared_secret.h"
#include "common/tenant_claim.h"

namespace kvpool {
namespace {

const SharedSecret kPool = SharedSecret::FromBytes("the pool's secret, 32 bytes long");

TEST(TenantClaimTest, ParsesSortsAndAllowsOnlyItsNamespaces) {
  auto claim = TenantClaim::Parse("team-a:ns2,ns1");
  ASSERT_TRUE(claim.ok()) << claim.status().ToString();
  EXPECT_EQ(claim->ToString(), "team-a:ns1,ns2");
  EXPECT_TRUE(claim->Allows("ns1/chunk/s0"));
  EXPECT_TRUE(claim->Allows("ns2/x"));
  EXPECT_FALSE(claim->Allows("ns3/x"));
  EXPECT_FALSE(claim->Allows("ns1"));  // no '/': the "" namespace
  EXPECT_FALSE(claim->Allows("ns10/x"));
  for (const char* bad : {"", "team-a", "team-a:", ":ns", "team a:ns", "t:ns/1", "t:a,,b", "t:a,a", "t:a b"}) {
    EXPECT_EQ(TenantClaim::Parse(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(TenantKeyTest, AVerifierDerivesTheTenantsKeyFromItsClaimAlone) {
  const SharedSecret tenant = kPool.ForTenant(TenantClaim::Parse("team-a:ns1").value());
  ASSERT_TRUE(tenant.tenant().has_value());
  EXPECT_EQ(tenant.claim(), "team-a:ns1");
  const auto challenge = SharedSecret::NewChallenge();
  const auto proof = tenant.Prove("transfer-tcp", challenge);
  auto key = kPool.KeyFor(tenant.claim());
  ASSERT_TRUE(key.ok());
  EXPECT_TRUE(key->Check("transfer-tcp", challenge, proof));
  // A wider claim derives another key, so the same proof fails for it.
  EXPECT_FALSE(kPool.KeyFor("team-a:ns1,ns2")->Check("transfer-tcp", challenge, proof));
  EXPECT_FALSE(kPool.KeyFor("")->Check("transfer-tcp", challenge, proof));
  // Another pool's secret derives another key; a tenant's key vouches for no one.
  EXPECT_FALSE(SharedSecret::FromBytes("another pool's secret, 32 bytes.")
                   .KeyFor(tenant.claim())
                   ->Check("transfer-tcp", challenge, proof));
  EXPECT_EQ(tenant.KeyFor("team-b:ns1").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(kPool.KeyFor("team-a:ns2,ns1").status().code(), StatusCode::kInvalidArgument);  // not canonical
}

TEST(TenantKeyTest, ACredentialFileReadsBackAsTheSameKey) {
  char dir[] = "/tmp/kvpool-tenant-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/team-a.cred";
  const SharedSecret tenant = kPool.ForTenant(TenantClaim::Parse("team-a:ns1,ns2").value());
  std::ofstream(path) << tenant.CredentialText();
  ::chmod(path.c_str(), 0600);
  auto loaded = SharedSecret::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->claim(), "team-a:ns1,ns2");
  const auto challenge = SharedSecret::NewChallenge();
  EXPECT_TRUE(tenant.Check("x", challenge, loaded->Prove("x", challenge)));
  for (const char* bad : {"kvpool-tenant v1 team-a:ns1", "kvpool-tenant v1 team-a:ns1 00ff",
                          "kvpool-tenant v1 bad name:ns1 "
                          "0000000000000000000000000000000000000000000000000000000000000000"}) {
    std::ofstream(path) << bad;
    auto refused = SharedSecret::Load(path);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("kvpool credential issue"), std::string::npos);
  }
  std::system(("rm -rf " + std::string(dir)).c_str());
}

TEST(AccessGrantTest, AGrantCoversItsOpSegmentRangeAndTimeOnly) {
  const int64_t now = 1'800'000'000'000;
  const AccessGrant grant = IssueGrant(kPool, GrantOp::kRead, 7, 4096, 8192, now + 5000);
  EXPECT_TRUE(CheckGrant(kPool, grant, GrantOp::kRead, 7, 4096, 8192, now).ok());
  EXPECT_TRUE(CheckGrant(kPool, grant, GrantOp::kRead, 7, 8192, 4096, now).ok());  // a chunk of it
  EXPECT_TRUE(CheckGrant(kPool, grant, GrantOp::kRead, 7, 4096, 8192, now + 6000).ok());  // within the skew
  const auto denied = [&](const AccessGrant& g, GrantOp op, uint64_t segment, uint64_t offset, uint64_t length,
                          int64_t at) {
    return CheckGrant(kPool, g, op, segment, offset, length, at).code() == StatusCode::kPermissionDenied;
  };
  EXPECT_TRUE(denied(grant, GrantOp::kWrite, 7, 4096, 8192, now));
  EXPECT_TRUE(denied(grant, GrantOp::kRead, 8, 4096, 8192, now));
  EXPECT_TRUE(denied(grant, GrantOp::kRead, 7, 0, 8192, now));
  EXPECT_TRUE(denied(grant, GrantOp::kRead, 7, 8192, 8192, now));
  EXPECT_TRUE(denied(grant, GrantOp::kRead, 7, 4096, UINT64_MAX, now));
  EXPECT_TRUE(denied(grant, GrantOp::kRead, 7, 4096, 8192, now + 5000 + AccessGrant::kClockSkewMs + 1));
  EXPECT_TRUE(denied(AccessGrant{}, GrantOp::kRead, 7, 4096, 8192, now));
  AccessGrant widened = grant;
  widened.length = 1 << 20;  // the range is under the mac
  EXPECT_TRUE(denied(widened, GrantOp::kRead, 7, 4096, 8192, now));
  const SharedSecret tenant = kPool.ForTenant(TenantClaim::Parse("team-a:ns1").value());
  EXPECT_TRUE(denied(IssueGrant(tenant, GrantOp::kRead, 7, 4096, 8192, now + 5000), GrantOp::kRead, 7, 4096, 8192, now));

  uint8_t wire[AccessGrant::kWireSize];
  EncodeGrant(grant, wire);
  const AccessGrant back = DecodeGrant(wire);
  EXPECT_TRUE(CheckGrant(kPool, back, GrantOp::kRead, 7, 4096, 8192, now).ok());
}

}  // namespace
}  // namespace kvpool
