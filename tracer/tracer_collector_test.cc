// tracer/tracer_collector_test.cc: the tracer streaming to a collector (an
// in-process one on loopback): buffers arrive while the program records
// (before Finalize), the rank is the collector's, every event and record
// is in the collector's raw archive; a collector unreachable at Init gives
// the local archive and says so; a collector gone mid-run leaves the rest
// to the local archive with no event lost; a bad contact string is an
// error naming the variable; children attached by the tracer (the C API's
// attach) get ranks after the run's and the group's communicators are in
// the parent's trace.

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collector/collection.h"
#include "collector/collector_service.h"
#include "collector/contact.h"
#include "collector/run_archive.h"
#include "collector/streaming_sink.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "trace/otf2_reader.h"
#include "trace/trace.h"
#include "tracer/clocksync_trace.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace {

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string dir = std::string(base != nullptr ? base : "/tmp") +
                    "/tracer_collector_test.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "";
  return dir;
}

class TracerCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    raw_dir_ = dir_ + "/raw";
    ASSERT_EQ(mkdir(raw_dir_.c_str(), 0755), 0);
    token_ = *collector::NewToken();
    options_.trace_dir = dir_ + "/local";
    options_.name = "app";
    options_.shm_path = dir_ + "/no.shm";  // no daemon: a warning only
    options_.read_environment = false;
    options_.install_signal_handlers = false;
    options_.buffer_events = 1024;  // several buffers stream during the run
    // Generous: sanitizers slow everything down (under ThreadSanitizer with
    // Debian's uninstrumented gRPC on a loaded CI machine a batch has taken
    // ~150 ms).
    options_.collector_timeout_ns = 120'000'000'000;
  }
  void TearDown() override {
    if (Tracer::IsActive()) Tracer::Finalize().IgnoreError();
    if (server_ != nullptr) server_->Shutdown();
  }

  void StartCollector(int32_t world_size) {
    collector::CollectionOptions options;
    options.token = token_;
    options.raw_dir = raw_dir_;
    options.world_size = world_size;
    collection_ = std::make_unique<collector::Collection>(options);
    service_ =
        std::make_unique<collector::CollectorService>(collection_.get(), nullptr);
    absl::StatusOr<std::unique_ptr<grpc::Server>> server =
        collector::BuildCollectorServer("127.0.0.1:0", service_.get(), nullptr,
                                        &port_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    options_.collector = absl::StrCat(token_, "@127.0.0.1:", port_);
  }

  // Records `pairs` Enter/Leave pairs on `threads` threads, each thread
  // waiting for `go` between its halves.
  static void RecordOnThreads(uint32_t region, int threads, int pairs) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([region, pairs] {
        for (int i = 0; i < pairs; ++i) {
          ASSERT_TRUE(Tracer::Enter(region));
          ASSERT_TRUE(Tracer::Leave(region));
        }
      });
    }
    for (std::thread& w : workers) w.join();
  }

  // Records `pairs` Enter/Leave pairs on the calling thread.
  static void RecordHere(uint32_t region, int pairs) {
    for (int i = 0; i < pairs; ++i) {
      ASSERT_TRUE(Tracer::Enter(region));
      ASSERT_TRUE(Tracer::Leave(region));
    }
  }

  std::string dir_, raw_dir_, token_;
  int port_ = 0;
  TracerOptions options_;
  std::unique_ptr<collector::Collection> collection_;
  std::unique_ptr<collector::CollectorService> service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(TracerCollectorTest, StreamsWhileRecordingAndTheCollectorHasItAll) {
  StartCollector(3);
  options_.rank = -1;  // the collector assigns: rank 0
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Rank(), 0);
  EXPECT_EQ(Tracer::WorldSize(), 3);
  EXPECT_EQ(cs_trace_rank(), 0);
  const uint32_t region = *Tracer::DefineRegion("work");
  ASSERT_TRUE(Tracer::Send(2, 5, 100));
  RecordOnThreads(region, 3, 5000);  // 30000 events, ~30 buffers
  // Buffers arrive while the program runs, not at Finalize.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Tracer::Stats().events_streamed < 20000 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const TracerStats during = Tracer::Stats();
  EXPECT_GE(during.events_streamed, 20000u);
  EXPECT_EQ(during.archive_dir, absl::StrCat("collector 127.0.0.1:", port_));
  EXPECT_GE(collection_->Status()[0].events, 20000u);
  ASSERT_TRUE(Tracer::Finalize().ok());
  const TracerStats after = Tracer::Stats();
  EXPECT_EQ(after.events_streamed, after.events_recorded);
  EXPECT_EQ(after.events_recorded, 30001u);
  EXPECT_FALSE(after.collector_fallback) << after.collector_note;

  const std::vector<collector::RankStatus> status = collection_->Status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].state, collector::RankState::kFinished) << status[0].note;
  absl::StatusOr<trace::ProcessTrace> back =
      trace::ReadProcessTrace(status[0].archive_dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->truncated) << back->truncation_note;
  EXPECT_EQ(back->info.rank, 0);
  EXPECT_EQ(back->info.process_name, "app");
  uint64_t events = 0;
  for (const trace::ThreadTrace& t : back->threads) events += t.events.size();
  EXPECT_EQ(events, 30001u);
  ASSERT_EQ(back->regions.size(), 1u);
  EXPECT_EQ(back->regions[0].name, "work");
  ASSERT_FALSE(back->communicators.empty());
  EXPECT_EQ(back->communicators[0].ranks.size(), 3u);  // the world of 3
  // Nothing local.
  struct stat st;
  EXPECT_NE(stat((options_.trace_dir + "/app.r0").c_str(), &st), 0);
}

