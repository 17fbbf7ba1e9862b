// collector/streaming_sink.cc: the traced process's stream to a collector,
// its back-pressure, watchdog and fallback to a local archive
// (streaming_sink.h).

#include "collector/streaming_sink.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collector/wire.h"
#include "trace/otf2_writer.h"
#include "trace/packed_events.h"
#include "trace/raw_archive.h"

namespace clocksync::collector {
namespace {

int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

absl::Status FromGrpc(const grpc::Status& status, absl::string_view what) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// The events per batch.
constexpr size_t kBatchEvents = kSendBatchBytes / trace::kEventWireBytes;
// Buffers of acknowledged batches kept for reuse.
constexpr size_t kSpareBuffers = 64;

}  // namespace

std::string LocalArchiveDir(const std::string& trace_dir,
                            const std::string& name, int32_t rank,
                            uint32_t phase) {
  return phase == 0 ? absl::StrCat(trace_dir, "/", name, ".r", rank)
                    : absl::StrCat(trace_dir, "/", name, ".r", rank, ".p",
                                   phase);
}

StreamingSink::StreamingSink(const StreamingOptions& options)
    : options_(options),
      where_(absl::StrCat("collector ", options.contact.address)) {}

absl::StatusOr<std::unique_ptr<StreamingSink>> StreamingSink::Connect(
    const StreamingOptions& options) {
  std::unique_ptr<StreamingSink> sink(new StreamingSink(options));
  if (absl::Status s = sink->Start(); !s.ok()) return s;
  return sink;
}

absl::Status StreamingSink::Start() {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (!options_.tls_ca_file.empty()) {
    std::ifstream in(options_.tls_ca_file);
    if (!in) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CLOCKSYNC_COLLECTOR_TLS_CA: cannot read ", options_.tls_ca_file));
    }
    std::stringstream pem;
    pem << in.rdbuf();
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(tls);
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A channel of its own (not shared with another sink of the process).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ = grpc::CreateCustomChannel(options_.contact.address, credentials,
                                       args);
  auto aborted = [&] {
    return options_.abort != nullptr &&
           options_.abort->load(std::memory_order_acquire);
  };
  const absl::Status abort_error = absl::CancelledError(
      absl::StrCat("collector ", options_.contact.address,
                   ": init aborted (abort called from another thread)"));
  // Waited in slices: an abort from another thread ends the wait.
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::nanoseconds(options_.timeout_ns);
  for (;;) {
    if (aborted()) return abort_error;
    const auto now = std::chrono::system_clock::now();
    if (now >= deadline) {
      return absl::UnavailableError(
          absl::StrCat("collector ", options_.contact.address,
                       ": no connection within ",
                       options_.timeout_ns / 1'000'000, " ms"));
    }
    if (channel_->WaitForConnected(
            std::min(deadline, now + std::chrono::milliseconds(50)))) {
      break;
    }
  }
  stub_ = Collector::NewStub(channel_);
  stream_ = stub_->Stream(&context_);
  watchdog_ = std::thread([this] { WatchdogLoop(); });

  ProcessMessage hello;
  Hello* h = hello.mutable_hello();
  h->set_protocol_version(kProtocolVersion);
  h->set_token(options_.contact.token);
  h->set_requested_rank(options_.requested_rank);
  h->set_phase(options_.phase);
  if (options_.contact.attach_parent >= 0) {
    h->mutable_attach()->set_parent_rank(options_.contact.attach_parent);
    h->mutable_attach()->set_group(options_.contact.attach_group);
  }
  ToProto(options_.info, h->mutable_process());
  CollectorMessage reply;
  const bool answered = Guarded(
      [&] { return stream_->Write(hello) && stream_->Read(&reply); },
      WelcomeTimeoutNs());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connecting_ = false;  // an abort no longer applies
  }
  if (!answered || !reply.has_welcome()) {
    bool stalled = false;
    bool was_aborted = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stalled = stalled_;
      was_aborted = aborted_;
    }
    // The collector's refusal ended the call (its status is waiting);
    // a stall is cut here.
    if (stalled) context_.TryCancel();
    grpc::Status status;
    Guarded([&] {
      status = stream_->Finish();
      return true;
    });
    stream_finished_ = true;
    StopThreads();
    if (was_aborted) return abort_error;
    if (stalled) {
      return absl::DeadlineExceededError(
          absl::StrCat("collector ", options_.contact.address,
                       ": no Welcome within ",
                       WelcomeTimeoutNs() / 1'000'000, " ms"));
    }
    if (status.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "collector ", options_.contact.address, ": no Welcome"));
    }
    return FromGrpc(status,
                    absl::StrCat("collector ", options_.contact.address));
  }
  rank_ = reply.welcome().rank();
  world_size_ = reply.welcome().world_size();
  ranks_in_run_ = reply.welcome().ranks_in_run();
  attach_key_ = reply.welcome().attach_key();
  if (reply.welcome().has_attached()) {
    const AttachGroup& group = reply.welcome().attached();
    attached_ = AttachGroupInfo{
        group.parent_rank(), group.group(),
        std::vector<int32_t>(group.children().begin(), group.children().end()),
        ranks_in_run_};
  }
  max_unacked_bytes_ =
      std::max<uint64_t>(reply.welcome().max_unacked_bytes(), kSendBatchBytes);
  reader_ = std::thread([this] { ReaderLoop(); });
  return absl::OkStatus();
}

