// collector/streaming_sink.h: the traced process's end of the collector
// protocol (proto/collector.proto): a trace::TraceSink that streams the
// tracer's full buffers and records to a collector while the program runs,
// and falls back to a local OTF2 archive when the collector is lost.
//
// Back-pressure: at most Welcome.max_unacked_bytes of event bytes are sent
// ahead of the collector's acks; beyond, AppendEvents waits (the tracer's
// writer thread; recording threads wait only when both their buffers are
// full). gRPC's own flow control holds a Write the same way.
//
// Fallback (no event is lost because of the collector): the sink keeps
// every batch until the collector acknowledges it (it is then on the
// collector's disk). When the stream breaks (the collector died or refused
// a message), a Write or an ack stalls longer than timeout_ns, or the final
// ack does not come, the sink warns once, creates the local archive
// (<fallback_trace_dir>/<name>.r<rank>, trace::Otf2Writer), writes into it
// every batch not acknowledged and everything after, and the records whole.
// The run's events are then in the collector's raw archive of the rank (up
// to the last ack) and in the local archive (the rest; the first events of
// the local one may repeat the last acknowledged ones when an ack was lost
// with the collector).
//
// Fail-safe: the collector tells the stream when another rank is lost
// (PeerLost); lost_peers() lists them, and `warn` says so once each.
//
// Dynamic spawning: the Welcome gives the rank's attach key, from which
// AttachContact makes the contact string of an attach group for the
// children; Attach waits (a unary call beside the stream) until they all
// joined. A child (its contact an attach contact string) learns its group
// from its Welcome (attached()).
//
// Thread safety: AppendEvents, StreamRecords and Finish must not overlap
// (the tracer calls them under its archive lock); the statistics,
// AttachContact and Attach may be called from any thread. Two threads of its own: the ack reader and a
// watchdog that cancels a stalled call.
#ifndef CLOCKSYNC_COLLECTOR_STREAMING_SINK_H_
#define CLOCKSYNC_COLLECTOR_STREAMING_SINK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collector/contact.h"
#include "grpcpp/grpcpp.h"
#include "proto/collector.grpc.pb.h"
#include "trace/trace.h"
#include "trace/trace_sink.h"

namespace clocksync::collector {

// The local archive of a tracing phase: <trace_dir>/<name>.r<rank>, and
// <trace_dir>/<name>.r<rank>.p<phase> for the phases after the first.
std::string LocalArchiveDir(const std::string& trace_dir,
                            const std::string& name, int32_t rank,
                            uint32_t phase);

struct StreamingOptions {
  Contact contact;
  // The rank the process asks for; -1: the collector assigns one.
  int32_t requested_rank = -1;
  // The tracing phase (Hello.phase): 0 the first; k > 0 continues
  // requested_rank after a Finish with more_phases.
  uint32_t phase = 0;
  // Set from another thread: Connect gives up its waits (the connection,
  // the Welcome) within ~50 ms and returns Cancelled. May be null.
  const std::atomic<bool>* abort = nullptr;
  // Who the process is (its rank is the Welcome's).
  trace::ProcessInfo info;
  // The local archive, should the collector be lost:
  // <fallback_trace_dir>/<fallback_name>.r<rank>.
  std::string fallback_trace_dir;
  std::string fallback_name;
  // The longest wait for the connection and Welcome, for a Write, for an
  // ack the window waits on, and for the final ack, ns. A child of an
  // attach group waits twice this for its Welcome (its parent's Attach,
  // which may come later, waits this long).
  int64_t timeout_ns = 10'000'000'000;
  // TLS: a PEM file of the certificate authority the collector's
  // certificate must chain to; empty: plaintext.
  std::string tls_ca_file;
  // One line per event worth telling the program's user (the fallback).
  std::function<void(const std::string&)> warn;
};

// An attach group as the collector completed it (proto AttachGroup).
struct AttachGroupInfo {
  int32_t parent_rank = -1;
  uint32_t group = 0;
  std::vector<int32_t> children;  // ranks, ascending
  int32_t ranks_in_run = 0;       // when it completed
};

class StreamingSink : public trace::TraceSink {
 public:
  // Connects, says Hello and waits for the Welcome, all within timeout_ns
  // (the Welcome of an attach group's child: 2 × timeout_ns).
  // Errors: Cancelled (options.abort was set), Unavailable /
  // DeadlineExceeded (unreachable, or no answer),
  // PermissionDenied (the token), OutOfRange / AlreadyExists /
  // ResourceExhausted (the rank), FailedPrecondition (protocol version),
  // InvalidArgument (a TLS file), each with the collector's message.
  static absl::StatusOr<std::unique_ptr<StreamingSink>> Connect(
      const StreamingOptions& options);
  ~StreamingSink() override;
  StreamingSink(const StreamingSink&) = delete;
  StreamingSink& operator=(const StreamingSink&) = delete;

  int32_t rank() const { return rank_; }
  int32_t world_size() const { return world_size_; }
  // world_size plus the children attached when this stream was welcomed.
  int32_t ranks_in_run() const { return ranks_in_run_; }
  // A child of an attach group: the group (its Welcome's); else nullopt.
  const std::optional<AttachGroupInfo>& attached() const { return attached_; }

