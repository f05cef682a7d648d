#include "transfer/batch_state.h"

#include <fmt/format.h>

namespace kvpool::transfer {

BatchState::BatchState(size_t request_count)
    : results_(request_count),
      parts_left_(request_count, 1),
      finished_at_(request_count),
      pending_(request_count) {}

void BatchState::ExpectParts(size_t index, uint32_t parts) {
  std::lock_guard<std::mutex> lock(mu_);
  parts_left_[index] = parts;
}

void BatchState::FinishPart(size_t index, Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finalized_ || parts_left_[index] == 0) return;
  if (!status.ok() && results_[index].ok()) results_[index] = std::move(status);
  if (--parts_left_[index] == 0) {
    finished_at_[index] = std::chrono::steady_clock::now();
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) cv_.notify_all();
  }
}

Status BatchState::Wait(TimePoint deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finalized_) return overall_;
  cv_.wait_until(lock, deadline, [&] { return pending_.load() == 0; });
  // Close the buffers gate without holding mu_: a transport inside a section may finish its
  // step and then call FinishPart, which takes mu_.
  lock.unlock();
  buffers_.Close();
  lock.lock();
  if (finalized_) return overall_;

  size_t failed = 0, timed_out = 0;
  const Status* first_error = nullptr;
  for (size_t i = 0; i < results_.size(); ++i) {
    if (parts_left_[i] != 0 || finished_at_[i] > deadline) {
      results_[i] = Timeout("request did not finish by the batch deadline");
    }
    if (!results_[i].ok()) {
      ++failed;
      if (results_[i].code() == StatusCode::kTimeout) ++timed_out;
      if (first_error == nullptr) first_error = &results_[i];
    }
  }
  finalized_ = true;
  if (failed == 0) {
    overall_ = Status::Ok();
  } else if (timed_out > 0) {
    overall_ = Timeout(fmt::format("{} of {} requests did not finish by the deadline ({} failed)",
                                   timed_out, results_.size(), failed));
  } else {
    overall_ = Status(first_error->code(),
                      fmt::format("{} of {} requests failed; first: {}", failed, results_.size(),
                                  first_error->message()));
  }
  return overall_;
}

}  // namespace kvpool::transfer
