// PoolParts: which masters make up one pool, and which part holds each key.
//
// A pool is split into N parts (the published deployment: one per network rail), each with
// its own master, its own storage services and its own eviction. Every process that uses
// the pool — clients, the connector, the replay, the Python module, `kvpool stat`, a store
// joining part K — reads the same list, written once:
//
//   inline:  --pool part0=10.0.0.1:50051,part1=10.0.1.1:50051     (or just HOST:PORT)
//   file:    --pool-file pool.conf, one `partK = HOST:PORT` per line, `#` comments, and an
//            optional `stage_parts = 0,1,2,3`
//   etcd:    --etcd HOST:PORT[,...] [--parts N]: each part's master is whichever leads the
//            part's election in etcd (master/leadership.h), followed across failovers; in a
//            file, `etcd = HOST:PORT,...` and `parts = N` instead of the partK lines
//
// Routing (PartOf): a pipeline stage's object — a key ending in "/s<stage>", which is how
// connector/chunk_keys.h names them — lives in part stage_parts[stage % size] (by default
// part stage % N), so rank i of every prefill instance reads and writes one part; any
// other key lives in part xxh3(key) % N. Every client computes the same answer, so a key
// written by the connector is found by `kvpool get` too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvpool::client {

struct PoolParts {
  std::vector<std::string> masters;    // masters[k] = part k's master, "HOST:PORT"
  std::vector<uint32_t> stage_parts;   // stage s -> part stage_parts[s % size]; empty => s % N
  // etcd endpoints; when set, every masters[k] is "" and part k's master is its election's
  // leader (etcd/part_leader.h).
  std::string etcd;

  // A one-part pool (what a lone `--master HOST:PORT` means).
  static PoolParts Single(std::string master_address);
  // `parts` parts whose masters are elected in etcd.
  static PoolParts Elected(std::string etcd_endpoints, size_t parts);

  size_t size() const { return masters.size(); }
  // REQUIRES: Validate() passed.
  uint32_t PartOf(std::string_view key) const;
  // "part0=HOST:PORT,part1=...": what ParsePoolSpec reads back (the stage map is not in it);
  // "etcd=ENDPOINTS parts=N" for an elected pool.
  std::string ToString() const;
  // INVALID_ARGUMENT when there is no part, an address is malformed or repeated, or a stage
  // maps to a part the pool does not have (or, with etcd, an endpoint is malformed).
  Status Validate() const;
};

// "part0=HOST:PORT,part1=HOST:PORT,..." (parts named 0..N-1, each once, any order) or a bare
// "HOST:PORT" (one part). Validated.
Result<PoolParts> ParsePoolSpec(std::string_view spec);
// The file form (see above). Errors name the file and line. Validated.
Result<PoolParts> ReadPoolFile(const std::string& path);
// "0,1,2,3" -> {0, 1, 2, 3}; used by --stage-parts and the file's stage_parts key.
Result<std::vector<uint32_t>> ParseStageParts(std::string_view text);

}  // namespace kvpool::client
