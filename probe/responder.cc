// probe/responder.cc: the responder's set-up and serving loop: batched
// receive, t2 from kernel stamps, one t3 reading per batch, batched send
// (see probe/responder.h).

#include "probe/responder.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace clocksync::probe {

using probe_internal::Bump;

GlobalTimeSource::~GlobalTimeSource() = default;
ReplyObserver::~ReplyObserver() = default;

namespace {

// Serve() checks its stop flag at least this often.
constexpr int64_t kStopCheckNs = 100'000'000;
// A transmit stamp converted to more than this before its send's raw
// reading is implausible (CLOCK_REALTIME was stepped back): dropped.
// Earlier stamps within it are clamped to the reading (the conversion's
// early bias, stamps read long after the send).
constexpr int64_t kMaxTxStampEarlyNs = 1'000'000;

// Slot of a nonce in the stamp table: nonces are random, a multiplicative
// hash spreads any others.
inline size_t StampSlot(uint64_t nonce) {
  return static_cast<size_t>((nonce * 0x9E3779B97F4A7C15ULL) >> 52) &
         (ProbeResponder::kStampTableSize - 1);
}
static_assert(ProbeResponder::kStampTableSize == 4096,
              "StampSlot takes the hash's top 12 bits");

// Fills in what a reply says at t3: the time and the parent's state.
inline void StampT3(const ParentTime& now, ProbePacket& reply) {
  reply.t3_ns = now.global_ns;
  reply.parent_state = now.state;
  reply.parent_depth = now.depth;
  reply.parent_bound_ns = now.bound_ns;
  reply.upstream_id = now.upstream_id;
}

}  // namespace

// The reply's bound covers t2's conversion too: t2 is the middle of the
// receive stamp's range (probe/udp_socket.h), within ± the uncertainty in
// raw time, and global time runs at 1 ± 1000 ppm of raw time at most.
void ProbeResponder::WidenForT2(TxSlot& tx) {
  const int64_t u_ns = tx.receive_uncertainty_ns;
  tx.packet.parent_bound_ns += u_ns + u_ns / 1000 + (u_ns > 0 ? 1 : 0);
}

uint64_t ResponderCounters::malformed_total() const {
  return probe_internal::Sum(malformed);
}

absl::StatusOr<std::unique_ptr<ProbeResponder>> ProbeResponder::Create(
    const Options& options) {
  if (options.time_source == nullptr) {
    return absl::InvalidArgumentError("probe responder: no time_source");
  }
  if (absl::Status s = ValidateDelayInjection(options.delay,
                                                options.delay_queue_capacity);
      !s.ok()) {
    return s;
  }
  if (const std::string invalid = SourceRateLimiter::Validate(options.per_source_limit);
      !invalid.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("probe responder: per_source_limit.", invalid));
  }
  absl::StatusOr<probe_internal::ProbeSocket> opened =
      probe_internal::OpenProbeSocket(options.listen_address,
                                      /*passive=*/true, /*nonblocking=*/false);
  if (!opened.ok()) return opened.status();
  const int fd = opened->fd;
  absl::Status status;
  // Serve() blocks in recvmmsg; this bounds the wait so it sees its stop
  // flag.
  const timeval receive_timeout = {0, kStopCheckNs / 1000};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout,
                 sizeof(receive_timeout)) != 0) {
    status = absl::ErrnoToStatus(
        errno,
        absl::StrCat("SO_RCVTIMEO on probe socket '", options.listen_address,
                     "'"));
    close(fd);
    return status;
  }
  if (options.receive_buffer_bytes > 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &options.receive_buffer_bytes,
                 sizeof(options.receive_buffer_bytes)) != 0) {
    status = absl::ErrnoToStatus(
        errno,
        absl::StrCat("SO_RCVBUF on probe socket '", options.listen_address, "'"));
    close(fd);
    return status;
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&opened->address),
           opened->address_len) != 0) {
    status = absl::ErrnoToStatus(
        errno, absl::StrCat("bind probe responder to '",
                            options.listen_address, "'"));
    close(fd);
    return status;
  }
  sockaddr_storage bound;
  socklen_t bound_len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    status = absl::ErrnoToStatus(
        errno, absl::StrCat("getsockname of probe responder '",
                            options.listen_address, "'"));
    close(fd);
    return status;
  }
  return std::unique_ptr<ProbeResponder>(new ProbeResponder(
      options, fd, probe_internal::FormatAddress(bound),
      probe_internal::PortOf(bound)));
}

