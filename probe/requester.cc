// probe/requester.cc: the requester's set-up, nonce table, sends (direct
// or delayed) and reply matching (see probe/requester.h).

#include "probe/requester.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace clocksync::probe {

using probe_internal::Bump;

LocalClock::~LocalClock() = default;

uint64_t RequesterCounters::malformed_total() const {
  return probe_internal::Sum(malformed);
}

absl::StatusOr<std::unique_ptr<ProbeRequester>> ProbeRequester::Create(
    const Options& options) {
  if (options.expiry_ns <= 0) {
    return absl::InvalidArgumentError("probe requester: expiry_ns must be > 0");
  }
  if (absl::Status s = ValidateDelayInjection(options.delay,
                                                options.delay_queue_capacity);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<probe_internal::ProbeSocket> opened =
      probe_internal::OpenProbeSocket(options.parent_address,
                                      /*passive=*/false, /*nonblocking=*/true);
  if (!opened.ok()) return opened.status();
  const int fd = opened->fd;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&opened->address),
              opened->address_len) != 0) {
    const absl::Status status = absl::ErrnoToStatus(
        errno, absl::StrCat("connect to probe parent '",
                            options.parent_address, "' (",
                            probe_internal::FormatAddress(opened->address),
                            ")"));
    close(fd);
    return status;
  }
  return std::unique_ptr<ProbeRequester>(new ProbeRequester(options, fd));
}

ProbeRequester::ProbeRequester(const Options& options, int fd)
    : options_(options),
      fd_(fd),
      clock_(options.clock != nullptr ? options.clock : &identity_clock_),
      delay_sampler_(options.delay, /*stream=*/1) {
  if (options_.delay.enabled) {
    delay_queue_ = std::make_unique<DelayQueue>(options_.delay_queue_capacity);
  }
}

ProbeRequester::~ProbeRequester() { close(fd_); }

size_t ProbeRequester::outstanding() const {
  size_t n = 0;
  for (const Outstanding& o : outstanding_) n += o.used ? 1 : 0;
  return n;
}

void ProbeRequester::Remember(std::array<uint64_t, kRememberedNonces>& ring,
                              size_t& next, uint64_t nonce) {
  ring[next] = nonce;
  next = (next + 1) % kRememberedNonces;
}

bool ProbeRequester::Contains(
    const std::array<uint64_t, kRememberedNonces>& ring, uint64_t nonce) {
  // Nonces are never 0, so the ring's initial zeros match nothing.
  if (nonce == 0) return false;
  return std::find(ring.begin(), ring.end(), nonce) != ring.end();
}

void ProbeRequester::Expire(int64_t raw_now_ns) {
  for (Outstanding& o : outstanding_) {
    if (o.used && raw_now_ns >= o.expires_raw_ns) {
      o.used = false;
      Bump(counters_.lost);
      Remember(expired_nonces_, expired_next_, o.nonce);
    }
  }
}

ProbeRequester::Outstanding* ProbeRequester::FreeSlot() {
  Outstanding* oldest = &outstanding_[0];
  for (Outstanding& o : outstanding_) {
    if (!o.used) return &o;
    if (o.expires_raw_ns < oldest->expires_raw_ns) oldest = &o;
  }
  oldest->used = false;
  Bump(counters_.lost);
  Remember(expired_nonces_, expired_next_, oldest->nonce);
  return oldest;
}

uint64_t ProbeRequester::NewNonce() {
  for (;;) {
    const uint64_t nonce = nonce_bits_();
    if (nonce == 0) continue;
    bool in_use = false;
    for (const Outstanding& o : outstanding_) {
      in_use = in_use || (o.used && o.nonce == nonce);
    }
    if (!in_use) return nonce;
  }
}

int ProbeRequester::SendNow(const uint8_t* data) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (send(fd_, data, kProbePacketSize, MSG_DONTWAIT) ==
        static_cast<ssize_t>(kProbePacketSize)) {
      return 0;
    }
    if (errno == ECONNREFUSED) {
      // An earlier datagram's ICMP port unreachable, reported (and cleared)
      // on this call; this datagram was not sent. Try again.
      Bump(counters_.refused);
      continue;
    }
    if (errno != EINTR) return errno;
  }
  return ECONNREFUSED;
}

absl::Status ProbeRequester::SendProbe() {
  const int64_t raw_now_ns = RawNowNs();
  Expire(raw_now_ns);
  if (delay_queue_ != nullptr) SendDue(raw_now_ns).IgnoreError();
  Outstanding* slot = FreeSlot();
  ProbePacket request;
  request.type = ProbeType::kRequest;
  request.nonce = NewNonce();
  request.sender_id = options_.node_id;
  uint8_t data[kProbePacketSize];

  const int64_t raw_t1_ns = RawNowNs();
  request.t1_ns = clock_->LocalAt(raw_t1_ns);
  EncodeProbe(request, data, Key());
  if (delay_queue_ != nullptr) {
    const int64_t due_ns = raw_t1_ns + delay_sampler_.NextNs();
    if (!delay_queue_->Push(due_ns, data, nullptr, 0)) {
      Bump(counters_.delay_queue_drops);
      return absl::OkStatus();  // Emulated loss.
    }
    *slot = Outstanding{true, request.nonce, request.t1_ns,
                        due_ns + options_.expiry_ns};
    return SendDue(RawNowNs());
  }
  if (const int error = SendNow(data); error != 0) {
    Bump(counters_.send_errors);
    return absl::ErrnoToStatus(
        error, absl::StrCat("send probe to '", options_.parent_address, "'"));
  }
  Bump(counters_.sent);
  *slot = Outstanding{true, request.nonce, request.t1_ns,
                      raw_t1_ns + options_.expiry_ns};
  return absl::OkStatus();
}

