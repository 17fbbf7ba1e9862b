// tracer/tracer_test.cc: the tracer end to end. Every event kind recorded
// on several threads goes through an OTF2 archive and back
// (trace/otf2_reader.h) unchanged; mapping changes of a fake daemon
// (ShmPublisher) become mapping records; sync sessions run against a fake
// master (ProbeResponder); a modeled clock stamps events and gives the
// ground truth; bad arguments, bad environment variables and unwritable
// paths give clear errors; the C API does the same as the C++ one.

#include "tracer/tracer.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/clock.h"
#include "tracer/clocksync_trace.h"
#include "probe/responder.h"
#include "shm/shm_publisher.h"
#include "gtest/gtest.h"
#include "hull/sim/clock_model.h"
#include "hull/trace_stamp.h"
#include "trace/otf2_reader.h"
#include "trace/trace.h"

namespace clocksync {
namespace {

using trace::CollectiveKind;
using trace::Event;
using trace::EventKind;

int64_t RawNs() { return Clock::RawNowNs(); }

// A fresh directory under the test's temporary directory.
std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string dir =
      std::string(base != nullptr ? base : "/tmp") + "/tracer_test.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "";
  return dir;
}

// The master: answers probes with global = raw + offset.
class FakeMaster {
 public:
  explicit FakeMaster(int64_t offset_ns,
                      std::optional<probe::ProbeKey> key = std::nullopt)
      : source_(offset_ns) {
    probe::ProbeResponder::Options options;
    options.listen_address = "127.0.0.1:0";
    options.node_id = 1;
    options.time_source = &source_;
    options.key = key;
    auto responder = probe::ProbeResponder::Create(options);
    EXPECT_TRUE(responder.ok()) << responder.status();
    responder_ = std::move(*responder);
    thread_ = std::thread([this] { (void)responder_->Serve(stop_); });
  }
  ~FakeMaster() {
    stop_ = true;
    thread_.join();
  }
  std::string address() const {
    return absl::StrCat("127.0.0.1:", responder_->port());
  }

 private:
  class Source : public probe::GlobalTimeSource {
   public:
    explicit Source(int64_t offset_ns) : offset_ns_(offset_ns) {}
    probe::ParentTime GlobalAt(int64_t raw_ns) const override {
      probe::ParentTime t;
      t.global_ns = raw_ns + offset_ns_;
      t.state = probe::kProbeStateSynced;
      return t;
    }

   private:
    int64_t offset_ns_;
  };
  Source source_;
  std::unique_ptr<probe::ProbeResponder> responder_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

Mapping MappingAt(int64_t offset_ns, double rate_adj, int64_t bound_ns) {
  Mapping m;
  m.anchor_raw_ns = RawNs();
  m.anchor_global_ns = m.anchor_raw_ns + offset_ns;
  m.rate_adj = rate_adj;
  m.bound_at_anchor_ns = bound_ns;
  m.bound_growth_ppb = 10;
  m.state = CLOCKSYNC_STATE_SYNCED;
  return m;
}

// What a test thread recorded, to compare with what is read back.
struct Recorded {
  std::vector<Event> events;  // stamp left 0
  std::vector<int64_t> raw_before_ns;
  std::vector<int64_t> raw_after_ns;
};

class TracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    options_.trace_dir = dir_ + "/traces";
    options_.name = "app";
    options_.rank = 1;
    options_.world_size = 3;
    options_.shm_path = dir_ + "/node.shm";
    options_.read_environment = false;
    options_.sync_max_messages = 5;
    options_.sync_max_duration_ns = 500'000'000;
  }
  void TearDown() override {
    if (Tracer::IsActive()) (void)Tracer::Finalize();
  }

  std::string archive() const { return options_.trace_dir + "/app.r1"; }

  std::string dir_;
  TracerOptions options_;
};

