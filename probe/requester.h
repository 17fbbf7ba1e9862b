// probe/requester.h: the child side of the probe protocol (wire format:
// probe/packet.h, docs/PROBE_PROTOCOL.md): ProbeRequester sends requests
// with random nonces to one parent, matches the replies by nonce and
// delivers each answer as a ProbeResult.
//
//   ProbeRequester  connects a UDP socket to the parent; SendProbe(), Poll().
//   ProbeResult     one answered probe: the hull::ProbeSample and who
//                   answered it.
//   LocalClock      what the requester stamps t1/t4 with (IdentityClock in
//                   production: the raw clock; a modeled clock in tests).
//
// Timestamps: t1 and t4 are the child's LocalClock at raw instants
// (CLOCK_MONOTONIC_RAW); t2 and t3 are the parent's global time
// (probe/responder.h). t1 is the kernel's transmit stamp of the request
// (probe/tx_stamps.h, converted early), or a reading just before the send
// call where the kernel gives none; t4 comes from the kernel's receive
// stamp, biased late (probe/udp_socket.h). Both only look like extra network
// delay.
//
// Interleaved mode (version 2, Options::interleaved): each request names
// the last answered exchange (prev_nonce) and the parent's reply carries
// the kernel's transmit stamp of its reply to it (prev_t3_ns). The
// requester holds each answered exchange until the next reply and delivers
// it then with that stamp as t3, so samples arrive one probe late but with
// all four stamps from the kernels. An exchange whose stamp does not come
// (a version-1 parent, a lost reply, a parent without transmit stamps) is
// delivered with the parent's user-space t3, at the next reply or after
// expiry_ns. A parent that never answers version 2 (an older daemon) gets
// version-1 requests after kV1FallbackLosses losses, with one version-2
// request in kV2RetryEvery to notice an upgrade.
//
// Example:
//   ProbeRequester::Options options;
//   options.parent_address = "parent.example:3190";
//   options.node_id = my_id;
//   absl::StatusOr<std::unique_ptr<ProbeRequester>> requester =
//       ProbeRequester::Create(options);
//   if (!requester.ok()) return requester.status();
//   if (absl::Status s = (*requester)->SendProbe(); !s.ok()) log(s);
//   absl::StatusOr<int> n =
//       (*requester)->Poll(100, [&](const ProbeResult& r) {
//         estimator.Add(r.sample);  // the parent's bound included
//       });
//
// Errors are absl::Status values naming the address and the errno text.
#ifndef CLOCKSYNC_PROBE_REQUESTER_H_
#define CLOCKSYNC_PROBE_REQUESTER_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hull/estimator.h"
#include "probe/auth.h"
#include "probe/delay_injection.h"
#include "probe/packet.h"
#include "probe/raw_clock.h"
#include "probe/tx_stamps.h"
#include "probe/udp_socket.h"

namespace clocksync::probe {

// One answered probe, as the requester delivers it. Each value of the reply
// lives in one place: the four timestamps and the parent's error bound in
// `sample` (what the estimator takes as is), the rest says who answered and
// in what state. (It keeps the name ProbeResult, so callers only lost the
// duplicate parent_bound_ns: read sample.parent_bound_ns.)
struct ProbeResult {
  // t1, t4 on the child's LocalClock; t2, t3 on the parent's global time;
  // parent_bound_ns: the parent's error bound at t3, ns.
  hull::ProbeSample sample;
  uint8_t parent_state = 0;  // SyncState of the parent at t3 (1..4).
  uint8_t parent_depth = 0;  // Parent's depth, 0 for the master.
  uint64_t parent_id = 0;    // The parent's node id (reply's sender).
  uint64_t upstream_id = 0;  // The parent's own parent; 0 if none.
  // Where t1 and t3 come from: the kernels' transmit stamps (true), or
  // readings before the send calls (false).
  bool kernel_t1 = false;
  bool kernel_t3 = false;
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

// Counters of a requester. Written by the owner's thread only, readable from
// any thread at any time (relaxed atomics; each counter is exact, a set of
// them read together may be from slightly different moments).
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
  // Datagrams the kernel dropped because the socket's receive buffer was
  // full (SO_RXQ_OVFL; as of the last datagram received).
  std::atomic<uint64_t> receive_buffer_drops{0};
  // Kernel transmit stamps used as t1, and those dropped (no request
  // awaiting one, or implausible).
  std::atomic<uint64_t> tx_stamps{0};
  std::atomic<uint64_t> tx_stamps_rejected{0};
  // Samples delivered with the parent's kernel transmit stamp as t3, and
  // those delivered with its user-space t3 in interleaved mode.
  std::atomic<uint64_t> interleaved{0};
  std::atomic<uint64_t> interleave_misses{0};
  // Previous stamps that did not fit their exchange (before its t2, long
  // after its t3, or late enough to make its round trip negative even
  // with the sample's widening): ignored.
  std::atomic<uint64_t> bad_previous_stamps{0};
  // Times the requester fell back to version-1 requests.
  std::atomic<uint64_t> version1_fallbacks{0};

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
  // Datagrams received per system call, at most.
  static constexpr size_t kBatch = 16;
  // Version-2 requests lost in a row, with no version-2 reply ever, after
  // which the parent is taken for a version-1 one.
  static constexpr int kV1FallbackLosses = 4;
  // After that fallback, one request in this many is version 2 again.
  static constexpr uint64_t kV2RetryEvery = 64;

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
    // Requests wait min + Exp(mean) after t1 before they are sent (tests).
    DelayInjection delay;
    size_t delay_queue_capacity = 256;
    // The tree's shared key: requests are authenticated and only
    // authenticated replies are accepted. None: unauthenticated probes.
    std::optional<ProbeKeys> key;
    // t1 from the kernel's transmit stamp where it gives one. Off with
    // delay injection (the injected delay stands for the wire, which
    // begins after the kernel's stamp).
    bool kernel_tx_stamps = true;
    // Version-2 requests and interleaved samples (see the file comment);
    // false: version 1, each sample delivered with its own reply.
    bool interleaved = true;
    // Before each request, send one byte through the host's UDP stack to a
    // socket of our own on the loopback and read it back, so that the
    // request's path from its transmit stamp to the parent's receive stamp
    // runs with warm caches, as the parent's reply (sent right after it
    // received) does. After an idle probe interval the cold path took up
    // to a few µs longer one way (loopback, this host), which biased the
    // offset by half that. With kernel transmit stamps only.
    bool warm_up = true;
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

