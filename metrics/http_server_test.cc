// metrics/http_server_test.cc: HttpServer over real sockets on loopback:
// answers and their headers, 404/405/400/431/505, slow and silent clients
// (timeouts), the connection cap, clients that never read, many clients at
// once, random garbage, a port in use, and the log's rate limit.
#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace clocksync::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kBody[] = "# HELP up 1 when up.\n# TYPE up gauge\nup 1\n";
constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// A connected TCP socket to 127.0.0.1:port (-1 on failure), with a receive
// timeout so that a broken server fails the test instead of hanging it.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval timeout = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(n);
  }
  return true;
}

// Everything the server sends until it closes ("" on a reset before any).
std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return out;
    out.append(buffer, n);
  }
}

// Sends `request` on a new connection and returns the whole answer.
std::string Exchange(int port, absl::string_view request) {
  const int fd = Connect(port);
  if (fd < 0) return "connect failed";
  SendAll(fd, request);
  std::string answer = ReadAll(fd);
  close(fd);
  return answer;
}

// The status code of an answer (0 when there is none).
int StatusOf(absl::string_view answer) {
  int code = 0;
  if (!absl::StartsWith(answer, "HTTP/1.1 ") || answer.size() < 12 ||
      !absl::SimpleAtoi(answer.substr(9, 3), &code)) {
    return 0;
  }
  return code;
}

// The header fields of an answer, and its body.
struct Answer {
  int status = 0;
  std::vector<std::string> fields;
  std::string body;
};
Answer Split(absl::string_view answer) {
  Answer a;
  a.status = StatusOf(answer);
  const size_t end = answer.find("\r\n\r\n");
  if (end == absl::string_view::npos) return a;
  a.fields = absl::StrSplit(answer.substr(0, end), "\r\n");
  a.body = std::string(answer.substr(end + 4));
  return a;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}, std::string body = kBody) {
    body_ = std::move(body);
    server_ = std::make_unique<HttpServer>(
        std::move(options),
        std::map<std::string, HttpPage>{
            {"/metrics", {kContentType, [this] {
                            ++pages_made_;
                            return body_;
                          }}}});
    ASSERT_TRUE(server_->Start("127.0.0.1:0").ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }
  std::string Get(absl::string_view path = "/metrics") {
    return Exchange(port_, absl::StrCat("GET ", path,
                                        " HTTP/1.1\r\nHost: test\r\n\r\n"));
  }

  std::string body_;
  std::atomic<int> pages_made_{0};
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, GetAndHead) {
  StartServer();
  const Answer get = Split(Get("/metrics?x=1"));
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.fields[0], "HTTP/1.1 200 OK");
  EXPECT_THAT(get.fields, testing::Contains(absl::StrCat("Content-Type: ", kContentType)));
  EXPECT_THAT(get.fields, testing::Contains(absl::StrCat("Content-Length: ",
                                                         std::strlen(kBody))));
  EXPECT_THAT(get.fields, testing::Contains("Connection: close"));
  EXPECT_THAT(get.fields, testing::Contains(testing::MatchesRegex(
                              "Date: [A-Z][a-z][a-z], [0-9]+ [A-Z][a-z][a-z] "
                              "20[0-9][0-9] [0-9:]+ GMT")));
  EXPECT_EQ(get.body, kBody);

  const Answer head =
      Split(Exchange(port_, "HEAD /metrics HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(head.status, 200);
  EXPECT_THAT(head.fields, testing::Contains(absl::StrCat(
                               "Content-Length: ", std::strlen(kBody))));
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(pages_made_.load(), 2);
  EXPECT_EQ(server_->stats().ok, 2u);
  EXPECT_EQ(server_->stats().bad_requests, 0u);
}

TEST(HttpServerQueryTest, QueryPagesGetTheQueryString) {
  HttpPage echo;
  echo.content_type = "text/plain";
  echo.body_for_query = [](const std::string& query) {
    return absl::StrCat("query=", query);
  };
  HttpServer server({}, {{"/lod", echo}});
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  const auto get = [&](absl::string_view target) {
    return Split(Exchange(server.port(), absl::StrCat("GET ", target,
                                                      " HTTP/1.0\r\n\r\n")));
  };
  EXPECT_EQ(get("/lod?t0=5&t1=9").body, "query=t0=5&t1=9");
  EXPECT_EQ(get("/lod").body, "query=");
  EXPECT_EQ(get("/lod/?t0=1").status, 404);
  server.Stop();
}

TEST_F(HttpServerTest, OtherPathsAndMethods) {
  StartServer();
  EXPECT_EQ(StatusOf(Get("/")), 404);
  EXPECT_EQ(StatusOf(Get("/metrics/")), 404);
  EXPECT_EQ(StatusOf(Exchange(port_, "HEAD /x HTTP/1.0\r\n\r\n")), 404);
  const std::string post =
      Exchange(port_, "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: "
                      "5\r\n\r\nhello");
  EXPECT_EQ(StatusOf(post), 405);
  EXPECT_THAT(post, HasSubstr("\r\nAllow: GET, HEAD\r\n"));
  EXPECT_EQ(StatusOf(Exchange(port_, "DELETE /metrics HTTP/1.0\r\n\r\n")), 405);
  EXPECT_EQ(StatusOf(Exchange(port_, "get /metrics HTTP/1.0\r\n\r\n")), 405);
  EXPECT_EQ(pages_made_.load(), 0);
  EXPECT_EQ(server_->stats().bad_requests, 6u);
}

TEST_F(HttpServerTest, MalformedAndOversized) {
  HttpServerOptions options;
  options.max_request_head_bytes = 1024;
  StartServer(options);
  EXPECT_EQ(StatusOf(Exchange(port_, "GET /metrics\r\n\r\n")), 400);
  EXPECT_EQ(StatusOf(Exchange(port_, "GET /metrics HTTP/1.1\r\n\r\n")), 400);
  EXPECT_EQ(StatusOf(Exchange(port_, "GET /metrics HTTP/2.0\r\n\r\n")), 505);
  // Refused as soon as the bytes arrive, not at the read timeout.
  const absl::Time start = absl::Now();
  EXPECT_EQ(StatusOf(Exchange(port_, "\x16\x03\x01\x02\x00\x01")), 400);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  const std::string huge = absl::StrCat(
      "GET /metrics HTTP/1.1\r\nHost: a\r\nX: ", std::string(2000, 'x'), "\r\n\r\n");
  EXPECT_EQ(StatusOf(Exchange(port_, huge)), 431);
  // A long stream without a line end: refused at the limit, the rest
  // never read (the client sees the answer or a reset, not a hang).
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, std::string(1024, 'A'));
  const std::string answer = ReadAll(fd);
  close(fd);
  EXPECT_EQ(StatusOf(answer), 431) << answer;
  EXPECT_EQ(server_->stats().bad_requests, 6u);
  EXPECT_EQ(StatusOf(Get()), 200);
}