TEST_F(TracerCollectorTest, UnreachableCollectorGivesTheLocalArchive) {
  // A port bound but never listening: connections are refused.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string where = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  options_.collector = absl::StrCat(token_, "@", where);
  options_.collector_timeout_ns = 300'000'000;
  options_.rank = 4;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  const TracerStats stats = Tracer::Stats();
  EXPECT_TRUE(stats.collector_fallback);
  EXPECT_NE(stats.collector_note.find(where), std::string::npos)
      << stats.collector_note;
  EXPECT_EQ(Tracer::Rank(), 4);
  RecordOnThreads(*Tracer::DefineRegion("work"), 1, 100);
  ASSERT_TRUE(Tracer::Finalize().ok());
  absl::StatusOr<trace::ProcessTrace> local =
      trace::ReadProcessTrace(options_.trace_dir + "/app.r4");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_FALSE(local->truncated);
  ASSERT_EQ(local->threads.size(), 1u);
  EXPECT_EQ(local->threads[0].events.size(), 200u);
  close(fd);
}

TEST_F(TracerCollectorTest, CollectorGoneMidRunLosesNoEvent) {
  StartCollector(2);
  options_.rank = 1;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Rank(), 1);
  const uint32_t region = *Tracer::DefineRegion("work");
  RecordOnThreads(region, 2, 10000);
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  RecordOnThreads(region, 2, 10000);
  ASSERT_TRUE(Tracer::Finalize().ok());
  const TracerStats stats = Tracer::Stats();
  EXPECT_TRUE(stats.collector_fallback);
  EXPECT_EQ(stats.archive_dir, options_.trace_dir + "/app.r1");
  EXPECT_EQ(stats.events_dropped, 0u);

  // The collector's part and the local part: every event once per thread
  // (the local one may repeat acknowledged events whose ack was lost).
  absl::StatusOr<trace::ProcessTrace> stored =
      trace::ReadProcessTrace(raw_dir_ + "/rank.1");
  ASSERT_TRUE(stored.ok()) << stored.status();
  absl::StatusOr<trace::ProcessTrace> local =
      trace::ReadProcessTrace(options_.trace_dir + "/app.r1");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_FALSE(local->truncated) << local->truncation_note;
  std::map<uint32_t, std::vector<uint64_t>> stamps;
  for (const trace::ThreadTrace& t : stored->threads) {
    for (const trace::Event& e : t.events) stamps[t.thread_index].push_back(e.stamp);
  }
  for (const trace::ThreadTrace& t : local->threads) {
    for (const trace::Event& e : t.events) {
      std::vector<uint64_t>& s = stamps[t.thread_index];
      if (s.empty() || e.stamp > s.back()) s.push_back(e.stamp);
    }
  }
  uint64_t events = 0;
  for (const auto& [thread, s] : stamps) events += s.size();
  EXPECT_EQ(events, stats.events_recorded);
  EXPECT_EQ(events, 80000u);
}

