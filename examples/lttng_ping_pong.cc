// examples/lttng_ping_pong.cc: two processes exchanging messages over a
// Unix socket, instrumented with LTTng-UST (the clocksync_pingpong
// provider, lttng_ping_pong_tp.h): an event before each message is sent and
// one after each is received, with the message's id. Traced with lttng and
// merged with babeltrace2, a message received before it was sent shows
// that the two processes' clocks disagree; with libclocksync-lttng.so as
// LTTng's clock (docs/LTTNG.md) both stamp global time.
//
//   lttng_ping_pong --role=pong --socket=/tmp/pp.sock &     # on one node
//   lttng_ping_pong --role=ping --socket=/tmp/pp.sock       # on another
//
// ping sends ids 0, 2, 4, ... and pong answers each with the next odd id,
// --messages times, --interval_us apart; so a run has 2 x --messages
// messages, half in each direction. Each event also carries the process's
// own global time (clocksync_now through client/clock.h, the segment named
// by CLOCKSYNC_SHM or the default path; 0 without a daemon), so that a test
// can check LTTng's timestamps against it. Exit status 0 when every message
// went both ways, 1 otherwise (said on stderr).

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "client/clock.h"
#include "examples/lttng_ping_pong_tp.h"

ABSL_FLAG(std::string, role, "", "ping (connects, sends even ids) or pong "
                                 "(listens, answers with odd ids)");
ABSL_FLAG(std::string, socket, "/tmp/clocksync-lttng-ping-pong.sock",
          "the Unix socket pong listens on");
ABSL_FLAG(int, messages, 200, "messages ping sends (pong answers each), 1..1000000");
ABSL_FLAG(int, interval_us, 1000, "pause between two rounds, us (0..1000000)");
ABSL_FLAG(double, connect_timeout_s, 20, "how long ping tries to connect, s");
ABSL_FLAG(int, linger_ms, 0,
          "stay this long after the last message before exiting, ms "
          "(0..60000): LTTng's consumer daemon closes a process's packets "
          "when it exits, stamped with the consumer's clock; where that "
          "clock lags the process's (LTTng's default clock in a shifted time "
          "namespace), the packets would end before their last events");

namespace {

// The process's global time, or 0 without a (synchronized) daemon.
class GlobalTime {
 public:
  GlobalTime() {
    const char* path = std::getenv("CLOCKSYNC_SHM");
    absl::StatusOr<clocksync::Clock> clock = clocksync::Clock::Open(
        path != nullptr && path[0] != '\0' ? path : CLOCKSYNC_DEFAULT_SHM_PATH);
    if (clock.ok()) {
      clock_.emplace(std::move(*clock));
    } else {
      std::fprintf(stderr, "lttng_ping_pong: %s (events carry clocksync_ns 0)\n",
                   std::string(clock.status().message()).c_str());
    }
  }
  int64_t Now() const {
    if (!clock_) return 0;
    const clocksync::TimeReading t = clock_->Now();
    return t.ok() || t.error == CLOCKSYNC_ESTALE ? t.global_ns : 0;
  }

 private:
  std::optional<clocksync::Clock> clock_;
};

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes; false at end of file or on error.
bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

sockaddr_un Address(const std::string& path) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  return address;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "lttng_ping_pong: %s: %s\n", what.c_str(), std::strerror(errno));
  return 1;
}

int RunPong(const std::string& path, const GlobalTime& global) {
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return Fail("socket");
  unlink(path.c_str());
  const sockaddr_un address = Address(path);
  if (bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return Fail("bind " + path);
  }
  if (listen(listener, 1) != 0) return Fail("listen " + path);
  const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return Fail("accept on " + path);
  uint64_t received = 0;
  uint64_t id;
  while (ReadAll(fd, &id, sizeof(id))) {
    lttng_ust_tracepoint(clocksync_pingpong, recv, id, global.Now());
    ++received;
    const uint64_t answer = id + 1;
    lttng_ust_tracepoint(clocksync_pingpong, send, answer, global.Now());
    if (!WriteAll(fd, &answer, sizeof(answer))) return Fail("write");
  }
  close(fd);
  close(listener);
  unlink(path.c_str());
  std::fprintf(stderr, "lttng_ping_pong: pong: %llu messages received and answered\n",
               static_cast<unsigned long long>(received));
  return received > 0 ? 0 : 1;
}

int RunPing(const std::string& path, const GlobalTime& global, int messages,
            int interval_us, double connect_timeout_s) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail("socket");
  const sockaddr_un address = Address(path);
  const int64_t attempts = static_cast<int64_t>(connect_timeout_s * 100);
  for (int64_t i = 0;; ++i) {
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) break;
    if (i >= attempts) return Fail("connect to " + path);
    usleep(10'000);
  }
  for (int k = 0; k < messages; ++k) {
    const uint64_t id = 2 * static_cast<uint64_t>(k);
    lttng_ust_tracepoint(clocksync_pingpong, send, id, global.Now());
    if (!WriteAll(fd, &id, sizeof(id))) return Fail("write");
    uint64_t answer;
    if (!ReadAll(fd, &answer, sizeof(answer))) return Fail("read");
    lttng_ust_tracepoint(clocksync_pingpong, recv, answer, global.Now());
    if (answer != id + 1) {
      std::fprintf(stderr, "lttng_ping_pong: ping: answer %llu to %llu\n",
                   static_cast<unsigned long long>(answer),
                   static_cast<unsigned long long>(id));
      return 1;
    }
    if (interval_us > 0) usleep(static_cast<useconds_t>(interval_us));
  }
  close(fd);
  std::fprintf(stderr, "lttng_ping_pong: ping: %d messages sent and answered\n", messages);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "two processes exchanging messages over a Unix socket, traced with "
      "LTTng-UST (provider clocksync_pingpong); docs/LTTNG.md");
  absl::ParseCommandLine(argc, argv);
  const std::string role = absl::GetFlag(FLAGS_role);
  const std::string path = absl::GetFlag(FLAGS_socket);
  const int messages = absl::GetFlag(FLAGS_messages);
  const int interval_us = absl::GetFlag(FLAGS_interval_us);
  if (messages < 1 || messages > 1'000'000 || interval_us < 0 || interval_us > 1'000'000 ||
      path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    std::fprintf(stderr, "lttng_ping_pong: --messages=%d (1..1000000), --interval_us=%d "
                         "(0..1000000), --socket='%s' (1..%zu bytes)\n",
                 messages, interval_us, path.c_str(), sizeof(sockaddr_un::sun_path) - 1);
    return 2;
  }
  const int linger_ms = absl::GetFlag(FLAGS_linger_ms);
  if (linger_ms < 0 || linger_ms > 60'000) {
    std::fprintf(stderr, "lttng_ping_pong: --linger_ms=%d (0..60000)\n", linger_ms);
    return 2;
  }
  if (role != "ping" && role != "pong") {
    std::fprintf(stderr, "lttng_ping_pong: --role='%s' is neither ping nor pong\n",
                 role.c_str());
    return 2;
  }
  const GlobalTime global;
  const int status = role == "pong"
                         ? RunPong(path, global)
                         : RunPing(path, global, messages, interval_us,
                                   absl::GetFlag(FLAGS_connect_timeout_s));
  usleep(static_cast<useconds_t>(linger_ms) * 1000);
  return status;
}
