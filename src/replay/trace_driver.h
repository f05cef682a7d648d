// TraceDriver: what RunReplay needs from whatever feeds a Deployment from a trace — the
// closed-loop session lanes of AgentX traces (ReplayDriver) or the open-loop, by-timestamp
// replay of Mooncake traces (OpenLoopDriver).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/request_record.h"

namespace kvpool::replay {

class TraceDriver {
 public:
  virtual ~TraceDriver() = default;
  // Schedules the first requests; INVALID_ARGUMENT when nothing in the corpus fits the
  // deployment or the options make no sense.
  virtual Status Start() = 0;
  // Every finished request, counted or not, in completion order.
  virtual const std::vector<engine::RequestRecord>& records() const = 0;
  // The measurement window, emulated seconds.
  virtual double window_start_s() const = 0;
  virtual double window_end_s() const = 0;
  virtual bool window_open() const = 0;
  virtual int64_t counted_finished() const = 0;
  // Traces (closed loop) or requests (open loop) that do not fit the deployment.
  virtual int64_t traces_skipped() const = 0;
  // Closed loop: lanes past their warm-up (0 for open loop).
  virtual size_t lanes_warm() const = 0;
};

}  // namespace kvpool::replay
