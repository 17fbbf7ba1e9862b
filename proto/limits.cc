// proto/limits.cc: the node id rule.
#include "proto/limits.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace clocksync {

absl::Status ValidateNodeId(absl::string_view field,
                            absl::string_view node_id) {
  if (node_id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must not be empty"));
  }
  if (node_id.size() > kMaxNodeIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": at most ", kMaxNodeIdBytes, " bytes, got ", node_id.size()));
  }
  for (const char c : node_id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": only letters, digits, '.', '_' and '-' allowed, got \"",
          absl::CHexEscape(node_id), "\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace clocksync