  // Delivers the exchange held for its transmit stamp (interleaved mode)
  // now, with the parent's user-space t3; returns 1 if there was one, else
  // 0. For callers that stop probing (a tracer's sync session at its end).
  int Flush(Callback on_reply) { return FlushHeld(on_reply); }

  // Requests awaiting a reply (including delayed ones not yet sent).
  size_t outstanding() const;
  const std::string& parent_address() const { return options_.parent_address; }
  const RequesterCounters& counters() const { return counters_; }
  // Whether t1 comes from kernel transmit stamps (asked for, and the kernel
  // agreed).
  bool kernel_tx_stamps() const { return tx_stamps_.enabled(); }
  // The connected socket, for diagnostics (its local address); owned.
  int socket_fd() const { return fd_; }
  // Whether requests go out as version 2 now (not fallen back).
  bool sending_version2() const { return options_.interleaved && !use_v1_; }
  // Replaces Options::key (a reload): later requests are signed with the
  // new key and replies checked against it. From the thread that sends and
  // polls.
  void SetKey(const std::optional<ProbeKeys>& key) { key_ = key; }

 private:
  struct Outstanding {
    bool used = false;
    uint64_t nonce = 0;
    uint8_t version = kProbeVersion1;
    int64_t t1_echo_ns = 0;  // As sent, to check the echo.
    int64_t t1_ns = 0;       // Best t1: the kernel's stamp when it came.
    bool kernel_t1 = false;
    bool awaiting_stamp = false;
    uint32_t tx_key = 0;
    int64_t raw_send_ns = 0;  // Read before the send call.
    int64_t expires_raw_ns = 0;
  };
  // An answered exchange held for the next reply's transmit stamp.
  struct Held {
    bool valid = false;
    uint64_t nonce = 0;
    int64_t raw_receive_ns = 0;
    ProbeResult result;
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
  // Sends one encoded request; returns 0 or an errno. *attempts: send
  // calls made (refused ones retried).
  int SendNow(const uint8_t* data, int* attempts = nullptr);
  absl::Status SendDue(int64_t raw_now_ns);
  int HandleBatch(int count, int64_t raw_after_receive_ns, Callback on_reply);
  void DrainTxStamps();
  void OnTxStamp(uint32_t key, int64_t realtime_ns);
  // Delivers the held exchange with its user-space t3, if any.
  int FlushHeld(Callback on_reply);
  // Takes the parent's transmit stamp of the held exchange's reply as its
  // t3 when it fits.
  void CompleteHeld(int64_t prev_t3_ns);

  const Options options_;
  // The key to sign and check with, or nullptr.
  const ProbeKeys* Key() const { return key_.has_value() ? &*key_ : nullptr; }
  std::optional<ProbeKeys> key_;
  const int fd_;
  int warm_fd_ = -1;  // Options::warm_up: a UDP socket connected to itself.
  probe_internal::TxStamps warm_stamps_;
  void WarmUp();
  IdentityClock identity_clock_;
  LocalClock* const clock_;
  RequesterCounters counters_;
  RealtimeToRaw realtime_to_raw_;
  DelaySampler delay_sampler_;
  std::unique_ptr<DelayQueue> delay_queue_;  // With delay injection only.
  absl::BitGen nonce_bits_;

  probe_internal::TxStamps tx_stamps_;
  Held held_;
  bool use_v1_ = false;          // Fallen back to version 1.
  bool v2_answered_ = false;     // A version-2 reply came, ever.
  int v2_losses_in_a_row_ = 0;
  uint64_t requests_ = 0;

  std::array<Outstanding, kMaxOutstanding> outstanding_{};
  std::array<uint64_t, kRememberedNonces> answered_nonces_{};
  size_t answered_next_ = 0;
  std::array<uint64_t, kRememberedNonces> expired_nonces_{};
  size_t expired_next_ = 0;

  // The replies of one recvmmsg (a connected socket: no sender needed).
  probe_internal::RxBatch<kBatch> rx_{/*with_sender=*/false};
};

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_REQUESTER_H_
