#include "proto/lookup_reply.h"

#include <gtest/gtest.h>

namespace kvpool {
namespace {

proto::BatchGetReplicasReply ThreeKeys() {
  proto::BatchGetReplicasReply reply;
  LookupReplyWriter out(&reply, 3);
  out.Hit(100, 0xABCDEF0123456789, 2);
  out.Replica(7, 0);
  out.Replica(8, 4096);
  out.Miss(proto::NOT_FOUND, "key 'b' is not in the pool");
  out.Hit(50, 42, 1);
  out.Replica(7, 8192);
  return reply;
}

TEST(LookupReply, ReadsBackWhatWasWritten) {
  const proto::BatchGetReplicasReply reply = ThreeKeys();
  auto entries = ReadLookupReply(reply, 3);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  const auto& e = *entries;
  EXPECT_EQ(e[0].code, proto::OK);
  EXPECT_EQ(e[0].length, 100u);
  EXPECT_EQ(e[0].checksum, 0xABCDEF0123456789u);
  ASSERT_EQ(e[0].replicas(), 2u);
  EXPECT_EQ(e[0].segment_id(1), 8u);
  EXPECT_EQ(e[0].offset(1), 4096u);
  EXPECT_EQ(e[1].code, proto::NOT_FOUND);
  EXPECT_EQ(e[1].message, "key 'b' is not in the pool");
  EXPECT_EQ(e[2].length, 50u);
  EXPECT_EQ(e[2].checksum, 42u);
  ASSERT_EQ(e[2].replicas(), 1u);
  EXPECT_EQ(e[2].segment_id(0), 7u);
  EXPECT_EQ(e[2].offset(0), 8192u);
}

// Every way the arrays can disagree is an error naming what is wrong, never an index past an
// array's end (a master of another version, or bytes garbled on the way).
TEST(LookupReply, RejectsArraysThatDisagree) {
  EXPECT_FALSE(ReadLookupReply(ThreeKeys(), 2).ok());
  EXPECT_FALSE(ReadLookupReply(ThreeKeys(), 4).ok());
  auto no_message = ThreeKeys();
  no_message.clear_messages();
  EXPECT_FALSE(ReadLookupReply(no_message, 3).ok());
  auto short_lengths = ThreeKeys();
  short_lengths.mutable_lengths()->RemoveLast();
  EXPECT_FALSE(ReadLookupReply(short_lengths, 3).ok());
  auto short_checksums = ThreeKeys();
  short_checksums.mutable_checksums()->RemoveLast();
  EXPECT_FALSE(ReadLookupReply(short_checksums, 3).ok());
  auto extra_word = ThreeKeys();
  extra_word.add_replicas(1);
  EXPECT_FALSE(ReadLookupReply(extra_word, 3).ok());
  auto zero_replicas = ThreeKeys();
  zero_replicas.set_replica_counts(1, 0);
  zero_replicas.mutable_replicas()->RemoveLast();
  zero_replicas.mutable_replicas()->RemoveLast();
  const auto status = ReadLookupReply(zero_replicas, 3).status();
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("without a replica"), std::string::npos) << status.ToString();
  EXPECT_TRUE(ReadLookupReply(proto::BatchGetReplicasReply(), 0).ok());
  auto short_flags = ThreeKeys();
  short_flags.set_on_ssd(std::string(1, '\0'));
  EXPECT_FALSE(ReadLookupReply(short_flags, 3).ok());
  auto flagged_pair = ThreeKeys();
  flagged_pair.set_on_ssd(std::string("\1\0", 2));  // a key on SSD has one replica
  EXPECT_FALSE(ReadLookupReply(flagged_pair, 3).ok());
}

// A key on SSD is flagged; the flags are sent only once a key of the reply is on SSD.
TEST(LookupReply, FlagsKeysOnSsd) {
  EXPECT_TRUE(ThreeKeys().on_ssd().empty());
  proto::BatchGetReplicasReply reply;
  LookupReplyWriter out(&reply, 4);
  out.Hit(10, 1, 1);
  out.Replica(7, 0);
  out.Miss(proto::NOT_FOUND, "absent");
  out.Hit(20, 2, 1, /*on_ssd=*/true);
  out.Replica(7, 1u << 20);
  out.Hit(30, 3, 1);
  out.Replica(7, 4096);
  auto entries = ReadLookupReply(reply, 4);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_FALSE((*entries)[0].on_ssd);
  EXPECT_TRUE((*entries)[2].on_ssd);
  EXPECT_EQ((*entries)[2].offset(0), 1u << 20);
  EXPECT_FALSE((*entries)[3].on_ssd);
  // The first hit on SSD too.
  proto::BatchGetReplicasReply first;
  LookupReplyWriter writer(&first, 1);
  writer.Hit(20, 2, 1, /*on_ssd=*/true);
  writer.Replica(7, 4096);
  auto read = ReadLookupReply(first, 1);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE((*read)[0].on_ssd);
}

// A miss of a key the master evicted says how long ago; the ages are sent only once a miss of
// the reply has one.
TEST(LookupReply, SaysHowLongAgoAMissedKeyWasEvicted) {
  EXPECT_EQ(ThreeKeys().evicted_ms_ago_size(), 0);
  proto::BatchGetReplicasReply reply;
  LookupReplyWriter out(&reply, 4);
  out.Miss(proto::NOT_FOUND, "never stored");
  out.Hit(10, 1, 1);
  out.Replica(7, 0);
  out.Miss(proto::NOT_FOUND, "evicted", 1500);
  out.Miss(proto::NOT_READY, "pending");
  auto entries = ReadLookupReply(reply, 4);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ((*entries)[0].evicted_ms_ago, 0u);
  EXPECT_EQ((*entries)[2].evicted_ms_ago, 1500u);
  EXPECT_EQ((*entries)[3].evicted_ms_ago, 0u);
  auto short_ages = reply;
  short_ages.mutable_evicted_ms_ago()->RemoveLast();
  EXPECT_FALSE(ReadLookupReply(short_ages, 4).ok());
}

}  // namespace
}  // namespace kvpool
