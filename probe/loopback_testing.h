// probe/loopback_testing.h: what the responder and requester tests share
// on loopback: a fake parent time (raw + 1 hour, synced at depth 3), a
// responder serving on its own thread, a plain UDP socket for hand-made
// datagrams, and builders of requests and replies. Test-only.
#ifndef CLOCKSYNC_PROBE_LOOPBACK_TESTING_H_
#define CLOCKSYNC_PROBE_LOOPBACK_TESTING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "probe/packet.h"
#include "probe/requester.h"
#include "probe/responder.h"

namespace clocksync::probe::loopback {

inline constexpr int64_t kHourNs = int64_t{3600} * 1'000'000'000;
inline constexpr uint64_t kParentId = 0xA1;
inline constexpr uint64_t kChildId = 0xC1;

// Global time is the raw clock plus one hour; the parent is synced at
// depth 3 with a bound of 1234 ns under node 77.
class FakeGlobalTime : public GlobalTimeSource {
 public:
  ParentTime GlobalAt(int64_t raw_ns) const override;
};

// A responder (node id kParentId, FakeGlobalTime, 127.0.0.1:0 unless the
// options name an address) serving on its own thread until destroyed.
class ServingResponder {
 public:
  explicit ServingResponder(ProbeResponder::Options options);
  ~ServingResponder();

  // Stops serving; Serve()'s status.
  absl::Status Stop();
  // Create()'s status.
  const absl::Status& status() const { return status_; }
  ProbeResponder& responder() { return *responder_; }
  // "127.0.0.1:<port>".
  std::string address() const;

 private:
  FakeGlobalTime time_;
  absl::Status status_;
  std::unique_ptr<ProbeResponder> responder_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  absl::Status serve_status_;
};

// A requester with node id kChildId; null (and a test failure) if Create()
// fails.
std::unique_ptr<ProbeRequester> MakeRequester(ProbeRequester::Options options);

// Polls until `want` replies arrived or `timeout` passed.
std::vector<ProbeResult> PollFor(ProbeRequester& requester, size_t want,
                                 absl::Duration timeout = absl::Seconds(5));

// Waits until `counter` reaches `want` (5 s at most).
bool WaitFor(const std::atomic<uint64_t>& counter, uint64_t want);

// A plain UDP socket on 127.0.0.1 for sending hand-made datagrams.
class RawSocket {
 public:
  RawSocket();
  ~RawSocket();
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  uint16_t port() const;
  void SendTo(uint16_t port, const std::vector<uint8_t>& bytes);
  // Receives one datagram; returns its sender's port (0 on timeout, 5 s).
  uint16_t Receive(std::vector<uint8_t>* bytes);

 private:
  int fd_ = -1;
};

// `p` encoded without a key.
std::vector<uint8_t> Encoded(const ProbePacket& p);
// A request from kChildId with t1 = 1000.
ProbePacket Request(uint64_t nonce);
// kParentId's reply to `request`: t2 = t1 + 1 hour, t3 = t2 + 10, synced,
// bound 5 ns.
ProbePacket ReplyTo(const ProbePacket& request);

}  // namespace clocksync::probe::loopback

#endif  // CLOCKSYNC_PROBE_LOOPBACK_TESTING_H_