TEST_F(TracerCollectorTest, PhasesKeepTheRankAndTheCollectorJoinsThem) {
  StartCollector(1);
  options_.rank = -1;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Stats().phase, 0u);
  RecordHere(*Tracer::DefineRegion("first"), 100);
  ASSERT_TRUE(Tracer::FinalizePhase().ok());
  std::vector<collector::RankStatus> status = collection_->Status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].state, collector::RankState::kBetweenPhases);
  // Between phases the run is not done.
  EXPECT_FALSE(collection_->WaitUntilDone(absl::ZeroDuration()));

  // The next phase: the same rank, new definitions (ids start again).
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Rank(), 0);
  EXPECT_EQ(Tracer::Stats().phase, 1u);
  RecordHere(*Tracer::DefineRegion("second"), 30);
  RecordHere(*Tracer::DefineRegion("first"), 20);
  ASSERT_EQ(cs_trace_finalize_phase(), CLOCKSYNC_OK);
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Stats().phase, 2u);
  RecordHere(*Tracer::DefineRegion("third"), 10);
  ASSERT_TRUE(Tracer::Finalize().ok());
  EXPECT_FALSE(Tracer::Stats().collector_fallback)
      << Tracer::Stats().collector_note;
  EXPECT_TRUE(collection_->WaitUntilDone(absl::ZeroDuration()));

  status = collection_->Status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].state, collector::RankState::kFinished) << status[0].note;
  EXPECT_EQ(status[0].phase, 2u);
  ASSERT_EQ(status[0].phase_dirs.size(), 3u);
  EXPECT_EQ(status[0].phase_dirs[2], raw_dir_ + "/rank.0.phase.2");
  EXPECT_EQ(status[0].events, 200u + 100u + 20u);
  absl::StatusOr<trace::ProcessTrace> joined =
      collector::ReadRankPhases(status[0].phase_dirs);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_FALSE(joined->truncated) << joined->truncation_note;
  // One thread (the test's), the phases' events in order, regions by name.
  ASSERT_EQ(joined->threads.size(), 1u);
  const std::vector<trace::Event>& events = joined->threads[0].events;
  ASSERT_EQ(events.size(), 320u);
  for (size_t i = 1; i < events.size(); ++i) {
    ASSERT_LT(events[i - 1].stamp, events[i].stamp) << i;
  }
  std::map<uint32_t, std::string> names;
  for (const trace::Region& r : joined->regions) names[r.id] = r.name;
  EXPECT_EQ(names.size(), 3u);
  EXPECT_EQ(names[events[0].region], "first");
  EXPECT_EQ(names[events[200].region], "second");
  EXPECT_EQ(names[events[260].region], "first");
  EXPECT_EQ(names[events[300].region], "third");
  // Every phase's sync sessions and records are the rank's.
  EXPECT_EQ(joined->info.rank, 0);
}

TEST_F(TracerCollectorTest, LocalPhasesHaveAnArchiveEach) {
  options_.rank = 3;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  RecordOnThreads(*Tracer::DefineRegion("a"), 1, 5);
  ASSERT_TRUE(Tracer::FinalizePhase().ok());
  options_.rank = 7;  // ignored: a phase continues the rank
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Rank(), 3);
  RecordOnThreads(*Tracer::DefineRegion("b"), 1, 6);
  ASSERT_TRUE(Tracer::Finalize().ok());
  absl::StatusOr<trace::ProcessTrace> first =
      trace::ReadProcessTrace(options_.trace_dir + "/app.r3");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<trace::ProcessTrace> second =
      trace::ReadProcessTrace(options_.trace_dir + "/app.r3.p1");
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->threads.size(), 1u);
  EXPECT_EQ(second->threads[0].events.size(), 12u);
  // After Finalize the next Init is a new trace (phase 0 again).
  options_.trace_dir = dir_ + "/again";
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Stats().phase, 0u);
  EXPECT_EQ(Tracer::Rank(), 7);
  ASSERT_TRUE(Tracer::Finalize().ok());
}

