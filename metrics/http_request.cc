// metrics/http_request.cc: the request head, line by line, as RFC 9112
// wants it (sections 2.2, 3 and 5), refusing what a hostile client sends.
#include "metrics/http_request.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace clocksync::metrics {
namespace {

// RFC 9110 token characters (methods, field names).
bool IsTokenChar(unsigned char c) {
  return absl::ascii_isalnum(c) ||
         (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

bool IsToken(absl::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (!IsTokenChar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

ParsedRequest Bad(int status_code, std::string error) {
  ParsedRequest parsed;
  parsed.state = ParseState::kBad;
  parsed.status_code = status_code;
  parsed.error = std::move(error);
  return parsed;
}

// The path of a request target, or "" when the target is malformed.
std::string PathOf(absl::string_view target) {
  for (const char c : target) {
    // Visible ASCII only: no spaces, controls or bytes above 0x7e.
    if (c < 0x21 || c > 0x7e) return "";
  }
  if (target == "*") return "*";
  if (target.front() != '/') {
    // absolute-form: http://authority[/path][?query].
    size_t scheme = 0;
    if (absl::StartsWithIgnoreCase(target, "http://")) scheme = 7;
    if (absl::StartsWithIgnoreCase(target, "https://")) scheme = 8;
    if (scheme == 0) return "";
    target.remove_prefix(scheme);
    const size_t end = target.find_first_of("/?#");
    if (end == 0) return "";  // No authority.
    target.remove_prefix(end == absl::string_view::npos ? target.size() : end);
    if (target.empty() || target.front() != '/') return "/";
  }
  return std::string(target.substr(0, target.find_first_of("?#")));
}

// The query of a well-formed target: after the first '?', up to a '#'.
std::string QueryOf(absl::string_view target) {
  const size_t mark = target.find('?');
  if (mark == absl::string_view::npos) return "";
  const size_t hash = target.find('#');
  if (hash != absl::string_view::npos && hash < mark) return "";
  const absl::string_view query = target.substr(mark + 1);
  return std::string(query.substr(0, query.find('#')));
}

// `line` (without its line ending) as the request line, into `request`;
// kComplete when fine (the head has not ended yet), else why not.
ParsedRequest ParseRequestLine(absl::string_view line, RequestHead* request) {
  const size_t first = line.find(' ');
  const size_t second =
      first == absl::string_view::npos ? first : line.find(' ', first + 1);
  if (second == absl::string_view::npos ||
      line.find(' ', second + 1) != absl::string_view::npos) {
    return Bad(400, "malformed request line (want METHOD SP target SP HTTP/1.x)");
  }
  const absl::string_view method = line.substr(0, first);
  const absl::string_view target = line.substr(first + 1, second - first - 1);
  const absl::string_view version = line.substr(second + 1);
  if (!IsToken(method)) return Bad(400, "malformed method");
  if (target.empty()) return Bad(400, "empty request target");
  request->path = PathOf(target);
  if (request->path.empty()) return Bad(400, "malformed request target");
  request->query = QueryOf(target);
  if (version.size() != 8 || !absl::StartsWith(version, "HTTP/") ||
      !absl::ascii_isdigit(version[5]) || version[6] != '.' ||
      !absl::ascii_isdigit(version[7])) {
    return Bad(400, "malformed HTTP version");
  }
  if (version[5] != '1') return Bad(505, "only HTTP/1.x is served");
  request->method = std::string(method);
  request->minor_version = version[7] - '0';
  ParsedRequest parsed;
  parsed.state = ParseState::kComplete;
  return parsed;
}

// `line` as a header field: "" when fine, else why not. Counts Host
// fields in `hosts`.
std::string CheckFieldLine(absl::string_view line, int* hosts) {
  if (line.front() == ' ' || line.front() == '\t') {
    return "folded field line (obsolete line folding)";
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return "field line without a colon";
  const absl::string_view name = line.substr(0, colon);
  // Whitespace before the colon is refused too (RFC 9112, 5.1).
  if (!IsToken(name)) return "malformed field name";
  for (const char c : line.substr(colon + 1)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u != '\t' && (u < 0x20 || u == 0x7f)) {
      return "control character in a field value";
    }
  }
  if (absl::EqualsIgnoreCase(name, "host") && ++*hosts > 1) {
    return "more than one Host field";
  }
  return "";
}

}  // namespace

ParsedRequest ParseRequestHead(absl::string_view received,
                               size_t max_head_bytes) {
  const absl::string_view window = received.substr(0, max_head_bytes);
  RequestHead request;
  bool have_request_line = false;
  int fields = 0;
  int hosts = 0;
  size_t pos = 0;
  for (;;) {
    const size_t newline = window.find('\n', pos);
    if (newline == absl::string_view::npos) break;
    absl::string_view line = window.substr(pos, newline - pos);
    pos = newline + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != absl::string_view::npos) {
      return Bad(400, "bare CR in the request head");
    }
    if (line.find('\0') != absl::string_view::npos) {
      return Bad(400, "NUL in the request head");
    }
    if (!have_request_line) {
      // Empty lines before the request line are ignored (RFC 9112, 2.2).
      if (line.empty()) continue;
      const ParsedRequest parsed = ParseRequestLine(line, &request);
      if (parsed.state == ParseState::kBad) return parsed;
      have_request_line = true;
      continue;
    }
    if (line.empty()) {
      if (request.minor_version >= 1 && hosts == 0) {
        return Bad(400, "HTTP/1.1 request without a Host field");
      }
      request.head_bytes = pos;
      ParsedRequest parsed;
      parsed.state = ParseState::kComplete;
      parsed.request = std::move(request);
      return parsed;
    }
    if (++fields > kMaxHeaderFields) {
      return Bad(431, "too many header fields");
    }
    const std::string bad = CheckFieldLine(line, &hosts);
    if (!bad.empty()) return Bad(400, bad);
  }
  // The line still arriving: bytes no valid line holds are refused now
  // (a TLS handshake, binary garbage), not at the read timeout.
  const absl::string_view tail = window.substr(pos);
  for (size_t i = 0; i < tail.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(tail[i]);
    if (c == '\r' && i + 1 == tail.size()) break;  // CR of a CRLF.
    const bool allowed = have_request_line
                             ? c == '\t' || (c >= 0x20 && c != 0x7f)
                             : c >= 0x20 && c < 0x7f;
    if (!allowed) return Bad(400, "not an HTTP/1.x request head");
  }
  if (received.size() >= max_head_bytes) {
    return Bad(431, "request head too large");
  }
  return ParsedRequest{};
}

}  // namespace clocksync::metrics
