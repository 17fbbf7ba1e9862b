// probe/transport.cc: UDP sockets, the responder's serving loop,
// the requester's nonce matching, and delay injection (see
// probe_transport.h).

#include "probe/transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "probe/address.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace clocksync::probe {

GlobalTimeSource::~GlobalTimeSource() = default;
LocalClock::~LocalClock() = default;
ReplyObserver::~ReplyObserver() = default;

namespace {

// Serve() checks its stop flag at least this often.
constexpr int64_t kStopCheckNs = 100'000'000;
// A kernel receive stamp more than this before the raw reading taken after
// the receive call is implausible (CLOCK_REALTIME was stepped): the reading
// replaces it.
constexpr int64_t kMaxReceiveAgeNs = 1'000'000'000;
// A stamp converted to more than this after that reading is implausible
// too; smaller excesses (the late bias) are clamped to the reading.
constexpr int64_t kMaxReceiveAheadNs = 1'000'000;
// Largest injected minimum or mean delay accepted.
constexpr int64_t kMaxInjectedDelayNs = 10'000'000'000;

// Counters have one writer each (the thread that owns the socket), so a
// plain load and store is enough; readers on other threads see whole values.
void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n,
                std::memory_order_relaxed);
}

uint64_t Sum(const std::array<std::atomic<uint64_t>, kDecodeStatusCount>& a) {
  uint64_t total = 0;
  for (const auto& counter : a) total += counter.load(std::memory_order_relaxed);
  return total;
}

timespec ToTimespec(int64_t ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return ts;
}

// Resolves an address to its first socket address. `passive`: for bind(),
// where an empty host means the wildcard address.
absl::Status Resolve(const std::string& address, bool passive,
                     sockaddr_storage* out, socklen_t* out_len) {
  AddressRules rules;
  rules.allow_port_zero = true;
  rules.allow_empty_host = true;
  absl::StatusOr<HostPort> parsed =
      ParseHostPort(absl::StrCat("probe address '", address, "'"), address,
                    rules);
  if (!parsed.ok()) return parsed.status();
  const std::string& host = parsed->host;
  const std::string port = absl::StrCat(parsed->port);
  if (host.empty() && !passive) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe address '", address, "': missing host"));
  }
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                             port.c_str(), &hints, &result);
  if (rc != 0) {
    const std::string why = rc == EAI_SYSTEM ? std::strerror(errno)
                                             : gai_strerror(rc);
    return absl::UnavailableError(absl::StrCat(
        "probe address '", address, "': cannot resolve: ", why));
  }
  if (result == nullptr || result->ai_addrlen > sizeof(sockaddr_storage)) {
    if (result != nullptr) freeaddrinfo(result);
    return absl::UnavailableError(
        absl::StrCat("probe address '", address, "': no usable address"));
  }
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out, result->ai_addr, result->ai_addrlen);
  *out_len = result->ai_addrlen;
  freeaddrinfo(result);
  return absl::OkStatus();
}

// "1.2.3.4:5" or "[::1]:5".
std::string FormatAddress(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return absl::StrCat(text, ":", ntohs(v4->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return absl::StrCat("[", text, "]:", ntohs(v6->sin6_port));
  }
  return absl::StrCat("(address family ", address.ss_family, ")");
}

uint16_t PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return 0;
}

absl::Status CheckDelay(const DelayInjection& delay, size_t queue_capacity) {
  if (!delay.enabled) return absl::OkStatus();
  if (delay.min_ns < 0 || delay.min_ns > kMaxInjectedDelayNs ||
      !(delay.exp_mean_ns >= 0) ||
      delay.exp_mean_ns > static_cast<double>(kMaxInjectedDelayNs)) {
    return absl::InvalidArgumentError(
        "delay injection: min and mean must be in [0, 10s]");
  }
  if (queue_capacity == 0 || queue_capacity > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(
        "delay injection: queue capacity must be in [1, 2^24]");
  }
  return absl::OkStatus();
}

