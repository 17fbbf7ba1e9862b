// The Perfetto export parsed back with the generated classes of
// trace/perfetto_trace.proto, on the synthetic two-process trace: tracks,
// slices per thread at the timeline's global times, interned names, flows
// from every matched send to its receive, the size against the Chrome JSON,
// and the error for negative global times.

#include "trace/perfetto_export.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hull/trace_stamp.h"
#include "trace/export.h"
#include "trace/otf2_reader.h"
#include "trace/perfetto_trace.pb.h"
#include "trace/synthetic_trace.h"

namespace clocksync::trace {
namespace {

using perfetto::protos::Trace;
using perfetto::protos::TracePacket;
using perfetto::protos::TrackEvent;

std::vector<ProcessTrace> SyntheticTraces() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/perfetto_synthetic";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::StatusOr<SyntheticAnswers> written = WriteSyntheticTraces(dir);
  EXPECT_TRUE(written.ok()) << written.status();
  std::vector<ProcessTrace> traces;
  for (const std::string& archive : {written->rank0_dir, written->rank1_dir}) {
    absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(archive);
    EXPECT_TRUE(trace.ok()) << trace.status();
    traces.push_back(*std::move(trace));
  }
  return traces;
}

TEST(PerfettoExport, ParsesBackWithEveryEventFlowAndTrack) {
  const std::vector<ProcessTrace> traces = SyntheticTraces();
  ASSERT_EQ(traces.size(), 2u);
  absl::StatusOr<Timeline> timeline =
      BuildTimeline(traces, hull::CorrectionKind::kOnline);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  absl::StatusOr<MessageMatch> messages = MatchMessages(traces);
  ASSERT_TRUE(messages.ok()) << messages.status();
  ASSERT_GT(messages->pairs.size(), 100u);

  std::ostringstream out;
  ASSERT_TRUE(WritePerfettoTrace(traces, *timeline, *messages, out).ok());
  Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(out.str()));

  // Tracks: a process per rank, a thread per thread, parented.
  std::map<uint64_t, perfetto::protos::TrackDescriptor> tracks;
  for (const TracePacket& packet : parsed.packet()) {
    if (packet.has_track_descriptor()) {
      tracks[packet.track_descriptor().uuid()] = packet.track_descriptor();
    }
  }
  ASSERT_EQ(tracks.size(), 2u + 1u + 2u);
  for (const ProcessTrace& trace : traces) {
    const auto& process = tracks.at(PerfettoProcessUuid(trace.info.rank));
    EXPECT_EQ(process.process().pid(), trace.info.rank + 1);
    EXPECT_THAT(process.process().process_name(),
                ::testing::StartsWith(absl::StrCat("rank ", trace.info.rank)));
    for (const ThreadTrace& thread : trace.threads) {
      const auto& track =
          tracks.at(PerfettoThreadUuid(trace.info.rank, thread.thread_index));
      EXPECT_EQ(track.parent_uuid(), PerfettoProcessUuid(trace.info.rank));
      EXPECT_EQ(track.thread().pid(), trace.info.rank + 1);
      EXPECT_EQ(track.thread().thread_name(), thread.name);
    }
  }