std::string StreamingSink::AttachContact(uint32_t group,
                                         const std::string& address) const {
  Contact contact;
  contact.token = AttachGroupToken(attach_key_, group);
  contact.address = address;
  contact.attach_parent = rank_;
  contact.attach_group = group;
  return FormatContact(contact);
}

absl::StatusOr<AttachGroupInfo> StreamingSink::Attach(
    uint32_t group, int32_t children, const std::vector<int64_t>& pids,
    int64_t timeout_ns, const std::atomic<bool>* abort) {
  const std::string name = AttachGroupName(rank_, group);
  if (fell_back()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attach group ", name, ": the collector was lost (",
        fallback_reason(), "); no children can be attached"));
  }
  AttachRequest request;
  request.set_token(AttachGroupToken(attach_key_, group));
  request.mutable_group()->set_parent_rank(rank_);
  request.mutable_group()->set_group(group);
  request.set_children(children);
  for (int64_t pid : pids) request.add_pids(pid);
  request.set_wait_ms(static_cast<uint32_t>(
      std::clamp<int64_t>(timeout_ns / 1'000'000, 1, 600'000)));
  grpc::ClientContext context;
  // The collector's own wait ends first, with the message naming the
  // children that never came.
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::nanoseconds(timeout_ns) +
                       std::chrono::seconds(5));
  AttachReply reply;
  // Asynchronous, waited in slices: an abort from another thread cancels it.
  std::mutex mutex;
  std::condition_variable answered;
  bool done = false;
  grpc::Status status;
  stub_->async()->Attach(&context, &request, &reply,
                         [&](grpc::Status result) {
                           std::lock_guard<std::mutex> lock(mutex);
                           status = std::move(result);
                           done = true;
                           answered.notify_all();
                         });
  {
    std::unique_lock<std::mutex> lock(mutex);
    bool cancelled = false;
    while (!done) {
      answered.wait_for(lock, std::chrono::milliseconds(50));
      if (!done && !cancelled && abort != nullptr &&
          abort->load(std::memory_order_acquire)) {
        cancelled = true;
        context.TryCancel();  // the callback still comes
      }
    }
  }
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::CancelledError(absl::StrCat(
        "attach group ", name, ": aborted (abort called from another "
        "thread)"));
  }
  if (!status.ok()) {
    return FromGrpc(status, absl::StrCat("collector ", options_.contact.address));
  }
  return AttachGroupInfo{
      reply.group().parent_rank(), reply.group().group(),
      std::vector<int32_t>(reply.group().children().begin(),
                           reply.group().children().end()),
      reply.ranks_in_run()};
}

StreamingSink::~StreamingSink() {
  if (stream_ != nullptr && !stream_finished_) context_.TryCancel();
  StopThreads();
  if (stream_ != nullptr && !stream_finished_) {
    stream_->Finish().IgnoreError();
  }
}

void StreamingSink::StopThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    changed_.notify_all();
  }
  if (watchdog_.joinable()) watchdog_.join();
  if (reader_.joinable()) {
    context_.TryCancel();
    reader_.join();
  }
}

