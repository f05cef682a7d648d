// Flag helpers shared by the subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "common/byte_size.h"
#include "common/host_port.h"

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
          description + " (e.g. 64KiB, 1GiB; default " + FormatByteSize(target) + ")")
      ->default_str(FormatByteSize(target));
}

// "HOST:PORT" with a numeric port in 0..65535.
inline const CLI::Validator& HostPort() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        const Status s = CheckHostPort(text);
        return s.ok() ? "" : s.message();
      },
      "HOST:PORT");
  return validator;
}

}  // namespace kvpool::cli
