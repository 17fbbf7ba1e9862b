// probe/transport.h: the UDP transport of probes (wire format:
// probe_packet.h, docs/PROBE_PROTOCOL.md).
//
//   ProbeResponder   the parent side: answers requests from a tight loop,
//                    stamping t2 from the kernel's receive timestamp and t3
//                    just before sending. Allocates nothing while serving.
//   ProbeRequester   the child side: sends requests with random nonces,
//                    matches replies by nonce, delivers hull::ProbeSample.
//   GlobalTimeSource what the responder reads its global time from (the
//                    daemon's current mapping; a fake in tests).
//   LocalClock       what the requester stamps t1/t4 with (IdentityClock in
//                    production: the raw clock; a modeled clock in tests).
//   DelayInjection   user-space delays (minimum + exponential) on outgoing
//                    probes and replies, to emulate a network on one host.
//                    Tests and local clusters only; never production.
//
// Timestamps: t1 and t4 are the child's LocalClock at raw instants; t2 and
// t3 are GlobalAt() of raw instants of the parent. Raw instants come from
// CLOCK_MONOTONIC_RAW; receive instants from the kernel's SO_TIMESTAMPNS
// stamp converted by RealtimeToRaw (raw_clock.h), biased late, clamped to a
// raw reading taken right after the receive call, and replaced by that
// reading when the kernel gave no stamp or an implausible one. Send instants
// are read just before the send call, so they are early. Early sends and
// late receives only look like extra network delay: the estimator's bound
// stays valid. With batching (several replies per sendmmsg) the later
// replies of a batch leave later than their t3; at the daemon's probe rates
// batches hold one packet.
//
// Example (parent):
//   ProbeResponder::Options options;
//   options.listen_address = "[::]:3190";
//   options.node_id = my_id;
//   options.time_source = &mapping_source;  // implements GlobalTimeSource
//   absl::StatusOr<std::unique_ptr<ProbeResponder>> responder =
//       ProbeResponder::Create(options);
//   if (!responder.ok()) return responder.status();  // names the address
//   std::thread serving([&] { serve_status = (*responder)->Serve(stop); });
//
// Example (child):
//   ProbeRequester::Options options;
//   options.parent_address = "parent.example:3190";
//   options.node_id = my_id;
//   absl::StatusOr<std::unique_ptr<ProbeRequester>> requester =
//       ProbeRequester::Create(options);
//   if (!requester.ok()) return requester.status();
//   if (absl::Status s = (*requester)->SendProbe(); !s.ok()) log(s);
//   absl::StatusOr<int> n =
//       (*requester)->Poll(100, [&](const ProbeResult& r) {
//         estimator.Add(r.sample);
//       });
//
// Errors are absl::Status values naming the address and the errno text.
#ifndef CLOCKSYNC_PROBE_TRANSPORT_H_
#define CLOCKSYNC_PROBE_TRANSPORT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"
#include "hull/estimator.h"

namespace clocksync::probe {

namespace probe_internal {
class DelayQueue;  // Fixed-capacity queue of delayed packets (the .cc file).
}  // namespace probe_internal

// --- clocks -----------------------------------------------------------------

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

// The child's local clock as a function of the raw clock. Called on the
// requester's thread only. Successive calls may go slightly back in raw time
// (a receive stamp is from the past, a send stamp is now).
class LocalClock {
 public:
  virtual ~LocalClock();
  virtual int64_t LocalAt(int64_t raw_ns) = 0;
};

// Production's local clock: the raw clock itself.
class IdentityClock final : public LocalClock {
 public:
  int64_t LocalAt(int64_t raw_ns) override { return raw_ns; }
};

// --- delay injection --------------------------------------------------------

// User-space delay added to outgoing packets: min_ns plus an exponential
// variable of mean exp_mean_ns, drawn from a generator seeded with `seed`.
struct DelayInjection {
  bool enabled = false;
  int64_t min_ns = 0;
  double exp_mean_ns = 0;
  uint64_t seed = 1;
};

// Parses "min=50us,mean=20us,seed=3" (keys in any order; min and mean are
// durations with a unit as absl::ParseDuration reads them: ns, us, ms, s;
// seed a decimal integer; at least one of min and mean). On success sets
// *out (enabled = true) and returns true; otherwise sets *error to a message
// naming the bad key or value and returns false.
bool ParseDelayInjection(const std::string& spec, DelayInjection* out,
                         std::string* error);

// Draws the delays of a DelayInjection: deterministic for a seed and
// stream (the responder and the requester use different streams).
// Allocation-free; not thread-safe.
class DelaySampler {
 public:
  DelaySampler(const DelayInjection& delay, uint64_t stream);
  // min_ns + Exp(exp_mean_ns), rounded to ns.
  int64_t NextNs();