ProbeResponder::ProbeResponder(const Options& options, int fd,
                               std::string address, uint16_t port)
    : options_(options),
      key_(options.key),
      fd_(fd),
      address_(std::move(address)),
      port_(port),
      rate_limiter_(options.per_source_limit),
      delay_sampler_(options.delay, /*stream=*/2),
      stamp_table_(std::make_unique<std::array<Stamp, kStampTableSize>>()) {
  if (options_.delay.enabled) {
    delay_queue_ = std::make_unique<DelayQueue>(options_.delay_queue_capacity);
  }
  if (options_.kernel_tx_stamps && !options_.delay.enabled) {
    // Without them the responder answers every request without a previous
    // stamp (prev_nonce 0): the children keep the user-space t3.
    tx_stamps_.Enable(fd_).IgnoreError();
  }
  for (size_t i = 0; i < kBatch; ++i) {
    tx_[i].iov = {tx_[i].data, kProbePacketSize};
    msghdr& tx = tx_msgs_[i].msg_hdr;
    tx.msg_iov = &tx_[i].iov;
    tx.msg_iovlen = 1;
    tx.msg_name = &tx_[i].to;
  }
}

ProbeResponder::~ProbeResponder() { close(fd_); }

void ProbeResponder::SetKey(const std::optional<ProbeKeys>& key) {
  std::lock_guard<std::mutex> lock(new_key_mu_);
  new_key_ = key;
  new_key_pending_.store(true, std::memory_order_release);
}

void ProbeResponder::TakeNewKey() {
  if (!new_key_pending_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(new_key_mu_);
  key_ = new_key_;
  new_key_pending_.store(false, std::memory_order_relaxed);
}

absl::Status ProbeResponder::Serve(const std::atomic<bool>& stop) {
  pollfd readable{fd_, POLLIN, 0};
  while (!stop.load(std::memory_order_relaxed)) {
    // Block in recvmmsg itself (cheaper than poll + receive) for the first
    // datagram, at most SO_RCVTIMEO (kStopCheckNs) so that `stop` is seen;
    // take whatever else is queued without waiting (MSG_WAITFORONE).
    int flags = MSG_WAITFORONE;
    if (delay_queue_ != nullptr && !delay_queue_->empty()) {
      // Delayed replies pending: wait only until the next one is due.
      SendDue(RawNowNs());
      if (!delay_queue_->empty()) {
        const int64_t wait_ns = std::clamp<int64_t>(
            delay_queue_->next_due_ns() - RawNowNs(), 0, kStopCheckNs);
        const timespec timeout = probe_internal::ToTimespec(wait_ns);
        if (wait_ns > 0 && ppoll(&readable, 1, &timeout, nullptr) < 0 &&
            errno != EINTR) {
          return absl::ErrnoToStatus(
              errno, absl::StrCat("probe responder ", address_, ": ppoll"));
        }
        flags = MSG_DONTWAIT;
      }
    }
    const int count = rx_.Receive(fd_, flags);
    if (count > 0) {
      const int64_t raw_after_receive_ns = RawNowNs();
      // Calibrating next to the stamps keeps the conversion's rate error at
      // the packets' queueing time (raw_clock.h); it costs a few clock reads
      // per batch.
      realtime_to_raw_.Calibrate();
      TakeNewKey();
      HandleBatch(count, raw_after_receive_ns);
      if (delay_queue_ != nullptr) SendDue(RawNowNs());
    } else if (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
               errno != EINTR && errno != ENOMEM && errno != ENOBUFS) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("probe responder ", address_, ": recvmmsg"));
    }
  }
  return absl::OkStatus();
}

