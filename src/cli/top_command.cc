// kvpool top: a live view of the pool, refreshed every --interval seconds until Ctrl-C (or
// --iterations frames): each part's master and term, its fill, objects, key lookups and hits
// per second, hit rate and evictions per second over the last interval, and every segment's
// fill (and its SSD tier's). On a terminal each frame replaces the last; otherwise frames
// follow each other, so the output can be logged or read by a script.
#include <unistd.h>

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/pool_flags.h"
#include "cli/shutdown_signal.h"
#include "client/client.h"
#include "common/byte_size.h"

namespace kvpool::cli {
namespace {

struct TopFlags {
  PoolFlags pool;
  double interval_s = 2;
  int iterations = 0;  // 0: until Ctrl-C
  int timeout_ms = 3000;
};

std::string Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? "-" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

// A bar of `width` cells, filled by used / size.
std::string Bar(uint64_t used, uint64_t size, int width = 20) {
  const int filled = size == 0 ? 0 : static_cast<int>(static_cast<double>(used) / static_cast<double>(size) * width + 0.5);
  return "[" + std::string(std::min(filled, width), '#') + std::string(width - std::min(filled, width), '.') + "]";
}

// One frame: `now` against `before` (nullopt on the first) over `seconds`.
std::string Frame(const client::PoolStats& now, const std::optional<client::PoolStats>& before, double seconds) {
  std::map<uint32_t, const client::PartStats*> earlier;
  if (before) {
    for (const auto& p : before->parts) earlier[p.part] = &p;
  }
  const auto per_second = [seconds](uint64_t later, uint64_t sooner) {
    return later >= sooner && seconds > 0 ? static_cast<double>(later - sooner) / seconds : 0.0;
  };
  std::string out = fmt::format("kvpool top · {} part{} · {} segment{} · {} of {} used ({}) · {} objects\n",
                                now.parts.size(), now.parts.size() == 1 ? "" : "s", now.segments.size(),
                                now.segments.size() == 1 ? "" : "s", FormatByteSize(now.used_bytes),
                                FormatByteSize(now.capacity_bytes), Percent(now.used_bytes, now.capacity_bytes),
                                now.objects);
  // "missed evicted": of the interval's misses, those of keys the master evicted (the rest were
  // never stored, removed or pending: a key or namespace mismatch shows up there).
  out += fmt::format("{:<5} {:<22} {:>5} {:>7} {:>10} {:>11} {:>9} {:>8} {:>11} {:>14}\n", "part", "master", "term",
                     "fill", "objects", "lookups/s", "hits/s", "hit rate", "evictions/s", "missed evicted");
  for (const auto& p : now.parts) {
    if (!p.status.ok()) {
      out += fmt::format("{:<5} {:<22} UNREACHABLE: {}\n", p.part, p.master_address, p.status.ToString());
      continue;
    }
    const auto it = earlier.find(p.part);
    const client::PartStats* b = it == earlier.end() || !it->second->status.ok() ? nullptr : it->second;
    std::string rates = fmt::format("{:>11} {:>9} {:>8} {:>11} {:>14}", "-", "-", "-", "-", "-");
    if (b != nullptr) {
      const uint64_t hits = p.hits - std::min(p.hits, b->hits), misses = p.misses - std::min(p.misses, b->misses);
      const uint64_t evicted = p.misses_evicted - std::min(p.misses_evicted, b->misses_evicted);
      rates = fmt::format("{:>11.0f} {:>9.0f} {:>8} {:>11.0f} {:>14}", per_second(p.hits + p.misses, b->hits + b->misses),
                          per_second(p.hits, b->hits), Percent(hits, hits + misses),
                          per_second(p.evicted_objects, b->evicted_objects), Percent(evicted, misses));
    }
    out += fmt::format("{:<5} {:<22} {:>5} {:>7} {:>10} {}\n", p.part, p.master_address,
                       p.term > 0 ? std::to_string(p.term) : "-", Percent(p.used_bytes, p.capacity_bytes), p.objects,
                       rates);
  }
  out += "\n";
  for (const auto& s : now.segments) {
    out += fmt::format("  part {} segment {:<6} {} {:>6} {:>10} / {:<10} {:>8} objects  store {}\n", s.part, s.id,
                       Bar(s.used_bytes, s.size), Percent(s.used_bytes, s.size), FormatByteSize(s.used_bytes),
                       FormatByteSize(s.size), s.objects, s.store_id);
    if (s.ssd_capacity_bytes > 0) {
      out += fmt::format("  {:<21} {} {:>6} {:>10} / {:<10} {:>8} objects  (SSD tier)\n", "",
                         Bar(s.ssd_used_bytes, s.ssd_capacity_bytes),
                         Percent(s.ssd_used_bytes, s.ssd_capacity_bytes), FormatByteSize(s.ssd_used_bytes),
                         FormatByteSize(s.ssd_capacity_bytes), s.ssd_objects);
    }
  }
  return out;
}

int RunTop(const TopFlags& f) {
  auto pool = ResolvePoolOrLocal(f.pool);
  if (!pool.ok()) {
    fmt::print(stderr, "kvpool top: {}\n", pool.status().ToString());
    return 2;
  }
  auto credentials = ClientCredentials(f.pool.security);
  if (!credentials.ok()) {
    fmt::print(stderr, "kvpool top: {}\n", credentials.status().ToString());
    return 2;
  }
  client::ClientOptions options;
  options.pool = *pool;
  options.credentials = *std::move(credentials);
  options.allow_unreachable_parts = true;  // a part that is down is shown as such
  options.rpc_timeout = std::chrono::milliseconds(f.timeout_ms);
  auto c = client::Client::Connect(options);
  if (!c.ok()) {
    fmt::print(stderr, "kvpool top: {}\n", c.status().ToString());
    return 1;
  }
  const bool tty = isatty(fileno(stdout));
  std::optional<client::PoolStats> before;
  auto taken = std::chrono::steady_clock::now();
  for (int frame = 0; f.iterations == 0 || frame < f.iterations; ++frame) {
    if (frame > 0 && WaitForShutdownSignalFor(static_cast<long>(f.interval_s * 1000)) != 0) break;
    auto now = (*c)->Stat();
    const auto at = std::chrono::steady_clock::now();
    if (!now.ok()) {
      fmt::print(stderr, "kvpool top: {}\n", now.status().ToString());
      return 1;
    }
    const std::string text = Frame(*now, before, std::chrono::duration<double>(at - taken).count());
    fmt::print("{}{}{}", tty ? "\033[H\033[2J" : "", text, tty ? "" : "\n");
    std::fflush(stdout);
    before = std::move(now).value();
    taken = at;
  }
  return 0;
}

}  // namespace

void AddTopCommand(CLI::App& app) {
  static TopFlags f;
  auto* cmd = app.add_subcommand("top", "A live view of the pool: parts, segments, fill, lookups, hit rate, evictions");
  AddPoolFlags(cmd, f.pool, "master HOST:PORT (default: the local one)");
  cmd->add_option("--interval", f.interval_s, "seconds between refreshes")->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  cmd->add_option("--iterations", f.iterations, "frames to show, then exit (0: until Ctrl-C)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--timeout-ms", f.timeout_ms, "deadline of each call to a master")->check(CLI::Range(100, 600'000))
      ->capture_default_str();
  cmd->callback([] { ExitCode() = RunTop(f); });
}

}  // namespace kvpool::cli
