// collector/streaming_sink_test.cc: the traced process's end of the stream
// against an in-process collector: a trace arrives whole; an unreachable
// collector and a wrong token are errors at Connect; a collector that goes
// away mid-stream or stops reading (the watchdog) makes the sink fall back
// to a local archive, and the collector's raw archive plus the local one
// hold every event exactly once or, for a lost ack, the last acknowledged
// ones twice.

#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collector/collection.h"
#include "collector/collector_service.h"
#include "collector/contact.h"
#include "collector/streaming_sink.h"
#include "collector/wire.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "trace/otf2_reader.h"

namespace clocksync::collector {
namespace {

std::string TempDir() {
  std::string templ = absl::StrCat(
      std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp",
      "/sink_test.XXXXXX");
  EXPECT_NE(mkdtemp(templ.data()), nullptr);
  return templ;
}

trace::ProcessInfo Info() {
  trace::ProcessInfo info;
  info.process_name = "app";
  info.pid = getpid();
  info.hostname = "here";
  info.origin_ns = 5000;
  return info;
}

// `n` events of one thread, stamps from `first`, all kinds in turn.
std::vector<trace::Event> Events(uint64_t first, size_t n) {
  std::vector<trace::Event> events(n);
  for (size_t i = 0; i < n; ++i) {
    trace::Event& e = events[i];
    e.stamp = first + i;
    switch (i % 4) {
      case 0:
        e.kind = trace::EventKind::kEnter;
        e.region = 0;
        break;
      case 1:
        e.kind = trace::EventKind::kSend;
        e.peer = 0;
        e.tag = 3;
        e.bytes = i;
        break;
      case 2:
        e.kind = trace::EventKind::kRecv;
        e.peer = 0;
        e.tag = 3;
        e.bytes = i;
        break;
      default:
        e.kind = trace::EventKind::kLeave;
        e.region = 0;
    }
  }
  return events;
}

const std::vector<trace::Region> kRegions = {{0, "work"}};
const std::vector<trace::Communicator> kComms = {{0, "world", {0}}};

class SinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    raw_dir_ = dir_ + "/raw";
    local_dir_ = dir_ + "/local";
    ASSERT_EQ(mkdir(raw_dir_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(local_dir_.c_str(), 0755), 0);
    token_ = *NewToken();
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  void StartCollector() {
    CollectionOptions options;
    options.token = token_;
    options.raw_dir = raw_dir_;
    options.world_size = 1;
    collection_ = std::make_unique<Collection>(options);
    service_ = std::make_unique<CollectorService>(collection_.get(), nullptr);
    absl::StatusOr<std::unique_ptr<grpc::Server>> server =
        BuildCollectorServer("127.0.0.1:0", service_.get(), nullptr, &port_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  StreamingOptions Options(const std::string& token) {
    StreamingOptions options;
    options.contact = Contact{token, absl::StrCat("127.0.0.1:", port_)};
    options.info = Info();
    options.fallback_trace_dir = local_dir_;
    options.fallback_name = "app";
    // Generous: sanitizers slow everything down; the watchdog test sets
    // its own.
    options.timeout_ns = 30'000'000'000;
    options.warn = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(warn_mutex_);
      warnings_.push_back(line);
    };
    return options;
  }

  std::string dir_, raw_dir_, local_dir_, token_;
  int port_ = 0;
  std::unique_ptr<Collection> collection_;
  std::unique_ptr<CollectorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex warn_mutex_;
  std::vector<std::string> warnings_;
};

TEST_F(SinkTest, TraceArrivesWhole) {
  StartCollector();
  absl::StatusOr<std::unique_ptr<StreamingSink>> sink =
      StreamingSink::Connect(Options(token_));
  ASSERT_TRUE(sink.ok()) << sink.status();
  EXPECT_EQ((*sink)->rank(), 0);
  EXPECT_EQ((*sink)->world_size(), 1);
  // Two threads' buffers, interleaved; one larger than a batch (split).
  const std::vector<trace::Event> t0 = Events(100, 6000);  // several batches of 2400
  const std::vector<trace::Event> t1 = Events(7, 1000);
  ASSERT_TRUE((*sink)->AppendEvents(0, "main", absl::MakeConstSpan(t0).first(1000)).ok());
  ASSERT_TRUE((*sink)->AppendEvents(1, "worker", t1).ok());
  ASSERT_TRUE((*sink)->StreamRecords(kRegions, kComms, {}, {}, std::nullopt).ok());
  ASSERT_TRUE((*sink)->AppendEvents(0, "main", absl::MakeConstSpan(t0).subspan(1000)).ok());
  trace::SyncSession session;
  session.exchanges.push_back(hull::ProbeSample{1, 2, 3, 4, 0});
  ASSERT_TRUE((*sink)->Finish(kRegions, kComms, {}, {session}, std::nullopt).ok());
  EXPECT_FALSE((*sink)->fell_back()) << (*sink)->fallback_reason();
  EXPECT_EQ((*sink)->events_acknowledged(), t0.size() + t1.size());
  ASSERT_TRUE(collection_->WaitUntilDone(absl::Seconds(5)));
  absl::StatusOr<trace::ProcessTrace> back =
      trace::ReadProcessTrace(raw_dir_ + "/rank.0");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->truncated) << back->truncation_note;
  ASSERT_EQ(back->threads.size(), 2u);
  EXPECT_TRUE(back->threads[0].events == t0);
  EXPECT_TRUE(back->threads[1].events == t1);
  EXPECT_EQ(back->threads[1].name, "worker");
  ASSERT_EQ(back->sessions.size(), 1u);
  EXPECT_EQ(back->sessions[0], session);
  ASSERT_EQ(back->regions.size(), 1u);
  EXPECT_EQ(back->info.origin_ns, 5000);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(SinkTest, UnreachableAndWrongTokenFailAtConnect) {
  // A port nobody listens on: bind one, keep it closed to connections.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  StreamingOptions options = Options(token_);
  options.timeout_ns = 1'000'000'000;
  absl::StatusOr<std::unique_ptr<StreamingSink>> sink =
      StreamingSink::Connect(options);
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(sink.status().message().find(options.contact.address),
            std::string::npos)
      << sink.status();
  close(fd);

  StartCollector();
  std::string wrong = token_;
  wrong[5] = wrong[5] == '0' ? '1' : '0';
  sink = StreamingSink::Connect(Options(wrong));
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), absl::StatusCode::kPermissionDenied)
      << sink.status();
  EXPECT_EQ(collection_->Stats().refused_token, 1u);
}

// The events of rank 0 in the collector's raw archive and the local one,
// per thread: the local one continues where the collector's stopped (or
// repeats a few acknowledged ones first).
void ExpectNothingLost(const std::string& raw, const std::string& local,
                       const std::vector<std::vector<trace::Event>>& sent) {
  std::vector<std::vector<trace::Event>> got(sent.size());
  absl::StatusOr<trace::ProcessTrace> stored = trace::ReadProcessTrace(raw);
  ASSERT_TRUE(stored.ok()) << stored.status();
  for (const trace::ThreadTrace& t : stored->threads) {
    got[t.thread_index] = t.events;
  }
  absl::StatusOr<trace::ProcessTrace> kept = trace::ReadProcessTrace(local);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->truncated) << kept->truncation_note;
  EXPECT_EQ(kept->regions.size(), kRegions.size());
  for (const trace::ThreadTrace& t : kept->threads) {
    for (const trace::Event& e : t.events) {
      std::vector<trace::Event>& g = got[t.thread_index];
      if (g.empty() || e.stamp > g.back().stamp) g.push_back(e);
    }
  }
  for (size_t t = 0; t < sent.size(); ++t) {
    EXPECT_EQ(got[t].size(), sent[t].size()) << "thread " << t;
    EXPECT_TRUE(got[t] == sent[t]) << "thread " << t;
  }
}

