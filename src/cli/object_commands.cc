// kvpool put / get / exists / rm / stat: one object at a time from the shell.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/pool_flags.h"
#include "client/client.h"

namespace kvpool::cli {
namespace {

struct CommonOptions {
  PoolFlags pool;
  int timeout_ms = 5000;
};

CommonOptions& Common() {
  static CommonOptions options;
  return options;
}

void AddCommonOptions(CLI::App* cmd) {
  AddPoolFlags(cmd, Common().pool, "master HOST:PORT (default 127.0.0.1:50051)");
  cmd->add_option("--timeout-ms", Common().timeout_ms, "give up after this long")->check(CLI::Range(1, 3'600'000))
      ->capture_default_str();
}

// Connects or prints why not (and sets the exit code). `degraded_ok`: a pool with some
// parts unreachable still connects (stat shows them).
std::unique_ptr<client::Client> ConnectOrReport(bool degraded_ok = false) {
  client::ClientOptions options;
  options.allow_unreachable_parts = degraded_ok;
  auto pool = ResolvePoolOrLocal(Common().pool);
  if (!pool.ok()) {
    fmt::print(stderr, "kvpool: {}\n", pool.status().ToString());
    ExitCode() = 2;
    return nullptr;
  }
  options.pool = *pool;
  auto credentials = ClientCredentials(Common().pool.security);
  if (!credentials.ok()) {
    fmt::print(stderr, "kvpool: {}\n", credentials.status().ToString());
    ExitCode() = 2;
    return nullptr;
  }
  options.credentials = *std::move(credentials);
  auto ucx = TransportSettings(Common().pool);
  if (!ucx.ok()) {
    fmt::print(stderr, "kvpool: {}\n", ucx.status().ToString());
    ExitCode() = 2;
    return nullptr;
  }
  options.transfer.ucx = *ucx;
  options.rpc_timeout = std::chrono::milliseconds(Common().timeout_ms);
  options.transfer_timeout = std::chrono::milliseconds(Common().timeout_ms);
  auto c = client::Client::Connect(options);
  if (!c.ok()) {
    fmt::print(stderr, "kvpool: {}\n", c.status().ToString());
    ExitCode() = 2;
    return nullptr;
  }
  return std::move(c.value());
}

int Fail(const Status& s) {
  fmt::print(stderr, "kvpool: {}\n", s.ToString());
  return s.code() == StatusCode::kNotFound ? 1 : 2;
}

Result<std::string> ReadInput(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "' for reading");
  std::string data((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) return Internal("error reading '" + path + "'");
  return data;
}

Status WriteOutput(const std::string& path, const std::string& data) {
  if (path == "-") {
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    std::cout.flush();
    return std::cout ? Status::Ok() : Internal("error writing to stdout");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgument("cannot open '" + path + "' for writing");
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  return out ? Status::Ok() : Internal("error writing '" + path + "'");
}

}  // namespace

void AddObjectCommands(CLI::App& app) {
  static std::string key, path, group;
  static int64_t pin_ttl_ms = 0;
  static uint32_t replicas = 1;
  static bool json = false;

  auto* put = app.add_subcommand("put", "Store FILE (or - for stdin) under KEY");
  put->add_option("KEY", key, "object key")->required();
  put->add_option("FILE", path, "file to read, - for stdin")->required();
  put->add_option("--group", group, "evict together with other objects of this group");
  put->add_option("--pin-ttl-ms", pin_ttl_ms, "soft-pin for this long")->check(CLI::NonNegativeNumber);
  put->add_option("--replicas", replicas, "copies on distinct segments")->check(CLI::Range(1, 16))->capture_default_str();
  AddCommonOptions(put);
  put->callback([] {
    auto data = ReadInput(path);
    if (!data.ok()) return void(ExitCode() = Fail(data.status()));
    auto c = ConnectOrReport();
    if (!c) return;
    client::PutOptions options{replicas, group, std::chrono::milliseconds(pin_ttl_ms)};
    Status s = c->Put(key, std::as_bytes(std::span(data->data(), data->size())), options);
    if (!s.ok()) return void(ExitCode() = Fail(s));
    fmt::print(stderr, "stored '{}' ({})\n", key, FormatByteSize(data->size()));
  });

  auto* get = app.add_subcommand("get", "Write KEY's value to FILE (or - for stdout)");
  get->add_option("KEY", key, "object key")->required();
  get->add_option("FILE", path, "file to write, - for stdout")->required();
  AddCommonOptions(get);
  get->callback([] {
    auto c = ConnectOrReport();
    if (!c) return;
    auto value = c->Get(key);
    if (!value.ok()) return void(ExitCode() = Fail(value.status()));
    Status s = WriteOutput(path, *value);
    if (!s.ok()) return void(ExitCode() = Fail(s));
  });

  auto* exists = app.add_subcommand("exists", "Exit 0 if KEY is in the pool, 1 if not");
  exists->add_option("KEY", key, "object key")->required();
  AddCommonOptions(exists);
  exists->callback([] {
    auto c = ConnectOrReport();
    if (!c) return;
    auto r = c->Exists(key);
    if (!r.ok()) return void(ExitCode() = Fail(r.status()));
    fmt::print("{}\n", *r ? "yes" : "no");
    ExitCode() = *r ? 0 : 1;
  });

  auto* rm = app.add_subcommand("rm", "Remove KEY from the pool");
  rm->add_option("KEY", key, "object key")->required();
  AddCommonOptions(rm);
  rm->callback([] {
    auto c = ConnectOrReport();
    if (!c) return;
    Status s = c->Remove(key);
    if (!s.ok()) ExitCode() = Fail(s);
  });

  auto* stat = app.add_subcommand("stat", "Show pool usage per part and segment");
  stat->add_flag("--json", json, "machine-readable output");
  AddCommonOptions(stat);
  stat->callback([] {
    auto c = ConnectOrReport(/*degraded_ok=*/true);
    if (!c) return;
    auto s = c->Stat();
    if (!s.ok()) return void(ExitCode() = Fail(s.status()));
    // A part that did not answer is shown with its error, and makes the exit code 2.
    if (s->unreachable_parts()) ExitCode() = 2;
    const auto counters = [](const client::PoolCounters& p) {
      return nlohmann::json{{"objects", p.objects},         {"used_bytes", p.used_bytes},
                            {"capacity_bytes", p.capacity_bytes}, {"evicted_objects", p.evicted_objects},
                            {"evicted_bytes", p.evicted_bytes}, {"hits", p.hits},
                            {"misses", p.misses}, {"misses_evicted", p.misses_evicted}};
    };
    if (json) {
      nlohmann::json j = counters(*s);
      j["parts"] = nlohmann::json::array();
      for (const auto& part : s->parts) {
        nlohmann::json pj = part.status.ok() ? counters(part) : nlohmann::json{{"error", part.status.ToString()}};
        pj["part"] = part.part;
        pj["master"] = part.master_address;
        if (part.term > 0) pj["term"] = part.term;
        j["parts"].push_back(std::move(pj));
      }
      j["segments"] = nlohmann::json::array();
      for (const auto& seg : s->segments) {
        j["segments"].push_back({{"part", seg.part}, {"id", seg.id}, {"store_id", seg.store_id},
                                 {"host_id", seg.host_id}, {"tcp_address", seg.tcp_address}, {"size", seg.size},
                                 {"used_bytes", seg.used_bytes}, {"objects", seg.objects},
                                 {"ssd_capacity_bytes", seg.ssd_capacity_bytes}, {"ssd_used_bytes", seg.ssd_used_bytes},
                                 {"ssd_objects", seg.ssd_objects}, {"transport", seg.transport}});
      }
      fmt::print("{}\n", j.dump(2));
      return;
    }
    const auto line = [](const client::PoolCounters& p) {
      return fmt::format("{} objects, {} of {} used, {} evicted ({}), hits {} misses {} ({} of keys evicted)",
                         p.objects, FormatByteSize(p.used_bytes), FormatByteSize(p.capacity_bytes), p.evicted_objects,
                         FormatByteSize(p.evicted_bytes), p.hits, p.misses, p.misses_evicted);
    };
    fmt::print("pool: {}{}\n", s->parts.size() > 1 ? fmt::format("{} parts, ", s->parts.size()) : "", line(*s));
    for (const auto& part : s->parts) {
      // An elected leader is shown with its term: a term that moves on is a failover.
      const std::string term = part.term > 0 ? fmt::format(" (term {})", part.term) : "";
      if (s->parts.size() > 1 || !part.status.ok() || part.term > 0) {
        fmt::print("part {}  master {}{}  {}\n", part.part, part.master_address, term,
                   part.status.ok() ? line(part) : "UNREACHABLE: " + part.status.ToString());
      }
      for (const auto& seg : s->segments) {
        if (seg.part != part.part) continue;
        fmt::print("  segment {:>4}  {:>10} / {:<10} {:>8} objects  store {} at {} via {}\n", seg.id,
                   FormatByteSize(seg.used_bytes), FormatByteSize(seg.size), seg.objects, seg.store_id,
                   seg.tcp_address, seg.transport.empty() ? "nothing (cannot open)" : seg.transport);
        if (seg.ssd_capacity_bytes > 0) {
          fmt::print("        ssd  {:>10} / {:<10} {:>8} objects\n", FormatByteSize(seg.ssd_used_bytes),
                     FormatByteSize(seg.ssd_capacity_bytes), seg.ssd_objects);
        }
      }
    }
  });
}

int& ExitCode() {
  static int code = 0;
  return code;
}

}  // namespace kvpool::cli
