// probe/responder.h: the parent side of the probe protocol (wire format:
// probe/packet.h, docs/PROBE_PROTOCOL.md): ProbeResponder answers requests
// from a tight loop, stamping t2 from the kernel's receive timestamp and t3
// just before sending, and (version 2, interleaved) passing each child the
// kernel's transmit stamp of its previous reply. Allocates nothing while
// serving.
//
//   ProbeResponder    binds a UDP socket and answers until told to stop.
//   GlobalTimeSource  what the responder reads its global time from (the
//                     daemon's current mapping; a fake in tests).
//   ReplyObserver     an optional hook on every reply (the benchmark's
//                     turnaround histogram).
//
// Timestamps: t2 and t3 are GlobalAt() of raw instants (CLOCK_MONOTONIC_RAW).
// The receive instant comes from the kernel's stamp, biased late
// (probe/udp_socket.h); the send instant is read just before the send call,
// so it is early. Early sends and late receives only look like extra network
// delay: the child's estimator bound stays valid. With kernel transmit
// stamps (Options::kernel_tx_stamps) the responder also records when each
// reply really left (probe/tx_stamps.h, converted early) under its nonce,
// and a version-2 request naming that nonce (prev_nonce) gets it back as
// prev_t3_ns: the child then has all four stamps from the kernels. With batching (several
// replies per sendmmsg) the later replies of a batch leave later than their
// t3; at the daemon's probe rates batches hold one packet.
//
// Example:
//   ProbeResponder::Options options;
//   options.listen_address = "[::]:3190";
//   options.node_id = my_id;
//   options.time_source = &mapping_source;  // implements GlobalTimeSource
//   absl::StatusOr<std::unique_ptr<ProbeResponder>> responder =
//       ProbeResponder::Create(options);
//   if (!responder.ok()) return responder.status();  // names the address
//   std::thread serving([&] { serve_status = (*responder)->Serve(stop); });
//
// Errors are absl::Status values naming the address and the errno text.
#ifndef CLOCKSYNC_PROBE_RESPONDER_H_
#define CLOCKSYNC_PROBE_RESPONDER_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probe/auth.h"
#include "probe/delay_injection.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"
#include "probe/source_rate_limiter.h"
#include "probe/tx_stamps.h"
#include "probe/udp_socket.h"

namespace clocksync::probe {

// The responder's view of its global time at one raw instant, with the state
// it reports to its children.
struct ParentTime {
  // Global time at the raw instant, ns.
  int64_t global_ns = 0;
  // SyncState (kProbeState*, 1..4).
  uint8_t state = kProbeStateUnsynced;
  // Depth in the tree, 0 for the master.
  uint8_t depth = 0;
  // Half-width of [earliest, latest] at the raw instant, ns, including the
  // bounds of every node above; >= 0.
  int64_t bound_ns = 0;
  // Node id of this node's own parent; 0 for the master.
  uint64_t upstream_id = 0;
};

// Where a ProbeResponder gets global time. Called from the Serve() thread,
// twice per request; implementations must be thread-safe against whoever
// updates them (the daemon's sync loop) and should be fast (a seqlock read).
class GlobalTimeSource {
 public:
  virtual ~GlobalTimeSource();
  virtual ParentTime GlobalAt(int64_t raw_ns) const = 0;
};

// Called on the Serve() thread for every reply sent, with the responder's
// turnaround: raw instant of t3 minus raw instant of t2, ns. Optional (the
// benchmark records a histogram); when none is set it costs one branch.
class ReplyObserver {
 public:
  virtual ~ReplyObserver();
  virtual void OnReply(int64_t turnaround_ns) = 0;
};

// Counters of a responder. Written by the Serve() thread only, readable from
// any thread at any time (relaxed atomics; each counter is exact, a set of
// them read together may be from slightly different moments).
struct ResponderCounters {
  std::atomic<uint64_t> received{0};  // Datagrams received.
  std::atomic<uint64_t> answered{0};  // Replies handed to the kernel.
  // Malformed datagrams by DecodeStatus (index 0, kOk, stays 0).
  std::array<std::atomic<uint64_t>, kDecodeStatusCount> malformed{};
  std::atomic<uint64_t> unexpected_type{0};  // Well-formed replies received.
  std::atomic<uint64_t> send_errors{0};      // sendmmsg refused a reply.
  std::atomic<uint64_t> delay_queue_drops{0};  // Delay queue was full.
  // Requests without a usable kernel timestamp (t2 from a raw reading).
  std::atomic<uint64_t> rx_timestamp_fallbacks{0};
  // Datagrams the kernel dropped because the socket's receive buffer was
  // full (SO_RXQ_OVFL; as of the last datagram received).
  std::atomic<uint64_t> receive_buffer_drops{0};
  // Datagrams over their source host's budget (SourceRateLimiter).
  std::atomic<uint64_t> rate_limited{0};
  // Kernel transmit stamps recorded for replies sent.
  std::atomic<uint64_t> tx_stamps{0};
  // Transmit stamps dropped: no matching send, or implausible (a realtime
  // step between send and stamp).
  std::atomic<uint64_t> tx_stamps_rejected{0};
  // Version-2 replies that carried the transmit stamp asked for, and those
  // that could not (the stamp is unknown or was overwritten).
  std::atomic<uint64_t> interleaved{0};
  std::atomic<uint64_t> interleave_misses{0};