absl::Status ProbeRequester::SendDue(int64_t raw_now_ns) {
  int first_error = 0;
  uint8_t data[kProbePacketSize];
  while (!delay_queue_->empty() && delay_queue_->next_due_ns() <= raw_now_ns) {
    delay_queue_->Pop(data, nullptr, nullptr);
    if (const int error = SendNow(data); error != 0) {
      // The request stays outstanding and will expire as lost.
      Bump(counters_.send_errors);
      if (first_error == 0) first_error = error;
    } else {
      Bump(counters_.sent);
    }
  }
  if (first_error == 0) return absl::OkStatus();
  return absl::ErrnoToStatus(
      first_error,
      absl::StrCat("send delayed probe to '", options_.parent_address, "'"));
}

absl::StatusOr<int> ProbeRequester::Poll(int timeout_ms, Callback on_reply) {
  const int64_t deadline_ns =
      RawNowNs() + static_cast<int64_t>(std::max(timeout_ms, 0)) * 1'000'000;
  pollfd readable{fd_, POLLIN, 0};
  for (;;) {
    int64_t now_ns = RawNowNs();
    if (delay_queue_ != nullptr) {
      // Errors are counted in send_errors; the requests expire as lost.
      SendDue(now_ns).IgnoreError();
    }
    Expire(now_ns);
    const int count = rx_.Receive(fd_, MSG_DONTWAIT);
    if (count > 0) {
      const int64_t raw_after_receive_ns = RawNowNs();
      realtime_to_raw_.Calibrate();
      return HandleBatch(count, raw_after_receive_ns, on_reply);
    }
    if (count < 0) {
      if (errno == ECONNREFUSED) {
        Bump(counters_.refused);
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
          errno != ENOMEM && errno != ENOBUFS) {
        return absl::ErrnoToStatus(
            errno, absl::StrCat("receive probe replies from '",
                                options_.parent_address, "'"));
      }
    }
    now_ns = RawNowNs();
    if (now_ns >= deadline_ns) return 0;
    int64_t wait_ns = deadline_ns - now_ns;
    if (delay_queue_ != nullptr && !delay_queue_->empty()) {
      wait_ns = std::clamp<int64_t>(delay_queue_->next_due_ns() - now_ns, 0,
                                    wait_ns);
    }
    const timespec timeout = probe_internal::ToTimespec(wait_ns);
    if (ppoll(&readable, 1, &timeout, nullptr) < 0 && errno != EINTR) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("wait for probe replies from '",
                              options_.parent_address, "'"));
    }
  }
}

int ProbeRequester::HandleBatch(int count, int64_t raw_after_receive_ns,
                                Callback on_reply) {
  int delivered = 0;
  for (int i = 0; i < count; ++i) {
    const size_t index = static_cast<size_t>(i);
    ProbePacket reply;
    const DecodeStatus status =
        DecodeProbe(rx_.data(index), rx_.length(index), &reply, Key());
    // Restore what the kernel overwrote, for the next recvmmsg.
    const msghdr received = rx_.header(index);
    rx_.Restore(index);
    if (status != DecodeStatus::kOk) {
      Bump(counters_.malformed[static_cast<size_t>(status)]);
      continue;
    }
    if (reply.type != ProbeType::kReply) {
      Bump(counters_.unexpected_type);
      continue;
    }
    Outstanding* slot = nullptr;
    for (Outstanding& o : outstanding_) {
      if (o.used && o.nonce == reply.nonce) slot = &o;
    }
    if (slot == nullptr) {
      if (Contains(answered_nonces_, reply.nonce)) {
        Bump(counters_.duplicate);
      } else if (Contains(expired_nonces_, reply.nonce)) {
        Bump(counters_.late);
      } else {
        Bump(counters_.unknown);
      }
      continue;
    }
    if (reply.t1_ns != slot->t1_ns) {
      Bump(counters_.echo_mismatch);
      continue;
    }
    const int64_t raw_receive_ns = probe_internal::ReceiveRawNs(
        received, raw_after_receive_ns, realtime_to_raw_,
        counters_.rx_timestamp_fallbacks);
    ProbeResult result;
    result.sample = hull::ProbeSample{slot->t1_ns, reply.t2_ns, reply.t3_ns,
                                      clock_->LocalAt(raw_receive_ns),
                                      reply.parent_bound_ns};
    result.parent_state = reply.parent_state;
    result.parent_depth = reply.parent_depth;
    result.parent_id = reply.sender_id;
    result.upstream_id = reply.upstream_id;
    slot->used = false;
    Remember(answered_nonces_, answered_next_, reply.nonce);
    Bump(counters_.answered);
    ++delivered;
    on_reply(result);
  }
  return delivered;
}

}  // namespace clocksync::probe
