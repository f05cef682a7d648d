#include "cli/config_file.h"

#include <fstream>
#include <memory>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kvpool::cli {
namespace {

constexpr const char* kConfigFlag = "--config";
constexpr const char* kPrintFlag = "--print-config";

// What PrepareConfig handed to the app, for ExplainConfigError.
struct GivenConfig {
  std::string role, path;
};
GivenConfig& Given() {
  static GivenConfig given;
  return given;
}

// TOML as CLI11 reads it, every key filed under `role` (as if the file were its [role] section).
class RoleConfig : public CLI::ConfigTOML {
 public:
  explicit RoleConfig(std::string role) : role_(std::move(role)) {}
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> items = CLI::ConfigTOML::from_config(input);
    for (CLI::ConfigItem& item : items) item.parents.insert(item.parents.begin(), role_);
    return items;
  }

 private:
  std::string role_;
};

// The key a ConfigError names ("INI was not able to parse store.memroy" -> "memroy"; a flag
// that may not be configured: "store.print-config: This option is not allowed ...").
std::string KeyOf(const std::string& message) {
  static const std::string kExtras = "INI was not able to parse ";
  std::string item = message.rfind(kExtras, 0) == 0 ? message.substr(kExtras.size())
                                                      : message.substr(0, message.find(':'));
  const size_t dot = item.rfind('.');
  return dot == std::string::npos ? item : item.substr(dot + 1);
}

// The first line of `path` that sets `key` (1-based), or 0.
int LineOf(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  const std::string quoted = std::regex_replace(key, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  const std::regex sets("^\\s*[\"']?" + quoted + "[\"']?\\s*[=:]");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (std::regex_search(line, sets)) return n;
  }
  return 0;
}

// A value as TOML: true, false and numbers bare, the rest a quoted string.
std::string TomlValue(const std::string& v) {
  static const std::regex number(R"(^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$)");
  if (v == "true" || v == "false" || std::regex_match(v, number)) return v;
  std::string quoted = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

void AddConfigFile(CLI::App* role) {
  // Declared here for --help and the role's own parse; PrepareConfig hands the file to the app
  // before the role ever sees it.
  role->add_option(kConfigFlag, "read this role's flags from a TOML file (keys: the flag names without --; "
                                "flags given here override it)")
      ->configurable(false);
  static const std::string kPrintHelp = "print the effective configuration (as a --config file) and exit";
  role->add_flag(kPrintFlag, kPrintHelp)->configurable(false);
}

bool PrintedConfig(const CLI::App* role) {
  if (role->count(kPrintFlag) == 0) return false;
  std::string out = fmt::format("# kvpool {}: the effective configuration (a --config file)\n", role->get_name());
  // The role's options and its option groups' (CLI11 keeps a group's options in the group, an
  // unnamed subcommand).
  const auto configurable = [](const CLI::Option* o) { return o->get_configurable() && !o->get_lnames().empty(); };
  std::vector<const CLI::Option*> options = role->get_options(configurable);
  for (const CLI::App* group : role->get_subcommands([](const CLI::App* sub) { return sub->get_name().empty(); })) {
    const auto more = group->get_options(configurable);
    options.insert(options.end(), more.begin(), more.end());
  }
  for (const CLI::Option* o : options) {
    const std::string key = o->get_lnames().front();
    std::vector<std::string> values = o->results();
    if (values.empty() && !o->get_default_str().empty()) values = {o->get_default_str()};
    if (values.empty() && o->get_expected_max() == 0) values = {"false"};  // a flag not given
    out += "\n# " + o->get_description() + "\n";
    if (values.empty()) {  // not set and no default: a line would set it to ""
      out += fmt::format("# {} = (not set)\n", key);
      continue;
    }
    std::vector<std::string> shown;
    for (const std::string& v : values) shown.push_back(TomlValue(v));
    out += key + " = " + (o->get_items_expected_max() > 1 ? "[" + fmt::format("{}", fmt::join(shown, ", ")) + "]"
                                                          : shown.back()) + "\n";
  }
  std::fputs(out.c_str(), stdout);
  return true;
}

std::vector<std::string> PrepareConfig(CLI::App& app, std::vector<std::string> args) {
  if (args.size() >= 3 && args[1] == "config" && args[2] == "print") {
    args.erase(args.begin() + 1, args.begin() + 3);
    args.emplace_back(kPrintFlag);
  }
  // The role: the first argument naming a subcommand that has --config.
  size_t role_at = 0;
  for (size_t i = 1; i < args.size() && role_at == 0; ++i) {
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->check_name(args[i]) && sub->get_option_no_throw(kConfigFlag) != nullptr) role_at = i;
    }
  }
  if (role_at == 0) return args;
  std::string path;
  for (size_t i = role_at + 1; i < args.size(); ++i) {
    const std::string with_value = std::string(kConfigFlag) + "=";
    if (args[i] == kConfigFlag && i + 1 < args.size()) {
      path = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
      break;
    }
    if (args[i].rfind(with_value, 0) == 0) {
      path = args[i].substr(with_value.size());
      args.erase(args.begin() + i);
      break;
    }
  }
  if (path.empty()) return args;
  Given() = {args[role_at], path};
  app.set_config(kConfigFlag);
  app.config_formatter(std::make_shared<RoleConfig>(args[role_at]));
  app.allow_config_extras(CLI::config_extras_mode::error);
  args.insert(args.begin() + 1, {kConfigFlag, path});
  return args;
}

std::string ExplainConfigError(const CLI::ConfigError& error) {
  const GivenConfig& given = Given();
  const std::string key = KeyOf(error.what());
  const int line = given.path.empty() ? 0 : LineOf(given.path, key);
  if (line == 0) return error.what();
  if (std::string(error.what()).find("not allowed in a configuration file") != std::string::npos) {
    return fmt::format("{}:{}: {} may be given only on the command line", given.path, line, key);
  }
  return fmt::format("{}:{}: {} is not a flag of kvpool {} (kvpool {} --help lists them)", given.path, line, key,
                     given.role, given.role);
}

}  // namespace kvpool::cli