// Acks: the batches up to one are stored; drop them from the retained.
void StreamingSink::ReaderLoop() {
  CollectorMessage reply;
  while (stream_->Read(&reply)) {
    if (reply.has_peer_lost()) {
      const int32_t peer = reply.peer_lost().rank();
      bool told = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (std::find(lost_peers_.begin(), lost_peers_.end(), peer) ==
            lost_peers_.end()) {
          lost_peers_.push_back(peer);
          told = true;
        }
      }
      if (told && options_.warn) {
        options_.warn(absl::StrCat("collector ", options_.contact.address,
                                   ": rank ", peer, " was lost (",
                                   reply.peer_lost().why(), ")"));
      }
      continue;
    }
    if (!reply.has_ack()) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    acked_batch_ = std::max(acked_batch_, reply.ack().batch());
    uint64_t acked_events = 0;
    while (!retained_.empty() && retained_.front().batch <= acked_batch_) {
      unacked_bytes_ -= retained_.front().sent_bytes;
      acked_events += retained_.front().events;
      // The batch's buffer is kept for the next batches (reused memory
      // does not fault its pages in again).
      if (spare_.size() < kSpareBuffers && !retained_.front().bytes.empty()) {
        spare_.push_back(std::move(retained_.front().bytes));
      }
      retained_.pop_front();
    }
    events_acked_.fetch_add(acked_events, std::memory_order_relaxed);
    if (reply.ack().finished()) finished_ack_ = true;
    changed_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  broken_ = true;
  changed_.notify_all();
}

// Cancels the stream when a guarded call outlives its deadline: a
// collector that stopped reading (stopped, or its host gone) must not hang
// the program.
void StreamingSink::WatchdogLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    changed_.wait_for(lock, std::chrono::milliseconds(50));
    const bool abort = deadline_ns_ != 0 && connecting_ &&
                       options_.abort != nullptr &&
                       options_.abort->load(std::memory_order_acquire);
    if (deadline_ns_ != 0 && (abort || MonotonicNs() > deadline_ns_) &&
        !stalled_) {
      stalled_ = true;
      aborted_ = abort;
      context_.TryCancel();
      changed_.notify_all();
    }
  }
}

int64_t StreamingSink::WelcomeTimeoutNs() const {
  // A child's Welcome comes when its parent's Attach takes the group, and
  // that Attach waits timeout_ns from when it reaches the collector, which
  // may be after this Hello (a busy parent): the child waits longer, so
  // the Attach decides and its error names the children that never came.
  return options_.contact.attach_parent >= 0 ? 2 * options_.timeout_ns
                                             : options_.timeout_ns;
}

bool StreamingSink::Guarded(const std::function<bool()>& call,
                            int64_t timeout_ns) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    deadline_ns_ =
        MonotonicNs() + (timeout_ns > 0 ? timeout_ns : options_.timeout_ns);
  }
  const bool ok = call();
  std::lock_guard<std::mutex> lock(mutex_);
  deadline_ns_ = 0;
  return ok && !stalled_;
}

std::vector<int32_t> StreamingSink::lost_peers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_peers_;
}

std::string StreamingSink::fallback_reason() const {
  std::lock_guard<std::mutex> lock(reason_mutex_);
  return fallback_reason_;
}

absl::Status StreamingSink::AppendEvents(uint32_t thread_index,
                                         const std::string& thread_name,
                                         absl::Span<const trace::Event> events) {
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat(where_, ": events after Finish"));
  }
  while (!events.empty()) {
    if (local_ != nullptr || !local_error_.ok()) {
      if (!local_error_.ok()) return local_error_;
      return local_->AppendEvents(thread_index, thread_name, events);
    }
    const size_t n = std::min(events.size(), kBatchEvents);
    if (absl::Status s = SendBatch(thread_index, thread_name, events.first(n));
        !s.ok()) {
      return s;
    }
    events.remove_prefix(n);
  }
  return absl::OkStatus();
}

