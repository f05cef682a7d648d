#include "connector/kv_namespace.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "connector/test_kv_cache.h"

namespace kvpool::connector {
namespace {

KvModelSpec Base() { return testing::SmallSpec(KvLayoutKind::kLatent, {4, 4}); }

std::string HexOf(const KvModelSpec& spec) {
  auto ns = KvNamespace::Create(spec);
  EXPECT_TRUE(ns.ok()) << ns.status().ToString();
  return ns.ok() ? ns->hex() : "";
}

TEST(KvNamespaceTest, SameSpecSameId) {
  EXPECT_EQ(HexOf(Base()), HexOf(Base()));
  EXPECT_EQ(HexOf(Base()).size(), 32u);
}

TEST(KvNamespaceTest, EveryFieldThatChangesKvBytesChangesTheId) {
  std::vector<std::function<void(KvModelSpec&)>> changes = {
      [](KvModelSpec& s) { s.model_id = "other-model"; },
      [](KvModelSpec& s) { s.kv_dtype = "bf16"; },
      [](KvModelSpec& s) { s.layout = KvLayoutKind::kSplitKv; },
      [](KvModelSpec& s) { s.bytes_per_token_per_layer = 512; },
      [](KvModelSpec& s) { s.stage_layers = {4, 4, 1}; },   // more layers
      [](KvModelSpec& s) { s.stage_layers = {3, 5}; },      // same layers, other split
      [](KvModelSpec& s) { s.stage_layers = {8}; },         // no pipeline
      [](KvModelSpec& s) { s.block_tokens = 32; },
      [](KvModelSpec& s) { s.chunk_tokens = 128; },
  };
  std::set<std::string> ids = {HexOf(Base())};
  for (auto& change : changes) {
    KvModelSpec spec = Base();
    change(spec);
    EXPECT_TRUE(ids.insert(HexOf(spec)).second) << KvNamespace::CanonicalText(spec);
  }
}

TEST(KvNamespaceTest, StringsCannotShiftIntoEachOther) {
  KvModelSpec a = Base(), b = Base();
  a.model_id = "m|dtype:";
  b.model_id = "m";
  b.kv_dtype = "|dtype:" + a.kv_dtype;
  EXPECT_NE(HexOf(a), HexOf(b));
}

TEST(KvNamespaceTest, RejectsNonsense) {
  KvModelSpec s = Base();
  s.chunk_tokens = 100;  // not a multiple of 16
  EXPECT_EQ(KvNamespace::Create(s).status().code(), StatusCode::kInvalidArgument);
  s = Base();
  s.stage_layers = {};
  EXPECT_EQ(KvNamespace::Create(s).status().code(), StatusCode::kInvalidArgument);
  s = Base();
  s.layout = KvLayoutKind::kSplitKv;
  s.bytes_per_token_per_layer = 575;
  EXPECT_EQ(KvNamespace::Create(s).status().code(), StatusCode::kInvalidArgument);
}

TEST(KvNamespaceTest, StageGeometry) {
  KvModelSpec s = testing::SmallSpec(KvLayoutKind::kLatent, {3, 5});
  EXPECT_EQ(s.total_layers(), 8u);
  EXPECT_EQ(s.first_layer(1), 3u);
  EXPECT_EQ(s.stage_object_bytes(1), 64u * 576 * 5);
}

}  // namespace
}  // namespace kvpool::connector