  // The attach contact string of this rank's attach group `group` at the
  // collector's `address` (the address children reach it at):
  // TOKEN.RANK.GROUP@ADDRESS (collector/contact.h).
  std::string AttachContact(uint32_t group, const std::string& address) const;
  // Waits until `children` children started with that contact string
  // joined (pids: theirs, or empty), at most timeout_ns. The collector's
  // errors with its message: DeadlineExceeded naming the children that
  // never connected, PermissionDenied, FailedPrecondition (attached
  // before); FailedPrecondition too when this sink fell back to its local
  // archive (no collector to attach to). Cancelled within ~50 ms when
  // *abort is set (may be null; the collector then fails the group).
  absl::StatusOr<AttachGroupInfo> Attach(uint32_t group, int32_t children,
                                         const std::vector<int64_t>& pids,
                                         int64_t timeout_ns,
                                         const std::atomic<bool>* abort);
  // Finish tells the collector another phase of this rank follows
  // (Finish.more_phases). Before Finish, from the thread that calls it.
  void set_more_phases(bool more) { more_phases_ = more; }

  absl::Status AppendEvents(uint32_t thread_index,
                            const std::string& thread_name,
                            absl::Span<const trace::Event> events) override;
  absl::Status StreamRecords(
      const std::vector<trace::Region>& regions,
      const std::vector<trace::Communicator>& communicators,
      const std::vector<trace::MappingRecord>& mappings,
      const std::vector<trace::SyncSession>& sessions,
      const std::optional<trace::GroundTruth>& truth) override;
  absl::Status Finish(const std::vector<trace::Region>& regions,
                      const std::vector<trace::Communicator>& communicators,
                      const std::vector<trace::MappingRecord>& mappings,
                      const std::vector<trace::SyncSession>& sessions,
                      const std::optional<trace::GroundTruth>& truth) override;
  // "collector TOKEN-less address", or the local archive after a fallback.
  const std::string& archive_dir() const override { return where_; }

  // Events the collector acknowledged (stored).
  uint64_t events_acknowledged() const {
    return events_acked_.load(std::memory_order_relaxed);
  }
  // The ranks the collector said were lost (PeerLost), in the order told,
  // each once.
  std::vector<int32_t> lost_peers() const;

  // Whether the sink fell back to the local archive, and why.
  bool fell_back() const { return fell_back_.load(std::memory_order_acquire); }
  std::string fallback_reason() const;

 private:
  struct Retained {
    uint64_t batch = 0;
    uint32_t thread_index = 0;
    std::string thread_name;
    uint64_t events = 0;
    uint64_t sent_bytes = 0;  // its packed chunk's size (the window's unit)
    std::string bytes;  // the chunk, filled once its Write returned
  };

  explicit StreamingSink(const StreamingOptions& options);
  absl::Status Start();
  void ReaderLoop();
  void WatchdogLoop();
  // Runs `call` with the watchdog armed for `timeout_ns` (0: the
  // options' timeout_ns).
  bool Guarded(const std::function<bool()>& call, int64_t timeout_ns = 0);
  // How long the Hello waits for its Welcome: timeout_ns, twice that for a
  // child of an attach group (see Start()).
  int64_t WelcomeTimeoutNs() const;
  absl::Status SendBatch(uint32_t thread_index, const std::string& thread_name,
                         absl::Span<const trace::Event> events);
  absl::Status FallBack(const std::string& reason);
  void StopThreads();

  const StreamingOptions options_;
  std::string where_;
  int32_t rank_ = -1;
  int32_t world_size_ = 0;
  int32_t ranks_in_run_ = 0;
  std::string attach_key_;
  std::optional<AttachGroupInfo> attached_;
  uint64_t max_unacked_bytes_ = 0;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Collector::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<ProcessMessage, CollectorMessage>>
      stream_;
  bool stream_finished_ = false;  // stream_->Finish() was called
  std::thread reader_;
  std::thread watchdog_;

  mutable std::mutex mutex_;  // the members down to stop_
  std::condition_variable changed_;  // acks, the stream's end, stop
  std::deque<Retained> retained_;    // sent, not acknowledged
  std::vector<std::string> spare_;   // buffers of acknowledged batches
  std::unique_ptr<char[]> scratch_;  // a batch packed (SendBatch's own)
  uint64_t unacked_bytes_ = 0;
  uint64_t acked_batch_ = 0;
  bool finished_ack_ = false;
  std::vector<int32_t> lost_peers_;
  bool broken_ = false;          // the reader saw the stream end
  int64_t deadline_ns_ = 0;      // of the guarded call running; 0: none
  bool stalled_ = false;         // the watchdog cancelled a stalled call
  bool aborted_ = false;         // the watchdog cancelled on options.abort
  bool connecting_ = true;       // until the Welcome (options.abort applies)
  bool stop_ = false;

  // Writer side (calls do not overlap).
  uint64_t next_batch_ = 0;
  uint64_t events_sent_ = 0;
  std::map<uint32_t, std::string> sent_regions_;  // id -> name
  std::map<uint32_t, trace::Communicator> sent_comms_;
  size_t sent_mappings_ = 0;
  size_t sent_sessions_ = 0;
  bool sent_truth_ = false;
  bool finished_ = false;
  bool more_phases_ = false;
  std::unique_ptr<trace::TraceSink> local_;  // after a fallback
  absl::Status local_error_;  // the fallback could not be made

  std::atomic<uint64_t> events_acked_{0};
  std::atomic<bool> fell_back_{false};
  mutable std::mutex reason_mutex_;
  std::string fallback_reason_;
};

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_STREAMING_SINK_H_