// Sends one batch within the window of unacknowledged bytes; falls back
// (and writes the batch locally) when the collector is lost.
absl::Status StreamingSink::SendBatch(uint32_t thread_index,
                                      const std::string& thread_name,
                                      absl::Span<const trace::Event> events) {
  ProcessMessage message;
  EventBatch* batch = message.mutable_events();
  const uint64_t number = ++next_batch_;
  batch->set_batch(number);
  batch->set_thread_index(thread_index);
  batch->set_thread_name(thread_name);
  {
    std::string buffer;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!spare_.empty()) {
        buffer = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    // Packed into the sink's scratch, then copied into a reused buffer
    // (its capacity kept: no allocation, no new pages).
    if (scratch_ == nullptr) {
      scratch_ = std::make_unique<char[]>(trace::PackedBound(kBatchEvents));
    }
    buffer.assign(scratch_.get(), trace::PackEventsTo(events, scratch_.get()));
    batch->mutable_packed()->swap(buffer);
  }
  const uint64_t bytes = batch->packed().size();
  std::string lost;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t deadline_ns = MonotonicNs() + options_.timeout_ns;
    while (!broken_ && !stalled_ && unacked_bytes_ > 0 &&
           unacked_bytes_ + bytes > max_unacked_bytes_) {
      const int64_t left_ns = deadline_ns - MonotonicNs();
      if (left_ns <= 0) break;
      changed_.wait_for(lock, std::chrono::nanoseconds(left_ns));
    }
    if (broken_) {
      lost = "the stream ended";
    } else if (stalled_ || (unacked_bytes_ > 0 &&
                            unacked_bytes_ + bytes > max_unacked_bytes_)) {
      lost = absl::StrCat("no ack within ", options_.timeout_ns / 1'000'000,
                          " ms");
    } else {
      retained_.push_back(Retained{number, thread_index, thread_name,
                                   events.size(), bytes, std::string()});
      unacked_bytes_ += bytes;
    }
  }
  if (lost.empty()) {
    const bool sent = Guarded([&] { return stream_->Write(message); });
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Keep the bytes until the ack, unless it came already.
      if (!retained_.empty() && retained_.back().batch == number) {
        retained_.back().bytes =
            std::move(*message.mutable_events()->mutable_packed());
      }
    }
    if (sent) {
      events_sent_ += events.size();
      return absl::OkStatus();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lost = stalled_ ? absl::StrCat("a write made no progress within ",
                                     options_.timeout_ns / 1'000'000, " ms")
                      : std::string("a write failed");
    }
    // The batch is among the retained ones: FallBack writes it.
    return FallBack(lost);
  }
  if (absl::Status s = FallBack(lost); !s.ok()) return s;
  return local_->AppendEvents(thread_index, thread_name, events);
}

absl::Status StreamingSink::StreamRecords(
    const std::vector<trace::Region>& regions,
    const std::vector<trace::Communicator>& communicators,
    const std::vector<trace::MappingRecord>& mappings,
    const std::vector<trace::SyncSession>& sessions,
    const std::optional<trace::GroundTruth>& truth) {
  if (!local_error_.ok()) return local_error_;
  if (local_ != nullptr) {
    return local_->StreamRecords(regions, communicators, mappings, sessions,
                                 truth);
  }
  std::vector<trace::Region> new_regions;
  for (const trace::Region& r : regions) {
    auto it = sent_regions_.find(r.id);
    if (it == sent_regions_.end() || it->second != r.name) {
      new_regions.push_back(r);
      sent_regions_[r.id] = r.name;
    }
  }
  std::vector<trace::Communicator> new_comms;
  for (const trace::Communicator& c : communicators) {
    auto it = sent_comms_.find(c.id);
    if (it == sent_comms_.end() || it->second.name != c.name ||
        it->second.ranks != c.ranks) {
      new_comms.push_back(c);
      sent_comms_[c.id] = c;
    }
  }
  const size_t from_mapping = std::min(sent_mappings_, mappings.size());
  const size_t from_session = std::min(sent_sessions_, sessions.size());
  const bool new_truth = truth.has_value() && !sent_truth_;
  if (new_regions.empty() && new_comms.empty() &&
      from_mapping == mappings.size() && from_session == sessions.size() &&
      !new_truth) {
    return absl::OkStatus();
  }
  ProcessMessage message;
  AppendRecords(
      new_regions, new_comms,
      std::vector<trace::MappingRecord>(mappings.begin() + from_mapping,
                                        mappings.end()),
      std::vector<trace::SyncSession>(sessions.begin() + from_session,
                                      sessions.end()),
      new_truth ? truth : std::nullopt, message.mutable_records());
  sent_mappings_ = mappings.size();
  sent_sessions_ = sessions.size();
  sent_truth_ = sent_truth_ || new_truth;
  if (Guarded([&] { return stream_->Write(message); })) {
    return absl::OkStatus();
  }
  if (absl::Status s = FallBack("a write failed"); !s.ok()) return s;
  return local_->StreamRecords(regions, communicators, mappings, sessions,
                               truth);
}

