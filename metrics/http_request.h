// metrics/http_request.h: the head of an HTTP/1.x request (request line
// and header fields, RFC 9112), parsed strictly from the bytes received so
// far, for metrics/http_server.h. Pure: no socket, no clock.
//
// What it accepts: optional empty lines, then `METHOD SP target SP
// HTTP/1.x`, then `name: value` fields, then an empty line; lines end in
// CRLF or a bare LF. The target is origin-form (/path?query), absolute-form
// (http://host/path) or `*`. HTTP/1.1 needs exactly one Host field. What
// it refuses, with the status to answer: malformed or hostile input (a
// bare CR, control bytes, whitespace before a field's colon, obs-fold,
// two Host fields) 400; a head longer than the limit, or with more than
// kMaxHeaderFields fields, 431; HTTP/2 and later in this syntax 505.
// A bad line is refused as soon as it is complete, and bytes no line may
// hold as soon as they arrive, so garbage is answered at once rather than
// at the read timeout. Bodies are never read: the
// server answers and closes the connection.
//
// Example:
//   const ParsedRequest parsed = ParseRequestHead(received, 8192);
//   if (parsed.state == ParseState::kIncomplete) { ... read more ... }
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_METRICS_HTTP_REQUEST_H_
#define CLOCKSYNC_METRICS_HTTP_REQUEST_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace clocksync::metrics {

// More header fields than this: 431 (a scraper sends fewer than 10).
inline constexpr int kMaxHeaderFields = 64;

enum class ParseState {
  kIncomplete,  // No bad line yet, and the head has not ended: read more.
  kComplete,    // A well-formed head: `request` holds it.
  kBad,         // Refused: answer `status_code` and close.
};

struct RequestHead {
  std::string method;  // As sent (methods are case-sensitive): "GET".
  std::string path;    // The target's path, without query: "/metrics".
  std::string query;   // The target's query, after '?', before '#': "a=1&b=2".
  int minor_version = 0;  // HTTP/1.<minor_version>.
  size_t head_bytes = 0;  // Through the empty line that ends the head.
};

struct ParsedRequest {
  ParseState state = ParseState::kIncomplete;
  RequestHead request;     // kComplete only.
  int status_code = 0;     // kBad only: 400, 431 or 505.
  std::string error;       // kBad only: why, for the log and the answer.
};

// Parses the head at the start of `received` (every byte read from the
// connection so far). A head that has not ended within `max_head_bytes`
// is refused (431), so a caller reads at most that many bytes.
ParsedRequest ParseRequestHead(absl::string_view received,
                               size_t max_head_bytes);

}  // namespace clocksync::metrics

#endif  // CLOCKSYNC_METRICS_HTTP_REQUEST_H_
