// metrics/http_request_test.cc: request heads as scrapers and curl send
// them, every prefix of them, and each malformed or oversized form with
// the status it is refused with.
#include "metrics/http_request.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace clocksync::metrics {
namespace {

constexpr size_t kLimit = 8192;

// What Prometheus 2.x sends.
constexpr char kPrometheus[] =
    "GET /metrics HTTP/1.1\r\n"
    "Host: 10.0.0.7:9100\r\n"
    "User-Agent: Prometheus/2.42.0\r\n"
    "Accept: application/openmetrics-text;version=1.0.0,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
    "Accept-Encoding: gzip\r\n"
    "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n"
    "\r\n";

ParsedRequest Parse(absl::string_view text, size_t limit = kLimit) {
  return ParseRequestHead(text, limit);
}

// The status a head is refused with (0 when it is not refused).
int Refused(absl::string_view text, size_t limit = kLimit) {
  const ParsedRequest parsed = Parse(text, limit);
  return parsed.state == ParseState::kBad ? parsed.status_code : 0;
}

TEST(HttpRequestTest, PrometheusScrape) {
  const ParsedRequest parsed = Parse(kPrometheus);
  ASSERT_EQ(parsed.state, ParseState::kComplete) << parsed.error;
  EXPECT_EQ(parsed.request.method, "GET");
  EXPECT_EQ(parsed.request.path, "/metrics");
  EXPECT_EQ(parsed.request.minor_version, 1);
  EXPECT_EQ(parsed.request.head_bytes, sizeof(kPrometheus) - 1);
}

TEST(HttpRequestTest, EveryPrefixIsIncomplete) {
  const std::string head = kPrometheus;
  for (size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(Parse(head.substr(0, n)).state, ParseState::kIncomplete)
        << "first " << n << " bytes";
  }
}

TEST(HttpRequestTest, BytesAfterTheHeadAreNotItsConcern) {
  const ParsedRequest parsed =
      Parse(absl::StrCat(kPrometheus, "GET /other HTTP/1.1\r\n"));
  ASSERT_EQ(parsed.state, ParseState::kComplete);
  EXPECT_EQ(parsed.request.head_bytes, sizeof(kPrometheus) - 1);
  EXPECT_EQ(parsed.request.path, "/metrics");
}

TEST(HttpRequestTest, BareLineFeedsAndLeadingEmptyLines) {
  const ParsedRequest parsed = Parse("\r\n\nHEAD /metrics HTTP/1.0\nA: b\n\n");
  ASSERT_EQ(parsed.state, ParseState::kComplete) << parsed.error;
  EXPECT_EQ(parsed.request.method, "HEAD");
  EXPECT_EQ(parsed.request.minor_version, 0);
}

TEST(HttpRequestTest, TargetForms) {
  const auto path = [](absl::string_view target) {
    const ParsedRequest parsed =
        Parse(absl::StrCat("GET ", target, " HTTP/1.0\r\n\r\n"));
    return parsed.state == ParseState::kComplete ? parsed.request.path
                                                 : "refused";
  };
  EXPECT_EQ(path("/metrics?name[]=up&x=1"), "/metrics");
  EXPECT_EQ(path("/"), "/");
  EXPECT_EQ(path("/%6detrics"), "/%6detrics");  // Not decoded: 404.
  EXPECT_EQ(path("http://host:9100/metrics"), "/metrics");
  EXPECT_EQ(path("HTTP://host/metrics?x"), "/metrics");
  EXPECT_EQ(path("https://host"), "/");
  EXPECT_EQ(path("http://host?x"), "/");
  EXPECT_EQ(path("*"), "*");
  EXPECT_EQ(path("metrics"), "refused");
  EXPECT_EQ(path("http:///metrics"), "refused");
  EXPECT_EQ(path("ftp://host/metrics"), "refused");
  EXPECT_EQ(path("/caf\xc3\xa9"), "refused");
}

TEST(HttpRequestTest, QueryOfTheTarget) {
  const auto query = [](absl::string_view target) {
    const ParsedRequest parsed =
        Parse(absl::StrCat("GET ", target, " HTTP/1.0\r\n\r\n"));
    return parsed.state == ParseState::kComplete ? parsed.request.query
                                                 : "refused";
  };
  EXPECT_EQ(query("/lod?t0=1&t1=2&px=800"), "t0=1&t1=2&px=800");
  EXPECT_EQ(query("/lod"), "");
  EXPECT_EQ(query("/lod?"), "");
  EXPECT_EQ(query("/lod?a=1#frag"), "a=1");
  EXPECT_EQ(query("/lod#frag?a=1"), "");
  EXPECT_EQ(query("http://host/lod?x=%20"), "x=%20");  // Not decoded.
}

TEST(HttpRequestTest, HostRules) {
  EXPECT_EQ(Refused("GET / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(Refused("GET / HTTP/1.1\r\nhOST: a\r\n\r\n"), 0);
  EXPECT_EQ(Refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(Refused("GET / HTTP/1.0\r\n\r\n"), 0);
  EXPECT_EQ(Refused("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
}

TEST(HttpRequestTest, MalformedRequestLines) {
  for (const char* line :
       {"GET /metrics", "GET  /metrics HTTP/1.1", "GET /metrics  HTTP/1.1",
        "GET /metrics HTTP/1.1 ", " GET /metrics HTTP/1.1", "GET\t/ HTTP/1.1",
        "G@T / HTTP/1.1", "GET / http/1.1", "GET / HTTP/1", "GET / HTTP/1.10",
        "GET / HTTP/x.1", "GET / HTTP/1.x", "GET"}) {
    EXPECT_EQ(Refused(absl::StrCat(line, "\r\nHost: a\r\n\r\n")), 400) << line;
  }
  EXPECT_EQ(Refused("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(Refused("GET / HTTP/0.9\r\n\r\n"), 505);
  // Unknown methods are well-formed: the server answers 405.
  EXPECT_EQ(Refused("BREW /pot HTTP/1.0\r\n\r\n"), 0);
}

TEST(HttpRequestTest, MalformedFieldLines) {
  for (const char* field :
       {"Host : a", "No colon", ": empty name", " Folded: x", "\tFolded: x",
        "Na\x01me: x", "Name: a\x01z", "Name: a\x7fz", "Name: a\rz",
        "Caf\xc3\xa9: x"}) {
    EXPECT_EQ(Refused(absl::StrCat("GET / HTTP/1.1\r\nHost: a\r\n", field,
                                   "\r\n\r\n")),
              400)
        << field;
  }
  // obs-text and tabs in values are fine.
  EXPECT_EQ(Refused("GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\tb\r\n\r\n"), 0);
}

TEST(HttpRequestTest, GarbageIsRefusedBeforeItsLineEnds) {
  // A TLS ClientHello's first bytes; binary after a good request line; a
  // NUL; a bare CR.
  EXPECT_EQ(Refused(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc", 9)), 400);
  EXPECT_EQ(Refused("GET / HTTP/1.1\r\nHost: a\x01"), 400);
  EXPECT_EQ(Refused(std::string("GET /\0", 6)), 400);
  EXPECT_EQ(Refused("GET /\r/ HTTP/1.1"), 400);
  EXPECT_EQ(Refused("GET /\r/ HTTP/1.1\r\n"), 400);
  // A CR that may be half of a CRLF waits for the LF.
  EXPECT_EQ(Parse("GET / HTTP/1.1\r").state, ParseState::kIncomplete);
}

TEST(HttpRequestTest, Limits) {
  const std::string start = "GET / HTTP/1.1\r\nHost: a\r\n";
  // A head of exactly the limit is fine; one byte more is refused.
  const auto head_of = [&](size_t bytes) {
    const std::string field = "X: ";
    return start + field +
           std::string(bytes - start.size() - field.size() - 4, 'x') +
           "\r\n\r\n";
  };
  ASSERT_EQ(head_of(kLimit).size(), kLimit);
  EXPECT_EQ(Refused(head_of(kLimit)), 0);
  EXPECT_EQ(Refused(head_of(kLimit + 1)), 431);
  // A head still growing at the limit: 431 (nothing more is read).
  EXPECT_EQ(Refused(start + std::string(kLimit, 'x')), 431);
  EXPECT_EQ(Refused(std::string(kLimit, '\n')), 431);
  EXPECT_EQ(Refused("GET /" + std::string(kLimit, 'a')), 431);
  // Smaller limits too.
  EXPECT_EQ(Refused("GET / HTTP/1.0\r\n\r\n", 18), 0);
  EXPECT_EQ(Refused("GET / HTTP/1.0\r\n\r\n", 17), 431);
  // Fields: kMaxHeaderFields are fine, one more is not.
  std::string fields = start;
  for (int i = 1; i < kMaxHeaderFields; ++i) fields += absl::StrCat("F", i, ": v\r\n");
  EXPECT_EQ(Refused(fields + "\r\n"), 0);
  EXPECT_EQ(Refused(fields + "One: more\r\n\r\n"), 431);
}

}  // namespace
}  // namespace clocksync::metrics
