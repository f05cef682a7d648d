#include "common/prometheus_text.h"

#include <fmt/format.h>

namespace kvpool {
namespace {

template <typename T>
void Append(std::string* out, std::string_view name, std::string_view type, std::string_view help, T value,
            std::string_view labels) {
  AppendHeader(out, name, type, help);
  out->append(fmt::format("{}{}{}{} {}\n", name, labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}", value));
}

}  // namespace

void AppendMetric(std::string* out, std::string_view name, std::string_view type, std::string_view help,
                  uint64_t value, std::string_view labels) {
  Append(out, name, type, help, value, labels);
}

void AppendMetric(std::string* out, std::string_view name, std::string_view type, std::string_view help,
                  double value, std::string_view labels) {
  Append(out, name, type, help, value, labels);
}

void AppendHeader(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  out->append(fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n", name, help, type));
}

std::string JoinLabels(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) return std::string(a.empty() ? b : a);
  return fmt::format("{},{}", a, b);
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace kvpool