 private:
  uint64_t NextBits();
  int64_t min_ns_;
  double exp_mean_ns_;
  uint64_t state_;
};

// --- responder (parent side) -----------------------------------------------

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
    // Replies wait min + Exp(mean) after t3 before they are sent.
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
  };

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

 private:
  ProbeResponder(const Options& options, int fd, std::string address,
                 uint16_t port);
  // Handles `count` received datagrams; sends immediate replies.
  void HandleBatch(int count, int64_t raw_after_receive_ns);
  // Sends the encoded replies tx_[0..count) with sendmmsg.
  void SendPrepared(size_t count);
  // Sends the delayed replies due at `raw_now_ns`.
  void SendDue(int64_t raw_now_ns);

  const Options options_;
  // The key to sign and check with, or nullptr.
  const ProbeKeys* Key() const {
    return options_.key.has_value() ? &*options_.key : nullptr;
  }
  const int fd_;
  const std::string address_;
  const uint16_t port_;
  ResponderCounters counters_;
  RealtimeToRaw realtime_to_raw_;
  DelaySampler delay_sampler_;
  std::unique_ptr<probe_internal::DelayQueue> delay_queue_;

  // Receive side: one slot per datagram of a batch.
  static constexpr size_t kRxBufferSize = 128;  // > kProbePacketSize.
  static constexpr size_t kControlSize = 64;
  struct RxSlot {
    alignas(8) uint8_t data[kRxBufferSize];
    alignas(cmsghdr) uint8_t control[kControlSize];
    sockaddr_storage from;
    iovec iov;
  };
  std::array<RxSlot, kBatch> rx_{};
  std::array<mmsghdr, kBatch> rx_msgs_{};
  // Send side.
  struct TxSlot {
    ProbePacket packet;
    int64_t raw_receive_ns;
    uint8_t data[kProbePacketSize];
    sockaddr_storage to;
    socklen_t to_len;
    iovec iov;
  };
  std::array<TxSlot, kBatch> tx_{};
  std::array<mmsghdr, kBatch> tx_msgs_{};
};

// --- requester (child side) -------------------------------------------------

// One answered probe, as the requester delivers it.
struct ProbeResult {
  // t1, t4 on the child's LocalClock; t2, t3 on the parent's global time.
  hull::ProbeSample sample;
  uint8_t parent_state = 0;     // SyncState of the parent at t3 (1..4).
  uint8_t parent_depth = 0;     // Parent's depth, 0 for the master.
  int64_t parent_bound_ns = 0;  // Parent's error bound at t3, ns.
  uint64_t parent_id = 0;       // The parent's node id (reply's sender).
  uint64_t upstream_id = 0;     // The parent's own parent; 0 if none.
};

// Counters of a requester; readable from any thread (see ResponderCounters).
struct RequesterCounters {
  std::atomic<uint64_t> sent{0};      // Requests handed to the kernel.
  std::atomic<uint64_t> answered{0};  // Replies matched and delivered.
  // Requests not answered within expiry_ns (or evicted from a full table).
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> late{0};       // Replies to lost requests.
  std::atomic<uint64_t> duplicate{0};  // Replies to answered requests.
  std::atomic<uint64_t> unknown{0};    // Replies with a nonce never seen.
  // Malformed datagrams by DecodeStatus (index 0, kOk, stays 0).
  std::array<std::atomic<uint64_t>, kDecodeStatusCount> malformed{};
  std::atomic<uint64_t> unexpected_type{0};  // Well-formed requests received.
  // Replies whose echoed t1 differs from the request's (dropped; the
  // request stays outstanding).
  std::atomic<uint64_t> echo_mismatch{0};
  std::atomic<uint64_t> send_errors{0};
  // ICMP port unreachable seen on the socket (parent not listening).
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> delay_queue_drops{0};
  // Replies without a usable kernel timestamp (t4 from a raw reading).
  std::atomic<uint64_t> rx_timestamp_fallbacks{0};

  uint64_t malformed_total() const;
};

// Sends probes to one parent and matches the replies. Not thread-safe: one
// owner calls SendProbe() and Poll(); counters() is safe from any thread.
class ProbeRequester {
 public:
  // Requests awaiting a reply, at most. A probe sent while the table is full
  // evicts the oldest outstanding one, which counts as lost.
  static constexpr size_t kMaxOutstanding = 64;
  // Nonces remembered after an answer (to spot duplicates) and after
  // expiry (to tell late replies from unknown ones).
  static constexpr size_t kRememberedNonces = 64;
  static constexpr size_t kBatch = 16;

