#include "transfer/batch_state.h"

#include <thread>

#include <gtest/gtest.h>

namespace kvpool::transfer {
namespace {

using Clock = std::chrono::steady_clock;

TEST(BatchStateTest, FinishesWhenEveryPartHasReported) {
  BatchState batch(2);
  batch.ExpectParts(0, 3);
  batch.FinishPart(0, Status::Ok());
  batch.FinishPart(1, Status::Ok());
  batch.FinishPart(0, Status::Ok());
  EXPECT_FALSE(batch.Done());
  batch.FinishPart(0, Status::Ok());
  EXPECT_TRUE(batch.Done());
  EXPECT_TRUE(batch.Wait(Clock::now() + std::chrono::seconds(1)).ok());
}

TEST(BatchStateTest, KeepsTheFirstErrorOfARequest) {
  BatchState batch(2);
  batch.ExpectParts(0, 2);
  batch.FinishPart(0, Stale("first"));
  batch.FinishPart(0, Unavailable("second"));
  batch.FinishPart(1, Status::Ok());
  Status overall = batch.Wait(Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(overall.code(), StatusCode::kStale);
  EXPECT_EQ(batch.results()[0].message(), "first");
  EXPECT_TRUE(batch.results()[1].ok());
}

TEST(BatchStateTest, PastDeadlineTimesOutAndClosesTheBuffers) {
  BatchState batch(2);
  batch.FinishPart(0, Status::Ok());
  Status overall = batch.Wait(Clock::now() - std::chrono::milliseconds(1));
  EXPECT_EQ(overall.code(), StatusCode::kTimeout);
  EXPECT_EQ(batch.results()[1].code(), StatusCode::kTimeout);
  EXPECT_FALSE(batch.buffers().Enter());
  batch.FinishPart(1, Status::Ok());  // late: ignored
  EXPECT_EQ(batch.results()[1].code(), StatusCode::kTimeout);
  EXPECT_EQ(batch.Wait(Clock::now()).code(), StatusCode::kTimeout);  // same answer again
}

TEST(BatchStateTest, CompletionAfterTheDeadlineCountsAsTimeout) {
  BatchState batch(1);
  auto deadline = Clock::now() - std::chrono::seconds(1);
  batch.FinishPart(0, Status::Ok());  // finished, but after the deadline
  EXPECT_EQ(batch.Wait(deadline).code(), StatusCode::kTimeout);
}

TEST(BatchStateTest, WaitReturnsWhenAnotherThreadFinishes) {
  auto batch = std::make_shared<BatchState>(1);
  std::thread t([batch] { batch->FinishPart(0, Status::Ok()); });
  EXPECT_TRUE(batch->Wait(Clock::now() + std::chrono::seconds(30)).ok());
  t.join();
}

TEST(AccessGateTest, CloseWaitsForOpenSectionsAndRefusesNewOnes) {
  AccessGate gate;
  ASSERT_TRUE(gate.Enter());
  std::atomic<bool> closed{false};
  std::thread closer([&] {
    gate.Close();
    closed = true;
  });
  while (!gate.closed()) std::this_thread::yield();
  EXPECT_FALSE(closed.load());
  EXPECT_FALSE(gate.Enter());
  gate.Exit();
  closer.join();
  EXPECT_TRUE(closed.load());
}

}  // namespace
}  // namespace kvpool::transfer
