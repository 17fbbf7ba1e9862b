// clocksyncd/parent_loss_detector.cc: the loss-aware parent-loss rule
// (parent_loss_detector.h).

#include "clocksyncd/parent_loss_detector.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace clocksync {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

int64_t SecondOf(int64_t ns) { return ns >= 0 ? ns / kSecondNs : -1 - (-ns - 1) / kSecondNs; }

}  // namespace

std::string ValidateParentLossOptions(const ParentLossOptions& o) {
  if (o.missed_probes_for_loss < 1) {
    return absl::StrCat("missed_probes_for_loss: must be >= 1, got ",
                        o.missed_probes_for_loss);
  }
  if (o.probe_interval_ns <= 0) {
    return absl::StrCat("probe_interval_ns: must be > 0, got ", o.probe_interval_ns);
  }
  if (!(o.false_loss_probability > 0 && o.false_loss_probability < 1)) {
    return absl::StrCat("false_loss_probability: must be in (0, 1), got ",
                        o.false_loss_probability);
  }
  if (!(o.max_loss_ratio > 0 && o.max_loss_ratio < 1)) {
    return absl::StrCat("max_loss_ratio: must be in (0, 1), got ", o.max_loss_ratio);
  }
  if (o.min_probes_for_ratio < 1) {
    return absl::StrCat("min_probes_for_ratio: must be >= 1, got ",
                        o.min_probes_for_ratio);
  }
  if (o.loss_window_ns < kSecondNs || o.loss_window_ns > 100 * kSecondNs) {
    return absl::StrCat("loss_window_ns: must be 1..100 s, got ", o.loss_window_ns);
  }
  if (o.heartbeat_alive_ns < 0 || o.probe_silence_cap_ns <= 0) {
    return "heartbeat_alive_ns, probe_silence_cap_ns: must be >= 0 and > 0";
  }
  return "";
}

ParentLossDetector::ParentLossDetector(ParentLossOptions options)
    : options_(options) {}

void ParentLossDetector::Reset(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<double> ratio = LossRatioLocked();
  if (ratio) prior_ratio_ = ratio;
  buckets_.fill(Bucket{});
  reset_ns_ = now_ns;
  last_answer_ns_ = 0;
  last_heartbeat_ns_ = 0;
}

ParentLossDetector::Bucket& ParentLossDetector::BucketAtLocked(int64_t now_ns) {
  const int64_t second = SecondOf(now_ns);
  Bucket& b = buckets_[static_cast<size_t>(((second % kBuckets) + kBuckets) % kBuckets)];
  if (b.second != second) b = Bucket{second, 0, 0};
  return b;
}

void ParentLossDetector::OnProbeSent(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ++BucketAtLocked(now_ns).sent;
}

void ParentLossDetector::OnProbeAnswered(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ++BucketAtLocked(now_ns).answered;
  last_answer_ns_ = std::max(last_answer_ns_, now_ns);
}

void ParentLossDetector::OnHeartbeatAnswered(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  last_heartbeat_ns_ = std::max(last_heartbeat_ns_, now_ns);
}

std::optional<double> ParentLossDetector::RatioOverLocked(int64_t seconds) const {
  if (last_answer_ns_ == 0) return std::nullopt;
  // Whole seconds before the one of the last answer: the current silence
  // (which may be the parent's death) is not part of the measure.
  const int64_t end = SecondOf(last_answer_ns_);
  const int64_t begin = end - seconds;
  uint64_t sent = 0, answered = 0;
  for (const Bucket& b : buckets_) {
    if (b.second >= begin && b.second < end) {
      sent += b.sent;
      answered += b.answered;
    }
  }
  if (sent < static_cast<uint64_t>(options_.min_probes_for_ratio)) return std::nullopt;
  // Replies counted in the second after their probe can exceed the probes
  // of the window by one or two.
  return 1.0 - std::min(1.0, static_cast<double>(answered) / static_cast<double>(sent));
}

std::optional<double> ParentLossDetector::LossRatioLocked() const {
  // The worse of the recent and the long view: loss that sets in is seen
  // within seconds, loss that comes and goes is remembered for a minute.
  const std::optional<double> recent = RatioOverLocked(kRecentSeconds);
  const std::optional<double> longer = RatioOverLocked(options_.loss_window_ns / kSecondNs);
  if (recent && longer) return std::max(*recent, *longer);
  if (recent || longer) return recent ? recent : longer;
  // Too few exchanges with this parent yet: what the path to the last one
  // showed, if anything.
  return prior_ratio_;
}

std::optional<double> ParentLossDetector::LossRatio() const {
  std::lock_guard<std::mutex> lock(mu_);
  return LossRatioLocked();
}

int64_t ParentLossDetector::SilenceThresholdLocked() const {
  int64_t probes = options_.missed_probes_for_loss;
  const std::optional<double> ratio = LossRatioLocked();
  if (ratio && *ratio > 0) {
    const double p = std::min(*ratio, options_.max_loss_ratio);
    const double needed = std::ceil(std::log(options_.false_loss_probability) / std::log(p));
    probes = std::max<int64_t>(probes, static_cast<int64_t>(needed));
  }
  return probes * options_.probe_interval_ns;
}

int64_t ParentLossDetector::SilenceThresholdNs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return SilenceThresholdLocked();
}

int64_t ParentLossDetector::LastAnswerNs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::max(last_answer_ns_, reset_ns_);
}

bool ParentLossDetector::AnsweredSinceReset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_answer_ns_ != 0;
}

std::optional<std::string> ParentLossDetector::Check(int64_t now_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t silence_ns = now_ns - std::max(last_answer_ns_, reset_ns_);
  const int64_t threshold_ns = SilenceThresholdLocked();
  if (silence_ns <= threshold_ns) return std::nullopt;
  const bool heartbeats_answered =
      last_heartbeat_ns_ != 0 && now_ns - last_heartbeat_ns_ <= options_.heartbeat_alive_ns;
  if (heartbeats_answered && silence_ns <= options_.probe_silence_cap_ns) {
    return std::nullopt;
  }
  const std::optional<double> ratio = LossRatioLocked();
  return absl::StrCat(
      "no probe answered for ", silence_ns / 1'000'000, " ms (threshold ",
      threshold_ns / 1'000'000, " ms",
      ratio ? absl::StrCat(" at ", static_cast<int>(*ratio * 100 + 0.5),
                           " % exchanges lost before")
            : std::string(),
      ")",
      heartbeats_answered
          ? absl::StrCat(" while heartbeats are answered: its probe port is "
                         "unreachable for longer than ",
                         options_.probe_silence_cap_ns / 1'000'000, " ms")
          : std::string(", and no heartbeat answered"));
}

}  // namespace clocksync
