#include "engine/kv_admission_gate.h"

#include <gtest/gtest.h>

namespace kvpool::engine {
namespace {

TEST(KvAdmissionGateTest, AdmitsWhileThereIsRoomThenQueuesInOrder) {
  KvAdmissionGate gate(100);
  EXPECT_TRUE(gate.Admit(1, 60));
  EXPECT_FALSE(gate.Admit(2, 50));
  EXPECT_FALSE(gate.Admit(3, 10));  // would fit, but may not overtake request 2
  EXPECT_EQ(gate.waiting(), 2u);
  EXPECT_EQ(gate.waiting_tokens(), 60u);
  EXPECT_EQ(gate.Release(60), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(gate.reserved(), 60u);
  EXPECT_EQ(gate.waiting(), 0u);
}

TEST(KvAdmissionGateTest, ReleaseAdmitsOnlyWhatFits) {
  KvAdmissionGate gate(100);
  EXPECT_TRUE(gate.Admit(1, 100));
  EXPECT_FALSE(gate.Admit(2, 70));
  EXPECT_FALSE(gate.Admit(3, 40));
  EXPECT_EQ(gate.Release(100), (std::vector<uint64_t>{2}));
  EXPECT_EQ(gate.Release(70), (std::vector<uint64_t>{3}));
}

TEST(KvAdmissionGateTest, CancelledHeadUnblocksTheQueue) {
  KvAdmissionGate gate(100);
  EXPECT_TRUE(gate.Admit(1, 50));
  EXPECT_FALSE(gate.Admit(2, 80));
  EXPECT_FALSE(gate.Admit(3, 30));
  std::vector<uint64_t> admitted;
  EXPECT_TRUE(gate.Cancel(2, &admitted));  // timed out
  EXPECT_EQ(admitted, (std::vector<uint64_t>{3}));
  EXPECT_FALSE(gate.Cancel(2, &admitted));
  EXPECT_EQ(gate.reserved(), 80u);
}

}  // namespace
}  // namespace kvpool::engine
