#include "client/pool_parts.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <cstring>
#include <xxhash.h>

namespace kvpool::client {
namespace {

std::string WriteFile(const std::string& text) {
  char path[] = "/tmp/kvpool-pool-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << text;
  return path;
}

// ReadPoolFile of a file holding `text`, removed again.
Result<PoolParts> ReadPoolText(const std::string& text) {
  const std::string path = WriteFile(text);
  auto pool = ReadPoolFile(path);
  std::remove(path.c_str());
  return pool;
}

TEST(PoolPartsTest, ParsesTheInlineList) {
  auto pool = ParsePoolSpec("part1=10.0.1.1:50051, part0=10.0.0.1:50051");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  ASSERT_EQ(pool->size(), 2u);
  EXPECT_EQ(pool->masters[0], "10.0.0.1:50051");
  EXPECT_EQ(pool->masters[1], "10.0.1.1:50051");
  EXPECT_EQ(pool->ToString(), "part0=10.0.0.1:50051,part1=10.0.1.1:50051");
  EXPECT_EQ(ParsePoolSpec(pool->ToString())->masters, pool->masters);
}

TEST(PoolPartsTest, ABareAddressIsOnePart) {
  auto pool = ParsePoolSpec("127.0.0.1:50051");
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->masters, std::vector<std::string>{"127.0.0.1:50051"});
}

TEST(PoolPartsTest, BadListsSayWhatIsWrong) {
  const auto error = [](const char* spec) {
    auto pool = ParsePoolSpec(spec);
    EXPECT_FALSE(pool.ok()) << spec;
    return pool.ok() ? std::string() : pool.status().message();
  };
  EXPECT_NE(error("part0=a:1,part0=b:2").find("part0 is listed twice"), std::string::npos);
  EXPECT_NE(error("part0=a:1,part2=b:2").find("part1 is missing"), std::string::npos);
  EXPECT_NE(error("part0=a:1,part1=a:1").find("same master"), std::string::npos);
  EXPECT_NE(error("part0=a:99999").find("port"), std::string::npos);
  EXPECT_NE(error("rail0=a:1").find("not a part name"), std::string::npos);
  EXPECT_NE(error("part0=a:1,junk").find("not partK=HOST:PORT"), std::string::npos);
  EXPECT_NE(error("partx=a:1").find("part number"), std::string::npos);
  EXPECT_NE(error("").find("HOST:PORT"), std::string::npos);
  EXPECT_NE(error("nohost").find("HOST:PORT"), std::string::npos);
}

TEST(PoolPartsTest, ReadsTheFileForm) {
  const std::string path = WriteFile(
      "# four rails\n"
      "part0 = 10.0.0.1:50051\n"
      "part1 = 10.0.1.1:50051   # rail 1\n"
      "\n"
      "stage_parts = 1, 0\n");
  auto pool = ReadPoolFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->masters, (std::vector<std::string>{"10.0.0.1:50051", "10.0.1.1:50051"}));
  EXPECT_EQ(pool->stage_parts, (std::vector<uint32_t>{1, 0}));
}

TEST(PoolPartsTest, FileErrorsNameTheLine) {
  const std::string path = WriteFile("part0 = a:1\nmaster = b:2\n");
  auto pool = ReadPoolFile(path);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find(path + ":2: unknown key 'master'"), std::string::npos)
      << pool.status().message();
  std::ofstream(path) << "part0 = a:1\nstage_parts = 0,1\n";
  pool = ReadPoolFile(path);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find("names part 1"), std::string::npos) << pool.status().message();
  std::remove(path.c_str());
  EXPECT_EQ(ReadPoolFile(path).status().code(), StatusCode::kNotFound);
}

TEST(PoolPartsTest, APoolElectedInEtcdNamesEndpointsAndAPartCount) {
  PoolParts elected = PoolParts::Elected("127.0.0.1:2379,127.0.0.1:22379", 4);
  EXPECT_TRUE(elected.Validate().ok());
  EXPECT_EQ(elected.size(), 4u);
  EXPECT_EQ(elected.ToString(), "etcd=127.0.0.1:2379,127.0.0.1:22379 parts=4");
  EXPECT_FALSE(PoolParts::Elected("not-an-endpoint", 1).Validate().ok());

  auto file = ReadPoolText("# elected\netcd = 127.0.0.1:2379\nparts = 2\nstage_parts = 1,0\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->etcd, "127.0.0.1:2379");
  EXPECT_EQ(file->size(), 2u);
  EXPECT_EQ(file->PartOf("chunk/s0"), 1u);
  EXPECT_FALSE(ReadPoolText("etcd = 127.0.0.1:2379\npart0 = a:1\n").ok());
  EXPECT_FALSE(ReadPoolText("parts = 2\n").ok());
}

TEST(PoolPartsTest, StageObjectsGoToTheirStagesPart) {
  PoolParts pool = ParsePoolSpec("part0=a:1,part1=b:1,part2=c:1,part3=d:1").value();
  for (uint32_t s = 0; s < 8; ++s) EXPECT_EQ(pool.PartOf("ns/chunk/s" + std::to_string(s)), s % 4);
  pool.stage_parts = {3, 2, 1, 0};
  EXPECT_EQ(pool.PartOf("ns/chunk/s0"), 3u);
  EXPECT_EQ(pool.PartOf("ns/chunk/s5"), 2u);
}

TEST(PoolPartsTest, OtherKeysSpreadByHashTheSameWayEverywhere) {
  const PoolParts pool = ParsePoolSpec("part0=a:1,part1=b:1,part2=c:1,part3=d:1").value();
  const PoolParts again = ParsePoolSpec("part0=a:1,part1=b:1,part2=c:1,part3=d:1").value();
  std::vector<int> per_part(4);
  for (int i = 0; i < 4000; ++i) {
    const std::string key = "key-" + std::to_string(i);
    ++per_part[pool.PartOf(key)];
    EXPECT_EQ(pool.PartOf(key), again.PartOf(key));
  }
  for (int n : per_part) EXPECT_GT(n, 800);
  // Not stage names ("/s" without digits, or digits then more): hashed like any key.
  for (const char* key : {"a/s", "a/sx", "a/s1x", "a/x1"}) {
    EXPECT_EQ(pool.PartOf(key), static_cast<uint32_t>(XXH3_64bits(key, std::strlen(key)) % 4)) << key;
  }
  EXPECT_EQ(ParsePoolSpec("h:1")->PartOf("a/s3"), 0u);
}

}  // namespace
}  // namespace kvpool::client
