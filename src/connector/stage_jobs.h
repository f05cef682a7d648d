// StageJobs: the workers, queues and request table the restore and save engines share. An
// engine cuts each request into jobs, each on one pipeline stage (a restore window, a save's
// stage); StageJobs runs them and hands out each request's outcome once.
//
//   jobs = StageJobs::Create(store, spec, devices, options, body, finish);
//   jobs->Add(request, jobs_per_stage)         // queues the request's jobs; returns at once
//   jobs->Poll(id) / jobs->Wait(id, deadline)  // kFinished: the request, its outcome built
//
// Per stage: one queue, taken in order by workers_per_stage workers, each with a ChunkPacker
// of its own (CUDA on the stage's device, else the CPU's, made on the worker's thread) and its
// own share of the stage's registered staging buffer. A worker runs the engine's `body` on each
// job it takes, then counts the job reported.
//
// A request finishes when every job of it has reported, or once its own deadline
// (Request::deadline: a restore's bounded wait) has passed. Then it is cancelled first:
// BeginWrite refuses from then on and the writes already under way are waited for, so once
// its outcome is handed out no job writes the memory its caller lent. The engine's `finish`
// builds the outcome, once, on the thread of the Poll or Wait that takes the request.
//
// Wait blocks on the request's condition variable (notified whenever a job of it reports), and
// never past the caller's deadline: there it answers kRunning and the request goes on, to be
// Polled or Waited for again.
//
// Thread-safe. `body` runs on the workers (one job at a time per worker, many at once per
// StageJobs); `finish` runs under the request's mu.
// REQUIRES: `store`, and whatever `body` and `finish` use, outlive the StageJobs (its
// destructor joins the workers).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/status.h"
#include "connector/chunk_store.h"
#include "connector/kv_namespace.h"
#include "connector/staging_buffer.h"

namespace kvpool::connector {

class ChunkPacker;

struct StageJobsOptions {
  // "restore" or "save": names the engine in errors ("restore engine: ...", "save 7: ...").
  std::string noun;
  uint32_t workers_per_stage = 1;
  // Registered staging per stage, split evenly among its workers; each share must hold at
  // least one stage object.
  uint64_t staging_bytes_per_stage = uint64_t{64} << 20;
  // Requests in the table (added, outcome not taken yet); Add beyond it is refused.
  size_t max_requests = std::numeric_limits<size_t>::max();
  // Jobs waiting per stage; Add beyond it is refused.
  size_t max_queued_jobs_per_stage = std::numeric_limits<size_t>::max();
};

class StageJobs {
 public:
  using Clock = std::chrono::steady_clock;

  // One request as the table sees it; an engine's request derives from it and keeps its own
  // fields under the same mu.
  struct Request {
    virtual ~Request() = default;
    // Brackets a job's write into memory the caller lent (a restore's unpack into its cache):
    // false, and nothing may be written, once the request is cancelled. REQUIRES: mu not held.
    bool BeginWrite();
    void EndWrite();

    uint64_t id = 0;
    // Its own deadline (a restore's bounded wait): once past, the request is cancelled and
    // handed out as ran out. max: none. Set before Add.
    Clock::time_point deadline = Clock::time_point::max();
    uint64_t jobs = 0;  // its jobs across every stage; set by Add

    std::mutex mu;                    // guards what follows and the engine's fields
    std::condition_variable changed;  // a job reported or a write ended; it was cancelled or taken
    uint64_t jobs_pending = 0;        // not reported yet
    uint32_t writing = 0;             // between BeginWrite and EndWrite
    bool cancelled = false;           // BeginWrite refuses
    bool taken = false;               // its outcome is (being) handed out
  };

  // Job `index` (0, 1, ... in queue order) of `request` on stage `stage`.
  struct Job {
    std::shared_ptr<Request> request;
    uint32_t stage = 0;
    uint64_t index = 0;
  };

  // A stage: fixed once Create returns.
  struct Stage {
    uint32_t index = 0;
    StageDevice device;
    uint64_t object_bytes = 0;  // one chunk's stage object
    uint64_t slot_bytes = 0;    // each worker's share of the staging buffer
    uint64_t slot_chunks = 0;   // stage objects one share holds (>= 1)
    std::unique_ptr<StagingBuffer> staging;  // the workers' shares back to back
  };

  // What a worker runs a job with.
  struct Worker {
    const Stage* stage = nullptr;
    ChunkPacker* packer = nullptr;  // null when it could not be made: packer_status says why
    Status packer_status;
    std::byte* slot = nullptr;  // this worker's share of the stage's staging (stage->slot_bytes)
  };

  // Runs one job. Its result goes into the engine's request fields, under request->mu.
  using Body = std::function<void(const Job& job, Worker& worker)>;
  // Builds `request`'s outcome into the engine's fields; called once, under request.mu, when
  // the request is taken. ran_out: its own deadline passed before every job reported (it is
  // cancelled; jobs still queued or reading report later and write nothing).
  using Finish = std::function<void(Request& request, bool ran_out)>;

