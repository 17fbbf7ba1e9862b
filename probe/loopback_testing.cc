// probe/loopback_testing.cc: loopback helpers of the responder and
// requester tests (see probe/loopback_testing.h).

#include "probe/loopback_testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "gtest/gtest.h"
#include "probe/raw_clock.h"

namespace clocksync::probe::loopback {

ParentTime FakeGlobalTime::GlobalAt(int64_t raw_ns) const {
  ParentTime t;
  t.global_ns = raw_ns + kHourNs;
  t.state = kProbeStateSynced;
  t.depth = 3;
  t.bound_ns = 1234;
  t.upstream_id = 77;
  return t;
}

ServingResponder::ServingResponder(ProbeResponder::Options options) {
  options.time_source = &time_;
  options.node_id = kParentId;
  if (options.listen_address.empty()) options.listen_address = "127.0.0.1:0";
  auto created = ProbeResponder::Create(options);
  status_ = created.status();
  if (!created.ok()) return;
  responder_ = std::move(*created);
  thread_ = std::thread([this] { serve_status_ = responder_->Serve(stop_); });
}

ServingResponder::~ServingResponder() { Stop().IgnoreError(); }

absl::Status ServingResponder::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  return serve_status_;
}

std::string ServingResponder::address() const {
  return "127.0.0.1:" + std::to_string(responder_->port());
}

std::unique_ptr<ProbeRequester> MakeRequester(ProbeRequester::Options options) {
  options.node_id = kChildId;
  auto created = ProbeRequester::Create(options);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? std::move(*created) : nullptr;
}

std::vector<ProbeResult> PollFor(ProbeRequester& requester, size_t want,
                                 absl::Duration timeout) {
  std::vector<ProbeResult> results;
  const int64_t deadline = RawNowNs() + absl::ToInt64Nanoseconds(timeout);
  while (results.size() < want && RawNowNs() < deadline) {
    absl::StatusOr<int> n = requester.Poll(
        50, [&](const ProbeResult& r) { results.push_back(r); });
    EXPECT_TRUE(n.ok()) << n.status();
  }
  return results;
}

bool WaitFor(const std::atomic<uint64_t>& counter, uint64_t want) {
  const int64_t deadline = RawNowNs() + 5'000'000'000;
  while (counter.load() < want && RawNowNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return counter.load() >= want;
}

RawSocket::RawSocket() {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
  timeval timeout{5, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
}

RawSocket::~RawSocket() { close(fd_); }

uint16_t RawSocket::port() const {
  sockaddr_in self{};
  socklen_t len = sizeof(self);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&self), &len);
  return ntohs(self.sin_port);
}

void RawSocket::SendTo(uint16_t port, const std::vector<uint8_t>& bytes) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(port);
  ASSERT_EQ(sendto(fd_, bytes.data(), bytes.size(), 0,
                   reinterpret_cast<sockaddr*>(&to), sizeof(to)),
            static_cast<ssize_t>(bytes.size()));
}

uint16_t RawSocket::Receive(std::vector<uint8_t>* bytes) {
  bytes->assign(2048, 0);
  sockaddr_in from{};
  socklen_t len = sizeof(from);
  const ssize_t n = recvfrom(fd_, bytes->data(), bytes->size(), 0,
                             reinterpret_cast<sockaddr*>(&from), &len);
  if (n < 0) return 0;
  bytes->resize(static_cast<size_t>(n));
  return ntohs(from.sin_port);
}

std::vector<uint8_t> Encoded(const ProbePacket& p) {
  std::vector<uint8_t> bytes(kProbePacketSize);
  EncodeProbe(p, bytes.data());
  return bytes;
}

ProbePacket Request(uint64_t nonce) {
  ProbePacket p;
  p.type = ProbeType::kRequest;
  p.nonce = nonce;
  p.sender_id = kChildId;
  p.t1_ns = 1000;
  return p;
}

ProbePacket ReplyTo(const ProbePacket& request) {
  ProbePacket p = request;
  p.type = ProbeType::kReply;
  p.sender_id = kParentId;
  p.t2_ns = request.t1_ns + kHourNs;
  p.t3_ns = p.t2_ns + 10;
  p.parent_state = kProbeStateSynced;
  p.parent_bound_ns = 5;
  return p;
}

}  // namespace clocksync::probe::loopback