  uint64_t malformed_total() const;
};

// Answers probe requests on one UDP socket. Create() binds; Serve() answers
// until `stop` becomes true. One thread calls Serve(); counters() and port()
// are safe from any thread.
class ProbeResponder {
 public:
  // Datagrams received or replies sent per system call, at most.
  static constexpr size_t kBatch = 32;

  struct Options {
    // "host:port" to bind: "0.0.0.0:3190", "[::]:3190", "127.0.0.1:0",
    // ":3190" (wildcard). Port 0 picks an ephemeral port (see port()).
    std::string listen_address;
    // Sent as sender_id in every reply.
    uint64_t node_id = 0;
    // Required; not owned; must outlive the responder.
    const GlobalTimeSource* time_source = nullptr;
    // Replies wait min + Exp(mean) after t3 before they are sent (tests).
    DelayInjection delay;
    // Replies the delay queue holds; more are dropped and counted.
    size_t delay_queue_capacity = 4096;
    // SO_RCVBUF in bytes; 0 leaves the system default.
    int receive_buffer_bytes = 0;
    // Optional; not owned; must outlive the responder.
    ReplyObserver* observer = nullptr;
    // The tree's shared key: answers only authenticated requests and
    // authenticates its replies. None: unauthenticated probes only.
    std::optional<ProbeKeys> key;
    // Record kernel transmit stamps of replies and answer version-2
    // requests with them (interleaved). Off with delay injection: injected
    // delays stand for the wire, which begins after the kernel's stamp.
    bool kernel_tx_stamps = true;
    // Budget of each source host (docs/PROBE_PROTOCOL.md, "Who is
    // answered"); datagrams beyond it are dropped undecoded and counted.
    SourceRateLimiter::Options per_source_limit;
  };

  // Transmit stamps remembered, by nonce: a child asks for its previous
  // reply's within a probe interval, so this many children can probe at
  // once without losing interleaving.
  static constexpr size_t kStampTableSize = 4096;

  // Binds the socket and enables SO_TIMESTAMPNS. Errors name the address.
  static absl::StatusOr<std::unique_ptr<ProbeResponder>> Create(
      const Options& options);
  ~ProbeResponder();
  ProbeResponder(const ProbeResponder&) = delete;
  ProbeResponder& operator=(const ProbeResponder&) = delete;

