// probe/udp_socket.h: the UDP plumbing the responder and the requester
// share: resolving a probe address (parsed by probe/address.h, the one
// address parser), opening a socket with kernel receive timestamps
// (SO_TIMESTAMPNS) and receive-buffer drop counts (SO_RXQ_OVFL), turning a datagram's stamp into a raw instant, and the
// buffers and loops of batched recvmmsg/sendmmsg calls. Internal to probe/
// (its Bazel target is visible to //probe only).
//
// Receive instants: the kernel stamps each datagram with CLOCK_REALTIME;
// ReceiveRawNs converts the stamp with RealtimeToRaw (raw_clock.h) to the
// middle of its possible range, clipped at a raw reading taken right after
// the receive call, and says how far off it may be; the sample is widened
// by that much on both sides, which keeps the estimator's bound valid
// without biasing it. It uses that reading instead (late: it only looks
// like extra network delay) when the kernel gave no stamp or an
// implausible one (CLOCK_REALTIME was stepped).
//
// Counters: every counter of the responder and the requester has one
// writer, the thread that owns the socket; Bump() is a relaxed load and
// store, and readers on other threads see whole values.
//
// Thread safety: the functions are stateless; an RxBatch belongs to the
// thread that owns its socket. Only OpenProbeSocket() and FormatAddress()
// allocate (set-up only).
#ifndef CLOCKSYNC_PROBE_UDP_SOCKET_H_
#define CLOCKSYNC_PROBE_UDP_SOCKET_H_

#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"

namespace clocksync::probe::probe_internal {

// One count per DecodeStatus (index 0, kOk, stays 0).
using DecodeStatusCounters =
    std::array<std::atomic<uint64_t>, kDecodeStatusCount>;

// Adds `n` to a counter that has one writer (see the file comment).
inline void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n,
                std::memory_order_relaxed);
}

// The sum of all counts.
uint64_t Sum(const DecodeStatusCounters& counters);

inline timespec ToTimespec(int64_t ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return ts;
}

// A UDP socket for a resolved probe address; the caller closes fd.
struct ProbeSocket {
  int fd = -1;
  sockaddr_storage address{};  // The first address "host:port" resolved to.
  socklen_t address_len = 0;
};

// Resolves a probe address "host:port" (parsed by probe/address.h) to its
// first socket address and opens a UDP socket for that family (nonblocking
// if asked) with SO_TIMESTAMPNS on. `passive`: the address is for bind(),
// where an empty host means the wildcard address. Errors name the address.
absl::StatusOr<ProbeSocket> OpenProbeSocket(const std::string& address,
                                            bool passive, bool nonblocking);

// "1.2.3.4:5" or "[::1]:5".
std::string FormatAddress(const sockaddr_storage& address);

// The port of an AF_INET or AF_INET6 address; 0 for another family.
uint16_t PortOf(const sockaddr_storage& address);

// Raw instant a datagram arrived: the kernel's stamp in `header`'s control
// data converted (RealtimeToRaw::ToRawCentered) and checked against
// `raw_after_receive_ns` (a reading taken after the receive call), with
// *uncertainty_ns: the true instant is within ± that of the result (the
// caller widens its sample by it; see hull/probe_sample.h). Without a
// usable stamp: that reading, late-biased, uncertainty 0 (then `fallbacks`
// is bumped).
int64_t ReceiveRawNs(const msghdr& header, int64_t raw_after_receive_ns,
                     const RealtimeToRaw& realtime_to_raw,
                     std::atomic<uint64_t>& fallbacks,
                     int64_t* uncertainty_ns);

// Datagrams the kernel dropped on this socket because its receive buffer
// was full, from a received datagram's SO_RXQ_OVFL control data: sets
// `drops` (one writer) to the socket's cumulative count when present.
void NoteReceiveBufferDrops(const msghdr& header,
                            std::atomic<uint64_t>& drops);

// Hands msgs[0..count) to sendmmsg (retrying on EINTR) until each was sent
// or refused: `sent` counts the datagrams the kernel took, `errors` those it
// refused (send buffer full, destination unreachable, ...), which are
// dropped. With `accepted` (count entries): accepted[i] says whether the
// kernel took msgs[i].
void SendEach(int fd, mmsghdr* msgs, size_t count,
              std::atomic<uint64_t>& sent, std::atomic<uint64_t>& errors,
              bool* accepted = nullptr);

// The buffers of one recvmmsg call of up to N datagrams, each with room for
// the kernel's timestamp and, on an unconnected socket, the sender's
// address. Holds pointers into itself: neither copied nor moved.
template <size_t N>
class RxBatch {
 public:
  static constexpr size_t kBufferSize = 128;  // > kProbePacketSize.
  // Room for SCM_TIMESTAMPNS, SO_RXQ_OVFL and, on a socket with transmit
  // stamps on, the SCM_TIMESTAMPING the kernel adds to received datagrams.
  static constexpr size_t kControlSize = 160;

  // `with_sender`: record each datagram's source address (see sender()).
  explicit RxBatch(bool with_sender) {
    for (size_t i = 0; i < N; ++i) {
      slots_[i].iov = {slots_[i].data, kBufferSize};
      msghdr& header = msgs_[i].msg_hdr;
      header.msg_iov = &slots_[i].iov;
      header.msg_iovlen = 1;
      header.msg_name = with_sender ? &slots_[i].from : nullptr;
      header.msg_control = slots_[i].control;
      Restore(i);
    }
  }
  RxBatch(const RxBatch&) = delete;
  RxBatch& operator=(const RxBatch&) = delete;

  // recvmmsg into the batch: the number of datagrams, or -1 and errno.
  int Receive(int fd, int flags) {
    return recvmmsg(fd, msgs_.data(), N, flags, nullptr);
  }

  const uint8_t* data(size_t i) const { return slots_[i].data; }
  // Datagram i's length; kBufferSize + 1 when the kernel truncated it (so
  // that decoding reports it oversized).
  size_t length(size_t i) const {
    if ((msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0) return kBufferSize + 1;
    return msgs_[i].msg_len;
  }
  // Datagram i's header as the kernel filled it (timestamp, sender).
  const msghdr& header(size_t i) const { return msgs_[i].msg_hdr; }
  // Datagram i's source address, header(i).msg_namelen bytes of it (with
  // `with_sender` only).
  const sockaddr_storage& sender(size_t i) const { return slots_[i].from; }

  // Restores what the kernel overwrote in header i, for the next Receive().
  void Restore(size_t i) {
    msghdr& header = msgs_[i].msg_hdr;
    header.msg_namelen =
        header.msg_name != nullptr ? sizeof(slots_[i].from) : 0;
    header.msg_controllen = kControlSize;
  }

 private:
  struct Slot {
    alignas(8) uint8_t data[kBufferSize];
    alignas(cmsghdr) uint8_t control[kControlSize];
    sockaddr_storage from;
    iovec iov;
  };
  std::array<Slot, N> slots_{};
  std::array<mmsghdr, N> msgs_{};
};

}  // namespace clocksync::probe::probe_internal

#endif  // CLOCKSYNC_PROBE_UDP_SOCKET_H_
