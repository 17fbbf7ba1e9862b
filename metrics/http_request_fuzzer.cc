// metrics/http_request_fuzzer.cc: hostile request heads through
// ParseRequestHead, with the server's limit and a small one (the first
// byte picks it), as the metrics endpoint receives them. Beyond "no crash":
// a refusal is 400, 431 or 505 with a reason; a complete head lies within
// the input and the limit, names a method and a path, and parses the same
// from its own bytes, while every shorter prefix of it is incomplete (so
// the server, reading more, can never refuse what it would accept).

#include <cstdint>
#include <cstdlib>
#include <string>

#include "metrics/http_request.h"

namespace {

using clocksync::metrics::ParsedRequest;
using clocksync::metrics::ParseRequestHead;
using clocksync::metrics::ParseState;

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckOne(const std::string& input, size_t limit) {
  const ParsedRequest parsed = ParseRequestHead(input, limit);
  switch (parsed.state) {
    case ParseState::kBad:
      Check(parsed.status_code == 400 || parsed.status_code == 431 ||
            parsed.status_code == 505);
      Check(!parsed.error.empty());
      return;
    case ParseState::kIncomplete:
      Check(input.size() < limit);
      return;
    case ParseState::kComplete:
      break;
  }
  const size_t head_bytes = parsed.request.head_bytes;
  Check(head_bytes > 0 && head_bytes <= input.size() && head_bytes <= limit);
  Check(!parsed.request.method.empty() && !parsed.request.path.empty());
  const ParsedRequest again = ParseRequestHead(input.substr(0, head_bytes), limit);
  Check(again.state == ParseState::kComplete);
  Check(again.request.path == parsed.request.path);
  Check(again.request.method == parsed.request.method);
  for (const size_t cut : {head_bytes - 1, head_bytes / 2, size_t{1}}) {
    if (cut >= head_bytes) continue;
    Check(ParseRequestHead(input.substr(0, cut), limit).state ==
          ParseState::kIncomplete);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The server's limit, or a small one so that the fuzzer reaches it.
  const size_t limit = (data[0] & 1) != 0 ? 8192 : 16 + data[0] % 128;
  CheckOne(input, limit);
  return 0;
}