void ProbeResponder::HandleBatch(int count, int64_t raw_after_receive_ns) {
  Bump(counters_.received, static_cast<uint64_t>(count));
  const GlobalTimeSource& source = *options_.time_source;
  // Stamps of earlier replies that came after their send call returned.
  DrainTxStamps();
  size_t ready = 0;
  for (int i = 0; i < count; ++i) {
    const size_t slot = static_cast<size_t>(i);
    const msghdr& header = rx_.header(slot);
    probe_internal::NoteReceiveBufferDrops(header,
                                           counters_.receive_buffer_drops);
    ProbePacket request;
    if (!rate_limiter_.Admit(rx_.sender(slot), raw_after_receive_ns)) {
      Bump(counters_.rate_limited);
      rx_.Restore(slot);
      continue;
    }
    const DecodeStatus status =
        DecodeProbe(rx_.data(slot), rx_.length(slot), &request, Key());
    if (status != DecodeStatus::kOk) {
      Bump(counters_.malformed[static_cast<size_t>(status)]);
    } else if (request.type != ProbeType::kRequest) {
      Bump(counters_.unexpected_type);
    } else {
      TxSlot& tx = tx_[ready];
      tx.raw_receive_ns = probe_internal::ReceiveRawNs(
          header, raw_after_receive_ns, realtime_to_raw_,
          counters_.rx_timestamp_fallbacks, &tx.receive_uncertainty_ns);
      tx.packet = ProbePacket{};
      tx.packet.version = request.version;
      tx.packet.type = ProbeType::kReply;
      tx.packet.nonce = request.nonce;
      tx.packet.sender_id = options_.node_id;
      tx.packet.t1_ns = request.t1_ns;
      tx.packet.t2_ns = source.GlobalAt(tx.raw_receive_ns).global_ns;
      if (request.prev_nonce != 0) {
        int64_t prev_t3_ns = 0;
        if (LookUpStamp(request.prev_nonce, &prev_t3_ns)) {
          tx.packet.prev_nonce = request.prev_nonce;
          tx.packet.prev_t3_ns = prev_t3_ns;
          Bump(counters_.interleaved);
        } else {
          Bump(counters_.interleave_misses);
        }
      }
      std::memcpy(&tx.to, &rx_.sender(slot), header.msg_namelen);
      tx.to_len = header.msg_namelen;
      if (delay_queue_ == nullptr) {
        ++ready;
      } else {
        // Emulated network: t3 is now, the reply leaves when due.
        const int64_t raw_send_ns = RawNowNs();
        StampT3(source.GlobalAt(raw_send_ns), tx.packet);
        WidenForT2(tx);
        EncodeProbe(tx.packet, tx.data, Key());
        if (options_.observer != nullptr) {
          options_.observer->OnReply(raw_send_ns - tx.raw_receive_ns);
        }
        if (!delay_queue_->Push(raw_send_ns + delay_sampler_.NextNs(),
                                tx.data, &tx.to, tx.to_len)) {
          Bump(counters_.delay_queue_drops);
        }
      }
    }
    rx_.Restore(slot);
  }
  if (ready == 0) return;
  // t3 as late as possible: one reading for the batch, then encode and send.
  const int64_t raw_send_ns = RawNowNs();
  const ParentTime now = source.GlobalAt(raw_send_ns);
  for (size_t j = 0; j < ready; ++j) {
    TxSlot& tx = tx_[j];
    StampT3(now, tx.packet);
    WidenForT2(tx);
    EncodeProbe(tx.packet, tx.data, Key());
  }
  SendPrepared(ready);
  if (tx_stamps_.enabled()) {
    // Note each accepted reply's key, in send order, up to the first
    // refused one: after it the kernel's keys are not known, so it re-arms.
    bool refused = false;
    for (size_t j = 0; j < ready && !refused; ++j) {
      if (!tx_accepted_[j]) {
        refused = true;
        break;
      }
      const uint32_t key = tx_stamps_.NoteSent();
      awaiting_[key % kAwaiting] =
          Awaiting{true, key, tx_[j].packet.nonce, raw_send_ns};
    }
    if (refused) {
      tx_stamps_.Rearm([this](uint32_t key, int64_t realtime_ns) {
        OnTxStamp(key, realtime_ns);
      });
      for (Awaiting& a : awaiting_) a.used = false;
    } else {
      DrainTxStamps();
    }
  }
  if (options_.observer != nullptr) {
    for (size_t j = 0; j < ready; ++j) {
      options_.observer->OnReply(raw_send_ns - tx_[j].raw_receive_ns);
    }
  }
}

void ProbeResponder::SendPrepared(size_t count) {
  for (size_t j = 0; j < count; ++j) {
    tx_msgs_[j].msg_hdr.msg_namelen = tx_[j].to_len;
  }
  probe_internal::SendEach(fd_, tx_msgs_.data(), count, counters_.answered,
                           counters_.send_errors, tx_accepted_.data());
}

void ProbeResponder::DrainTxStamps() {
  if (!tx_stamps_.enabled()) return;
  tx_stamps_.Drain([this](uint32_t key, int64_t realtime_ns) {
    OnTxStamp(key, realtime_ns);
  });
}

void ProbeResponder::OnTxStamp(uint32_t key, int64_t realtime_ns) {
  Awaiting& sent = awaiting_[key % kAwaiting];
  if (!sent.used || sent.key != key) {
    Bump(counters_.tx_stamps_rejected);
    return;
  }
  sent.used = false;
  // The stamp was taken before now; converted early it is no later than
  // its true instant, and that is after the raw reading before the send.
  const int64_t raw_now_ns = RawNowNs();
  int64_t raw_tx_ns = realtime_to_raw_.ToRawEarly(realtime_ns);
  if (raw_tx_ns > raw_now_ns ||
      raw_tx_ns < sent.raw_send_ns - kMaxTxStampEarlyNs) {
    Bump(counters_.tx_stamps_rejected);
    return;
  }
  raw_tx_ns = std::max(raw_tx_ns, sent.raw_send_ns);
  Stamp& slot = (*stamp_table_)[StampSlot(sent.nonce)];
  slot.nonce = sent.nonce;
  slot.t3_ns = options_.time_source->GlobalAt(raw_tx_ns).global_ns;
  Bump(counters_.tx_stamps);
}

bool ProbeResponder::LookUpStamp(uint64_t nonce, int64_t* t3_ns) const {
  const Stamp& slot = (*stamp_table_)[StampSlot(nonce)];
  if (slot.nonce != nonce) return false;
  *t3_ns = slot.t3_ns;
  return true;
}

void ProbeResponder::SendDue(int64_t raw_now_ns) {
  size_t count = 0;
  while (!delay_queue_->empty() && delay_queue_->next_due_ns() <= raw_now_ns) {
    delay_queue_->Pop(tx_[count].data, &tx_[count].to, &tx_[count].to_len);
    if (++count == kBatch) {
      SendPrepared(count);
      count = 0;
    }
  }
  if (count > 0) SendPrepared(count);
}

}  // namespace clocksync::probe
