// probe/requester.cc: the requester's set-up, nonce table, sends (direct
// or delayed) and reply matching (see probe/requester.h).

#include "probe/requester.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace clocksync::probe {

using probe_internal::Bump;

namespace {

// A transmit stamp converted to more than this before its send's raw
// reading is implausible (CLOCK_REALTIME stepped back): dropped.
constexpr int64_t kMaxTxStampEarlyNs = 1'000'000;
// Transmit stamps are converted with a calibration at most this old.
constexpr int64_t kTxCalibrationMaxAgeNs = 100'000;
// A previous stamp more than this after the exchange's user-space t3 does
// not belong to it.
constexpr int64_t kMaxPreviousStampLateNs = 1'000'000'000;

}  // namespace

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
      key_(options.key),
      fd_(fd),
      clock_(options.clock != nullptr ? options.clock : &identity_clock_),
      delay_sampler_(options.delay, /*stream=*/1) {
  if (options_.delay.enabled) {
    delay_queue_ = std::make_unique<DelayQueue>(options_.delay_queue_capacity);
  }
  if (options_.kernel_tx_stamps && !options_.delay.enabled) {
    // Where the kernel refuses, t1 stays the reading before the send.
    tx_stamps_.Enable(fd_).IgnoreError();
  }
  if (options_.warm_up && tx_stamps_.enabled()) {
    // A socket on the loopback connected to itself; without a loopback
    // (a namespace with lo down) there is no warm-up.
    warm_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in self{};
    self.sin_family = AF_INET;
    self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(self);
    if (warm_fd_ >= 0 &&
        (bind(warm_fd_, reinterpret_cast<sockaddr*>(&self), sizeof(self)) != 0 ||
         getsockname(warm_fd_, reinterpret_cast<sockaddr*>(&self), &len) != 0 ||
         connect(warm_fd_, reinterpret_cast<sockaddr*>(&self), len) != 0)) {
      close(warm_fd_);
      warm_fd_ = -1;
    }
    // Stamped like the probe socket, so that the stamping path runs warm
    // too (its stamps are read and dropped).
    if (warm_fd_ >= 0 && !warm_stamps_.Enable(warm_fd_).ok()) {
      close(warm_fd_);
      warm_fd_ = -1;
    }
  }
}

ProbeRequester::~ProbeRequester() {
  close(fd_);
  if (warm_fd_ >= 0) close(warm_fd_);
}

void ProbeRequester::WarmUp() {
  if (warm_fd_ < 0) return;
  uint8_t byte = 0;
  if (send(warm_fd_, &byte, 1, MSG_DONTWAIT) == 1) {
    recv(warm_fd_, &byte, 1, MSG_DONTWAIT);
  }
  warm_stamps_.Drain([](uint32_t, int64_t) {});
}

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
      if (o.version == kProbeVersion2 && !v2_answered_ && !use_v1_ &&
          ++v2_losses_in_a_row_ >= kV1FallbackLosses) {
        // Never a version-2 answer: an older parent drops them unread.
        use_v1_ = true;
        Bump(counters_.version1_fallbacks);
      }
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

