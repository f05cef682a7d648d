#include "trace/json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace kvpool::trace::json_fields {

namespace {

// Builds the document like Json::parse, but hands a syntax error back instead of throwing it:
// malformed records are common input here (and throwing costs far more than parsing them).
class RecordParser : public nlohmann::detail::json_sax_dom_parser<Json> {
 public:
  explicit RecordParser(Json& out) : json_sax_dom_parser(out, /*allow_exceptions_=*/false) {}

  // Hides the base's (sax_parse calls the handler's own, not through a vtable).
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const Exception& ex) {
    error = ex.what();
    return false;
  }

  std::string error;
};

}  // namespace

Result<Json> ParseRecord(std::string_view text, std::string_view where) {
  Json doc;
  RecordParser parser(doc);
  if (Json::sax_parse(text, &parser)) return doc;
  std::string what = std::move(parser.error);
  // Drop the "[json.exception.parse_error.101] " tag: it means nothing to a user.
  if (const auto tag_end = what.find("] "); what.starts_with("[json.exception") && tag_end != std::string::npos)
    what.erase(0, tag_end + 2);
  return Invalid(where, fmt::format("not valid JSON: {}", what));
}

Status Invalid(std::string_view where, std::string_view message) {
  return InvalidArgument(fmt::format("{}: {}", where, message));
}

std::string Show(const Json& value) {
  constexpr size_t kMaxShown = 60;
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

Result<const Json*> Required(const Json& object, std::string_view key, std::string_view where) {
  const auto it = object.find(key);
  if (it == object.end()) return Invalid(where, fmt::format("missing '{}'", key));
  return &*it;
}

Result<int64_t> NonNegativeInt(const Json& object, std::string_view key, std::string_view where) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(const Json* v, Required(object, key, where));
  if (v->is_number_unsigned() && v->get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(v->get<uint64_t>());
  if (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() >= 0) return v->get<int64_t>();
  return Invalid(where, fmt::format("'{}' must be a non-negative integer, got {}", key, Show(*v)));
}

Result<double> NonNegativeNumber(const Json& object, std::string_view key, std::string_view where) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(const Json* v, Required(object, key, where));
  if (v->is_number()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d >= 0) return d;
  }
  return Invalid(where, fmt::format("'{}' must be a non-negative number, got {}", key, Show(*v)));
}

Result<std::string> String(const Json& object, std::string_view key, std::string_view where) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(const Json* v, Required(object, key, where));
  if (!v->is_string()) return Invalid(where, fmt::format("'{}' must be a string, got {}", key, Show(*v)));
  return v->get<std::string>();
}

Result<std::vector<std::string>> StringList(const Json& object, std::string_view key, std::string_view where) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(const Json* v, Required(object, key, where));
  if (!v->is_array()) return Invalid(where, fmt::format("'{}' must be a list of strings, got {}", key, Show(*v)));
  std::vector<std::string> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    if (!item.is_string())
      return Invalid(where, fmt::format("'{}'[{}] must be a string, got {}", key, i, Show(item)));
    out.push_back(item.get<std::string>());
  }
  return out;
}

Result<std::vector<uint64_t>> IdList(const Json& object, std::string_view key, std::string_view where) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(const Json* v, Required(object, key, where));
  if (!v->is_array()) return Invalid(where, fmt::format("'{}' must be a list of integers, got {}", key, Show(*v)));
  std::vector<uint64_t> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    if (item.is_number_unsigned()) {
      out.push_back(item.get<uint64_t>());
    } else if (item.is_number_integer() && item.get<int64_t>() >= 0) {
      out.push_back(static_cast<uint64_t>(item.get<int64_t>()));
    } else {
      return Invalid(where, fmt::format("'{}'[{}] must be a non-negative integer, got {}", key, i, Show(item)));
    }
  }
  return out;
}

namespace {

// Absent or null -> nullopt; otherwise what `read` makes of the field.
template <typename T>
Result<std::optional<T>> AbsentOrNullAsNone(const Json& object, std::string_view key, std::string_view where,
                                            Result<T> (*read)(const Json&, std::string_view, std::string_view)) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<T>();
  KVPOOL_TRACE_ASSIGN_OR_RETURN(T value, read(object, key, where));
  return std::optional<T>(std::move(value));
}

}  // namespace

Result<std::optional<int64_t>> OptionalNonNegativeInt(const Json& object, std::string_view key,
                                                      std::string_view where) {
  return AbsentOrNullAsNone(object, key, where, &NonNegativeInt);
}

Result<std::optional<double>> OptionalNonNegativeNumber(const Json& object, std::string_view key,
                                                       std::string_view where) {
  return AbsentOrNullAsNone(object, key, where, &NonNegativeNumber);
}

std::string OpaqueText(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  return it == object.end() ? std::string() : it->dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kvpool::trace::json_fields