  // Events per thread track, in the thread's order, at its global times,
  // their names resolved through the sequence's interned data.
  std::map<uint64_t, std::vector<const TracePacket*>> by_track;
  std::map<std::pair<uint32_t, uint64_t>, std::string> names;  // (seq, iid)
  std::map<const TracePacket*, std::string> event_name;
  std::map<uint64_t, uint64_t> flow_start_ts, flow_end_ts;
  std::map<uint32_t, uint64_t> default_track;  // sequence -> track uuid
  for (int i = 0; i < parsed.packet_size(); ++i) {
    const TracePacket& packet = parsed.packet(i);
    if (packet.has_trace_packet_defaults()) {
      EXPECT_EQ(packet.sequence_flags(), TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      default_track[packet.trusted_packet_sequence_id()] =
          packet.trace_packet_defaults().track_event_defaults().track_uuid();
    }
    for (const auto& interned : packet.interned_data().event_names()) {
      EXPECT_TRUE(names
                      .try_emplace({packet.trusted_packet_sequence_id(),
                                    interned.iid()},
                                   interned.name())
                      .second)
          << "iid interned twice on one sequence";
    }
    if (!packet.has_track_event()) continue;
    const TrackEvent& event = packet.track_event();
    EXPECT_FALSE(event.has_track_uuid()) << "the sequence's default is its track";
    EXPECT_EQ(packet.sequence_flags(), TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    ASSERT_TRUE(default_track.count(packet.trusted_packet_sequence_id()))
        << "an event before its sequence's defaults";
    by_track[default_track[packet.trusted_packet_sequence_id()]].push_back(&packet);
    if (event.has_name_iid()) {
      auto it = names.find({packet.trusted_packet_sequence_id(), event.name_iid()});
      ASSERT_NE(it, names.end()) << "name iid used before it was interned";
      event_name[&packet] = it->second;
    }
    for (uint64_t id : event.flow_ids()) {
      EXPECT_TRUE(flow_start_ts.emplace(id, packet.timestamp()).second);
    }
    for (uint64_t id : event.terminating_flow_ids()) {
      EXPECT_TRUE(flow_end_ts.emplace(id, packet.timestamp()).second);
    }
  }
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTrace& trace = traces[p];
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const ThreadTrace& thread = trace.threads[t];
      const std::vector<const TracePacket*>& events =
          by_track[PerfettoThreadUuid(trace.info.rank, thread.thread_index)];
      ASSERT_EQ(events.size(), thread.events.size());
      for (size_t i = 0; i < events.size(); ++i) {
        EXPECT_EQ(events[i]->timestamp(),
                  static_cast<uint64_t>(timeline->processes[p].global_ns[t][i]));
        const TrackEvent::Type expected =
            thread.events[i].kind == EventKind::kEnter ||
                    thread.events[i].kind == EventKind::kCollectiveBegin
                ? TrackEvent::TYPE_SLICE_BEGIN
            : thread.events[i].kind == EventKind::kLeave ||
                    thread.events[i].kind == EventKind::kCollectiveEnd
                ? TrackEvent::TYPE_SLICE_END
                : TrackEvent::TYPE_INSTANT;
        EXPECT_EQ(events[i]->track_event().type(), expected);
        if (thread.events[i].kind == EventKind::kEnter) {
          std::string want = "";
          for (const Region& r : trace.regions) {
            if (r.id == thread.events[i].region) want = r.name;
          }
          EXPECT_EQ(event_name[events[i]], want);
        }
      }
    }
  }

  // A flow per matched message, from the send's time to the receive's.
  ASSERT_EQ(flow_start_ts.size(), messages->pairs.size());
  ASSERT_EQ(flow_end_ts.size(), messages->pairs.size());
  for (size_t m = 0; m < messages->pairs.size(); ++m) {
    const MessagePair& pair = messages->pairs[m];
    EXPECT_EQ(flow_start_ts.at(m + 1),
              static_cast<uint64_t>(timeline->processes[pair.send_process]
                                        .global_ns[pair.send_thread][pair.send_index]));
    EXPECT_EQ(flow_end_ts.at(m + 1),
              static_cast<uint64_t>(timeline->processes[pair.recv_process]
                                        .global_ns[pair.recv_thread][pair.recv_index]));
  }

  // Several times smaller than the Chrome JSON of the same timeline.
  std::ostringstream json;
  WriteChromeJson(traces, *timeline, *messages, json);
  EXPECT_LT(out.str().size() * 3, json.str().size())
      << "perfetto " << out.str().size() << " bytes, JSON " << json.str().size();
}

TEST(PerfettoExport, NegativeGlobalTimeIsAnErrorNamingTheRank) {
  ProcessTrace trace;
  trace.info.rank = 5;
  trace.info.origin_ns = -1000;
  ThreadTrace thread;
  Event enter;
  enter.stamp = hull::PackStamp(0, 0);
  enter.kind = EventKind::kEnter;
  thread.events = {enter};
  trace.threads = {thread};
  std::vector<ProcessTrace> traces = {trace};
  absl::StatusOr<Timeline> timeline =
      BuildTimeline(traces, hull::CorrectionKind::kNone);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  std::ostringstream out;
  absl::Status status = WritePerfettoTrace(traces, *timeline, MessageMatch{}, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("rank 5"));
}

}  // namespace
}  // namespace clocksync::trace