int ProbeRequester::SendNow(const uint8_t* data, int* attempts) {
  int unused = 0;
  if (attempts == nullptr) attempts = &unused;
  *attempts = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ++*attempts;
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
  ++requests_;
  const bool v2 = options_.interleaved &&
                  (!use_v1_ || requests_ % kV2RetryEvery == 0);
  request.version = v2 ? kProbeVersion2 : kProbeVersion1;
  request.type = ProbeType::kRequest;
  request.nonce = NewNonce();
  request.sender_id = options_.node_id;
  if (v2 && held_.valid) request.prev_nonce = held_.nonce;
  uint8_t data[kProbePacketSize];

  if (delay_queue_ == nullptr) WarmUp();
  const int64_t raw_t1_ns = RawNowNs();
  request.t1_ns = clock_->LocalAt(raw_t1_ns);
  EncodeProbe(request, data, Key());
  Outstanding sent;
  sent.used = true;
  sent.nonce = request.nonce;
  sent.version = request.version;
  sent.t1_echo_ns = request.t1_ns;
  sent.t1_ns = request.t1_ns;
  sent.raw_send_ns = raw_t1_ns;
  if (delay_queue_ != nullptr) {
    const int64_t due_ns = raw_t1_ns + delay_sampler_.NextNs();
    if (!delay_queue_->Push(due_ns, data, nullptr, 0)) {
      Bump(counters_.delay_queue_drops);
      return absl::OkStatus();  // Emulated loss.
    }
    sent.expires_raw_ns = due_ns + options_.expiry_ns;
    *slot = sent;
    return SendDue(RawNowNs());
  }
  int attempts = 0;
  if (const int error = SendNow(data, &attempts); error != 0) {
    Bump(counters_.send_errors);
    // The refused attempts may have used transmit-stamp keys.
    tx_stamps_.Rearm([this](uint32_t key, int64_t realtime_ns) {
      OnTxStamp(key, realtime_ns);
    });
    return absl::ErrnoToStatus(
        error, absl::StrCat("send probe to '", options_.parent_address, "'"));
  }
  Bump(counters_.sent);
  sent.expires_raw_ns = raw_t1_ns + options_.expiry_ns;
  *slot = sent;
  if (tx_stamps_.enabled()) {
    if (attempts == 1) {
      slot->tx_key = tx_stamps_.NoteSent();
      slot->awaiting_stamp = true;
      DrainTxStamps();  // Loopback and veth stamp inside the send call.
    } else {
      // Refused attempts before this one may have used keys: this
      // request keeps its user-space t1.
      tx_stamps_.Rearm([this](uint32_t key, int64_t realtime_ns) {
        OnTxStamp(key, realtime_ns);
      });
    }
  }
  return absl::OkStatus();
}

void ProbeRequester::DrainTxStamps() {
  if (!tx_stamps_.enabled()) return;
  tx_stamps_.Drain([this](uint32_t key, int64_t realtime_ns) {
    OnTxStamp(key, realtime_ns);
  });
}

void ProbeRequester::OnTxStamp(uint32_t key, int64_t realtime_ns) {
  Outstanding* slot = nullptr;
  for (Outstanding& o : outstanding_) {
    if (o.used && o.awaiting_stamp && o.tx_key == key) slot = &o;
  }
  if (slot == nullptr) {
    // Answered or expired before its stamp came, or a stale key.
    Bump(counters_.tx_stamps_rejected);
    return;
  }
  slot->awaiting_stamp = false;
  const int64_t raw_now_ns = RawNowNs();
  realtime_to_raw_.MaybeRecalibrate(raw_now_ns, kTxCalibrationMaxAgeNs);
  // Converted early, the stamp is no later than the request left; it was
  // taken after the reading before the send call.
  int64_t raw_tx_ns = realtime_to_raw_.ToRawEarly(realtime_ns);
  if (raw_tx_ns > raw_now_ns ||
      raw_tx_ns < slot->raw_send_ns - kMaxTxStampEarlyNs) {
    Bump(counters_.tx_stamps_rejected);
    return;
  }
  raw_tx_ns = std::max(raw_tx_ns, slot->raw_send_ns);
  slot->t1_ns = std::max(slot->t1_ns, clock_->LocalAt(raw_tx_ns));
  slot->kernel_t1 = true;
  Bump(counters_.tx_stamps);
}

