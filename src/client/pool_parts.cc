#include "client/pool_parts.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <charconv>
#include <fstream>
#include <set>

#include "common/host_port.h"
#include "etcd/etcd_client.h"

namespace kvpool::client {
namespace {

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

Result<uint32_t> ParseIndex(std::string_view text, std::string_view what) {
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value > 1023)
    return InvalidArgument(fmt::format("{} '{}' is not a number from 0 to 1023", what, text));
  return value;
}

// Sets parts[K] from "partK" = "HOST:PORT"; a part named twice is an error.
Status AddPart(std::string_view name, std::string_view address, std::vector<std::string>& masters) {
  if (name.substr(0, 4) != "part")
    return InvalidArgument(fmt::format("'{}' is not a part name (expected part0, part1, ...)", name));
  Result<uint32_t> index = ParseIndex(name.substr(4), "part number");
  if (!index.ok()) return index.status();
  if (Status s = CheckHostPort(address); !s.ok())
    return InvalidArgument(fmt::format("{}: {}", name, s.message()));
  if (masters.size() <= *index) masters.resize(*index + 1);
  if (!masters[*index].empty()) return InvalidArgument(fmt::format("{} is listed twice", name));
  masters[*index] = std::string(address);
  return Status::Ok();
}

}  // namespace

PoolParts PoolParts::Single(std::string master_address) {
  PoolParts p;
  p.masters.push_back(std::move(master_address));
  return p;
}

PoolParts PoolParts::Elected(std::string etcd_endpoints, size_t parts) {
  PoolParts p;
  p.etcd = std::move(etcd_endpoints);
  p.masters.assign(parts, "");
  return p;
}

uint32_t PoolParts::PartOf(std::string_view key) const {
  const uint32_t n = static_cast<uint32_t>(masters.size());
  if (n == 1) return 0;
  // "<...>/s<digits>": a pipeline stage's object.
  const auto slash = key.rfind('/');
  if (slash != std::string_view::npos && slash + 1 < key.size() && key[slash + 1] == 's') {
    const std::string_view digits = key.substr(slash + 2);
    uint32_t stage = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), stage);
    if (ec == std::errc() && end == digits.data() + digits.size()) {
      return stage_parts.empty() ? stage % n : stage_parts[stage % stage_parts.size()];
    }
  }
  return static_cast<uint32_t>(XXH3_64bits(key.data(), key.size()) % n);
}

std::string PoolParts::ToString() const {
  if (!etcd.empty()) return fmt::format("etcd={} parts={}", etcd, masters.size());
  std::string out;
  for (size_t k = 0; k < masters.size(); ++k) out += fmt::format("{}part{}={}", k ? "," : "", k, masters[k]);
  return out;
}

Status PoolParts::Validate() const {
  if (masters.empty()) return InvalidArgument("the pool lists no part");
  if (!etcd.empty()) {
    if (masters.size() > 1024) return InvalidArgument(fmt::format("{} parts is more than 1024", masters.size()));
    for (const std::string& m : masters) {
      if (!m.empty()) return InvalidArgument("a pool elected in etcd lists no master addresses");
    }
    if (auto client = etcd::EtcdClient::Create(etcd); !client.ok()) return client.status();
  }
  std::set<std::string> seen;
  for (size_t k = 0; k < masters.size() && etcd.empty(); ++k) {
    if (masters[k].empty())
      return InvalidArgument(fmt::format("part{} is missing (parts must be numbered 0 to {} without a gap)", k,
                                         masters.size() - 1));
    if (Status s = CheckHostPort(masters[k]); !s.ok()) return InvalidArgument(fmt::format("part{}: {}", k, s.message()));
    if (!seen.insert(masters[k]).second)
      return InvalidArgument(fmt::format("part{} has the same master as an earlier part ({})", k, masters[k]));
  }
  for (uint32_t p : stage_parts) {
    if (p >= masters.size())
      return InvalidArgument(fmt::format("stage_parts names part {}, but the pool has parts 0 to {}", p,
                                         masters.size() - 1));
  }
  return Status::Ok();
}

Result<std::vector<uint32_t>> ParseStageParts(std::string_view text) {
  std::vector<uint32_t> out;
  while (true) {
    const auto comma = text.find(',');
    Result<uint32_t> p = ParseIndex(Trim(text.substr(0, comma)), "stage_parts entry");
    if (!p.ok()) return p.status();
    out.push_back(*p);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

Result<PoolParts> ParsePoolSpec(std::string_view spec) {
  spec = Trim(spec);
  PoolParts pool;
  if (spec.find('=') == std::string_view::npos) {
    if (Status s = CheckHostPort(spec); !s.ok()) return s;
    return PoolParts::Single(std::string(spec));
  }
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    const std::string_view entry = Trim(spec.substr(0, comma));
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgument(fmt::format("pool entry '{}' is not partK=HOST:PORT", entry));
    if (Status s = AddPart(Trim(entry.substr(0, eq)), Trim(entry.substr(eq + 1)), pool.masters); !s.ok()) return s;
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  if (Status s = pool.Validate(); !s.ok()) return s;
  return pool;
}

Result<PoolParts> ReadPoolFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open pool file '{}'", path));
  PoolParts pool;
  uint32_t elected_parts = 0;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string_view text = line;
    text = Trim(text.substr(0, text.find('#')));
    if (text.empty()) continue;
    const auto where = [&](const Status& s) { return InvalidArgument(fmt::format("{}:{}: {}", path, number, s.message())); };
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) return where(InvalidArgument(fmt::format("'{}' is not KEY = VALUE", text)));
    const std::string_view key = Trim(text.substr(0, eq)), value = Trim(text.substr(eq + 1));
    if (key == "etcd") {
      pool.etcd = std::string(value);
    } else if (key == "parts") {
      Result<uint32_t> parts = ParseIndex(value, "parts");
      if (!parts.ok() || *parts == 0) return where(InvalidArgument(fmt::format("parts '{}' is not from 1 to 1023", value)));
      elected_parts = *parts;
    } else if (key == "stage_parts") {
      Result<std::vector<uint32_t>> stages = ParseStageParts(value);
      if (!stages.ok()) return where(stages.status());
      pool.stage_parts = *std::move(stages);
    } else if (Status s = AddPart(key, value, pool.masters); !s.ok()) {
      return where(key.substr(0, 4) == "part" ? s : InvalidArgument(fmt::format("unknown key '{}'", key)));
    }
  }
  if (in.bad()) return Internal(fmt::format("error reading pool file '{}'", path));
  if (!pool.etcd.empty() || elected_parts > 0) {
    if (pool.etcd.empty()) return InvalidArgument(fmt::format("{}: `parts` needs `etcd`", path));
    if (!pool.masters.empty()) return InvalidArgument(fmt::format("{}: give either `etcd` or partK lines, not both", path));
    pool.masters.assign(elected_parts ? elected_parts : 1, "");
  }
  if (Status s = pool.Validate(); !s.ok()) return InvalidArgument(fmt::format("{}: {}", path, s.message()));
  return pool;
}

}  // namespace kvpool::client
