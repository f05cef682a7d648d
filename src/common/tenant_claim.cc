#include "common/tenant_claim.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvpool {

std::string_view NamespaceOf(std::string_view name) {
  const size_t slash = name.find('/');
  return slash == std::string_view::npos ? std::string_view() : name.substr(0, slash);
}

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

bool IsNamespaceChar(char c) { return c > ' ' && c < 0x7f && c != '/' && c != ',' && c != ':'; }

}  // namespace

Result<TenantClaim> TenantClaim::Parse(std::string_view text) {
  if (text.size() > kMaxText) {
    return InvalidArgument(fmt::format("tenant claim of {} bytes; at most {}", text.size(), kMaxText));
  }
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument("tenant claim must be NAME:NAMESPACE[,NAMESPACE...]");
  }
  TenantClaim claim;
  claim.name = std::string(text.substr(0, colon));
  if (claim.name.empty() || claim.name.size() > 64 || !std::all_of(claim.name.begin(), claim.name.end(), IsNameChar)) {
    return InvalidArgument(fmt::format("tenant name '{}' must be 1-64 letters, digits, '.', '_' or '-'", claim.name));
  }
  std::string_view rest = text.substr(colon + 1);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view ns = rest.substr(0, comma);
    if (ns.empty() || !std::all_of(ns.begin(), ns.end(), IsNamespaceChar)) {
      return InvalidArgument(fmt::format("tenant '{}': namespace '{}' must be non-empty printable ASCII without "
                                         "'/', ',', ':' or spaces",
                                         claim.name, ns));
    }
    claim.namespaces.emplace_back(ns);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  std::sort(claim.namespaces.begin(), claim.namespaces.end());
  if (std::adjacent_find(claim.namespaces.begin(), claim.namespaces.end()) != claim.namespaces.end()) {
    return InvalidArgument(fmt::format("tenant '{}': a namespace is named twice", claim.name));
  }
  if (claim.namespaces.size() > kMaxNamespaces) {
    return InvalidArgument(fmt::format("tenant '{}': {} namespaces; at most {}", claim.name, claim.namespaces.size(),
                                       kMaxNamespaces));
  }
  return claim;
}

std::string TenantClaim::ToString() const { return fmt::format("{}:{}", name, fmt::join(namespaces, ",")); }

bool TenantClaim::Allows(std::string_view key) const {
  return std::binary_search(namespaces.begin(), namespaces.end(), NamespaceOf(key));
}

}  // namespace kvpool