// A UDP socket (nonblocking if asked) for `address`'s family with
// SO_TIMESTAMPNS on; -1 and a status on failure.
int OpenSocket(const sockaddr_storage& address, const std::string& name,
               bool nonblocking, absl::Status* status) {
  const int type =
      SOCK_DGRAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0);
  const int fd = socket(address.ss_family, type, 0);
  if (fd < 0) {
    *status = absl::ErrnoToStatus(
        errno, absl::StrCat("probe socket for '", name, "'"));
    return -1;
  }
  const int on = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) != 0) {
    *status = absl::ErrnoToStatus(
        errno, absl::StrCat("SO_TIMESTAMPNS on probe socket for '", name, "'"));
    close(fd);
    return -1;
  }
  return fd;
}

// Raw instant a datagram arrived: the kernel's stamp converted and checked
// against `raw_after_receive_ns` (a reading taken after the receive call),
// or that reading when there is no usable stamp.
int64_t ReceiveRawNs(const msghdr& header, int64_t raw_after_receive_ns,
                     const RealtimeToRaw& realtime_to_raw,
                     std::atomic<uint64_t>& fallbacks) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&header), c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS ||
        c->cmsg_len < CMSG_LEN(sizeof(timespec))) {
      continue;
    }
    timespec stamp;
    std::memcpy(&stamp, CMSG_DATA(c), sizeof(stamp));
    if (stamp.tv_sec < 0 || stamp.tv_sec > INT64_MAX / 1'000'000'000 - 1) {
      break;
    }
    const int64_t raw_ns = realtime_to_raw.ToRaw(
        static_cast<int64_t>(stamp.tv_sec) * 1'000'000'000 + stamp.tv_nsec);
    if (raw_ns < raw_after_receive_ns - kMaxReceiveAgeNs ||
        raw_ns > raw_after_receive_ns + kMaxReceiveAheadNs) {
      break;
    }
    return std::min(raw_ns, raw_after_receive_ns);
  }
  Bump(fallbacks);
  return raw_after_receive_ns;
}

}  // namespace

// --- delay injection --------------------------------------------------------

bool ParseDelayInjection(const std::string& spec, DelayInjection* out,
                         std::string* error) {
  constexpr absl::string_view kExpected =
      "expected min=<duration>,mean=<duration>[,seed=<n>], e.g. "
      "min=50us,mean=20us,seed=3";
  if (spec.empty()) {
    *error = absl::StrCat("empty delay spec; ", kExpected);
    return false;
  }
  DelayInjection result;
  result.enabled = true;
  bool have_min = false;
  bool have_mean = false;
  bool have_seed = false;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    const size_t equals = part.find('=');
    if (equals == absl::string_view::npos) {
      *error = absl::StrCat("'", part, "': ", kExpected);
      return false;
    }
    const absl::string_view key = part.substr(0, equals);
    const absl::string_view value = part.substr(equals + 1);
    if (key == "min" || key == "mean") {
      bool& seen = key == "min" ? have_min : have_mean;
      if (seen) {
        *error = absl::StrCat("duplicate key '", key, "'");
        return false;
      }
      seen = true;
      absl::Duration duration;
      if (!absl::ParseDuration(value, &duration) ||
          duration < absl::ZeroDuration() ||
          duration > absl::Nanoseconds(kMaxInjectedDelayNs)) {
        *error = absl::StrCat(key, ": bad duration '", value,
                              "' (expected 0..10s with a unit: ns, us, ms, s)");
        return false;
      }
      if (key == "min") {
        result.min_ns = absl::ToInt64Nanoseconds(duration);
      } else {
        result.exp_mean_ns = absl::ToDoubleNanoseconds(duration);
      }
    } else if (key == "seed") {
      if (have_seed) {
        *error = "duplicate key 'seed'";
        return false;
      }
      have_seed = true;
      if (!absl::SimpleAtoi(value, &result.seed)) {
        *error = absl::StrCat("seed: bad value '", value,
                              "' (expected a non-negative integer)");
        return false;
      }
    } else {
      *error = absl::StrCat("unknown key '", key,
                            "' (expected min, mean, seed)");
      return false;
    }
  }
  if (!have_min && !have_mean) {
    *error = absl::StrCat("needs min or mean; ", kExpected);
    return false;
  }
  *out = result;
  return true;
}