  struct Options {
    // The parent's "host:port" ("10.0.0.1:3190", "[fe80::1%eth0]:3190",
    // "parent.example:3190"); resolved once, in Create().
    std::string parent_address;
    // Sent as sender_id in every request.
    uint64_t node_id = 0;
    // Stamps t1 and t4; not owned; must outlive the requester. Null: the
    // raw clock (IdentityClock).
    LocalClock* clock = nullptr;
    // A request unanswered this long after it was sent counts as lost.
    int64_t expiry_ns = 1'000'000'000;
    // Requests wait min + Exp(mean) after t1 before they are sent.
    DelayInjection delay;
    size_t delay_queue_capacity = 256;
    // The tree's shared key: requests are authenticated and only
    // authenticated replies are accepted. None: unauthenticated probes.
    std::optional<ProbeKeys> key;
  };

  // Resolves the address and connects a UDP socket to it (so that only the
  // parent's datagrams arrive). Errors name the address.
  static absl::StatusOr<std::unique_ptr<ProbeRequester>> Create(
      const Options& options);
  ~ProbeRequester();
  ProbeRequester(const ProbeRequester&) = delete;
  ProbeRequester& operator=(const ProbeRequester&) = delete;

  // Sends one request: t1 = clock->LocalAt(RawNowNs()) just before the send
  // call (with delay injection: at enqueue; the request leaves from a later
  // SendProbe() or Poll() call when due). Returns an error naming the
  // address when the kernel refuses the datagram (counted in send_errors).
  absl::Status SendProbe();

  using Callback = absl::FunctionRef<void(const ProbeResult&)>;
  // Waits up to `timeout_ms` (0: does not wait) for datagrams, handles one
  // batch of them, calling `on_reply` for each matched reply, and returns
  // how many it delivered (0 on timeout). Also sends due delayed requests
  // and expires old ones. Errors name the address.
  absl::StatusOr<int> Poll(int timeout_ms, Callback on_reply);

  // Requests awaiting a reply (including delayed ones not yet sent).
  size_t outstanding() const;
  const std::string& parent_address() const { return options_.parent_address; }
  const RequesterCounters& counters() const { return counters_; }

 private:
  struct Outstanding {
    bool used = false;
    uint64_t nonce = 0;
    int64_t t1_ns = 0;
    int64_t expires_raw_ns = 0;
  };
  ProbeRequester(const Options& options, int fd);
  void Expire(int64_t raw_now_ns);
  // Frees a slot (evicting the oldest request when all are used).
  Outstanding* FreeSlot();
  uint64_t NewNonce();
  void Remember(std::array<uint64_t, kRememberedNonces>& ring, size_t& next,
                uint64_t nonce);
  static bool Contains(const std::array<uint64_t, kRememberedNonces>& ring,
                       uint64_t nonce);
  // Sends one encoded request; returns 0 or an errno.
  int SendNow(const uint8_t* data);
  absl::Status SendDue(int64_t raw_now_ns);
  int HandleBatch(int count, int64_t raw_after_receive_ns, Callback on_reply);

  const Options options_;
  // The key to sign and check with, or nullptr.
  const ProbeKeys* Key() const {
    return options_.key.has_value() ? &*options_.key : nullptr;
  }
  const int fd_;
  IdentityClock identity_clock_;
  LocalClock* const clock_;
  RequesterCounters counters_;
  RealtimeToRaw realtime_to_raw_;
  DelaySampler delay_sampler_;
  std::unique_ptr<probe_internal::DelayQueue> delay_queue_;
  absl::BitGen nonce_bits_;

  std::array<Outstanding, kMaxOutstanding> outstanding_{};
  std::array<uint64_t, kRememberedNonces> answered_nonces_{};
  size_t answered_next_ = 0;
  std::array<uint64_t, kRememberedNonces> expired_nonces_{};
  size_t expired_next_ = 0;

  static constexpr size_t kRxBufferSize = 128;
  static constexpr size_t kControlSize = 64;
  struct RxSlot {
    alignas(8) uint8_t data[kRxBufferSize];
    alignas(cmsghdr) uint8_t control[kControlSize];
    iovec iov;
  };
  std::array<RxSlot, kBatch> rx_{};
  std::array<mmsghdr, kBatch> rx_msgs_{};
};

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_TRANSPORT_H_
