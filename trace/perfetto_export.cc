// trace/perfetto_export.cc: the timeline as Perfetto protobuf packets
// (see perfetto_export.h).

#include "trace/perfetto_export.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "trace/perfetto_trace.pb.h"

namespace clocksync::trace {
namespace {

using perfetto::protos::DebugAnnotation;
using perfetto::protos::TracePacket;
using perfetto::protos::TrackEvent;

// Debug annotation names, interned once per sequence with these iids.
enum AnnotationName : uint64_t {
  kPeer = 1,
  kTag,
  kComm,
  kBytes,
  kRoot,
  kBytesSent,
  kBytesReceived,
};
constexpr const char* kAnnotationNames[] = {
    "", "peer", "tag", "comm", "bytes", "root", "bytes_sent", "bytes_received"};

// Keys of event names within a sequence: a region id, a collective kind, or
// send / recv.
constexpr uint64_t kCollectiveKey = uint64_t{1} << 40;
constexpr uint64_t kSendKey = uint64_t{1} << 41;
constexpr uint64_t kRecvKey = kSendKey + 1;

// Writes packets as field 1 of Trace, one at a time.
class PacketWriter {
 public:
  explicit PacketWriter(std::ostream* out) : out_(out) {}

  void Write(const TracePacket& packet) {
    buffer_.clear();
    packet.SerializeToString(&buffer_);
    char header[11];
    size_t n = 0;
    header[n++] = 0x0a;  // field 1, length-delimited
    uint64_t size = buffer_.size();
    do {
      uint8_t byte = size & 0x7f;
      size >>= 7;
      if (size != 0) byte |= 0x80;
      header[n++] = static_cast<char>(byte);
    } while (size != 0);
    out_->write(header, static_cast<std::streamsize>(n));
    out_->write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  }

 private:
  std::ostream* out_;
  std::string buffer_;
};

void Annotate(TrackEvent* event, AnnotationName name, int64_t value) {
  DebugAnnotation* a = event->add_debug_annotations();
  a->set_name_iid(name);
  a->set_int_value(value);
}

void AnnotateUnsigned(TrackEvent* event, AnnotationName name, uint64_t value) {
  DebugAnnotation* a = event->add_debug_annotations();
  a->set_name_iid(name);
  a->set_uint_value(value);
}

// (event index, flow id) of one thread's matched sends or receives, by
// index.
using FlowList = std::vector<std::pair<uint32_t, uint64_t>>;

}  // namespace

uint64_t PerfettoProcessUuid(int32_t rank) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(rank)) + 1) << 32;
}

uint64_t PerfettoThreadUuid(int32_t rank, uint32_t thread_index) {
  return PerfettoProcessUuid(rank) | (static_cast<uint64_t>(thread_index) + 1);
}

