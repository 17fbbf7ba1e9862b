// hull/clock_condition.cc: counting clock-condition violations (see
// clock_condition.h).

#include "hull/clock_condition.h"

#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace clocksync::hull {
namespace {

int64_t Saturate(__int128 value) {
  if (value > std::numeric_limits<int64_t>::max()) {
    return std::numeric_limits<int64_t>::max();
  }
  if (value < std::numeric_limits<int64_t>::min()) {
    return std::numeric_limits<int64_t>::min();
  }
  return static_cast<int64_t>(value);
}

}  // namespace

std::string ClockConditionReport::ToString() const {
  std::string out =
      absl::StrCat("clock condition: ", reversed, " of ", messages,
                   " messages received before sent, ", below_min_latency,
                   " within the ", min_latency_ns, " ns minimum latency");
  if (has_worst) {
    absl::StrAppend(&out, "; worst: message ", worst_index, " (",
                    worst.send_process, " -> ", worst.receive_process,
                    "), latency ", worst_latency_ns, " ns, short by ",
                    worst_shortfall_ns, " ns");
  }
  return out;
}

ClockConditionReport CheckClockCondition(
    absl::Span<const MatchedMessage> messages, int64_t min_latency_ns) {
  ClockConditionReport report;
  report.min_latency_ns = min_latency_ns;
  report.messages = static_cast<int64_t>(messages.size());
  __int128 worst_shortfall = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const MatchedMessage& m = messages[i];
    const __int128 latency =
        static_cast<__int128>(m.receive_global_ns) - m.send_global_ns;
    const __int128 shortfall = static_cast<__int128>(min_latency_ns) - latency;
    if (latency < 0) ++report.reversed;
    if (shortfall <= 0) continue;
    ++report.below_min_latency;
    if (!report.has_worst || shortfall > worst_shortfall) {
      report.has_worst = true;
      worst_shortfall = shortfall;
      report.worst_index = static_cast<int64_t>(i);
      report.worst = m;
      report.worst_latency_ns = Saturate(latency);
      report.worst_shortfall_ns = Saturate(shortfall);
    }
  }
  return report;
}

absl::StatusOr<ClockConditionReport> CheckClockCondition(
    absl::Span<const LocalMessage> messages,
    absl::Span<const Correction* const> corrections, int64_t min_latency_ns) {
  auto correction = [&](int32_t process) -> const Correction* {
    if (process < 0 || static_cast<size_t>(process) >= corrections.size()) {
      return nullptr;
    }
    return corrections[static_cast<size_t>(process)];
  };
  std::vector<MatchedMessage> global;
  global.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const LocalMessage& m = messages[i];
    const Correction* send = correction(m.send_process);
    const Correction* receive = correction(m.receive_process);
    if (send == nullptr || receive == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, " (", m.send_process, " -> ",
                       m.receive_process, "): no correction for process ",
                       send == nullptr ? m.send_process : m.receive_process,
                       " of ", corrections.size()));
    }
    global.push_back(MatchedMessage{m.send_process, m.receive_process,
                                    send->ToGlobalNs(m.send_local_ns),
                                    receive->ToGlobalNs(m.receive_local_ns)});
  }
  return CheckClockCondition(global, min_latency_ns);
}

}  // namespace clocksync::hull