// Records every kind of event on the calling thread; returns what it did.
Recorded RecordAllKinds(uint32_t compute, uint32_t exchange, uint32_t comm,
                        int rounds) {
  Recorded r;
  auto note = [&](Event e, bool ok, int64_t before) {
    EXPECT_TRUE(ok);
    r.events.push_back(e);
    r.raw_before_ns.push_back(before);
    r.raw_after_ns.push_back(RawNs());
  };
  for (int i = 0; i < rounds; ++i) {
    int64_t t = RawNs();
    note(Event{0, 0, compute, -1, 0, 0, EventKind::kEnter,
               CollectiveKind::kOther},
         Tracer::Enter(compute), t);
    t = RawNs();
    note(Event{0, 0, exchange, -1, 0, 0, EventKind::kEnter,
               CollectiveKind::kOther},
         Tracer::Enter(exchange), t);
    t = RawNs();
    note(Event{0, 100u + i, 0, 2, 7, 0, EventKind::kSend,
               CollectiveKind::kOther},
         Tracer::Send(2, 7, 100 + i), t);
    t = RawNs();
    note(Event{0, 200u + i, 0, 0, 8, comm, EventKind::kRecv,
               CollectiveKind::kOther},
         Tracer::Recv(0, 8, 200 + i, comm), t);
    t = RawNs();
    note(Event{0, 64, 0, 0, 0, 0, EventKind::kCollectiveBegin,
               CollectiveKind::kBcast},
         Tracer::CollectiveBegin(CollectiveKind::kBcast, 0, 0, 64), t);
    t = RawNs();
    note(Event{0, 32, 0, -1, 0, comm, EventKind::kCollectiveBegin,
               CollectiveKind::kAllreduce},
         Tracer::CollectiveBegin(CollectiveKind::kAllreduce, comm, -1, 32), t);
    t = RawNs();
    note(Event{0, 32, 0, -1, 0, comm, EventKind::kCollectiveEnd,
               CollectiveKind::kAllreduce},
         Tracer::CollectiveEnd(CollectiveKind::kAllreduce, comm, -1, 32), t);
    t = RawNs();
    note(Event{0, 64, 0, 0, 0, 0, EventKind::kCollectiveEnd,
               CollectiveKind::kBcast},
         Tracer::CollectiveEnd(CollectiveKind::kBcast, 0, 0, 64), t);
    t = RawNs();
    note(Event{0, 0, exchange, -1, 0, 0, EventKind::kLeave,
               CollectiveKind::kOther},
         Tracer::Leave(exchange), t);
    t = RawNs();
    note(Event{0, 0, compute, -1, 0, 0, EventKind::kLeave,
               CollectiveKind::kOther},
         Tracer::Leave(compute), t);
  }
  return r;
}

// Checks that `thread` holds exactly `r`'s events, stamped in order within
// the raw instants around each call (local == raw here).
void ExpectSameEvents(const trace::ProcessInfo& info,
                      const trace::ThreadTrace& thread, const Recorded& r) {
  ASSERT_EQ(thread.events.size(), r.events.size()) << thread.name;
  uint64_t last_stamp = 0;
  for (size_t i = 0; i < r.events.size(); ++i) {
    Event got = thread.events[i];
    if (i > 0) {
      EXPECT_GT(got.stamp, last_stamp) << i;
    }
    last_stamp = got.stamp;
    const int64_t local_ns = trace::StampToLocalNs(info, got.stamp);
    EXPECT_GE(local_ns, r.raw_before_ns[i]) << i;
    // The event counter may push a stamp one tick past its clock reading.
    EXPECT_LE(local_ns, r.raw_after_ns[i] + 1) << i;
    got.stamp = 0;
    EXPECT_EQ(got, r.events[i]) << thread.name << " event " << i;
  }
}