TEST_F(SinkTest, CollectorShutDownMidStreamFallsBackWithNothingLost) {
  StartCollector();
  absl::StatusOr<std::unique_ptr<StreamingSink>> sink =
      StreamingSink::Connect(Options(token_));
  ASSERT_TRUE(sink.ok()) << sink.status();
  std::vector<std::vector<trace::Event>> sent = {Events(1, 12000),
                                                 Events(1, 2000)};
  ASSERT_TRUE((*sink)->StreamRecords(kRegions, kComms, {}, {}, std::nullopt).ok());
  const size_t cut = 5000;
  ASSERT_TRUE((*sink)->AppendEvents(0, "main", absl::MakeConstSpan(sent[0]).first(cut)).ok());
  ASSERT_TRUE((*sink)->AppendEvents(1, "w", sent[1]).ok());
  // The collector goes away (its open streams cancelled).
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  ASSERT_TRUE((*sink)->AppendEvents(0, "main", absl::MakeConstSpan(sent[0]).subspan(cut)).ok());
  ASSERT_TRUE((*sink)->Finish(kRegions, kComms, {}, {}, std::nullopt).ok());
  EXPECT_TRUE((*sink)->fell_back());
  EXPECT_EQ((*sink)->archive_dir(), local_dir_ + "/app.r0");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("local archive " + local_dir_ + "/app.r0"),
            std::string::npos)
      << warnings_[0];
  ExpectNothingLost(raw_dir_ + "/rank.0", local_dir_ + "/app.r0", sent);
}