absl::Status WritePerfettoTrace(absl::Span<const ProcessTrace> traces,
                                const Timeline& timeline,
                                const MessageMatch& messages,
                                std::ostream& out) {
  if (timeline.processes.size() != traces.size()) {
    return absl::InvalidArgumentError("the timeline is not of these traces");
  }
  // Flows by thread, both ends available.
  std::vector<std::vector<FlowList>> send_flows(traces.size()),
      recv_flows(traces.size());
  for (size_t p = 0; p < traces.size(); ++p) {
    send_flows[p].resize(traces[p].threads.size());
    recv_flows[p].resize(traces[p].threads.size());
    if (!timeline.processes[p].available) continue;
    for (const std::vector<int64_t>& thread : timeline.processes[p].global_ns) {
      if (!thread.empty() && thread.front() < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", traces[p].info.rank, ": global time ", thread.front(),
            " ns is negative; Perfetto timestamps are unsigned"));
      }
    }
  }
  for (size_t m = 0; m < messages.pairs.size(); ++m) {
    const MessagePair& pair = messages.pairs[m];
    if (!timeline.processes[pair.send_process].available ||
        !timeline.processes[pair.recv_process].available) {
      continue;
    }
    send_flows[pair.send_process][pair.send_thread].emplace_back(pair.send_index,
                                                                 m + 1);
    recv_flows[pair.recv_process][pair.recv_thread].emplace_back(pair.recv_index,
                                                                 m + 1);
  }
  for (auto* flows : {&send_flows, &recv_flows}) {
    for (std::vector<FlowList>& process : *flows) {
      for (FlowList& thread : process) std::sort(thread.begin(), thread.end());
    }
  }

  PacketWriter writer(&out);
  TracePacket packet;
  constexpr uint32_t kDescriptorSequence = 1;
  uint32_t next_sequence = kDescriptorSequence + 1;
  int32_t next_tid = kPerfettoTidBase;
  for (size_t p = 0; p < traces.size(); ++p) {
    const ProcessTimeline& process = timeline.processes[p];
    if (!process.available) continue;
    const ProcessTrace& trace = traces[p];
    const int32_t rank = trace.info.rank;
    const int32_t pid = rank + 1;
    packet.Clear();
    packet.set_trusted_packet_sequence_id(kDescriptorSequence);
    {
      auto* track = packet.mutable_track_descriptor();
      track->set_uuid(PerfettoProcessUuid(rank));
      track->mutable_process()->set_pid(pid);
      track->mutable_process()->set_process_name(absl::StrCat(
          "rank ", rank, " ", trace.info.process_name, "@", trace.info.hostname));
    }
    writer.Write(packet);

    absl::flat_hash_map<uint32_t, std::string> region_names;
    for (const Region& r : trace.regions) region_names.try_emplace(r.id, r.name);

    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const ThreadTrace& thread = trace.threads[t];
      const uint32_t sequence = next_sequence++;
      const uint64_t uuid = PerfettoThreadUuid(rank, thread.thread_index);
      // The sequence's first packet: the thread's track, a fresh
      // incremental state, the default track of its events and the
      // annotation names.
      packet.Clear();
      packet.set_trusted_packet_sequence_id(sequence);
      packet.set_sequence_flags(TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      {
        auto* track = packet.mutable_track_descriptor();
        track->set_uuid(uuid);
        track->set_parent_uuid(PerfettoProcessUuid(rank));
        track->mutable_thread()->set_pid(pid);
        track->mutable_thread()->set_tid(next_tid++);
        track->mutable_thread()->set_thread_name(thread.name);
        // The thread's events leave out their track: it is this one.
        packet.mutable_trace_packet_defaults()
            ->mutable_track_event_defaults()
            ->set_track_uuid(uuid);
        for (uint64_t iid = kPeer; iid <= kBytesReceived; ++iid) {
          auto* name = packet.mutable_interned_data()->add_debug_annotation_names();
          name->set_iid(iid);
          name->set_name(kAnnotationNames[iid]);
        }
      }
      writer.Write(packet);

      absl::flat_hash_map<uint64_t, uint64_t> name_iids;
      const std::vector<int64_t>& global_ns = process.global_ns[t];
      const FlowList& sends = send_flows[p][t];
      const FlowList& recvs = recv_flows[p][t];
      size_t next_send = 0, next_recv = 0;
      for (size_t i = 0; i < thread.events.size(); ++i) {
        const Event& e = thread.events[i];
        packet.Clear();
        packet.set_timestamp(static_cast<uint64_t>(global_ns[i]));
        packet.set_trusted_packet_sequence_id(sequence);
        packet.set_sequence_flags(TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
        TrackEvent* event = packet.mutable_track_event();
        // Names the event by iid, interning the name on first use.
        auto name = [&](uint64_t key, auto make_name) {
          auto [it, fresh] = name_iids.try_emplace(key, name_iids.size() + 1);
          if (fresh) {
            auto* interned = packet.mutable_interned_data()->add_event_names();
            interned->set_iid(it->second);
            interned->set_name(make_name());
          }
          event->set_name_iid(it->second);
        };
        switch (e.kind) {
          case EventKind::kEnter:
            event->set_type(TrackEvent::TYPE_SLICE_BEGIN);
            name(e.region, [&] {
              auto it = region_names.find(e.region);
              return it != region_names.end() ? it->second
                                              : absl::StrCat("region ", e.region);
            });
            break;
          case EventKind::kLeave:
          case EventKind::kCollectiveEnd:
            event->set_type(TrackEvent::TYPE_SLICE_END);
            if (e.kind == EventKind::kCollectiveEnd) {
              AnnotateUnsigned(event, kBytesReceived, e.bytes);
            }
            break;
          case EventKind::kCollectiveBegin:
            event->set_type(TrackEvent::TYPE_SLICE_BEGIN);
            name(kCollectiveKey | static_cast<uint64_t>(e.collective), [&] {
              return std::string(CollectiveKindName(e.collective));
            });
            Annotate(event, kComm, e.comm);
            Annotate(event, kRoot, e.peer);
            AnnotateUnsigned(event, kBytesSent, e.bytes);
            break;
          case EventKind::kSend:
          case EventKind::kRecv: {
            const bool send = e.kind == EventKind::kSend;
            event->set_type(TrackEvent::TYPE_INSTANT);
            name(send ? kSendKey : kRecvKey,
                 [&] { return std::string(send ? "send" : "recv"); });
            Annotate(event, kPeer, e.peer);
            Annotate(event, kTag, e.tag);
            Annotate(event, kComm, e.comm);
            AnnotateUnsigned(event, kBytes, e.bytes);
            const FlowList& flows = send ? sends : recvs;
            size_t& next = send ? next_send : next_recv;
            while (next < flows.size() && flows[next].first < i) ++next;
            if (next < flows.size() && flows[next].first == i) {
              if (send) {
                event->add_flow_ids(flows[next].second);
              } else {
                event->add_terminating_flow_ids(flows[next].second);
              }
            }
            break;
          }
        }
        writer.Write(packet);
      }
    }
  }
  out.flush();
  if (!out) return absl::DataLossError("cannot write the Perfetto trace");
  return absl::OkStatus();
}

}  // namespace clocksync::trace
