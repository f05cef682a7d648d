#include "common/byte_size.h"

#include <fmt/format.h>

#include <cctype>
#include <limits>

namespace kvpool {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  const std::string quoted = fmt::format("'{}'", text);
  size_t i = 0;
  uint64_t number = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (number > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      return InvalidArgument("byte size " + quoted + " is too large");
    number = number * 10 + digit;
    ++i;
  }
  if (i == 0) return InvalidArgument("byte size " + quoted + " must start with a number, e.g. 4GiB");
  std::string_view suffix = text.substr(i);
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  int shift = -1;
  const struct { std::string_view name; int shift; } kUnits[] = {
      {"", 0},     {"b", 0},     {"k", 10},   {"kb", 10},  {"kib", 10}, {"m", 20},  {"mb", 20},
      {"mib", 20}, {"g", 30},    {"gb", 30},  {"gib", 30}, {"t", 40},   {"tb", 40}, {"tib", 40},
  };
  for (const auto& unit : kUnits) {
    if (EqualsIgnoreCase(suffix, unit.name)) shift = unit.shift;
  }
  if (shift < 0) return InvalidArgument("byte size " + quoted + " has an unknown unit (use K, M, G or T)");
  if (shift > 0 && number > (std::numeric_limits<uint64_t>::max() >> (shift + 1)))
    return InvalidArgument("byte size " + quoted + " is too large");
  const uint64_t bytes = number << shift;
  if (bytes > (uint64_t{1} << 63)) return InvalidArgument("byte size " + quoted + " is too large");
  return bytes;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.4g} {}", value, kNames[unit]);
}

}  // namespace kvpool