DelaySampler::DelaySampler(const DelayInjection& delay, uint64_t stream)
    : min_ns_(delay.min_ns),
      exp_mean_ns_(delay.exp_mean_ns),
      state_(delay.seed ^ (stream * 0xD1B54A32D192ED03ULL)) {}

// SplitMix64 (Steele, Lea, Flood 2014): small, fast, and good enough for
// emulated network delays; fully specified, so a seed replays exactly.
uint64_t DelaySampler::NextBits() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

int64_t DelaySampler::NextNs() {
  if (exp_mean_ns_ <= 0) return min_ns_;
  // Inverse transform: u in [0, 1), so log1p(-u) is finite.
  const double u = static_cast<double>(NextBits() >> 11) * 0x1.0p-53;
  return min_ns_ + std::llround(-exp_mean_ns_ * std::log1p(-u));
}

// --- the delay queue --------------------------------------------------------

namespace probe_internal {

// Packets waiting for their due time: a binary min-heap of (due, sequence)
// over fixed slots. All memory is allocated in the constructor.
class DelayQueue {
 public:
  explicit DelayQueue(size_t capacity) : slots_(capacity) {
    heap_.reserve(capacity);
    free_.reserve(capacity);
    for (size_t i = capacity; i > 0; --i) {
      free_.push_back(static_cast<uint32_t>(i - 1));
    }
  }

  bool empty() const { return heap_.empty(); }
  int64_t next_due_ns() const { return heap_.front().due_ns; }

  // False when full.
  bool Push(int64_t due_ns, const uint8_t* packet, const sockaddr_storage* to,
            socklen_t to_len) {
    if (free_.empty()) return false;
    const uint32_t slot = free_.back();
    free_.pop_back();
    std::memcpy(slots_[slot].packet, packet, kProbePacketSize);
    slots_[slot].to_len = to == nullptr ? 0 : to_len;
    if (to != nullptr) std::memcpy(&slots_[slot].to, to, to_len);
    heap_.push_back(Due{due_ns, sequence_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), Later);
    return true;
  }

  // Moves the earliest packet out. Requires !empty().
  void Pop(uint8_t* packet, sockaddr_storage* to, socklen_t* to_len) {
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    const uint32_t slot = heap_.back().slot;
    heap_.pop_back();
    std::memcpy(packet, slots_[slot].packet, kProbePacketSize);
    if (to != nullptr) {
      *to_len = slots_[slot].to_len;
      std::memcpy(to, &slots_[slot].to, slots_[slot].to_len);
    }
    free_.push_back(slot);
  }

 private:
  struct Slot {
    uint8_t packet[kProbePacketSize];
    sockaddr_storage to;
    socklen_t to_len;
  };
  struct Due {
    int64_t due_ns;
    uint64_t sequence;  // Ties leave in arrival order.
    uint32_t slot;
  };
  static bool Later(const Due& a, const Due& b) {
    return a.due_ns != b.due_ns ? a.due_ns > b.due_ns
                                : a.sequence > b.sequence;
  }

  std::vector<Slot> slots_;
  std::vector<Due> heap_;
  std::vector<uint32_t> free_;
  uint64_t sequence_ = 0;
};

}  // namespace probe_internal

// --- responder --------------------------------------------------------------

uint64_t ResponderCounters::malformed_total() const { return Sum(malformed); }

absl::StatusOr<std::unique_ptr<ProbeResponder>> ProbeResponder::Create(
    const Options& options) {
  if (options.time_source == nullptr) {
    return absl::InvalidArgumentError("probe responder: no time_source");
  }
  if (absl::Status s = CheckDelay(options.delay, options.delay_queue_capacity);
      !s.ok()) {
    return s;
  }
  sockaddr_storage address;
  socklen_t address_len = 0;
  if (absl::Status s =
          Resolve(options.listen_address, /*passive=*/true, &address,
                  &address_len);
      !s.ok()) {
    return s;
  }
  absl::Status status;
  const int fd =
      OpenSocket(address, options.listen_address, /*nonblocking=*/false,
                 &status);
  if (fd < 0) return status;
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
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), address_len) !=
      0) {
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
      options, fd, FormatAddress(bound), PortOf(bound)));
}