// Bytes after the head (a body, a pipelined request) are drained, not
// answered, and do not reset the connection before the answer is read.
TEST_F(HttpServerTest, ExtraBytesAfterTheHead) {
  StartServer({}, std::string(200'000, 'm'));
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, absl::StrCat("GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: "
                           "20000\r\n\r\n", std::string(20'000, 'b'),
                           "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"));
  absl::SleepFor(absl::Milliseconds(200));  // The server has sent and drains.
  const Answer a = Split(ReadAll(fd));
  close(fd);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body.size(), 200'000u);
  EXPECT_EQ(pages_made_.load(), 1);
}

// Slowloris: a head trickling in a byte at a time is cut off at the read
// timeout (408), and meanwhile others are served at once.
TEST_F(HttpServerTest, SlowClientsTimeOut) {
  HttpServerOptions options;
  options.read_timeout = absl::Milliseconds(600);
  StartServer(options);
  const int slow = Connect(port_);
  const int silent = Connect(port_);
  ASSERT_GE(slow, 0);
  ASSERT_GE(silent, 0);
  std::atomic<bool> cut{false};
  std::thread trickle([&] {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: a\r\nX-Slow: ";
    for (size_t i = 0; !cut.load() && i < 100; ++i) {
      if (!SendAll(slow, absl::string_view(&request[i % request.size()], 1))) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  for (int i = 0; i < 3; ++i) {
    const absl::Time start = absl::Now();
    EXPECT_EQ(StatusOf(Get()), 200);
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(300));
  }
  const absl::Time start = absl::Now();
  const std::string slow_answer = ReadAll(slow);
  const std::string silent_answer = ReadAll(silent);
  cut.store(true);
  trickle.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(StatusOf(slow_answer), 408) << slow_answer;
  EXPECT_EQ(StatusOf(silent_answer), 408) << silent_answer;
  close(slow);
  close(silent);
  EXPECT_EQ(server_->stats().timeouts, 2u);
}

// A client that never reads a large answer is dropped at the write
// timeout; others are served meanwhile.
TEST_F(HttpServerTest, ClientThatNeverReadsIsDropped) {
  HttpServerOptions options;
  options.write_timeout = absl::Milliseconds(500);
  StartServer(options, std::string(16 << 20, 'm'));
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  for (int i = 0; i < 40 && server_->stats().timeouts == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(server_->stats().timeouts, 1u);
  close(fd);
  body_ = kBody;  // The server thread is idle: no page is being made.
  EXPECT_EQ(StatusOf(Get()), 200);
}

// At max_connections, one more gets 503 at once; when one closes, the
// next is served.
TEST_F(HttpServerTest, ConnectionCap) {
  HttpServerOptions options;
  options.max_connections = 4;
  StartServer(options);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(Connect(port_));
    ASSERT_GE(idle.back(), 0);
  }
  // The server has taken them once it answers 503 to the fifth.
  const absl::Time start = absl::Now();
  EXPECT_EQ(StatusOf(Get()), 503);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(server_->stats().refused_busy, 1u);
  close(idle.back());
  idle.pop_back();
  int status = 0;
  for (int i = 0; i < 50 && status != 200; ++i) {
    status = StatusOf(Get());
    if (status != 200) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(status, 200);
  for (const int fd : idle) close(fd);
}

TEST_F(HttpServerTest, ManyClientsAtOnce) {
  HttpServerOptions options;
  options.max_connections = 64;
  StartServer(options);
  constexpr int kThreads = 8;
  constexpr int kRequests = 50;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < kRequests; ++i) {
        const Answer a = Split(Get());
        if (a.status == 200 && a.body == kBody) ++ok;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(ok.load(), kThreads * kRequests);
  EXPECT_EQ(server_->stats().ok, static_cast<uint64_t>(kThreads * kRequests));
  EXPECT_EQ(server_->stats().connections, static_cast<uint64_t>(kThreads * kRequests));
}

// Random bytes, cut requests, resets: every connection ends with an error
// answer or a close, and the server still serves (seeded, printed).
TEST_F(HttpServerTest, GarbageNeverStopsIt) {
  HttpServerOptions options;
  options.read_timeout = absl::Milliseconds(300);
  StartServer(options);
  const uint32_t seed = std::random_device()();
  std::mt19937 rng(seed);
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  const std::string valid = "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n";
  for (int i = 0; i < 200; ++i) {
    std::string bytes;
    switch (i % 4) {
      case 0:  // Random bytes.
        for (int n = rng() % 300; n > 0; --n) bytes.push_back(static_cast<char>(rng()));
        break;
      case 1:  // A valid request cut short, then closed.
        bytes = valid.substr(0, rng() % valid.size());
        break;
      case 2: {  // A valid request with a byte changed.
        bytes = valid;
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
        break;
      }
      case 3:  // Valid lines in random order.
        for (int n = rng() % 6; n > 0; --n) {
          bytes += std::vector<std::string>{"GET / HTTP/1.1\r\n", "Host: a\r\n",
                                            "\r\n", "X: y\r\n", "\n",
                                            "HTTP/1.1"}[rng() % 6];
        }
        break;
    }
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    SendAll(fd, bytes);
    if (i % 4 == 1 || rng() % 3 == 0) {
      shutdown(fd, SHUT_WR);  // The client says it is done.
    }
    if (rng() % 5 == 0) {
      linger reset = {1, 0};  // Close with a reset.
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      close(fd);
      continue;
    }
    const std::string answer = ReadAll(fd);
    close(fd);
    const int status = StatusOf(answer);
    EXPECT_TRUE(answer.empty() || status == 200 || status == 400 ||
                status == 404 || status == 405 || status == 408 ||
                status == 431 || status == 505)
        << answer;
  }
  EXPECT_EQ(StatusOf(Get()), 200);
}

TEST_F(HttpServerTest, StopsPromptlyWithOpenConnections) {
  StartServer();
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /metr");
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  server_->Stop();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_EQ(ReadAll(fd), "");  // Closed without an answer.
  close(fd);
  server_->Stop();  // Idempotent.
  EXPECT_LT(Connect(port_), 0);  // No longer listening.
}

TEST(HttpServerStartTest, AddressErrorsSayWhy) {
  HttpServer first({}, {});
  ASSERT_TRUE(first.Start("127.0.0.1:0").ok());
  HttpServer second({}, {});
  const absl::Status in_use =
      second.Start(absl::StrCat("127.0.0.1:", first.port()));
  EXPECT_EQ(in_use.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(in_use.message()), StartsWith("address already in use"));
  HttpServer third({}, {});
  EXPECT_EQ(third.Start("127.0.0.1").code(), absl::StatusCode::kInvalidArgument);
  HttpServer fourth({}, {});
  EXPECT_THAT(std::string(fourth.Start("192.0.2.1:0").message()),
              HasSubstr("not an address of this host"));
  // localhost may resolve to ::1 and 127.0.0.1: both on one port.
  HttpServer fifth({}, {});
  ASSERT_TRUE(fifth.Start("localhost:0").ok());
  EXPECT_GT(fifth.port(), 0);
  EXPECT_EQ(StatusOf(Exchange(fifth.port(), "GET / HTTP/1.0\r\n\r\n")), 404);
}

// Problems are counted each, but logged at most once a minute, saying how
// many were not.
TEST_F(HttpServerTest, ProblemsDoNotFloodTheLog) {
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  HttpServerOptions options;
  options.log_name = "metrics endpoint";
  StartServer(options);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(StatusOf(Get("/nope")), 404);
  server_->Stop();
  spdlog::set_default_logger(previous);
  const std::vector<std::string> lines =
      absl::StrSplit(log.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << log.str();
  EXPECT_THAT(lines[0], HasSubstr("metrics endpoint: 127.0.0.1:"));
  EXPECT_THAT(lines[0], HasSubstr(": 404 for /nope"));
  EXPECT_EQ(server_->stats().bad_requests, 20u);
}

}  // namespace
}  // namespace clocksync::metrics
