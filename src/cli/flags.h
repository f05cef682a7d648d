// Flag helpers shared by the subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "common/byte_size.h"

namespace kvpool::cli {

// A size flag that accepts "4GiB", "512M", "65536"; bad input fails parsing with the reason.
inline CLI::Option* AddByteSizeOption(CLI::App* app, const std::string& name, uint64_t& target,
                                      const std::string& description) {
  return app
      ->add_option_function<std::string>(
          name,
          [&target, name](const std::string& text) {
            Result<uint64_t> bytes = ParseByteSize(text);
            if (!bytes.ok()) throw CLI::ValidationError(name, bytes.status().message());
            target = *bytes;
          },
          description + " (e.g. 64KiB, 1GiB; default " + FormatByteSize(target) + ")");
}

// "HOST:PORT" with a numeric port in 0..65535.
inline const CLI::Validator& HostPort() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        const auto colon = text.rfind(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
          return "expected HOST:PORT, got '" + text + "'";
        const std::string port = text.substr(colon + 1);
        if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
          return "port in '" + text + "' must be a number from 0 to 65535";
        return "";
      },
      "HOST:PORT");
  return validator;
}

}  // namespace kvpool::cli
