// Prometheus text exposition (format 0.0.4) for a process's /metrics: one metric's HELP, TYPE
// and sample line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvpool {

// Appends "# HELP name help", "# TYPE name type" and "name{labels} value". `labels` is the
// inside of the braces (`store="a"`), already escaped (EscapeLabelValue); empty for none.
void AppendMetric(std::string* out, std::string_view name, std::string_view type, std::string_view help,
                  uint64_t value, std::string_view labels = {});
void AppendMetric(std::string* out, std::string_view name, std::string_view type, std::string_view help,
                  double value, std::string_view labels = {});
// Appends only "# HELP name help" and "# TYPE name type": several labelled series follow.
void AppendHeader(std::string* out, std::string_view name, std::string_view type, std::string_view help);
// "a,b" of two label lists (either may be empty).
std::string JoinLabels(std::string_view a, std::string_view b);
// A label value with \, " and newline escaped.
std::string EscapeLabelValue(std::string_view value);

}  // namespace kvpool
