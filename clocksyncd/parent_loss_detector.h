// clocksyncd/parent_loss_detector.h: decides when a node's parent is lost,
// from the answers to its probes (UDP) and to its heartbeats (gRPC).
//
// A fixed count of missed probes is a poor detector on a lossy path: at 30 %
// loss each way (51 % of exchanges lost) ten misses in a row come once every
// 80 s at 10 probes/s, and a node that leaves a live parent for that only
// lands on another lossy one. So:
//   - the silence that counts as loss grows with the loss measured before
//     it: the run of misses must be one a live parent would show with
//     probability below false_loss_probability (p^k < 1e-6 at loss ratio p),
//     never shorter than missed_probes_for_loss intervals;
//   - a parent whose heartbeats are answered is alive: probe silence alone
//     then loses it only after probe_silence_cap_ns (its probe port is
//     unreachable, say), not at the first long run of misses.
//
// Thread safety: every method may be called from any thread (one mutex;
// called at most a few times per probe).
#ifndef CLOCKSYNC_CLOCKSYNCD_PARENT_LOSS_DETECTOR_H_
#define CLOCKSYNC_CLOCKSYNCD_PARENT_LOSS_DETECTOR_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace clocksync {

struct ParentLossOptions {
  // The shortest silence that counts as loss, in probe intervals.
  int missed_probes_for_loss = 10;
  int64_t probe_interval_ns = 100'000'000;
  // Largest chance that a live parent's run of lost exchanges is taken for
  // its loss, per probe.
  double false_loss_probability = 1e-6;
  // Loss ratios above this are taken as this (a dead parent's tail must not
  // stretch the threshold without end): 0.95 allows 270 intervals.
  double max_loss_ratio = 0.95;
  // Fewer exchanges than this in the window: the loss ratio is unknown and
  // the silence threshold is missed_probes_for_loss intervals.
  int min_probes_for_ratio = 20;
  // The window over which the loss ratio is measured.
  int64_t loss_window_ns = 60'000'000'000;
  // A heartbeat answered this recently proves the parent alive.
  int64_t heartbeat_alive_ns = 1'000'000'000;
  // Probe silence that loses even a parent answering heartbeats.
  int64_t probe_silence_cap_ns = 30'000'000'000;
};

// "" when valid, else "field: reason".
std::string ValidateParentLossOptions(const ParentLossOptions& options);

class ParentLossDetector {
 public:
  explicit ParentLossDetector(ParentLossOptions options);

  // A new parent (or none) from now on: forgets the old one's history but
  // for its loss ratio, a prior for the new one.
  void Reset(int64_t now_ns);
  void OnProbeSent(int64_t now_ns);
  void OnProbeAnswered(int64_t now_ns);
  void OnHeartbeatAnswered(int64_t now_ns);

  // Ratio of probes unanswered before the current silence, 0..1: the larger
  // of the last 10 s and the last loss_window_ns; the previous parent's
  // while too few were sent to this one; nullopt when nothing is known.
  std::optional<double> LossRatio() const;
  // The silence after which the parent is lost, now.
  int64_t SilenceThresholdNs() const;
  // Time of the last answer (or of the Reset, if none since), raw ns.
  int64_t LastAnswerNs() const;
  // Whether any probe was answered since the last Reset.
  bool AnsweredSinceReset() const;

  // Why the parent counts as lost at now_ns, or nullopt if it does not.
  std::optional<std::string> Check(int64_t now_ns) const;

 private:
  struct Bucket {
    int64_t second = -1;
    uint32_t sent = 0;
    uint32_t answered = 0;
  };
  static constexpr int kBuckets = 128;  // Seconds; above loss_window_ns.
  static constexpr int64_t kRecentSeconds = 10;

  Bucket& BucketAtLocked(int64_t now_ns);
  std::optional<double> RatioOverLocked(int64_t seconds) const;
  std::optional<double> LossRatioLocked() const;
  int64_t SilenceThresholdLocked() const;

  const ParentLossOptions options_;
  mutable std::mutex mu_;
  std::array<Bucket, kBuckets> buckets_{};
  int64_t reset_ns_ = 0;
  int64_t last_answer_ns_ = 0;   // 0: none since the reset.
  int64_t last_heartbeat_ns_ = 0;
  // The loss ratio to the previous parent (the same network, most likely),
  // used until the new one has been probed enough.
  std::optional<double> prior_ratio_;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_PARENT_LOSS_DETECTOR_H_