  enum class State {
    kUnknown,   // not in the table: never added, or handed out (maybe by another call now)
    kRunning,   // not finished, or ran out with a write of it still under way
    kFinished,  // taken by this call: out of the table, its outcome built
  };
  struct Answer {
    State state = State::kUnknown;
    std::shared_ptr<Request> request;  // kFinished only
  };

  // One StageDevice per stage of `spec`, in stage order; starts the workers.
  // INVALID_ARGUMENT for another stage count, no workers, a cache that does not match the
  // spec, or a staging share below one stage object.
  static Result<std::unique_ptr<StageJobs>> Create(ChunkStore* store, const KvModelSpec& spec,
                                                   std::vector<StageDevice> devices, StageJobsOptions options, Body body,
                                                   Finish finish);
  // Cancels every request in the table, drops queued jobs and joins the workers (each ends
  // the job it is running).
  ~StageJobs();
  StageJobs(const StageJobs&) = delete;
  StageJobs& operator=(const StageJobs&) = delete;

  uint32_t num_stages() const { return static_cast<uint32_t>(stages_.size()); }
  const Stage& stage(uint32_t s) const { return stages_[s]->stage; }

  // Queues jobs_per_stage[s] jobs on each stage s (one entry per stage) and puts `request`
  // in the table. ALREADY_EXISTS (its id is in the table) or UNAVAILABLE (max_requests, or a
  // stage's queue would pass max_queued_jobs_per_stage): nothing queued. A request with no
  // job finishes at once.
  Status Add(std::shared_ptr<Request> request, std::span<const uint64_t> jobs_per_stage);
  // kFinished when the request finished (see above), taking it; else kRunning or kUnknown.
  // Never waits for a job.
  Answer Poll(uint64_t id);
  // Blocks until Poll would answer kFinished or kUnknown, or until `deadline`: then kRunning,
  // and the request goes on. A request past its own deadline waits, up to `deadline`, only
  // for the writes already under way.
  Answer Wait(uint64_t id, Clock::time_point deadline);
  // Blocks until no job is queued or running: a ran-out request's late jobs included.
  void WaitIdle();

  // Poll and Wait as an engine hands them out, in its outcome type: the `outcome` field (with
  // `request_id` and `status`) of its request type R, which derives from Request. Poll: the
  // finished request's outcome, nullopt while it runs, NOT_FOUND for an id not in the table.
  // Wait: the same, and NOT_READY (nothing else set) when `deadline` came first.
  template <class R>
  std::optional<decltype(R::outcome)> PollOutcome(uint64_t id) {
    return OutcomeOf<R>(id, Poll(id));
  }
  template <class R>
  decltype(R::outcome) WaitOutcome(uint64_t id, Clock::time_point deadline) {
    if (auto out = OutcomeOf<R>(id, Wait(id, deadline))) return *std::move(out);
    decltype(R::outcome) out;
    out.request_id = id;
    out.status = NotReady(
        fmt::format("{} {} is still running at the caller's deadline; poll or wait again", options_.noun, id));
    return out;
  }

 private:
  template <class R>
  std::optional<decltype(R::outcome)> OutcomeOf(uint64_t id, const Answer& answer) {
    if (answer.state == State::kFinished) return static_cast<const R&>(*answer.request).outcome;
    if (answer.state == State::kRunning) return std::nullopt;
    decltype(R::outcome) out;
    out.request_id = id;
    out.status = NotFound(fmt::format("no {} {} in progress", options_.noun, id));
    return out;
  }

  struct StageQueue {
    Stage stage;
    std::deque<Job> queue;  // guarded by StageJobs::mu_
    std::condition_variable wake;
    std::vector<std::thread> workers;
  };
  StageJobs(StageJobsOptions options, Body body, Finish finish);
  void WorkerLoop(StageQueue* stage, uint32_t worker);
  std::shared_ptr<Request> Find(uint64_t id);
  // REQUIRES: `lock` holds r->mu. Takes r if it finished, waiting up to `writes_deadline` for
  // the writes of one that ran out.
  Answer Take(std::shared_ptr<Request> r, std::unique_lock<std::mutex>& lock, Clock::time_point writes_deadline);

  const StageJobsOptions options_;
  const Body body_;
  const Finish finish_;

  std::mutex mu_;  // guards requests_, every StageQueue::queue, running_ and stopping_
  std::unordered_map<uint64_t, std::shared_ptr<Request>> requests_;
  uint64_t running_ = 0;          // jobs taken off a queue, not reported yet
  std::condition_variable idle_;  // a job reported (WaitIdle)
  bool stopping_ = false;
  std::vector<std::unique_ptr<StageQueue>> stages_;
};

}  // namespace kvpool::connector
