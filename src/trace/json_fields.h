// Strict, exception-free readers for the fields of a parsed JSON record (internal to trace/).
//
// Every reader takes `where` ("traces.jsonl:17: request 3") and on failure returns an
// InvalidArgument Status that names the place, the field and the offending value, e.g.
//   traces.jsonl:17: request 3: 'in' must be a non-negative integer, got "abc"
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvpool::trace::json_fields {

using Json = nlohmann::json;

// Parses one JSON document (a JSONL line or a whole .json file). A syntax error names `where` and the column.
Result<Json> ParseRecord(std::string_view text, std::string_view where);

// "where: message": the one shape of every error from this folder.
Status Invalid(std::string_view where, std::string_view message);

// Short rendering of a value for messages; long values are cut with "...".
std::string Show(const Json& value);

Result<const Json*> Required(const Json& object, std::string_view key, std::string_view where);
Result<int64_t> NonNegativeInt(const Json& object, std::string_view key, std::string_view where);
Result<double> NonNegativeNumber(const Json& object, std::string_view key, std::string_view where);
Result<std::string> String(const Json& object, std::string_view key, std::string_view where);
Result<std::vector<std::string>> StringList(const Json& object, std::string_view key, std::string_view where);
// A list of non-negative integer block ids.
Result<std::vector<uint64_t>> IdList(const Json& object, std::string_view key, std::string_view where);
// Absent or null -> nullopt; otherwise a non-negative integer.
Result<std::optional<int64_t>> OptionalNonNegativeInt(const Json& object, std::string_view key,
                                                      std::string_view where);
// Absent or null -> nullopt; otherwise a finite non-negative number.
Result<std::optional<double>> OptionalNonNegativeNumber(const Json& object, std::string_view key,
                                                       std::string_view where);
// Absent -> ""; otherwise the value as compact JSON text, kept opaque.
std::string OpaqueText(const Json& object, std::string_view key);

}  // namespace kvpool::trace::json_fields

// Assigns the value of a Result-returning `expr` to `lhs`, or returns its Status.
#define KVPOOL_TRACE_ASSIGN_OR_RETURN(lhs, expr) \
  KVPOOL_TRACE_ASSIGN_OR_RETURN_IMPL(KVPOOL_TRACE_CONCAT(_kv_result_, __LINE__), lhs, expr)
#define KVPOOL_TRACE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                       \
  if (!tmp.ok()) return tmp.status();                      \
  lhs = std::move(tmp).value()
#define KVPOOL_TRACE_CONCAT(a, b) KVPOOL_TRACE_CONCAT_IMPL(a, b)
#define KVPOOL_TRACE_CONCAT_IMPL(a, b) a##b
