// kvpool bench: put/get throughput and latency against a running pool, with plain memcpy of
// the same bytes measured in the same run as the baseline.
//
// Each repetition puts `--bytes` worth of `--value-size` objects from `--threads` threads in
// batches of `--batch`, reads them all back (checking every value's stamp), then removes them.
// Reported figures are medians over repetitions.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <thread>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/pool_flags.h"
#include "client/client.h"

namespace kvpool::cli {
namespace {

struct BenchOptions {
  PoolFlags pool;
  uint64_t value_size = 1 << 20;
  uint64_t bytes = uint64_t{256} << 20;  // per phase per repetition
  int threads = 1;
  int batch = 8;
  int repeat = 5;
  int copy_threads = 2;  // threads one shm copy may use (the caller's included)
  bool no_shm = false;
  bool json = false;
};

// Memory for values: mapped, pre-faulted (first touch is slow here), THP when possible.
class BenchBuffer {
 public:
  explicit BenchBuffer(size_t size) : size_(size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, size, MADV_HUGEPAGE);
    data_ = static_cast<std::byte*>(p);
    std::memset(data_, 0x5a, size);
  }
  ~BenchBuffer() { munmap(data_, size_); }
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  std::byte* data() const { return data_; }

 private:
  std::byte* data_;
  size_t size_;
};

// Each value carries its object number in its first and last 8 bytes, so a value read back
// from the wrong place (or half-written) is caught.
void Stamp(std::byte* value, uint64_t size, uint64_t object) {
  std::memcpy(value, &object, sizeof object);
  std::memcpy(value + size - sizeof object, &object, sizeof object);
}
bool CheckStamp(const std::byte* value, uint64_t size, uint64_t object) {
  uint64_t head, tail;
  std::memcpy(&head, value, sizeof head);
  std::memcpy(&tail, value + size - sizeof tail, sizeof tail);
  return head == object && tail == object;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct PhaseResult {
  double gbps = 0;
  std::vector<double> batch_us;
  uint64_t errors = 0;
  std::string first_error;
};

using Clock = std::chrono::steady_clock;

// Runs `work(thread, batch_index)` over every batch of every thread and times the phase.
template <typename Work>
PhaseResult RunPhase(int threads, uint64_t batches_per_thread, uint64_t bytes, Work work) {
  PhaseResult result;
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<uint64_t> errors{0};
  std::mutex error_mu;
  std::barrier start(threads + 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      for (uint64_t b = 0; b < batches_per_thread; ++b) {
        const auto t0 = Clock::now();
        Status s = work(t, b);
        latencies[t].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (!s.ok()) {
          errors.fetch_add(1);
          std::lock_guard lock(error_mu);
          if (result.first_error.empty()) result.first_error = s.ToString();
        }
      }
    });
  }
  start.arrive_and_wait();
  const auto t0 = Clock::now();
  for (auto& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  result.gbps = static_cast<double>(bytes) / seconds / 1e9;
  for (auto& l : latencies) result.batch_us.insert(result.batch_us.end(), l.begin(), l.end());
  result.errors = errors.load();
  return result;
}

// Polls the pool until its used bytes fall to `bytes` (leases on removed objects ending).
void WaitUntilUsedAtMost(client::Client& c, uint64_t bytes, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    auto s = c.Stat();
    if (!s.ok() || s->used_bytes <= bytes) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int RunBench(const BenchOptions& o) {
  if (o.value_size < 16) {
    fmt::print(stderr, "kvpool bench: --value-size must be at least 16 bytes\n");
    return 2;
  }
  client::ClientOptions copts;
  auto pool = ResolvePoolOrLocal(o.pool);
  if (!pool.ok()) {
    fmt::print(stderr, "kvpool bench: {}\n", pool.status().ToString());
    return 2;
  }
  copts.pool = *pool;
  auto credentials = ClientCredentials(o.pool.security);
  if (!credentials.ok()) {
    fmt::print(stderr, "kvpool bench: {}\n", credentials.status().ToString());
    return 2;
  }
  copts.credentials = *std::move(credentials);
  auto ucx = TransportSettings(o.pool);
  if (!ucx.ok()) {
    fmt::print(stderr, "kvpool bench: {}\n", ucx.status().ToString());
    return 2;
  }
  copts.transfer.ucx = *ucx;
  copts.transfer.allow_shm = !o.no_shm;
  copts.transfer.shm_copy_threads = o.copy_threads;
  // Short leases: a repetition's objects are removed right after they are read, and a removed
  // object's space comes back only when its lease ends.
  copts.lease = std::chrono::milliseconds(1000);
  auto connected = client::Client::Connect(copts);
  if (!connected.ok()) {
    fmt::print(stderr, "kvpool bench: {}\n", connected.status().ToString());
    return 2;
  }
  client::Client& c = **connected;
  auto stats = c.Stat();
  if (!stats.ok()) {
    fmt::print(stderr, "kvpool bench: {}\n", stats.status().ToString());
    return 2;
  }
  // Stay under the eviction watermark so every get can hit.
  const uint64_t budget = std::min<uint64_t>(o.bytes, stats->capacity_bytes / 2);
  const uint64_t per_batch = o.value_size * static_cast<uint64_t>(o.batch);
  const uint64_t batches_per_thread = std::max<uint64_t>(1, budget / per_batch / static_cast<uint64_t>(o.threads));
  const uint64_t objects_per_thread = batches_per_thread * static_cast<uint64_t>(o.batch);
  const uint64_t phase_bytes = objects_per_thread * static_cast<uint64_t>(o.threads) * o.value_size;
  if (phase_bytes > stats->capacity_bytes) {
    fmt::print(stderr, "kvpool bench: pool of {} is too small for {} threads x batch {} x {}\n",
               FormatByteSize(stats->capacity_bytes), o.threads, o.batch, FormatByteSize(o.value_size));
    return 2;
  }

  std::vector<std::unique_ptr<BenchBuffer>> put_buffers, get_buffers;
  for (int t = 0; t < o.threads; ++t) {
    put_buffers.push_back(std::make_unique<BenchBuffer>(per_batch));
    get_buffers.push_back(std::make_unique<BenchBuffer>(per_batch));
    (void)c.RegisterBuffer(put_buffers.back()->data(), per_batch);
    (void)c.RegisterBuffer(get_buffers.back()->data(), per_batch);
  }
  // memcpy baseline: the same bytes from a phase-sized source (so it pays cache misses as the
  // pool does) on as many threads as the pool's copies may use, each copying whole values.
  BenchBuffer memcpy_source(phase_bytes);
  BenchBuffer memcpy_destination(phase_bytes);
  const int memcpy_threads = static_cast<int>(
      std::min<uint64_t>(static_cast<uint64_t>(o.threads) * (o.no_shm ? 1 : o.copy_threads), phase_bytes / o.value_size));
  const uint64_t values_per_memcpy_thread = phase_bytes / o.value_size / static_cast<uint64_t>(memcpy_threads);

  const std::string run_id = fmt::format("bench/{}/{}", getpid(), Clock::now().time_since_epoch().count());
  auto key_of = [&](int t, uint64_t object) { return fmt::format("{}/{}/{}", run_id, t, object); };

  std::vector<double> put_gbps, get_gbps, memcpy_gbps, put_lat, get_lat;
  uint64_t errors = 0;
  std::string first_error;
  auto note = [&](const PhaseResult& r) {
    errors += r.errors;
    if (first_error.empty()) first_error = r.first_error;
  };
  for (int rep = 0; rep < o.repeat; ++rep) {
    const std::string rep_tag = fmt::format("{}", rep);
    auto keys_for = [&](int t, uint64_t b) {
      std::vector<std::string> keys(o.batch);
      for (int i = 0; i < o.batch; ++i) keys[i] = key_of(t, b * o.batch + i) + "/" + rep_tag;
      return keys;
    };
    PhaseResult put = RunPhase(o.threads, batches_per_thread, phase_bytes, [&](int t, uint64_t b) -> Status {
      auto keys = keys_for(t, b);
      std::vector<client::ValueView> values(o.batch);
      for (int i = 0; i < o.batch; ++i) {
        std::byte* v = put_buffers[t]->data() + i * o.value_size;
        Stamp(v, o.value_size, b * o.batch + i);
        values[i] = client::ValueView(v, o.value_size);
      }
      for (const Status& s : c.BatchPut(keys, values)) KVPOOL_RETURN_IF_ERROR(s);
      return Status::Ok();
    });
    PhaseResult get = RunPhase(o.threads, batches_per_thread, phase_bytes, [&](int t, uint64_t b) -> Status {
      auto keys = keys_for(t, b);
      std::vector<client::ValueBuffer> buffers(o.batch);
      for (int i = 0; i < o.batch; ++i) buffers[i] = client::ValueBuffer(get_buffers[t]->data() + i * o.value_size, o.value_size);
      auto results = c.BatchGetInto(keys, buffers);
      for (int i = 0; i < o.batch; ++i) {
        if (!results[i].ok()) return results[i].status();
        if (!CheckStamp(buffers[i].data(), o.value_size, b * o.batch + i))
          return Internal("wrong bytes read back for " + keys[i]);
      }
      return Status::Ok();
    });
    PhaseResult copy = RunPhase(memcpy_threads, values_per_memcpy_thread,
                                memcpy_threads * values_per_memcpy_thread * o.value_size,
                                [&](int t, uint64_t v) -> Status {
                                  const uint64_t at = (t * values_per_memcpy_thread + v) * o.value_size;
                                  std::memcpy(memcpy_destination.data() + at, memcpy_source.data() + at, o.value_size);
                                  return Status::Ok();
                                });
    note(put);
    note(get);
    put_gbps.push_back(put.gbps);
    get_gbps.push_back(get.gbps);
    memcpy_gbps.push_back(copy.gbps);
    put_lat.insert(put_lat.end(), put.batch_us.begin(), put.batch_us.end());
    get_lat.insert(get_lat.end(), get.batch_us.begin(), get.batch_us.end());
    for (int t = 0; t < o.threads; ++t)
      for (uint64_t b = 0; b < batches_per_thread; ++b) (void)c.BatchRemove(keys_for(t, b));
    // Start the next repetition on an equally empty pool, so eviction never takes its objects.
    WaitUntilUsedAtMost(c, stats->used_bytes, std::chrono::seconds(5));
  }

  const std::string transport = c.transfer_engine().TransportFor(stats->segments.empty() ? 0 : stats->segments[0].id);
  const double put_m = Median(put_gbps), get_m = Median(get_gbps), copy_m = Median(memcpy_gbps);
  if (o.json) {
    nlohmann::json j = {{"value_size", o.value_size}, {"threads", o.threads}, {"batch", o.batch},
                        {"bytes_per_phase", phase_bytes}, {"repeat", o.repeat}, {"transport", transport},
                        {"put_gbps", put_m}, {"get_gbps", get_m}, {"memcpy_gbps", copy_m}, {"memcpy_threads", memcpy_threads},
                        {"put_batch_p50_us", Percentile(put_lat, 0.5)}, {"put_batch_p99_us", Percentile(put_lat, 0.99)},
                        {"get_batch_p50_us", Percentile(get_lat, 0.5)}, {"get_batch_p99_us", Percentile(get_lat, 0.99)},
                        {"errors", errors}, {"first_error", first_error}};
    fmt::print("{}\n", j.dump());
  } else {
    // One line per figure, each saying what it means next to the bound it is measured against.
    fmt::print("kvpool bench: {} values, {} thread{}, batch {}, {} per phase, medians of {} repetitions, over {}\n",
               FormatByteSize(o.value_size), o.threads, o.threads == 1 ? "" : "s", o.batch, FormatByteSize(phase_bytes),
               o.repeat, transport);
    fmt::print("  PUT    {:7.2f} GB/s = {:.2f} of memcpy on this machine: values written into the pool "
               "(batch p50 {:.0f} us, p99 {:.0f} us)\n",
               put_m, put_m / copy_m, Percentile(put_lat, 0.5), Percentile(put_lat, 0.99));
    fmt::print("  GET    {:7.2f} GB/s = {:.2f} of memcpy on this machine: values read back and checked "
               "(batch p50 {:.0f} us, p99 {:.0f} us)\n",
               get_m, get_m / copy_m, Percentile(get_lat, 0.5), Percentile(get_lat, 0.99));
    fmt::print("  memcpy {:7.2f} GB/s: the same bytes copied in this process on {} thread{}, this run (the bound)\n",
               copy_m, memcpy_threads, memcpy_threads == 1 ? "" : "s");
    if (errors) fmt::print("  ERRORS: {} batches failed; first: {}\n", errors, first_error);
  }
  return errors ? 1 : 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  static BenchOptions o;
  auto* cmd = app.add_subcommand("bench", "Measure put/get throughput and latency (with a memcpy baseline)");
  AddPoolFlags(cmd, o.pool, "master HOST:PORT (default 127.0.0.1:50051)");
  AddByteSizeOption(cmd, "--value-size", o.value_size, "bytes per object");
  AddByteSizeOption(cmd, "--bytes", o.bytes, "bytes moved per phase per repetition (capped at half the pool)");
  cmd->add_option("--threads", o.threads, "client threads")->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--batch", o.batch, "objects per batch call")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--repeat", o.repeat, "repetitions (medians are reported)")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--copy-threads", o.copy_threads, "threads one same-host copy may use")
      ->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_flag("--no-shm", o.no_shm, "use tcp even on the same host");
  cmd->add_flag("--json", o.json, "print one JSON object");
  cmd->callback([] { ExitCode() = RunBench(o); });
}

}  // namespace kvpool::cli