  // Answers requests until `stop` is true (checked at least every 100 ms).
  // Returns OK when stopped, or an error naming the address when the socket
  // fails. Allocates nothing while it runs. Replies still in the delay
  // queue at stop stay there (a later Serve() sends them when due). May be
  // called again after it returned, never concurrently.
  absl::Status Serve(const std::atomic<bool>& stop);

  // The bound port (the ephemeral one when asked for port 0).
  uint16_t port() const { return port_; }
  // The bound address, "ip:port" or "[ip6]:port".
  const std::string& address() const { return address_; }
  const ResponderCounters& counters() const { return counters_; }
  // Whether replies get kernel transmit stamps (asked for, and the kernel
  // agreed).
  bool kernel_tx_stamps() const { return tx_stamps_.enabled(); }

  // Replaces Options::key (a reload): every batch Serve() handles after
  // this returns is checked and answered with the new key. Safe from any
  // thread.
  void SetKey(const std::optional<ProbeKeys>& key);

 private:
  ProbeResponder(const Options& options, int fd, std::string address,
                 uint16_t port);
  // Handles `count` received datagrams; sends immediate replies.
  void HandleBatch(int count, int64_t raw_after_receive_ns);
  // Sends the encoded replies tx_[0..count) with sendmmsg.
  void SendPrepared(size_t count);
  // Sends the delayed replies due at `raw_now_ns`.
  void SendDue(int64_t raw_now_ns);
  struct TxSlot;
  static void WidenForT2(TxSlot& tx);
  // Moves the kernel's transmit stamps into stamp_table_.
  void DrainTxStamps();
  void OnTxStamp(uint32_t key, int64_t realtime_ns);
  // The transmit time recorded for the reply to `nonce` (nonzero), global
  // ns, into *t3_ns; false when there is none.
  bool LookUpStamp(uint64_t nonce, int64_t* t3_ns) const;

  const Options options_;
  // The key to sign and check with, or nullptr (Serve() thread).
  const ProbeKeys* Key() const { return key_.has_value() ? &*key_ : nullptr; }
  // Takes a key SetKey() left, if any (Serve() thread; no allocation).
  void TakeNewKey();
  std::optional<ProbeKeys> key_;
  std::mutex new_key_mu_;
  std::optional<ProbeKeys> new_key_;  // Guarded by new_key_mu_.
  std::atomic<bool> new_key_pending_{false};
  const int fd_;
  const std::string address_;
  const uint16_t port_;
  ResponderCounters counters_;
  SourceRateLimiter rate_limiter_;
  RealtimeToRaw realtime_to_raw_;
  DelaySampler delay_sampler_;
  std::unique_ptr<DelayQueue> delay_queue_;  // With delay injection only.

  // Receive side: the requests of one recvmmsg, with their senders.
  probe_internal::RxBatch<kBatch> rx_{/*with_sender=*/true};
  // Send side.
  struct TxSlot {
    ProbePacket packet;
    int64_t raw_receive_ns;
    int64_t receive_uncertainty_ns;  // Added to the reply's bound.
    uint8_t data[kProbePacketSize];
    sockaddr_storage to;
    socklen_t to_len;
    iovec iov;
  };
  std::array<TxSlot, kBatch> tx_{};
  std::array<mmsghdr, kBatch> tx_msgs_{};
  std::array<bool, kBatch> tx_accepted_{};

  // Transmit stamps: replies sent whose stamp has not come yet, by key
  // modulo kAwaiting, and the stamps that came, by nonce.
  probe_internal::TxStamps tx_stamps_;
  struct Awaiting {
    bool used = false;
    uint32_t key = 0;
    uint64_t nonce = 0;
    int64_t raw_send_ns = 0;  // Read before the send: the stamp is later.
  };
  static constexpr size_t kAwaiting = 64;
  std::array<Awaiting, kAwaiting> awaiting_{};
  struct Stamp {
    uint64_t nonce = 0;
    int64_t t3_ns = 0;
  };
  std::unique_ptr<std::array<Stamp, kStampTableSize>> stamp_table_;
};

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_RESPONDER_H_