absl::Status StreamingSink::Finish(
    const std::vector<trace::Region>& regions,
    const std::vector<trace::Communicator>& communicators,
    const std::vector<trace::MappingRecord>& mappings,
    const std::vector<trace::SyncSession>& sessions,
    const std::optional<trace::GroundTruth>& truth) {
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat(where_, ": Finish called twice"));
  }
  absl::Status status =
      StreamRecords(regions, communicators, mappings, sessions, truth);
  if (local_ == nullptr && local_error_.ok()) {
    ProcessMessage message;
    message.mutable_finish()->set_events(events_sent_);
    message.mutable_finish()->set_more_phases(more_phases_);
    bool sent = Guarded([&] {
      return stream_->Write(message) && stream_->WritesDone();
    });
    bool acked = false;
    if (sent) {
      std::unique_lock<std::mutex> lock(mutex_);
      acked = changed_.wait_for(
          lock, std::chrono::nanoseconds(options_.timeout_ns),
          [&] { return finished_ack_ || broken_; });
      acked = acked && finished_ack_;
    }
    if (acked) {
      finished_ = true;
      {
        // The collector ends the call after its final ack.
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait_for(lock, std::chrono::nanoseconds(options_.timeout_ns),
                          [&] { return broken_; });
      }
      StopThreads();
      const grpc::Status end = stream_->Finish();
      stream_finished_ = true;
      if (!end.ok() && end.error_code() != grpc::StatusCode::CANCELLED) {
        return FromGrpc(end, where_);
      }
      return status;
    }
    status = FallBack(sent ? "no final ack" : "a write failed");
  }
  finished_ = true;
  if (!local_error_.ok()) return local_error_;
  return local_->Finish(regions, communicators, mappings, sessions, truth);
}

// The collector is lost: the local archive takes every batch it did not
// acknowledge, and all that follows.
absl::Status StreamingSink::FallBack(const std::string& reason) {
  if (local_ != nullptr || !local_error_.ok()) return local_error_;
  context_.TryCancel();
  std::deque<Retained> unacked;
  std::string stream_error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(1), [&] { return broken_; });
    unacked.swap(retained_);
    unacked_bytes_ = 0;
  }
  StopThreads();
  const grpc::Status end = stream_->Finish();
  stream_finished_ = true;
  if (!end.ok() && end.error_code() != grpc::StatusCode::CANCELLED) {
    stream_error = absl::StrCat(" (", end.error_message(), ")");
  }
  const std::string dir = LocalArchiveDir(
      options_.fallback_trace_dir, options_.fallback_name, rank_,
      options_.phase);
  trace::ProcessInfo info = options_.info;
  info.rank = rank_;
  absl::StatusOr<std::unique_ptr<trace::Otf2Writer>> writer =
      trace::Otf2Writer::Create(dir, info);
  const uint64_t acked = events_acked_.load(std::memory_order_relaxed);
  uint64_t unacked_events = 0;
  for (const Retained& r : unacked) unacked_events += r.events;
  const std::string why = absl::StrCat(reason, stream_error);
  {
    std::lock_guard<std::mutex> lock(reason_mutex_);
    fallback_reason_ = why;
  }
  fell_back_.store(true, std::memory_order_release);
  if (!writer.ok()) {
    local_error_ = absl::Status(
        writer.status().code(),
        absl::StrCat("collector ", options_.contact.address, " lost (", why,
                     ") and no local archive: ", writer.status().message()));
    if (options_.warn) options_.warn(std::string(local_error_.message()));
    return local_error_;
  }
  local_ = *std::move(writer);
  where_ = dir;
  if (options_.warn) {
    options_.warn(absl::StrCat(
        "collector ", options_.contact.address, " lost (", why, "): the ",
        unacked_events, " events it did not acknowledge and all later ones "
        "go to the local archive ", dir, "; the collector holds the first ",
        acked, " events of rank ", rank_));
  }
  for (const Retained& r : unacked) {
    if (r.bytes.empty()) continue;  // its Write had not returned: none kept
    std::vector<trace::Event> events;
    if (absl::Status s = trace::UnpackChunk(r.bytes, nullptr, &events);
        !s.ok()) {
      return local_error_ = s;  // cannot happen: we encoded them
    }
    if (absl::Status s = local_->AppendEvents(r.thread_index, r.thread_name,
                                              events);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace clocksync::collector