// A collector that takes the Hello and then never reads again.
class SilentCollector final : public Collector::Service {
 public:
  grpc::Status Stream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<CollectorMessage, ProcessMessage>* stream)
      override {
    ProcessMessage hello;
    if (!stream->Read(&hello)) return grpc::Status::CANCELLED;
    CollectorMessage welcome;
    welcome.mutable_welcome()->set_rank(3);
    // The smallest window a sink accepts, which the test's events
    // (110,000, packed in more than 2 bytes each) overflow.
    welcome.mutable_welcome()->set_max_unacked_bytes(kSendBatchBytes);
    stream->Write(welcome);
    while (!context->IsCancelled() && !stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return grpc::Status::CANCELLED;
  }
  std::atomic<bool> stop{false};
};

TEST_F(SinkTest, SilentCollectorTripsTheWatchdog) {
  SilentCollector silent;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      BuildCollectorServer("127.0.0.1:0", &silent, nullptr, &port_);
  ASSERT_TRUE(server.ok());
  server_ = *std::move(server);
  StreamingOptions options = Options(token_);
  options.timeout_ns = 400'000'000;
  absl::StatusOr<std::unique_ptr<StreamingSink>> sink =
      StreamingSink::Connect(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  EXPECT_EQ((*sink)->rank(), 3);
  const std::vector<std::vector<trace::Event>> sent = {Events(1, 110000)};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE((*sink)->AppendEvents(0, "main", sent[0]).ok());
  ASSERT_TRUE((*sink)->Finish(kRegions, kComms, {}, {}, std::nullopt).ok());
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  EXPECT_LT(seconds, 5.0);
  EXPECT_TRUE((*sink)->fell_back());
  EXPECT_NE((*sink)->fallback_reason().find("400 ms"), std::string::npos)
      << (*sink)->fallback_reason();
  absl::StatusOr<trace::ProcessTrace> kept =
      trace::ReadProcessTrace(local_dir_ + "/app.r3");
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->threads.size(), 1u);
  EXPECT_TRUE(kept->threads[0].events == sent[0]);  // nothing was acked
  silent.stop = true;
}

}  // namespace
}  // namespace clocksync::collector