TEST_F(TracerCollectorTest, AbortInitReturnsFromAnotherThread) {
  EXPECT_FALSE(Tracer::AbortInit());  // no Init waits
  EXPECT_EQ(cs_trace_abort(), CLOCKSYNC_ENOTINIT);
  // A port bound but never listening: Init keeps trying to connect.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  options_.collector =
      absl::StrCat(token_, "@127.0.0.1:", ntohs(address.sin_port));
  options_.collector_timeout_ns = 600'000'000'000;
  std::atomic<bool> told{false};
  std::thread aborter([&] {
    while (!Tracer::AbortInit()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    told = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = Tracer::Init(options_);
  const auto took = std::chrono::steady_clock::now() - start;
  aborter.join();
  EXPECT_TRUE(told);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_NE(status.message().find("aborted"), std::string::npos) << status;
  EXPECT_LT(took, std::chrono::seconds(30));
  EXPECT_FALSE(Tracer::IsActive());
  close(fd);
  // Nothing is left behind: the next Init works.
  options_.collector.clear();
  ASSERT_TRUE(Tracer::Init(options_).ok());
  ASSERT_TRUE(Tracer::Finalize().ok());
}

TEST_F(TracerCollectorTest, AbortInitCutsTheWaitForASilentCollector) {
  // A listening socket that never answers: the kernel accepts, gRPC's
  // handshake and the Welcome never complete.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  setenv("CLOCKSYNC_COLLECTOR",
         absl::StrCat(token_, "@127.0.0.1:", ntohs(address.sin_port)).c_str(),
         1);
  setenv("CLOCKSYNC_COLLECTOR_TIMEOUT_MS", "600000", 1);
  std::thread aborter([&] {
    while (cs_trace_abort() != CLOCKSYNC_OK) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  cs_trace_options options;
  cs_trace_options_init(&options);
  const std::string trace_dir = dir_ + "/c";
  options.trace_dir = trace_dir.c_str();
  options.shm_path = options_.shm_path.c_str();
  options.install_signal_handlers = 0;
  EXPECT_EQ(cs_trace_init(&options), CLOCKSYNC_EABORTED);
  EXPECT_NE(std::string(cs_trace_last_error()).find("aborted"),
            std::string::npos)
      << cs_trace_last_error();
  aborter.join();
  unsetenv("CLOCKSYNC_COLLECTOR");
  unsetenv("CLOCKSYNC_COLLECTOR_TIMEOUT_MS");
  EXPECT_FALSE(Tracer::IsActive());
  close(fd);
}

TEST_F(TracerCollectorTest, BadContactIsAConfigurationError) {
  setenv("CLOCKSYNC_COLLECTOR", "127.0.0.1:4242", 1);
  cs_trace_options options;
  cs_trace_options_init(&options);
  EXPECT_EQ(options.rank, -1);
  const std::string trace_dir = dir_ + "/c";
  options.trace_dir = trace_dir.c_str();
  options.install_signal_handlers = 0;
  EXPECT_EQ(cs_trace_init(&options), CLOCKSYNC_ECONFIG);
  EXPECT_NE(std::string(cs_trace_last_error()).find("CLOCKSYNC_COLLECTOR"),
            std::string::npos)
      << cs_trace_last_error();
  unsetenv("CLOCKSYNC_COLLECTOR");
}

}  // namespace
}  // namespace clocksync

namespace clocksync {
namespace {

TEST_F(TracerCollectorTest, AttachConnectsChildrenAndDefinesTheCommunicators) {
  StartCollector(1);
  ASSERT_TRUE(Tracer::Init(options_).ok());
  char contact[512];
  ASSERT_EQ(cs_trace_attach_contact(contact, sizeof(contact)), 0)
      << cs_trace_last_error();
  absl::StatusOr<collector::Contact> parsed =
      collector::ParseContact("test", contact);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->attach_parent, 0);
  EXPECT_EQ(parsed->attach_group, 0u);
  EXPECT_EQ(parsed->address, absl::StrCat("127.0.0.1:", port_));
  char small[8];
  EXPECT_EQ(cs_trace_attach_contact(small, sizeof(small)), CLOCKSYNC_EINVAL);
  // Two children (stream ends of their own, as separate processes have).
  std::vector<std::unique_ptr<collector::StreamingSink>> children(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      collector::StreamingOptions child;
      child.contact = *parsed;
      child.info.process_name = "child";
      child.info.pid = 100 + i;
      child.info.hostname = "here";
      child.fallback_trace_dir = dir_;
      child.fallback_name = absl::StrCat("child", i);
      child.timeout_ns = 60'000'000'000;
      absl::StatusOr<std::unique_ptr<collector::StreamingSink>> sink =
          collector::StreamingSink::Connect(child);
      if (sink.ok()) children[i] = *std::move(sink);
    });
  }
  EXPECT_EQ(cs_trace_attach(0, nullptr, nullptr, nullptr), CLOCKSYNC_EINVAL);
  const int64_t pids[] = {101, 100};
  uint32_t children_comm = 0;
  uint32_t family_comm = 0;
  ASSERT_EQ(cs_trace_attach(2, pids, &children_comm, &family_comm), 0)
      << cs_trace_last_error();
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(children[0] != nullptr && children[1] != nullptr);
  EXPECT_EQ(children[1]->rank(), 1);  // pid 101 first
  EXPECT_EQ(children[0]->rank(), 2);
  EXPECT_GE(children_comm, 1u);
  EXPECT_NE(children_comm, family_comm);
  // The family: this process is its rank 0, the children 1 and 2.
  EXPECT_TRUE(Tracer::Send(2, 7, 64, family_comm));
  EXPECT_FALSE(Tracer::Send(3, 7, 64, family_comm));
  EXPECT_TRUE(Tracer::CollectiveBegin(trace::CollectiveKind::kBcast,
                                      family_comm, 0, 64));
  EXPECT_TRUE(Tracer::CollectiveEnd(trace::CollectiveKind::kBcast,
                                    family_comm, 0, 0));
  // Not attached itself; the next contact string is the next group's.
  EXPECT_EQ(cs_trace_attached(nullptr, nullptr, nullptr), CLOCKSYNC_ENOTINIT);
  ASSERT_EQ(cs_trace_attach_contact(contact, sizeof(contact)), 0);
  EXPECT_EQ(collector::ParseContact("test", contact)->attach_group, 1u);
  for (auto& child : children) {
    ASSERT_TRUE(child->Finish({}, {}, {}, {}, std::nullopt).ok());
  }
  ASSERT_TRUE(Tracer::Finalize().ok());
  ASSERT_TRUE(collection_->WaitUntilDone(absl::Seconds(10)));
  absl::StatusOr<trace::ProcessTrace> back =
      trace::ReadProcessTrace(raw_dir_ + "/rank.0");
  ASSERT_TRUE(back.ok()) << back.status();
  std::map<std::string, std::vector<int32_t>> comms;
  for (const trace::Communicator& c : back->communicators) {
    comms[c.name] = c.ranks;
  }
  EXPECT_EQ(comms["attach r0.g0 children"], (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(comms["attach r0.g0"], (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(comms["world"], (std::vector<int32_t>{0}));
}

TEST_F(TracerCollectorTest, ServerInitAttachesChildrenAtItsAdvertisedAddress) {
  // Every IPv4 address; another loopback address than this process's own
  // (127.0.0.1) advertised: no name to resolve.
  setenv("CLOCKSYNC_COLLECTOR_LISTEN", "0.0.0.0:0", 1);
  setenv("CLOCKSYNC_COLLECTOR_ADVERTISE", "127.0.0.2", 1);
  options_.trace_dir = dir_;
  options_.world_size = 1;
  absl::StatusOr<std::string> served = Tracer::ServerInit(options_);
  unsetenv("CLOCKSYNC_COLLECTOR_LISTEN");
  unsetenv("CLOCKSYNC_COLLECTOR_ADVERTISE");
  ASSERT_TRUE(served.ok()) << served.status();
  const std::string address =
      collector::ParseContact("test", *served)->address;
  EXPECT_EQ(address.rfind("127.0.0.2:", 0), 0u) << address;
  // The children reach the collector where the others do, not at this
  // process's loopback address.
  absl::StatusOr<std::string> contact = Tracer::AttachContact();
  ASSERT_TRUE(contact.ok()) << contact.status();
  absl::StatusOr<collector::Contact> parsed =
      collector::ParseContact("test", *contact);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->address, address);
  std::unique_ptr<collector::StreamingSink> child;
  std::thread thread([&] {
    collector::StreamingOptions options;
    options.contact = *parsed;
    options.info.process_name = "child";
    options.info.pid = 100;
    options.info.hostname = "here";
    options.fallback_trace_dir = dir_;
    options.fallback_name = "child";
    options.timeout_ns = 60'000'000'000;
    absl::StatusOr<std::unique_ptr<collector::StreamingSink>> sink =
        collector::StreamingSink::Connect(options);
    if (sink.ok()) child = *std::move(sink);
  });
  absl::StatusOr<AttachResult> group = Tracer::Attach(1);
  thread.join();
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->children, (std::vector<int32_t>{1}));
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->Finish({}, {}, {}, {}, std::nullopt).ok());
  // Finalize waits for both ranks and writes the run's archive.
  ASSERT_TRUE(Tracer::Finalize().ok());
  std::ifstream in(dir_ + "/app.otf2/clocksync.collection");
  std::stringstream summary;
  summary << in.rdbuf();
  EXPECT_NE(summary.str().find("rank 1 finished: 0 events, host here pid 100, "
                               "attached by rank 0 (group r0.g0)"),
            std::string::npos)
      << summary.str();
  EXPECT_NE(summary.str().find(": 2 of 2 ranks"), std::string::npos)
      << summary.str();
}

TEST_F(TracerCollectorTest, AForkThatDidNotExecIsToldToExec) {
  ASSERT_TRUE(Tracer::Init(options_).ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only async-signal-safe-ish calls on the tracer's failure paths.
    const int init = cs_trace_init(nullptr);
    const bool named = std::strstr(cs_trace_last_error(),
                                   "was forked from a traced process") !=
                       nullptr;
    char contact[512];
    const int attach = cs_trace_attach_contact(contact, sizeof(contact));
    _exit(init == CLOCKSYNC_EALREADY && named && attach == CLOCKSYNC_EIO ? 0
                                                                          : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_TRUE(Tracer::Finalize().ok());
}

TEST_F(TracerCollectorTest, AbortEndsAnAttachWaitingForItsChildren) {
  StartCollector(1);
  ASSERT_TRUE(Tracer::Init(options_).ok());  // a 120 s collector timeout
  EXPECT_FALSE(Tracer::AbortInit());  // nothing waits yet
  std::atomic<int> code{1};
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  std::thread attach([&] {
    code = cs_trace_attach(2, nullptr, nullptr, nullptr);  // nobody comes
    error = cs_trace_last_error();  // (per thread)
  });
  // AbortInit is true once the attach waits.
  while (!Tracer::AbortInit()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  attach.join();
  EXPECT_EQ(code.load(), CLOCKSYNC_EABORTED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(error.find("attach group r0.g0: aborted"), std::string::npos)
      << error;
  EXPECT_FALSE(Tracer::AbortInit());  // nothing waits any more
  // The group is used up (the collector, if the call reached it, failed
  // it): the next contact string is the next group's.
  char contact[512];
  ASSERT_EQ(cs_trace_attach_contact(contact, sizeof(contact)), 0);
  EXPECT_EQ(collector::ParseContact("test", contact)->attach_group, 1u);
  ASSERT_TRUE(Tracer::Finalize().ok());
}

TEST_F(TracerCollectorTest, NoAttachWithoutACollector) {
  ASSERT_TRUE(Tracer::Init(options_).ok());  // no collector: local archive
  char contact[512];
  EXPECT_EQ(cs_trace_attach_contact(contact, sizeof(contact)), CLOCKSYNC_EIO);
  EXPECT_NE(std::string(cs_trace_last_error()).find("cannot attach children"),
            std::string::npos)
      << cs_trace_last_error();
  EXPECT_EQ(cs_trace_attach(1, nullptr, nullptr, nullptr), CLOCKSYNC_EIO);
  ASSERT_TRUE(Tracer::Finalize().ok());
  EXPECT_EQ(cs_trace_attach(1, nullptr, nullptr, nullptr), CLOCKSYNC_ENOTINIT);
}

}  // namespace
}  // namespace clocksync
