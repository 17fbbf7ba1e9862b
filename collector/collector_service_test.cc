// collector/collector_service_test.cc: the collector's service on loopback,
// spoken to by a hand-made client of the protocol: the synthetic two-rank
// trace streamed in arrives whole (its raw archives read back equal, the
// run's archive compares as the originals do); wrong tokens, taken and
// out-of-range ranks, and malformed messages are refused, counted and never
// crash the collector; a stream cut without Finish marks its rank lost and
// the other streams are told (PeerLost); a phase continues only a rank
// between phases.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collector/collection.h"
#include "collector/collector_service.h"
#include "collector/contact.h"
#include "collector/run_archive.h"
#include "collector/wire.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/collector.grpc.pb.h"
#include "trace/otf2_reader.h"
#include "trace/packed_events.h"
#include "trace/raw_archive.h"
#include "trace/synthetic_trace.h"

namespace clocksync::collector {
namespace {

using Stream = grpc::ClientReaderWriter<ProcessMessage, CollectorMessage>;

std::string TempDir() {
  std::string templ = absl::StrCat(
      std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp",
      "/collector_test.XXXXXX");
  char* made = mkdtemp(templ.data());
  EXPECT_NE(made, nullptr);
  return templ;
}

// A collector on a loopback port, in this process.
class CollectorFixture : public ::testing::Test {
 protected:
  void StartCollector(int32_t world_size) {
    dir_ = TempDir();
    raw_dir_ = dir_ + "/raw";
    ASSERT_EQ(mkdir(raw_dir_.c_str(), 0755), 0);
    absl::StatusOr<std::string> token = NewToken();
    ASSERT_TRUE(token.ok());
    token_ = *token;
    CollectionOptions options;
    options.token = token_;
    options.raw_dir = raw_dir_;
    options.world_size = world_size;
    collection_ = std::make_unique<Collection>(options);
    service_ = std::make_unique<CollectorService>(
        collection_.get(), [this](const std::string& line) {
          std::lock_guard<std::mutex> lock(log_mutex_);
          log_.push_back(line);
        });
    int port = 0;
    absl::StatusOr<std::unique_ptr<grpc::Server>> server =
        BuildCollectorServer("127.0.0.1:0", service_.get(), nullptr, &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    channel_ = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                         grpc::InsecureChannelCredentials(),
                                         args);
    stub_ = Collector::NewStub(channel_);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  struct Call {
    std::unique_ptr<grpc::ClientContext> context =
        std::make_unique<grpc::ClientContext>();
    std::unique_ptr<Stream> stream;
  };

  Call Open() {
    Call call;
    call.stream = stub_->Stream(call.context.get());
    return call;
  }

  static ProcessMessage HelloMessage(const std::string& token, int32_t rank,
                                     const trace::ProcessInfo& info) {
    ProcessMessage m;
    Hello* hello = m.mutable_hello();
    hello->set_protocol_version(kProtocolVersion);
    hello->set_token(token);
    hello->set_requested_rank(rank);
    ToProto(info, hello->mutable_process());
    return m;
  }

  static trace::ProcessInfo SomeInfo() {
    trace::ProcessInfo info;
    info.process_name = "p";
    info.pid = 42;
    info.hostname = "h";
    info.origin_ns = 1000;
    return info;
  }

  // Opens a stream and says Hello; returns the Welcome's rank or -1.
  int32_t Join(Call* call, int32_t rank, const std::string& token) {
    *call = Open();
    EXPECT_TRUE(call->stream->Write(HelloMessage(token, rank, SomeInfo())));
    CollectorMessage reply;
    if (!call->stream->Read(&reply)) return -1;
    EXPECT_TRUE(reply.has_welcome());
    return reply.welcome().rank();
  }

  grpc::Status End(Call* call) {
    call->stream->WritesDone();
    CollectorMessage reply;
    while (call->stream->Read(&reply)) {
    }
    return call->stream->Finish();
  }

  static ProcessMessage Batch(uint64_t number, uint32_t thread,
                              const std::vector<trace::Event>& events) {
    ProcessMessage m;
    EventBatch* batch = m.mutable_events();
    batch->set_batch(number);
    batch->set_thread_index(thread);
    batch->set_thread_name(absl::StrCat("t", thread));
    trace::EncodeEvents(events, batch->mutable_events());
    return m;
  }

  // The same batch packed, as processes send it.
  static ProcessMessage PackedBatch(uint64_t number, uint32_t thread,
                                    const std::vector<trace::Event>& events) {
    ProcessMessage m = Batch(number, thread, {});
    trace::PackEvents(events, m.mutable_events()->mutable_packed());
    return m;
  }

  static std::vector<trace::Event> Enters(uint64_t first_stamp, int n) {
    std::vector<trace::Event> events(n);
    for (int i = 0; i < n; ++i) events[i].stamp = first_stamp + i;
    return events;
  }

  std::string dir_, raw_dir_, token_;
  std::unique_ptr<Collection> collection_;
  std::unique_ptr<CollectorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Collector::Stub> stub_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

// Streams `trace` as a tracer would: records, batches of at most
// `batch_events` per thread, interleaved, and Finish; checks every ack.
void StreamTrace(Collector::Stub* stub, const std::string& token,
                 const trace::ProcessTrace& trace, size_t batch_events) {
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub->Stream(&context);
  ProcessMessage m;
  Hello* hello = m.mutable_hello();
  hello->set_protocol_version(kProtocolVersion);
  hello->set_token(token);
  hello->set_requested_rank(trace.info.rank);
  ToProto(trace.info, hello->mutable_process());
  ASSERT_TRUE(stream->Write(m));
  CollectorMessage reply;
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_EQ(reply.welcome().rank(), trace.info.rank);
  // Records in two halves (the collector accumulates them).
  for (int half = 0; half < 2; ++half) {
    m.Clear();
    const size_t mappings = trace.mappings.size() * (half + 1) / 2;
    const size_t sessions = trace.sessions.size() * (half + 1) / 2;
    AppendRecords(
        half == 0 ? std::vector<trace::Region>{} : trace.regions,
        trace.communicators,
        std::vector<trace::MappingRecord>(
            trace.mappings.begin() + trace.mappings.size() * half / 2,
            trace.mappings.begin() + mappings),
        std::vector<trace::SyncSession>(
            trace.sessions.begin() + trace.sessions.size() * half / 2,
            trace.sessions.begin() + sessions),
        half == 0 ? trace.truth : std::nullopt, m.mutable_records());
    ASSERT_TRUE(stream->Write(m));
  }
  uint64_t batch = 0;
  uint64_t events = 0;
  std::vector<size_t> next(trace.threads.size(), 0);
  bool more = true;
  while (more) {
    more = false;
    for (size_t t = 0; t < trace.threads.size(); ++t) {
      const std::vector<trace::Event>& all = trace.threads[t].events;
      if (next[t] >= all.size()) continue;
      const size_t n = std::min(batch_events, all.size() - next[t]);
      m.Clear();
      EventBatch* b = m.mutable_events();
      b->set_batch(++batch);
      b->set_thread_index(trace.threads[t].thread_index);
      b->set_thread_name(trace.threads[t].name);
      trace::EncodeEvents(
          absl::MakeConstSpan(all.data() + next[t], n), b->mutable_events());
      ASSERT_TRUE(stream->Write(m));
      ASSERT_TRUE(stream->Read(&reply));
      ASSERT_EQ(reply.ack().batch(), batch);
      next[t] += n;
      events += n;
      more = true;
    }
  }
  m.Clear();
  m.mutable_finish()->set_events(events);
  ASSERT_TRUE(stream->Write(m));
  ASSERT_TRUE(stream->Read(&reply));
  EXPECT_TRUE(reply.ack().finished());
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(CollectorFixture, SyntheticTraceArrivesWholeAndCompares) {
  StartCollector(2);
  const std::string originals = dir_ + "/originals";
  ASSERT_EQ(mkdir(originals.c_str(), 0755), 0);
  absl::StatusOr<trace::SyntheticAnswers> answers =
      trace::WriteSyntheticTraces(originals);
  ASSERT_TRUE(answers.ok()) << answers.status();
  std::vector<trace::ProcessTrace> traces;
  for (const std::string& d : {answers->rank0_dir, answers->rank1_dir}) {
    absl::StatusOr<trace::ProcessTrace> t = trace::ReadProcessTrace(d);
    ASSERT_TRUE(t.ok()) << t.status();
    traces.push_back(*std::move(t));
  }
  // Rank 1 first, with small batches; rank 0 with large ones; at once.
  std::thread other([&] { StreamTrace(stub_.get(), token_, traces[1], 333); });
  StreamTrace(stub_.get(), token_, traces[0], 100000);
  other.join();
  ASSERT_TRUE(collection_->WaitUntilDone(absl::Seconds(10)));
  const std::vector<RankStatus> status = collection_->Status();
  ASSERT_EQ(status.size(), 2u);
  for (const RankStatus& s : status) {
    EXPECT_EQ(s.state, RankState::kFinished) << s.note;
  }
  EXPECT_EQ(status[0].events, static_cast<uint64_t>(answers->events_rank0));
  EXPECT_EQ(status[1].events, static_cast<uint64_t>(answers->events_rank1));

  // The raw archives read back as the originals.
  for (int r = 0; r < 2; ++r) {
    absl::StatusOr<trace::ProcessTrace> back =
        trace::ReadProcessTrace(status[r].archive_dir);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_FALSE(back->truncated) << back->truncation_note;
    const trace::ProcessTrace& original = traces[r];
    EXPECT_EQ(back->info.rank, original.info.rank);
    EXPECT_EQ(back->info.origin_ns, original.info.origin_ns);
    EXPECT_EQ(back->info.process_name, original.info.process_name);
    EXPECT_EQ(back->mappings, original.mappings);
    EXPECT_EQ(back->sessions, original.sessions);
    EXPECT_EQ(back->truth, original.truth);
    ASSERT_EQ(back->threads.size(), original.threads.size());
    for (size_t t = 0; t < original.threads.size(); ++t) {
      EXPECT_EQ(back->threads[t].name, original.threads[t].name);
      EXPECT_TRUE(back->threads[t].events == original.threads[t].events)
          << "rank " << r << " thread " << t;
    }
    ASSERT_EQ(back->regions.size(), original.regions.size());
    for (size_t i = 0; i < original.regions.size(); ++i) {
      EXPECT_EQ(back->regions[i].name, original.regions[i].name);
    }
  }

  // The run's archive: online, and the comparison the originals give.
  RunArchiveOptions options;
  absl::StatusOr<RunArchiveResult> run = WriteRunArchive(
      {status[0].archive_dir, status[1].archive_dir}, dir_ + "/run.otf2",
      options);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->correction_used, hull::CorrectionKind::kOnline);
  EXPECT_EQ(run->correction_note, "");
  EXPECT_EQ(run->events, static_cast<uint64_t>(answers->events_rank0 +
                                               answers->events_rank1));
  struct stat st;
  EXPECT_EQ(stat((dir_ + "/run.otf2/traces.otf2").c_str(), &st), 0);
  absl::StatusOr<trace::CompareReport> direct =
      trace::CompareCorrections(traces, 0);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(trace::FormatCompareTable(run->compare),
            trace::FormatCompareTable(*direct));
  for (const trace::CorrectionSummary& row : run->compare.rows) {
    if (row.kind == hull::CorrectionKind::kOnline) {
      EXPECT_EQ(row.clock_condition.reversed, 0);
      EXPECT_EQ(row.clock_condition.messages, answers->messages);
      EXPECT_NEAR(row.rms_error_ns, answers->online_rms_error_ns, 0.5);
    }
    if (row.kind == hull::CorrectionKind::kNone) {
      EXPECT_EQ(row.clock_condition.reversed,
                answers->reversed_without_correction);
    }
  }
  for (const RankSpan& span : run->ranks) {
    EXPECT_TRUE(span.has_events);
    EXPECT_FALSE(span.truncated);
    EXPECT_GT(span.last_event_global_ns, span.first_event_global_ns);
  }
}

TEST_F(CollectorFixture, RefusesWrongTokenAndBadRanks) {
  StartCollector(2);
  Call call;
  std::string wrong = token_;
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  EXPECT_EQ(Join(&call, 0, wrong), -1);
  grpc::Status status = End(&call);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("token"), std::string::npos);
  EXPECT_EQ(Join(&call, 0, ""), -1);
  EXPECT_EQ(End(&call).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  EXPECT_EQ(Join(&call, 2, token_), -1);
  status = End(&call);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(status.error_message().find("2"), std::string::npos);

  Call first, second, third;
  EXPECT_EQ(Join(&first, 1, token_), 1);
  EXPECT_EQ(Join(&second, 1, token_), -1);
  EXPECT_EQ(End(&second).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(Join(&second, -1, token_), 0);  // the lowest free rank
  EXPECT_EQ(Join(&third, -1, token_), -1);
  EXPECT_EQ(End(&third).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // A different protocol version.
  Call old = Open();
  ProcessMessage hello = HelloMessage(token_, -1, SomeInfo());
  hello.mutable_hello()->set_protocol_version(kProtocolVersion + 1);
  ASSERT_TRUE(old.stream->Write(hello));
  EXPECT_EQ(End(&old).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  const CollectionStats stats = collection_->Stats();
  EXPECT_EQ(stats.refused_token, 2u);
  EXPECT_EQ(stats.refused_hello, 4u);
  EXPECT_EQ(stats.streams_accepted, 2u);
  EXPECT_FALSE(log_.empty());
  End(&first);
  End(&second);
}

TEST_F(CollectorFixture, MalformedMessagesAreRefusedAndCounted) {
  struct Case {
    std::string name;
    std::vector<ProcessMessage> messages;  // after the Hello
    std::string expected;                  // in the error message
  };
  std::vector<Case> cases;
  cases.push_back({"batch out of sequence", {Batch(2, 0, Enters(1, 3))},
                   "events.batch: 2"});
  {
    ProcessMessage bad_kind = Batch(1, 0, Enters(1, 3));
    (*bad_kind.mutable_events()->mutable_events())[40 + 32] = 9;
    cases.push_back({"unknown event kind", {bad_kind}, "kind 9"});
  }
  {
    ProcessMessage cut = Batch(1, 0, Enters(1, 3));
    cut.mutable_events()->mutable_events()->resize(100);
    cases.push_back({"cut record", {cut}, "100 bytes"});
  }
  {
    ProcessMessage bad_kind = PackedBatch(1, 0, Enters(1, 3));
    (*bad_kind.mutable_events()->mutable_packed())[trace::kPackedChunkHeaderBytes] = 9;
    cases.push_back({"unknown packed event kind", {bad_kind}, "event 0: kind 9"});
  }
  {
    ProcessMessage cut = PackedBatch(1, 0, Enters(1, 3));
    cut.mutable_events()->mutable_packed()->resize(10);
    cases.push_back({"cut chunk", {cut}, "chunk of"});
  }
  {
    ProcessMessage both = PackedBatch(1, 0, Enters(1, 3));
    trace::EncodeEvents(Enters(1, 3), both.mutable_events()->mutable_events());
    cases.push_back({"packed and fixed", {both}, "both packed and fixed"});
  }
  cases.push_back({"packed stamps not rising",
                   {PackedBatch(1, 0, Enters(10, 3)), PackedBatch(2, 0, Enters(5, 3))},
                   "stamp 5 is not above the previous stamp 12"});
  cases.push_back({"stamps not rising",
                   {Batch(1, 0, Enters(10, 3)), Batch(2, 0, Enters(5, 3))},
                   "stamp 5 is not above the previous stamp 12"});
  {
    ProcessMessage records;
    records.mutable_records()->add_sessions()->set_kind(7);
    cases.push_back({"session kind", {records}, "records.sessions[0].kind: 7"});
  }
  {
    ProcessMessage records;
    Communicator* c = records.mutable_records()->add_communicators();
    c->add_ranks(0);
    c->add_ranks(50);
    cases.push_back({"communicator rank", {records}, "ranks[1]: 50"});
  }
  {
    ProcessMessage finish;
    finish.mutable_finish()->set_events(4);
    cases.push_back(
        {"finish count", {Batch(1, 0, Enters(1, 3)), finish}, "finish.events: 4"});
  }
  cases.push_back({"second hello", {HelloMessage(token_, -1, SomeInfo())},
                   "a second Hello"});
  cases.push_back({"empty message", {ProcessMessage()}, "an empty message"});

  StartCollector(static_cast<int32_t>(cases.size()));
  for (size_t i = 0; i < cases.size(); ++i) {
    // The test's HelloMessage above used the token before it existed.
    for (ProcessMessage& m : cases[i].messages) {
      if (m.has_hello()) m.mutable_hello()->set_token(token_);
    }
    Call call;
    ASSERT_EQ(Join(&call, static_cast<int32_t>(i), token_),
              static_cast<int32_t>(i));
    for (const ProcessMessage& m : cases[i].messages) call.stream->Write(m);
    const grpc::Status status = End(&call);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << cases[i].name;
    EXPECT_NE(status.error_message().find(cases[i].expected),
              std::string::npos)
        << cases[i].name << ": " << status.error_message();
  }
  // Not a Hello first.
  Call call = Open();
  ASSERT_TRUE(call.stream->Write(Batch(1, 0, Enters(1, 1))));
  EXPECT_EQ(End(&call).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  EXPECT_TRUE(collection_->WaitUntilDone(absl::Seconds(10)));
  const CollectionStats stats = collection_->Stats();
  EXPECT_EQ(stats.malformed_messages, cases.size() + 1);
  for (const RankStatus& s : collection_->Status()) {
    EXPECT_EQ(s.state, RankState::kLost) << s.rank;
    EXPECT_NE(s.note.find("refused a message"), std::string::npos) << s.note;
    // What was stored before the refusal stays readable.
    absl::StatusOr<trace::ProcessTrace> back =
        trace::ReadProcessTrace(s.archive_dir);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(back->truncated);
  }
}

TEST_F(CollectorFixture, CutStreamMarksRankLostKeepingItsEvents) {
  StartCollector(2);
  Call finished, cut;
  ASSERT_EQ(Join(&finished, 0, token_), 0);
  ASSERT_EQ(Join(&cut, 1, token_), 1);
  ASSERT_TRUE(cut.stream->Write(Batch(1, 0, Enters(100, 50))));
  CollectorMessage reply;
  ASSERT_TRUE(cut.stream->Read(&reply));
  EXPECT_EQ(reply.ack().batch(), 1u);
  EXPECT_FALSE(collection_->WaitUntilDone(absl::Milliseconds(50)));
  cut.context->TryCancel();  // as a killed process's connection would end
  cut.stream->Finish().IgnoreError();
  ProcessMessage finish;
  finish.mutable_finish()->set_events(0);
  ASSERT_TRUE(finished.stream->Write(finish));
  EXPECT_TRUE(End(&finished).ok());
  ASSERT_TRUE(collection_->WaitUntilDone(absl::Seconds(10)));
  const std::vector<RankStatus> status = collection_->Status();
  EXPECT_EQ(status[0].state, RankState::kFinished);
  EXPECT_EQ(status[1].state, RankState::kLost);
  EXPECT_NE(status[1].note.find("without Finish"), std::string::npos)
      << status[1].note;
  EXPECT_EQ(status[1].events, 50u);
  absl::StatusOr<trace::ProcessTrace> back =
      trace::ReadProcessTrace(status[1].archive_dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->truncated);
  ASSERT_EQ(back->threads.size(), 1u);
  EXPECT_EQ(back->threads[0].events.size(), 50u);
  EXPECT_EQ(back->threads[0].events.back().stamp, 149u);
}

TEST_F(CollectorFixture, ALostRankIsToldToTheOthersAndToLaterJoiners) {
  StartCollector(3);
  Call first, victim, later;
  ASSERT_EQ(Join(&first, 0, token_), 0);
  ASSERT_EQ(Join(&victim, 1, token_), 1);
  victim.context->TryCancel();  // as a killed process's connection would end
  victim.stream->Finish().IgnoreError();
  CollectorMessage told;
  ASSERT_TRUE(first.stream->Read(&told));
  ASSERT_TRUE(told.has_peer_lost());
  EXPECT_EQ(told.peer_lost().rank(), 1);
  EXPECT_NE(told.peer_lost().why().find("without Finish"), std::string::npos)
      << told.peer_lost().why();
  // A rank that joins later hears of it right after its Welcome.
  ASSERT_EQ(Join(&later, 2, token_), 2);
  ASSERT_TRUE(later.stream->Read(&told));
  ASSERT_TRUE(told.has_peer_lost());
  EXPECT_EQ(told.peer_lost().rank(), 1);
  // The streams go on: acks still come.
  ASSERT_TRUE(first.stream->Write(Batch(1, 0, Enters(100, 5))));
  ASSERT_TRUE(first.stream->Read(&told));
  EXPECT_EQ(told.ack().batch(), 1u);
  ProcessMessage finish;
  finish.mutable_finish()->set_events(5);
  ASSERT_TRUE(first.stream->Write(finish));
  EXPECT_TRUE(End(&first).ok());
  finish.mutable_finish()->set_events(0);
  ASSERT_TRUE(later.stream->Write(finish));
  EXPECT_TRUE(End(&later).ok());
  ASSERT_TRUE(collection_->WaitUntilDone(absl::Seconds(10)));
}

TEST_F(CollectorFixture, APhaseContinuesOnlyARankBetweenPhases) {
  StartCollector(2);
  Call call;
  ASSERT_EQ(Join(&call, 0, token_), 0);
  ProcessMessage finish;
  finish.mutable_finish()->set_events(0);
  finish.mutable_finish()->set_more_phases(true);
  ASSERT_TRUE(call.stream->Write(finish));
  EXPECT_TRUE(End(&call).ok());
  EXPECT_EQ(collection_->Status()[0].state, RankState::kBetweenPhases);
  // Phase 2 (not 1), and phase 1 of rank 1 (never joined): refused.
  for (auto [rank, phase] : {std::pair{0, 2u}, std::pair{1, 1u}}) {
    call = Open();
    ProcessMessage hello = HelloMessage(token_, rank, SomeInfo());
    hello.mutable_hello()->set_phase(phase);
    ASSERT_TRUE(call.stream->Write(hello));
    CollectorMessage reply;
    EXPECT_FALSE(call.stream->Read(&reply));
    const grpc::Status status = call.stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find("hello.phase"), std::string::npos)
        << status.error_message();
  }
  // Phase 1 of rank 0: its own raw archive.
  call = Open();
  ProcessMessage hello = HelloMessage(token_, 0, SomeInfo());
  hello.mutable_hello()->set_phase(1);
  ASSERT_TRUE(call.stream->Write(hello));
  CollectorMessage reply;
  ASSERT_TRUE(call.stream->Read(&reply));
  EXPECT_EQ(reply.welcome().rank(), 0);
  finish.mutable_finish()->set_more_phases(false);
  ASSERT_TRUE(call.stream->Write(finish));
  EXPECT_TRUE(End(&call).ok());
  const RankStatus status = collection_->Status()[0];
  EXPECT_EQ(status.state, RankState::kFinished);
  EXPECT_EQ(status.phase, 1u);
  EXPECT_EQ(status.phase_dirs.size(), 2u);
}

TEST_F(CollectorFixture, WaitsWithoutLimitUntilStopped) {
  StartCollector(1);
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    collection_->Stop();  // as SIGINT does
  });
  EXPECT_FALSE(collection_->WaitUntilDone(absl::InfiniteDuration()));
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(200));
  stopper.join();
}

}  // namespace
}  // namespace clocksync::collector