int ProbeRequester::FlushHeld(Callback on_reply) {
  if (!held_.valid) return 0;
  held_.valid = false;
  Bump(counters_.interleave_misses);
  on_reply(held_.result);
  return 1;
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
  int flushed = 0;
  for (;;) {
    int64_t now_ns = RawNowNs();
    if (delay_queue_ != nullptr) {
      // Errors are counted in send_errors; the requests expire as lost.
      SendDue(now_ns).IgnoreError();
    }
    Expire(now_ns);
    if (held_.valid && now_ns - held_.raw_receive_ns > options_.expiry_ns) {
      // No next reply came to complete it.
      flushed += FlushHeld(on_reply);
    }
    const int count = rx_.Receive(fd_, MSG_DONTWAIT);
    if (count > 0) {
      const int64_t raw_after_receive_ns = RawNowNs();
      realtime_to_raw_.Calibrate();
      return flushed + HandleBatch(count, raw_after_receive_ns, on_reply);
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
    // Late transmit stamps; an unread one would also end ppoll at once
    // (POLLERR).
    DrainTxStamps();
    now_ns = RawNowNs();
    if (now_ns >= deadline_ns) return flushed;
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
    probe_internal::NoteReceiveBufferDrops(received,
                                           counters_.receive_buffer_drops);
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
    if (reply.t1_ns != slot->t1_echo_ns) {
      Bump(counters_.echo_mismatch);
      continue;
    }
    int64_t receive_uncertainty_ns = 0;
    const int64_t raw_receive_ns = probe_internal::ReceiveRawNs(
        received, raw_after_receive_ns, realtime_to_raw_,
        counters_.rx_timestamp_fallbacks, &receive_uncertainty_ns);
    // t4 is the middle of the receive stamp's range: the sample is widened
    // by its uncertainty (on the local clock: at most 1000 ppm more).
    const int64_t u_ns = receive_uncertainty_ns;
    ProbeResult result;
    result.sample = hull::ProbeSample{
        slot->t1_ns, reply.t2_ns, reply.t3_ns, clock_->LocalAt(raw_receive_ns),
        reply.parent_bound_ns + u_ns + u_ns / 1000 + (u_ns > 0 ? 1 : 0)};
    result.parent_state = reply.parent_state;
    result.parent_depth = reply.parent_depth;
    result.parent_id = reply.sender_id;
    result.upstream_id = reply.upstream_id;
    result.kernel_t1 = slot->kernel_t1;
    slot->used = false;
    Remember(answered_nonces_, answered_next_, reply.nonce);
    Bump(counters_.answered);
    if (reply.version != kProbeVersion2 || !options_.interleaved) {
      // Basic mode: deliver now, after any held exchange (in order).
      delivered += FlushHeld(on_reply);
      ++delivered;
      on_reply(result);
      continue;
    }
    v2_answered_ = true;
    v2_losses_in_a_row_ = 0;
    use_v1_ = false;
    if (held_.valid) {
      if (reply.prev_nonce != 0 && reply.prev_nonce == held_.nonce) {
        CompleteHeld(reply.prev_t3_ns);
        held_.valid = false;
        ++delivered;
        on_reply(held_.result);
      } else {
        delivered += FlushHeld(on_reply);
      }
    }
    held_.valid = true;
    held_.nonce = reply.nonce;
    held_.raw_receive_ns = raw_receive_ns;
    held_.result = result;
  }
  return delivered;
}

void ProbeRequester::CompleteHeld(int64_t prev_t3_ns) {
  hull::ProbeSample& sample = held_.result.sample;
  // The parent's time between receive and send, (t3 − t2), cannot exceed
  // the exchange's round trip on this clock, (t4 − t1), by more than the
  // two clocks' rate difference allows (kMaxRateDiffPpm, 1000 ppm) and the
  // sample's widening on each side (parent_bound_ns: t2 and t4 are the
  // middles of their ranges): a later stamp would put the response point
  // above the request point even when widened.
  const int64_t exchange_ns = sample.t4_ns - sample.t1_ns;
  const int64_t longest_turn_ns =
      exchange_ns + exchange_ns / 1000 + 1 + 2 * sample.parent_bound_ns;
  if (prev_t3_ns < sample.t2_ns ||
      prev_t3_ns > sample.t3_ns + kMaxPreviousStampLateNs ||
      prev_t3_ns - sample.t2_ns > longest_turn_ns) {
    // Not this exchange's departure: keep the user-space t3.
    Bump(counters_.bad_previous_stamps);
    Bump(counters_.interleave_misses);
    return;
  }
  Bump(counters_.interleaved);
  held_.result.kernel_t3 = true;
  if (prev_t3_ns <= sample.t3_ns) return;  // Both are lower bounds.
  // The parent's bound is for its user-space t3; by the kernel's stamp it
  // may have grown, at most at kMaxRateDiffPpm (1000 ppm), plus 1 ns.
  const int64_t later_ns = prev_t3_ns - sample.t3_ns;
  sample.t3_ns = prev_t3_ns;
  sample.parent_bound_ns += later_ns / 1000 + 1;
}

}  // namespace clocksync::probe
