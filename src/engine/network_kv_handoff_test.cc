#include "engine/network_kv_handoff.h"

#include <gtest/gtest.h>

#include "engine/host_kv_cache.h"
#include "engine/kv_pattern.h"

namespace kvpool::engine {
namespace {

// Two prefill stages (2 + 1 layers) into two DCP ranks of all 3 layers, through sockets, the
// transfer engine and a landing segment small enough that every request needs many pieces and
// slot reuse. (Different block sizes on the two sides are covered in src/handoff's tests; the
// replay's KV pattern is keyed by its own block size, so both sides use it here.)
// Param: "shm" (the senders' default on one host) or "ucx" (UCX's tcp on loopback).
class NetworkKvHandoffTest : public ::testing::TestWithParam<const char*> {};

TEST_P(NetworkKvHandoffTest, EveryStageLandsInTheDecodeLayersRequestAfterRequest) {
  const bool ucx = std::string(GetParam()) == "ucx";
  if (ucx && !transfer::UcxBuilt()) GTEST_SKIP() << "built without UCX";
  connector::PagedKvLayout s0_layout;
  s0_layout.num_layers = 2;
  s0_layout.block_tokens = 16;
  s0_layout.bytes_per_token_per_layer = 24;
  connector::PagedKvLayout s1_layout = s0_layout;
  s1_layout.num_layers = 1;
  connector::PagedKvLayout dec_layout = s0_layout;
  dec_layout.num_layers = 3;
  HostKvCache s0(s0_layout, 20), s1(s1_layout, 20), rank0(dec_layout, 40), rank1(dec_layout, 40);
  const handoff::DcpTokenMap map{2, 1};
  NetworkKvHandoffOptions options{.max_write_bytes = 2048, .landing_bytes = 4096};
  if (ucx) options.ucx = {true, "tcp", "lo"};
  auto handoff = NewNetworkKvHandoff(options);
  for (uint64_t id = 1; id <= 4; ++id) {
    const uint64_t tokens = 100 + 50 * id;  // 150..300
    std::vector<connector::TokenId> ids(tokens, static_cast<connector::TokenId>(id));
    const auto keys = ChainBlockKeys(ids, 16);
    std::vector<connector::BlockId> ptable, table0, table1;
    for (uint64_t b = 0; b < (tokens + 15) / 16; ++b) ptable.push_back(static_cast<connector::BlockId>(19 - b));
    for (uint64_t b = 0; b < (tokens + 15) / 16; ++b) table0.push_back(static_cast<connector::BlockId>((b * 7) % 40));
    for (uint64_t b = 0; b < (tokens + 15) / 16; ++b) table1.push_back(static_cast<connector::BlockId>(39 - b));
    WriteKv(s0.cache(), ptable, 0, keys, 0, tokens);
    WriteKv(s1.cache(), ptable, 2, keys, 0, tokens);
    KvHandoffRequest r;
    r.request_id = id;
    r.tokens = tokens;
    r.stage_caches = {&s0.cache(), &s1.cache()};
    r.stage_first_layers = {0, 2};
    r.stage_block_tables = {ptable, ptable};
    r.decode_caches = {&rank0.cache(), &rank1.cache()};
    r.decode_block_tables = {table0, table1};
    auto bytes = handoff->Transfer(r);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(*bytes, tokens * 3 * 24);
    EXPECT_EQ(CountKvMismatches(rank0.cache(), table0, 0, keys, 0, map.CountBelow(0, tokens), {map, 0}), 0u)
        << "request " << id;
    EXPECT_EQ(CountKvMismatches(rank1.cache(), table1, 0, keys, 0, map.CountBelow(1, tokens), {map, 1}), 0u)
        << "request " << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, NetworkKvHandoffTest, ::testing::Values("shm", "ucx"),
                         [](const auto& info) { return std::string(info.param); });

TEST(NetworkKvHandoffRefusalTest, BadTablesAndLayoutsAreRefused) {
  connector::PagedKvLayout stage;
  stage.num_layers = 1;
  stage.block_tokens = 16;
  stage.bytes_per_token_per_layer = 8;
  connector::PagedKvLayout dec = stage;
  dec.num_layers = 2;
  HostKvCache s0(stage, 4), s1(stage, 4), decode(dec, 4);
  const std::vector<connector::BlockId> table = {0, 1, 2, 3};
  auto handoff = NewNetworkKvHandoff();
  KvHandoffRequest r;
  r.request_id = 1;
  r.tokens = 64;
  r.stage_caches = {&s0.cache(), &s1.cache()};
  r.stage_first_layers = {0, 1};
  r.stage_block_tables = {table, table};
  r.decode_caches = {&decode.cache()};
  r.decode_block_tables = {table};
  ASSERT_TRUE(handoff->Transfer(r).ok());
  r.request_id = 2;
  r.tokens = 65;  // beyond every block table
  EXPECT_EQ(handoff->Transfer(r).status().code(), StatusCode::kInvalidArgument);
  r.tokens = 64;
  r.stage_first_layers = {1, 0};  // stages out of layer order
  EXPECT_EQ(handoff->Transfer(r).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvpool::engine