ProbeResponder::ProbeResponder(const Options& options, int fd,
                               std::string address, uint16_t port)
    : options_(options),
      fd_(fd),
      address_(std::move(address)),
      port_(port),
      delay_sampler_(options.delay, /*stream=*/2) {
  if (options_.delay.enabled) {
    delay_queue_ = std::make_unique<probe_internal::DelayQueue>(
        options_.delay_queue_capacity);
  }
  for (size_t i = 0; i < kBatch; ++i) {
    rx_[i].iov = {rx_[i].data, kRxBufferSize};
    msghdr& rx = rx_msgs_[i].msg_hdr;
    rx.msg_iov = &rx_[i].iov;
    rx.msg_iovlen = 1;
    rx.msg_name = &rx_[i].from;
    rx.msg_namelen = sizeof(rx_[i].from);
    rx.msg_control = rx_[i].control;
    rx.msg_controllen = kControlSize;
    tx_[i].iov = {tx_[i].data, kProbePacketSize};
    msghdr& tx = tx_msgs_[i].msg_hdr;
    tx.msg_iov = &tx_[i].iov;
    tx.msg_iovlen = 1;
    tx.msg_name = &tx_[i].to;
  }
}

ProbeResponder::~ProbeResponder() { close(fd_); }

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
        const timespec timeout = ToTimespec(wait_ns);
        if (wait_ns > 0 && ppoll(&readable, 1, &timeout, nullptr) < 0 &&
            errno != EINTR) {
          return absl::ErrnoToStatus(
              errno, absl::StrCat("probe responder ", address_, ": ppoll"));
        }
        flags = MSG_DONTWAIT;
      }
    }
    const int count = recvmmsg(fd_, rx_msgs_.data(), kBatch, flags, nullptr);
    if (count > 0) {
      const int64_t raw_after_receive_ns = RawNowNs();
      // Calibrating next to the stamps keeps the conversion's rate error at
      // the packets' queueing time (raw_clock.h); it costs a few clock reads
      // per batch.
      realtime_to_raw_.Calibrate();
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
  size_t ready = 0;
  for (int i = 0; i < count; ++i) {
    msghdr& header = rx_msgs_[i].msg_hdr;
    size_t length = rx_msgs_[i].msg_len;
    if ((header.msg_flags & MSG_TRUNC) != 0) length = kRxBufferSize + 1;
    ProbePacket request;
    const DecodeStatus status = DecodeProbe(rx_[i].data, length, &request, Key());
    if (status != DecodeStatus::kOk) {
      Bump(counters_.malformed[static_cast<size_t>(status)]);
    } else if (request.type != ProbeType::kRequest) {
      Bump(counters_.unexpected_type);
    } else {
      TxSlot& tx = tx_[ready];
      tx.raw_receive_ns =
          ReceiveRawNs(header, raw_after_receive_ns, realtime_to_raw_,
                       counters_.rx_timestamp_fallbacks);
      tx.packet = ProbePacket{};
      tx.packet.type = ProbeType::kReply;
      tx.packet.nonce = request.nonce;
      tx.packet.sender_id = options_.node_id;
      tx.packet.t1_ns = request.t1_ns;
      tx.packet.t2_ns = source.GlobalAt(tx.raw_receive_ns).global_ns;
      std::memcpy(&tx.to, &rx_[i].from, header.msg_namelen);
      tx.to_len = header.msg_namelen;
      if (delay_queue_ == nullptr) {
        ++ready;
      } else {
        // Emulated network: t3 is now, the reply leaves when due.
        const int64_t raw_send_ns = RawNowNs();
        const ParentTime now = source.GlobalAt(raw_send_ns);
        tx.packet.t3_ns = now.global_ns;
        tx.packet.parent_state = now.state;
        tx.packet.parent_depth = now.depth;
        tx.packet.parent_bound_ns = now.bound_ns;
        tx.packet.upstream_id = now.upstream_id;
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
    // The kernel overwrote these; restore them for the next recvmmsg.
    header.msg_namelen = sizeof(rx_[i].from);
    header.msg_controllen = kControlSize;
  }
  if (ready == 0) return;
  // t3 as late as possible: one reading for the batch, then encode and send.
  const int64_t raw_send_ns = RawNowNs();
  const ParentTime now = source.GlobalAt(raw_send_ns);
  for (size_t j = 0; j < ready; ++j) {
    TxSlot& tx = tx_[j];
    tx.packet.t3_ns = now.global_ns;
    tx.packet.parent_state = now.state;
    tx.packet.parent_depth = now.depth;
    tx.packet.parent_bound_ns = now.bound_ns;
    tx.packet.upstream_id = now.upstream_id;
    EncodeProbe(tx.packet, tx.data, Key());
  }
  SendPrepared(ready);
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
  size_t done = 0;
  while (done < count) {
    const int sent = sendmmsg(fd_, tx_msgs_.data() + done,
                              static_cast<unsigned>(count - done), MSG_DONTWAIT);
    if (sent > 0) {
      done += static_cast<size_t>(sent);
      Bump(counters_.answered, static_cast<uint64_t>(sent));
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else {
      // The reply at `done` was refused (send buffer full, destination
      // unreachable, ...): drop it, go on with the rest.
      Bump(counters_.send_errors);
      ++done;
    }
  }
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

// --- requester --------------------------------------------------------------

uint64_t RequesterCounters::malformed_total() const { return Sum(malformed); }

absl::StatusOr<std::unique_ptr<ProbeRequester>> ProbeRequester::Create(
    const Options& options) {
  if (options.expiry_ns <= 0) {
    return absl::InvalidArgumentError("probe requester: expiry_ns must be > 0");
  }
  if (absl::Status s = CheckDelay(options.delay, options.delay_queue_capacity);
      !s.ok()) {
    return s;
  }
  sockaddr_storage address;
  socklen_t address_len = 0;
  if (absl::Status s = Resolve(options.parent_address, /*passive=*/false,
                               &address, &address_len);
      !s.ok()) {
    return s;
  }
  absl::Status status;
  const int fd = OpenSocket(address, options.parent_address,
                            /*nonblocking=*/true, &status);
  if (fd < 0) return status;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), address_len) !=
      0) {
    status = absl::ErrnoToStatus(
        errno, absl::StrCat("connect to probe parent '",
                            options.parent_address, "' (",
                            FormatAddress(address), ")"));
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
    delay_queue_ = std::make_unique<probe_internal::DelayQueue>(
        options_.delay_queue_capacity);
  }
  for (size_t i = 0; i < kBatch; ++i) {
    rx_[i].iov = {rx_[i].data, kRxBufferSize};
    msghdr& rx = rx_msgs_[i].msg_hdr;
    rx.msg_iov = &rx_[i].iov;
    rx.msg_iovlen = 1;
    rx.msg_control = rx_[i].control;
    rx.msg_controllen = kControlSize;
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
    const int count = recvmmsg(fd_, rx_msgs_.data(), kBatch, MSG_DONTWAIT,
                               nullptr);
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
    const timespec timeout = ToTimespec(wait_ns);
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
    msghdr& header = rx_msgs_[i].msg_hdr;
    size_t length = rx_msgs_[i].msg_len;
    if ((header.msg_flags & MSG_TRUNC) != 0) length = kRxBufferSize + 1;
    ProbePacket reply;
    const DecodeStatus status = DecodeProbe(rx_[i].data, length, &reply, Key());
    // Restore what the kernel overwrote, for the next recvmmsg.
    const msghdr received = header;
    header.msg_controllen = kControlSize;
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
    const int64_t raw_receive_ns =
        ReceiveRawNs(received, raw_after_receive_ns, realtime_to_raw_,
                     counters_.rx_timestamp_fallbacks);
    ProbeResult result;
    result.sample = hull::ProbeSample{slot->t1_ns, reply.t2_ns, reply.t3_ns,
                                      clock_->LocalAt(raw_receive_ns)};
    result.parent_state = reply.parent_state;
    result.parent_depth = reply.parent_depth;
    result.parent_bound_ns = reply.parent_bound_ns;
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
