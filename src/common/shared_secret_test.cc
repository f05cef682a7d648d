#include "common/shared_secret.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace kvpool {
namespace {

class SharedSecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/kvpool-secret-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& content, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << content;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
};

TEST_F(SharedSecretFileTest, ReadsASecretFileLessItsNewline) {
  const auto a = SharedSecret::Load(Write("a", "0123456789abcdef0123\n", 0600));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const auto b = SharedSecret::FromBytes("0123456789abcdef0123");
  const auto challenge = SharedSecret::NewChallenge();
  EXPECT_TRUE(b.Check("transfer", challenge, a->Prove("transfer", challenge)));
}

TEST_F(SharedSecretFileTest, RefusesFilesThatCannotHoldASecretSafely) {
  const auto open = SharedSecret::Load(Write("open", "0123456789abcdef0123", 0644));
  EXPECT_EQ(open.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos) << open.status().ToString();
  const auto short_one = SharedSecret::Load(Write("short", "tooshort\n", 0600));
  EXPECT_NE(short_one.status().message().find("at least 16"), std::string::npos) << short_one.status().ToString();
  EXPECT_FALSE(SharedSecret::Load(Write("empty", "", 0600)).ok());
  const auto missing = SharedSecret::Load(dir_ + "/missing");
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos) << missing.status().ToString();
  EXPECT_FALSE(SharedSecret::Load(dir_).ok());  // a folder
  auto none = LoadAuthFile("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(SharedSecretTest, AProofHoldsOnlyForItsSecretPurposeAndChallenge) {
  const auto secret = SharedSecret::FromBytes("the pool's secret, 32 bytes long");
  const auto other = SharedSecret::FromBytes("another pool's secret, as long..");
  const auto challenge = SharedSecret::NewChallenge();
  auto another_challenge = challenge;
  another_challenge[0] ^= 1;
  const auto proof = secret.Prove("transfer", challenge);
  EXPECT_TRUE(secret.Check("transfer", challenge, proof));
  EXPECT_FALSE(other.Check("transfer", challenge, proof));
  EXPECT_FALSE(secret.Check("shm", challenge, proof));
  EXPECT_FALSE(secret.Check("transfer", another_challenge, proof));
  auto flipped = proof;
  flipped[31] ^= 0x80;
  EXPECT_FALSE(secret.Check("transfer", challenge, flipped));
  EXPECT_NE(SharedSecret::NewChallenge(), SharedSecret::NewChallenge());
}

}  // namespace
}  // namespace kvpool