TEST_F(TracerTest, RoundTripEveryKindSeveralThreadsThroughOtf2) {
  auto publisher = ShmPublisher::Open(options_.shm_path);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  ASSERT_TRUE(publisher->Publish(MappingAt(5'000'000'000, 1e-6, 1000)).ok());
  FakeMaster master(7'000'000'000);
  options_.master_probe = master.address();
  options_.buffer_events = 64;  // several flushes per thread

  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_TRUE(Tracer::IsActive());
  const uint32_t compute = *Tracer::DefineRegion("compute");
  const uint32_t exchange = *Tracer::DefineRegion("exchange");
  EXPECT_EQ(*Tracer::DefineRegion("compute"), compute);
  const std::vector<int32_t> ranks = {2, 0};
  const uint32_t comm = *Tracer::DefineCommunicator("pair", ranks);
  EXPECT_EQ(comm, 1u);

  constexpr int kThreads = 4;
  std::vector<Recorded> recorded(kThreads + 1);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Tracer::SetThreadName(absl::StrCat("worker ", t));
      ready.fetch_add(1);
      recorded[t] = RecordAllKinds(compute, exchange, comm, 50);
    });
  }
  // The daemon publishes new mappings while threads record; the main
  // thread records after each, so each is seen at least once.
  Recorded& main_recorded = recorded[kThreads];
  auto append_main = [&](const Recorded& more) {
    for (size_t i = 0; i < more.events.size(); ++i) {
      main_recorded.events.push_back(more.events[i]);
      main_recorded.raw_before_ns.push_back(more.raw_before_ns[i]);
      main_recorded.raw_after_ns.push_back(more.raw_after_ns[i]);
    }
  };
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        publisher->Publish(MappingAt(5'000'000'000 + i, 1e-6 * i, 900 + i))
            .ok());
    append_main(RecordAllKinds(compute, exchange, comm, 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(Tracer::Timesync().ok());
  ASSERT_TRUE(publisher->Publish(MappingAt(4'000'000'000, -2e-6, 500)).ok());
  append_main(RecordAllKinds(compute, exchange, comm, 1));

  const TracerStats live = Tracer::Stats();
  EXPECT_EQ(live.threads, uint64_t{kThreads + 1});
  const absl::Status finalized = Tracer::Finalize();
  ASSERT_TRUE(finalized.ok()) << finalized;
  EXPECT_FALSE(Tracer::IsActive());
  const TracerStats stats = Tracer::Stats();
  EXPECT_EQ(stats.events_dropped, 0u);
  EXPECT_EQ(stats.events_rejected, 0u);
  EXPECT_GT(stats.flushes, 0u);
  EXPECT_EQ(stats.events_recorded, stats.events_written);
  EXPECT_EQ(stats.events_written, uint64_t{(kThreads * 50 + 3 + 1) * 10});

  absl::StatusOr<trace::ProcessTrace> read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->truncated) << read->truncation_note;
  EXPECT_EQ(read->info.rank, 1);
  EXPECT_EQ(read->info.process_name, "app");
  EXPECT_EQ(read->info.pid, getpid());
  EXPECT_EQ(read->info.shm_path, options_.shm_path);
  EXPECT_EQ(read->info.tick_period_ns, 1.0);

  ASSERT_EQ(read->regions.size(), 2u);
  EXPECT_EQ(read->regions[compute].name, "compute");
  EXPECT_EQ(read->regions[exchange].name, "exchange");
  bool saw_pair = false, saw_world = false;
  for (const trace::Communicator& c : read->communicators) {
    if (c.id == comm) {
      saw_pair = true;
      EXPECT_EQ(c.name, "pair");
      EXPECT_EQ(c.ranks, ranks);
    }
    if (c.id == trace::kWorldCommunicator) {
      saw_world = true;
      EXPECT_EQ(c.ranks, (std::vector<int32_t>{0, 1, 2}));
    }
  }
  EXPECT_TRUE(saw_pair);
  EXPECT_TRUE(saw_world);

  ASSERT_EQ(read->threads.size(), size_t{kThreads + 1});
  for (const trace::ThreadTrace& thread : read->threads) {
    if (thread.name == "main") {
      ExpectSameEvents(read->info, thread, main_recorded);
      continue;
    }
    int index = -1;
    ASSERT_EQ(sscanf(thread.name.c_str(), "worker %d", &index), 1)
        << thread.name;
    ASSERT_GE(index, 0);
    ASSERT_LT(index, kThreads);
    ExpectSameEvents(read->info, thread, recorded[index]);
  }

  // The initial mapping and the four published later, each once, in order.
  ASSERT_EQ(read->mappings.size(), 5u);
  for (size_t i = 1; i < read->mappings.size(); ++i) {
    EXPECT_GE(read->mappings[i].raw_ns, read->mappings[i - 1].raw_ns);
    EXPECT_NE(read->mappings[i].anchor_raw_ns,
              read->mappings[i - 1].anchor_raw_ns);
  }
  EXPECT_EQ(read->mappings.back().anchor_global_ns -
                read->mappings.back().anchor_raw_ns,
            4'000'000'000);
  EXPECT_NEAR(read->mappings.back().rate_adj, -2e-6, 1e-15);
  EXPECT_EQ(read->mappings.back().bound_at_anchor_ns, 500);
  EXPECT_EQ(read->mappings.back().state, uint32_t{CLOCKSYNC_STATE_SYNCED});
  for (const trace::MappingRecord& m : read->mappings) {
    EXPECT_EQ(m.local_ns, m.raw_ns);  // no model: local == raw
  }

  // Sessions: init, timesync, finalize, each with its exchanges; the
  // master's stamps are raw + 7 s, between the local (= raw) stamps.
  ASSERT_EQ(read->sessions.size(), 3u);
  EXPECT_EQ(read->sessions[0].kind, trace::SyncSessionKind::kInit);
  EXPECT_EQ(read->sessions[1].kind, trace::SyncSessionKind::kTimesync);
  EXPECT_EQ(read->sessions[2].kind, trace::SyncSessionKind::kFinalize);
  for (const trace::SyncSession& session : read->sessions) {
    EXPECT_EQ(session.exchanges.size(), 5u);
    for (const hull::ProbeSample& x : session.exchanges) {
      EXPECT_LE(x.t1_ns + 7'000'000'000, x.t2_ns + 1);
      EXPECT_LE(x.t2_ns, x.t3_ns);
      EXPECT_LE(x.t3_ns, x.t4_ns + 7'000'000'000 + 1);
    }
  }
  EXPECT_FALSE(read->truth.has_value());
}

TEST_F(TracerTest, ModeledClockStampsEventsAndRecordsTheTruth) {
  // The daemon's side file: a clock 1.5 s ahead, 80 ppm fast, wandering.
  auto publisher = ShmPublisher::Open(options_.shm_path);
  ASSERT_TRUE(publisher.ok());
  ASSERT_TRUE(publisher->Publish(MappingAt(-1'500'000'000, -80e-6, 2000)).ok());
  const int64_t origin_raw_ns = RawNs() - 3'000'000'000;
  const std::string spec = "offset=1500ms,frequency_ppm=80,wander=1,seed=4";
  {
    std::ofstream model(options_.shm_path + ".model");
    model << "origin_raw_ns=" << origin_raw_ns << " spec=" << spec << "\n";
  }
  auto master_segment = ShmPublisher::Open(dir_ + "/master.shm");
  ASSERT_TRUE(master_segment.ok());
  ASSERT_TRUE(master_segment->Publish(MappingAt(123'456'789, 0, 0)).ok());
  options_.truth_master_shm = dir_ + "/master.shm";
  FakeMaster master(123'456'789);
  options_.master_probe = master.address();

  const int64_t raw_before_init = RawNs();
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_TRUE(Tracer::Stats().has_model);
  const uint32_t region = *Tracer::DefineRegion("r");
  std::vector<std::pair<int64_t, int64_t>> raw_bounds;
  for (int i = 0; i < 100; ++i) {
    const int64_t before = RawNs();
    ASSERT_TRUE(Tracer::Enter(region));
    raw_bounds.push_back({before, RawNs()});
  }
  ASSERT_TRUE(Tracer::Finalize().ok());

  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->truth.has_value());
  EXPECT_EQ(read->truth->clock_model_spec, spec);
  EXPECT_EQ(read->truth->model_origin_raw_ns, origin_raw_ns);
  EXPECT_NEAR(static_cast<double>(read->truth->master_offset_ns), 123'456'789,
              2.0);

  // Each event's local time is the model at a raw instant inside the call.
  hull::ClockModelParams params;
  ASSERT_EQ(hull::ParseClockModel(spec, &params), "");
  hull::ModeledClock model(params);
  auto local_at = [&](int64_t raw) {
    return origin_raw_ns + model.LocalAt(raw - origin_raw_ns);
  };
  ASSERT_EQ(read->threads.size(), 1u);
  ASSERT_EQ(read->threads[0].events.size(), 100u);
  for (size_t i = 0; i < raw_bounds.size(); ++i) {
    const int64_t local =
        trace::StampToLocalNs(read->info, read->threads[0].events[i].stamp);
    EXPECT_GE(local, local_at(raw_bounds[i].first)) << i;
    EXPECT_LE(local, local_at(raw_bounds[i].second) + 1) << i;
  }
  // The origin is the model's reading during Init: about 1.5 s ahead of
  // raw.
  EXPECT_GE(read->info.origin_ns, local_at(raw_before_init));
  EXPECT_LE(read->info.origin_ns, local_at(raw_bounds[0].first));
  EXPECT_NEAR(static_cast<double>(read->info.origin_ns - raw_before_init),
              1.5e9, 5e7);
  // The mapping records carry the model's local time too.
  ASSERT_FALSE(read->mappings.empty());
  for (const trace::MappingRecord& m : read->mappings) {
    EXPECT_EQ(m.local_ns, local_at(m.raw_ns));
  }
  // Sync exchanges: t1/t4 on the modeled clock, t2/t3 on the master's.
  ASSERT_EQ(read->sessions.size(), 2u);
  for (const trace::SyncSession& session : read->sessions) {
    ASSERT_FALSE(session.exchanges.empty());
    for (const hull::ProbeSample& x : session.exchanges) {
      // local - global ~ 1.5 s - 0.123 s (+ the model's drift since origin).
      EXPECT_NEAR(static_cast<double>(x.t1_ns - x.t2_ns),
                  1.5e9 - 123'456'789, 5e6);
    }
  }
}

TEST_F(TracerTest, DaemonAbsentMasterUnreachableStillWritesTheTrace) {
  options_.master_probe = "127.0.0.1:9";  // discard port: nobody answers
  options_.sync_max_duration_ns = 300'000'000;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  const uint32_t region = *Tracer::DefineRegion("alone");
  EXPECT_TRUE(Tracer::Enter(region));
  EXPECT_TRUE(Tracer::Leave(region));
  const absl::Status sync = Tracer::Timesync();
  EXPECT_EQ(sync.code(), absl::StatusCode::kUnavailable) << sync;
  EXPECT_NE(sync.message().find("127.0.0.1:9"), std::string::npos) << sync;
  ASSERT_TRUE(Tracer::Finalize().ok());

  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->mappings.empty());
  ASSERT_EQ(read->sessions.size(), 3u);  // init, timesync, finalize: empty
  for (const auto& session : read->sessions) {
    EXPECT_TRUE(session.exchanges.empty());
  }
  ASSERT_EQ(read->threads.size(), 1u);
  EXPECT_EQ(read->threads[0].events.size(), 2u);
}

// A master that authenticates probes answers sync sessions only with its
// key; a tracer without it gets empty sessions and a warning, never a
// failed program; a bad key file is refused at Init naming it.
TEST_F(TracerTest, SyncSessionsWithAnAuthenticatingMaster) {
  const probe::ProbeKey key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  FakeMaster master(5'000'000'000, key);
  const std::string key_path = dir_ + "/probe.key";
  {
    std::ofstream(key_path) << "efcdab8967452301" "1032547698badcfe\n";
  }
  chmod(key_path.c_str(), 0600);
  options_.master_probe = master.address();
  options_.sync_max_messages = 5;
  options_.sync_max_duration_ns = 300'000'000;
  options_.probe_key_file = key_path;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_TRUE(Tracer::Timesync().ok());
  ASSERT_TRUE(Tracer::Finalize().ok());
  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->sessions.size(), 3u);
  for (const auto& session : read->sessions) {
    EXPECT_EQ(session.exchanges.size(), 5u);
  }

  // Without the key: empty sessions.
  options_.probe_key_file.clear();
  options_.name = "keyless";
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Timesync().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(Tracer::Finalize().ok());

  // A key file others can read: refused, named.
  chmod(key_path.c_str(), 0644);
  options_.probe_key_file = key_path;
  options_.name = "badkey";
  const absl::Status refused = Tracer::Init(options_);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find(key_path), std::string::npos) << refused;
  EXPECT_FALSE(Tracer::IsActive());
}

TEST_F(TracerTest, RestartedDaemonIsPickedUp) {
  options_.sync_max_messages = 0;
  ASSERT_TRUE(Tracer::Init(options_).ok());  // no daemon yet
  const uint32_t region = *Tracer::DefineRegion("r");
  EXPECT_TRUE(Tracer::Enter(region));
  {
    auto first = ShmPublisher::Open(options_.shm_path);
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE(first->Publish(MappingAt(1'000, 0, 10)).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    EXPECT_TRUE(Tracer::Leave(region));
  }  // closed: the daemon stopped
  auto second = ShmPublisher::Open(options_.shm_path);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->Publish(MappingAt(2'000, 0, 20)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_TRUE(Tracer::Enter(region));
  ASSERT_TRUE(Tracer::Finalize().ok());

  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  std::vector<int64_t> offsets;
  for (const auto& m : read->mappings) {
    // Skip the UNSYNCED mapping a segment starts with and the CLOSED one it
    // ends with.
    if (m.state != CLOCKSYNC_STATE_SYNCED) continue;
    if (m.flags & CLOCKSYNC_STATUS_CLOSED) continue;
    offsets.push_back(m.anchor_global_ns - m.anchor_raw_ns);
  }
  EXPECT_EQ(offsets, (std::vector<int64_t>{1'000, 2'000}));
}

TEST_F(TracerTest, ExitingThreadsFlushTheirBuffers) {
  options_.sync_max_messages = 0;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  const uint32_t region = *Tracer::DefineRegion("r");
  for (int round = 0; round < 3; ++round) {
    std::thread([&] {
      for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(Tracer::Enter(region));
        ASSERT_TRUE(Tracer::Leave(region));
      }
    }).join();
  }
  EXPECT_EQ(Tracer::Stats().events_written, 60u);  // before Finalize
  ASSERT_TRUE(Tracer::Finalize().ok());
  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->threads.size(), 3u);
  for (const auto& t : read->threads) EXPECT_EQ(t.events.size(), 20u);
}

// Threads fill their smallest buffers much faster than the writer thread
// writes them: every hand-off, the waits for the writer, and the threads'
// exits with a buffer still pending keep every event, in order.
TEST_F(TracerTest, HandOffsUnderPressureKeepEveryEventInOrder) {
  options_.sync_max_messages = 0;
  options_.buffer_events = 16;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  const uint32_t region = *Tracer::DefineRegion("r");
  constexpr int kThreads = 6;
  constexpr int kPairs = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Tracer::SetThreadName(absl::StrCat("worker ", t));
      for (int i = 0; i < kPairs; ++i) {
        ASSERT_TRUE(Tracer::Enter(region));
        ASSERT_TRUE(Tracer::Leave(region));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const TracerStats live = Tracer::Stats();
  EXPECT_EQ(live.events_written, uint64_t{kThreads * kPairs * 2});
  EXPECT_GT(live.flushes, uint64_t{kThreads * kPairs * 2 / 16 / 2});
  ASSERT_TRUE(Tracer::Finalize().ok());
  EXPECT_EQ(Tracer::Stats().events_dropped, 0u);
  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->threads.size(), size_t{kThreads});
  for (const trace::ThreadTrace& thread : read->threads) {
    ASSERT_EQ(thread.events.size(), size_t{kPairs * 2}) << thread.name;
    for (size_t i = 0; i < thread.events.size(); ++i) {
      ASSERT_EQ(thread.events[i].kind,
                i % 2 == 0 ? trace::EventKind::kEnter : trace::EventKind::kLeave)
          << thread.name << " event " << i;
      if (i > 0) {
        ASSERT_GT(thread.events[i].stamp, thread.events[i - 1].stamp)
            << thread.name << " event " << i;
      }
    }
  }
}

TEST_F(TracerTest, BadArgumentsAreRejectedAndCounted) {
  // Before Init: nothing recorded, nothing crashes.
  EXPECT_FALSE(Tracer::Enter(0));
  EXPECT_EQ(Tracer::DefineRegion("x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  options_.sync_max_messages = 0;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  EXPECT_EQ(Tracer::Init(options_).code(),
            absl::StatusCode::kFailedPrecondition);
  const uint32_t region = *Tracer::DefineRegion("r");
  EXPECT_FALSE(Tracer::Enter(region + 1));           // undefined region
  EXPECT_FALSE(Tracer::Send(3, 0, 1));               // world has 3 ranks
  EXPECT_FALSE(Tracer::Send(-1, 0, 1));
  EXPECT_FALSE(Tracer::Recv(0, 0, 1, 5));            // undefined comm
  EXPECT_FALSE(Tracer::CollectiveEnd(CollectiveKind::kBarrier, 0, -1, 0));
  EXPECT_FALSE(Tracer::CollectiveBegin(static_cast<CollectiveKind>(77), 0,
                                       -1, 0));
  EXPECT_FALSE(Tracer::CollectiveBegin(CollectiveKind::kBcast, 0, 3, 0));
  EXPECT_FALSE(Tracer::DefineCommunicator("bad", {}).ok());
  const std::vector<int32_t> outside = {0, 3};
  EXPECT_FALSE(Tracer::DefineCommunicator("bad", outside).ok());
  const std::vector<int32_t> twice = {1, 1};
  EXPECT_FALSE(Tracer::DefineCommunicator("bad", twice).ok());
  EXPECT_TRUE(Tracer::Enter(region));
  EXPECT_EQ(Tracer::Stats().events_rejected, 7u);
  ASSERT_TRUE(Tracer::Finalize().ok());
  EXPECT_EQ(Tracer::Finalize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(Tracer::Enter(region));  // after Finalize
  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->threads.size(), 1u);
  EXPECT_EQ(read->threads[0].events.size(), 1u);
}

TEST_F(TracerTest, EnvironmentOverridesAndBadValuesNameTheVariable) {
  setenv("CLOCKSYNC_TRACE_DIR", "/somewhere", 1);
  setenv("CLOCKSYNC_SYNC_MAX_MESSAGES", "7", 1);
  setenv("CLOCKSYNC_SYNC_MAX_DURATION_MS", "250", 1);
  setenv("CLOCKSYNC_SYNC_PERIOD_MS", "1000", 1);
  setenv("CLOCKSYNC_TRACE_BUFFER_EVENTS", "1024", 1);
  setenv("CLOCKSYNC_MASTER_PROBE", "m:1", 1);
  TracerOptions o;
  ASSERT_TRUE(ApplyTracerEnvironment(&o).ok());
  EXPECT_EQ(o.trace_dir, "/somewhere");
  EXPECT_EQ(o.sync_max_messages, 7);
  EXPECT_EQ(o.sync_max_duration_ns, 250'000'000);
  EXPECT_EQ(o.sync_period_ns, 1'000'000'000);
  EXPECT_EQ(o.buffer_events, 1024);
  EXPECT_EQ(o.master_probe, "m:1");
  setenv("CLOCKSYNC_TRACE_BUFFER_EVENTS", "lots", 1);
  absl::Status bad = ApplyTracerEnvironment(&o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("CLOCKSYNC_TRACE_BUFFER_EVENTS"),
            std::string::npos);
  EXPECT_NE(bad.message().find("'lots'"), std::string::npos);
  setenv("CLOCKSYNC_TRACE_BUFFER_EVENTS", "1024", 1);
  setenv("CLOCKSYNC_SYNC_MAX_DURATION_MS", "-5", 1);
  bad = ApplyTracerEnvironment(&o);
  EXPECT_NE(bad.message().find("CLOCKSYNC_SYNC_MAX_DURATION_MS"),
            std::string::npos);

  // Init reports it (and the C API says ECONFIG).
  options_.read_environment = true;
  EXPECT_EQ(Tracer::Init(options_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Tracer::IsActive());
  cs_trace_options c;
  cs_trace_options_init(&c);
  EXPECT_EQ(cs_trace_init(&c), CLOCKSYNC_ECONFIG);
  EXPECT_NE(std::string(cs_trace_last_error())
                .find("CLOCKSYNC_SYNC_MAX_DURATION_MS"),
            std::string::npos);
  for (const char* name :
       {"CLOCKSYNC_TRACE_DIR", "CLOCKSYNC_SYNC_MAX_MESSAGES",
        "CLOCKSYNC_SYNC_MAX_DURATION_MS", "CLOCKSYNC_SYNC_PERIOD_MS",
        "CLOCKSYNC_TRACE_BUFFER_EVENTS", "CLOCKSYNC_MASTER_PROBE"}) {
    unsetenv(name);
  }
}

TEST_F(TracerTest, UnwritablePathIsAClearError) {
  options_.trace_dir = "/proc/clocksync-no-such-dir/traces";
  const absl::Status status = Tracer::Init(options_);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/proc/clocksync-no-such-dir"),
            std::string::npos)
      << status;
  EXPECT_FALSE(Tracer::IsActive());
  // An archive directory that already holds a trace.
  options_.trace_dir = dir_ + "/traces";
  options_.sync_max_messages = 0;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  ASSERT_TRUE(Tracer::Finalize().ok());
  const absl::Status again = Tracer::Init(options_);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_NE(again.message().find(archive()), std::string::npos) << again;
}

TEST_F(TracerTest, CApiRecordsLikeTheCppApi) {
  cs_trace_options c;
  cs_trace_options_init(&c);
  const std::string trace_dir = options_.trace_dir;
  const std::string shm = options_.shm_path;
  c.trace_dir = trace_dir.c_str();
  c.name = "capp";
  c.rank = 0;
  c.world_size = 2;
  c.shm_path = shm.c_str();
  c.sync_max_messages = 0;
  c.read_environment = 0;
  EXPECT_EQ(cs_trace_enter(0), CLOCKSYNC_ENOTINIT);
  ASSERT_EQ(cs_trace_init(&c), CLOCKSYNC_OK) << cs_trace_last_error();
  EXPECT_EQ(cs_trace_init(&c), CLOCKSYNC_EALREADY);
  const int32_t region = cs_trace_region_def("c_region");
  ASSERT_GE(region, 0);
  const int32_t ranks[] = {1, 0};
  const int32_t comm = cs_trace_comm_def("swapped", ranks, 2);
  ASSERT_EQ(comm, 1);
  EXPECT_EQ(cs_trace_comm_def("bad", ranks, 0), CLOCKSYNC_EINVAL);
  EXPECT_EQ(cs_trace_enter(static_cast<uint32_t>(region)), CLOCKSYNC_OK);
  EXPECT_EQ(cs_trace_send(1, 3, 10, CS_TRACE_COMM_WORLD), CLOCKSYNC_OK);
  EXPECT_EQ(cs_trace_recv(0, 3, 10, static_cast<uint32_t>(comm)), CLOCKSYNC_OK);
  EXPECT_EQ(cs_trace_collective_begin(CS_TRACE_BARRIER, 0, -1, 0),
            CLOCKSYNC_OK);
  EXPECT_EQ(cs_trace_collective_end(CS_TRACE_BARRIER, 0, -1, 0), CLOCKSYNC_OK);
  EXPECT_EQ(cs_trace_collective_end(CS_TRACE_BARRIER, 0, -1, 0),
            CLOCKSYNC_EINVAL);
  EXPECT_EQ(cs_trace_leave(static_cast<uint32_t>(region)), CLOCKSYNC_OK);
  EXPECT_EQ(cs_trace_leave(99), CLOCKSYNC_EINVAL);
  EXPECT_EQ(cs_trace_timesync(), CLOCKSYNC_ENOMASTER);
  EXPECT_STRNE(cs_trace_last_error(), "");
  EXPECT_EQ(cs_trace_finalize(), CLOCKSYNC_OK);
  EXPECT_EQ(cs_trace_finalize(), CLOCKSYNC_ENOTINIT);
  EXPECT_STREQ(clocksync_strerror(CLOCKSYNC_ENOMASTER),
               "master not configured or not answering");
  EXPECT_STREQ(clocksync_strerror(12345), "unknown error");

  auto read = trace::ReadProcessTrace(options_.trace_dir + "/capp.r0");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->threads.size(), 1u);
  const auto& events = read->threads[0].events;
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[1].kind, EventKind::kSend);
  EXPECT_EQ(events[1].peer, 1);
  EXPECT_EQ(events[1].tag, 3u);
  EXPECT_EQ(events[2].kind, EventKind::kRecv);
  EXPECT_EQ(events[2].comm, static_cast<uint32_t>(comm));
  EXPECT_EQ(events[3].collective, CollectiveKind::kBarrier);
}

TEST_F(TracerTest, PeriodicSessionsRunInTheBackground) {
  FakeMaster master(1'000);
  options_.master_probe = master.address();
  options_.sync_max_messages = 2;
  options_.sync_period_ns = 100'000'000;
  ASSERT_TRUE(Tracer::Init(options_).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(550));
  ASSERT_TRUE(Tracer::Finalize().ok());
  auto read = trace::ReadProcessTrace(archive());
  ASSERT_TRUE(read.ok()) << read.status();
  int periodic = 0;
  for (const auto& s : read->sessions) {
    if (s.kind == trace::SyncSessionKind::kPeriodic) {
      ++periodic;
      EXPECT_EQ(s.exchanges.size(), 2u);
    }
  }
  EXPECT_GE(periodic, 3);
  EXPECT_EQ(read->sessions.front().kind, trace::SyncSessionKind::kInit);
  EXPECT_EQ(read->sessions.back().kind, trace::SyncSessionKind::kFinalize);
}

}  // namespace
}  // namespace clocksync
