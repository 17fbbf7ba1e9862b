// Writer -> reader round trips of whole process traces, truncated archives,
// I/O errors, and otf2-print on a written archive.

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hull/trace_stamp.h"
#include "trace/otf2_reader.h"
#include "trace/otf2_writer.h"
#include "trace/sidecar.h"
#include "trace/trace.h"

namespace clocksync::trace {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return dir;
}

ProcessInfo Info(int32_t rank) {
  ProcessInfo info;
  info.rank = rank;
  info.process_name = "app with spaces=and%signs";
  info.pid = 4242 + rank;
  info.hostname = "node-01";
  info.node_id = "n1";
  info.shm_path = "/run/clocksyncd/clocksync.shm";
  info.origin_ns = 1'700'000'000'123'456'789;
  info.tick_period_ns = 1.0;
  return info;
}

// `count` events of every kind, in nesting order, stamps from `stamper`.
std::vector<Event> MakeEvents(int count, hull::TraceStamper* stamper,
                              uint64_t* tick, std::mt19937_64* rng) {
  std::vector<Event> events;
  auto next = [&]() {
    *tick += (*rng)() % 3;  // sometimes the same tick: counter > 0
    return stamper->Stamp(*tick);
  };
  for (int i = 0; i < count; ++i) {
    Event enter;
    enter.kind = EventKind::kEnter;
    enter.region = 1 + i % 3;
    enter.stamp = next();
    events.push_back(enter);

    Event send;
    send.kind = EventKind::kSend;
    send.peer = 1;
    send.tag = 7 + i;
    send.comm = 0;
    send.bytes = 100 + i;
    send.stamp = next();
    events.push_back(send);

    Event recv;
    recv.kind = EventKind::kRecv;
    recv.peer = 0;
    recv.tag = 9;
    recv.comm = 1;
    recv.bytes = 1u << 20;
    recv.stamp = next();
    events.push_back(recv);

    Event begin;
    begin.kind = EventKind::kCollectiveBegin;
    begin.collective = static_cast<CollectiveKind>(i % 9);
    begin.comm = i % 2;
    begin.peer = (i % 3 == 0) ? -1 : 1;
    begin.bytes = 64 * i;
    begin.stamp = next();
    events.push_back(begin);
    Event end = begin;
    end.kind = EventKind::kCollectiveEnd;
    end.bytes = 128 * i + 1;
    end.stamp = next();
    events.push_back(end);

    Event leave;
    leave.kind = EventKind::kLeave;
    leave.region = enter.region;
    leave.stamp = next();
    events.push_back(leave);
  }
  return events;
}

struct Fixture {
  std::vector<Region> regions = {{1, "compute"}, {2, "MPI_Send"},
                                 {3, "a region, with = signs"}};
  std::vector<Communicator> comms = {{0, "world", {0, 1, 2}},
                                     {1, "pair", {2, 0}}};
  std::vector<MappingRecord> mappings;
  std::vector<SyncSession> sessions;
  GroundTruth truth{"offset=5ms,frequency_ppm=3,wander=1,seed=9",
                    123'456'789, 1'700'000'000'000'000'000};

  Fixture() {
    MappingRecord a;
    a.local_ns = 1000;
    a.raw_ns = 2000;
    a.anchor_raw_ns = 1500;
    a.anchor_global_ns = 1'700'000'000'000'001'500;
    a.rate_adj = 1.2345678901234567e-5;
    a.bound_at_anchor_ns = 250;
    a.bound_growth_ppb = 10.000000000000002;
    a.state = 2;
    a.flags = 0x100;
    mappings.push_back(a);
    a.local_ns = 5000;
    a.raw_ns = 6000;
    a.rate_adj = -3.0e-7;
    a.state = 3;
    a.flags = 0;
    mappings.push_back(a);
    for (int s = 0; s < 3; ++s) {
      SyncSession session;
      session.kind = static_cast<SyncSessionKind>(s);
      for (int e = 0; e < 5; ++e) {
        session.exchanges.push_back(
            {1000 * s + e, 2000 * s + e + 10, 2000 * s + e + 11,
             1000 * s + e + 30});
      }
      sessions.push_back(session);
    }
    sessions.push_back(SyncSession{SyncSessionKind::kFinalize, {}});
  }
};

void ExpectSameTrace(const ProcessTrace& got, const ProcessInfo& info,
                     const Fixture& f,
                     const std::vector<std::vector<Event>>& threads,
                     const std::vector<std::string>& names) {
  EXPECT_EQ(got.info.rank, info.rank);
  EXPECT_EQ(got.info.process_name, info.process_name);
  EXPECT_EQ(got.info.pid, info.pid);
  EXPECT_EQ(got.info.hostname, info.hostname);
  EXPECT_EQ(got.info.node_id, info.node_id);
  EXPECT_EQ(got.info.shm_path, info.shm_path);
  EXPECT_EQ(got.info.origin_ns, info.origin_ns);
  EXPECT_EQ(got.info.tick_period_ns, info.tick_period_ns);
  ASSERT_EQ(got.regions.size(), f.regions.size());
  for (size_t i = 0; i < f.regions.size(); ++i) {
    EXPECT_EQ(got.regions[i].id, f.regions[i].id);
    EXPECT_EQ(got.regions[i].name, f.regions[i].name);
  }
  ASSERT_EQ(got.communicators.size(), f.comms.size());
  for (size_t i = 0; i < f.comms.size(); ++i) {
    EXPECT_EQ(got.communicators[i].id, f.comms[i].id);
    EXPECT_EQ(got.communicators[i].name, f.comms[i].name);
    EXPECT_EQ(got.communicators[i].ranks, f.comms[i].ranks);
  }
  EXPECT_EQ(got.mappings, f.mappings);
  EXPECT_EQ(got.sessions, f.sessions);
  ASSERT_TRUE(got.truth.has_value());
  EXPECT_EQ(*got.truth, f.truth);
  ASSERT_EQ(got.threads.size(), threads.size());
  for (size_t t = 0; t < threads.size(); ++t) {
    EXPECT_EQ(got.threads[t].thread_index, t);
    EXPECT_EQ(got.threads[t].name, names[t]);
    ASSERT_EQ(got.threads[t].events.size(), threads[t].size());
    for (size_t i = 0; i < threads[t].size(); ++i) {
      const Event& a = got.threads[t].events[i];
      const Event& b = threads[t][i];
      ASSERT_EQ(a, b) << "thread " << t << " event " << i << ": kind "
                      << EventKindName(a.kind) << " vs "
                      << EventKindName(b.kind) << ", stamp " << a.stamp
                      << " vs " << b.stamp << ", bytes " << a.bytes << " vs "
                      << b.bytes << ", peer " << a.peer << " vs " << b.peer;
    }
  }
}

// Writes a trace with `threads` threads of `per_thread` event groups, in
// several AppendEvents calls per thread, interleaved.
std::vector<std::vector<Event>> WriteTrace(const std::string& dir,
                                           const ProcessInfo& info,
                                           const Fixture& f, int threads,
                                           int per_thread,
                                           std::vector<std::string>* names) {
  absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
      Otf2Writer::Create(dir, info);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return {};
  std::mt19937_64 rng(5);
  std::vector<std::vector<Event>> all(threads);
  std::vector<hull::TraceStamper> stampers(threads);
  std::vector<uint64_t> ticks(threads, 1000);
  names->clear();
  for (int t = 0; t < threads; ++t) names->push_back(absl::StrCat("worker ", t));
  const int batches = 4;
  for (int b = 0; b < batches; ++b) {
    for (int t = 0; t < threads; ++t) {
      std::vector<Event> batch =
          MakeEvents(per_thread / batches, &stampers[t], &ticks[t], &rng);
      EXPECT_TRUE((*writer)->AppendEvents(t, (*names)[t], batch).ok());
      all[t].insert(all[t].end(), batch.begin(), batch.end());
    }
  }
  absl::Status finish = (*writer)->Finish(f.regions, f.comms, f.mappings,
                                          f.sessions, f.truth);
  EXPECT_TRUE(finish.ok()) << finish;
  return all;
}

TEST(Otf2RoundTrip, EveryFieldOfEveryEventKindSeveralThreads) {
  const std::string dir = TestDir("roundtrip");
  const ProcessInfo info = Info(2);
  const Fixture f;
  std::vector<std::string> names;
  const std::vector<std::vector<Event>> written =
      WriteTrace(dir, info, f, 3, 40, &names);
  absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->truncated) << trace->truncation_note;
  ExpectSameTrace(*trace, info, f, written, names);
}

TEST(Otf2RoundTrip, ManyChunks) {
  // ~ 6 MB of events: several 1 MiB OTF2 chunks per thread, flushed while
  // appending.
  const std::string dir = TestDir("many_chunks");
  const ProcessInfo info = Info(0);
  const Fixture f;
  std::vector<std::string> names;
  const std::vector<std::vector<Event>> written =
      WriteTrace(dir, info, f, 2, 40000, &names);
  absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->truncated) << trace->truncation_note;
  ExpectSameTrace(*trace, info, f, written, names);
}

TEST(Otf2RoundTrip, CutEventFileIsReadUpToItsLastCompleteEvent) {
  const std::string dir = TestDir("cut");
  const ProcessInfo info = Info(1);
  const Fixture f;
  std::vector<std::string> names;
  const std::vector<std::vector<Event>> written =
      WriteTrace(dir, info, f, 1, 32000, &names);
  const std::string evt =
      absl::StrCat(dir, "/traces/", (uint64_t{1} << 32), ".evt");
  const uint64_t size = fs::file_size(evt);
  ASSERT_GT(size, 2 * 1024 * 1024u) << "want a cut inside a later chunk";
  // Cut at many places, including inside a record and just after the chunk
  // header.
  uint64_t previous_count = 0;
  for (uint64_t cut : {uint64_t{1024 * 1024}, uint64_t{2 * 1024 * 1024},
                       uint64_t{2 * 1024 * 1024 + 17},
                       uint64_t{2 * 1024 * 1024 + 18},
                       uint64_t{2 * 1024 * 1024 + 5000},
                       uint64_t{2 * 1024 * 1024 + 5001},
                       uint64_t{2 * 1024 * 1024 + 5002},
                       uint64_t{2 * 1024 * 1024 + 5003}, size - 7}) {
    const std::string copy = TestDir(absl::StrCat("cut_", cut));
    fs::copy(dir, copy, fs::copy_options::recursive);
    fs::resize_file(absl::StrCat(copy, "/traces/", (uint64_t{1} << 32), ".evt"),
                    cut);
    absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(copy);
    ASSERT_TRUE(trace.ok()) << trace.status();
    EXPECT_TRUE(trace->truncated);
    EXPECT_NE(trace->truncation_note.find("read up to its last whole event"),
              std::string::npos)
        << trace->truncation_note;
    ASSERT_EQ(trace->threads.size(), 1u);
    const std::vector<Event>& got = trace->threads[0].events;
    ASSERT_GT(got.size(), 0u);
    ASSERT_LT(got.size(), written[0].size());
    EXPECT_GE(got.size(), previous_count) << "cut " << cut;
    previous_count = got.size();
    // Every event read is exactly the one written, except that a collective
    // begin whose end was cut off lacks the fields its end carries.
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].kind == EventKind::kCollectiveBegin && i + 1 == got.size()) {
        EXPECT_EQ(got[i].stamp, written[0][i].stamp);
        continue;
      }
      ASSERT_EQ(got[i], written[0][i]) << "cut " << cut << " event " << i;
    }
  }
}

TEST(Otf2RoundTrip, CutSidecarLosesOnlyItsLastLine) {
  const std::string dir = TestDir("cut_sidecar");
  const ProcessInfo info = Info(0);
  const Fixture f;
  std::vector<std::string> names;
  WriteTrace(dir, info, f, 1, 8, &names);
  const std::string path = dir + "/clocksync.sidecar";
  const uint64_t size = fs::file_size(path);
  // Drop the end line and half of the truth line.
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t truth_at = text.find("\ntruth ");
  ASSERT_NE(truth_at, std::string::npos);
  fs::resize_file(path, truth_at + 10);
  ASSERT_LT(fs::file_size(path), size);
  absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->truncated);
  EXPECT_NE(trace->truncation_note.find("last line cut"), std::string::npos)
      << trace->truncation_note;
  EXPECT_FALSE(trace->truth.has_value());
  EXPECT_EQ(trace->sessions, f.sessions);
  EXPECT_EQ(trace->mappings, f.mappings);
}

TEST(Otf2RoundTrip, WriterDestroyedWithoutFinishLeavesATruncatedTrace) {
  const std::string dir = TestDir("destroyed");
  std::vector<Event> events;
  {
    absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
        Otf2Writer::Create(dir, Info(0));
    ASSERT_TRUE(writer.ok()) << writer.status();
    hull::TraceStamper stamper;
    uint64_t tick = 0;
    std::mt19937_64 rng(2);
    events = MakeEvents(10, &stamper, &tick, &rng);
    ASSERT_TRUE((*writer)->AppendEvents(0, "main", events).ok());
  }
  absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->truncated);
  EXPECT_NE(trace->truncation_note.find("no 'end' line"), std::string::npos)
      << trace->truncation_note;
  ASSERT_EQ(trace->threads.size(), 1u);
  EXPECT_EQ(trace->threads[0].events, events);
  ASSERT_FALSE(trace->regions.empty());
  EXPECT_EQ(trace->regions[0].name, "region 1");
}

TEST(Otf2RoundTrip, KilledWriterIsRecoveredFromTheSidecar) {
  const std::string dir = TestDir("killed");
  const ProcessInfo info = Info(3);
  const Fixture f;
  constexpr int kThreads = 2;
  constexpr int kIterations = 80'000;  // ~6 MB per thread: chunks on disk
  auto events_of = [](int thread) {
    hull::TraceStamper stamper;
    uint64_t tick = 0;
    std::mt19937_64 rng(100 + thread);
    return MakeEvents(kIterations, &stamper, &tick, &rng);
  };
  // The child writes as the tracer does (records streamed, events in
  // pieces) and is killed before Finish.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
        Otf2Writer::Create(dir, info);
    if (!writer.ok()) std::_Exit(2);
    if (!(*writer)->StreamRecords(f.regions, f.comms, f.mappings, f.sessions,
                                  f.truth).ok()) {
      std::_Exit(3);
    }
    for (int t = 0; t < kThreads; ++t) {
      const std::vector<Event> events = events_of(t);
      const absl::Span<const Event> all(events);
      for (size_t at = 0; at < all.size(); at += 4096) {
        if (!(*writer)->AppendEvents(t, absl::StrCat("worker ", t),
                                     all.subspan(at, 4096)).ok()) {
          std::_Exit(4);
        }
      }
    }
    kill(getpid(), SIGKILL);
    std::_Exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_FALSE(fs::exists(dir + "/traces.otf2"));

  absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->truncated);
  EXPECT_NE(trace->truncation_note.find("definitions rebuilt from the sidecar"),
            std::string::npos)
      << trace->truncation_note;
  EXPECT_EQ(trace->info.rank, info.rank);
  EXPECT_EQ(trace->info.process_name, info.process_name);
  EXPECT_EQ(trace->regions.size(), f.regions.size());
  for (size_t i = 0; i < trace->regions.size() && i < f.regions.size(); ++i) {
    EXPECT_EQ(trace->regions[i].id, f.regions[i].id);
    EXPECT_EQ(trace->regions[i].name, f.regions[i].name);
  }
  ASSERT_EQ(trace->communicators.size(), f.comms.size());
  EXPECT_EQ(trace->communicators[1].name, "pair");
  EXPECT_EQ(trace->communicators[1].ranks, f.comms[1].ranks);
  EXPECT_EQ(trace->mappings, f.mappings);
  EXPECT_EQ(trace->sessions, f.sessions);
  ASSERT_TRUE(trace->truth.has_value());
  EXPECT_EQ(trace->truth->clock_model_spec, f.truth.clock_model_spec);
  ASSERT_EQ(trace->threads.size(), size_t{kThreads});
  for (int t = 0; t < kThreads; ++t) {
    const ThreadTrace& thread = trace->threads[t];
    EXPECT_EQ(thread.name, absl::StrCat("worker ", t));
    const std::vector<Event> written = events_of(t);
    // What OTF2 had written to disk: whole chunks, a prefix of the events.
    ASSERT_GT(thread.events.size(), 0u) << thread.name;
    ASSERT_LT(thread.events.size(), written.size()) << thread.name;
    for (size_t i = 0; i < thread.events.size(); ++i) {
      if (thread.events[i].kind == EventKind::kCollectiveBegin &&
          i + 1 == thread.events.size()) {
        EXPECT_EQ(thread.events[i].stamp, written[i].stamp);
        continue;
      }
      ASSERT_EQ(thread.events[i], written[i]) << thread.name << " event " << i;
    }
  }
}

// A finished archive whose anchor or global definitions are missing or
// damaged (they do not match the checksums of the sidecar's end line) is
// read with definitions rebuilt from the sidecar: every event, named
// threads and regions, and a note naming the file.
TEST(Otf2RoundTrip, DamagedDefinitionsAreRebuiltFromTheSidecar) {
  const ProcessInfo info = Info(0);
  const Fixture f;
  struct Case {
    std::string name;
    std::string file;
    bool remove;
    std::string note;
  };
  for (const Case& c : {Case{"anchor_removed", "traces.otf2", true, "is missing"},
                        Case{"anchor_flipped", "traces.otf2", false, "is damaged"},
                        Case{"defs_flipped", "traces.def", false, "is damaged"}}) {
    SCOPED_TRACE(c.name);
    const std::string dir = TestDir(c.name);
    std::vector<std::string> names;
    const std::vector<std::vector<Event>> written =
        WriteTrace(dir, info, f, 2, 40, &names);
    const std::string path = absl::StrCat(dir, "/", c.file);
    if (c.remove) {
      fs::remove(path);
    } else {
      std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
      file.seekg(static_cast<std::streamoff>(fs::file_size(path) / 2));
      const char byte = static_cast<char>(file.get());
      file.seekp(static_cast<std::streamoff>(fs::file_size(path) / 2));
      file.put(static_cast<char>(byte ^ 0x5a));
    }
    absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
    ASSERT_TRUE(trace.ok()) << trace.status();
    EXPECT_TRUE(trace->truncated);
    EXPECT_NE(trace->truncation_note.find(absl::StrCat(path, " ", c.note)),
              std::string::npos)
        << trace->truncation_note;
    EXPECT_NE(trace->truncation_note.find("definitions rebuilt"),
              std::string::npos);
    ASSERT_EQ(trace->threads.size(), written.size());
    for (size_t t = 0; t < written.size(); ++t) {
      EXPECT_EQ(trace->threads[t].name, names[t]);
      EXPECT_EQ(trace->threads[t].events, written[t]);
    }
    ASSERT_EQ(trace->regions.size(), f.regions.size());
    EXPECT_EQ(trace->regions[2].name, f.regions[2].name);
    EXPECT_EQ(trace->mappings, f.mappings);
  }
  // An intact archive is read from its own definitions, with no note.
  const std::string dir = TestDir("intact");
  std::vector<std::string> names;
  WriteTrace(dir, info, f, 1, 8, &names);
  absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->truncated) << trace->truncation_note;
}

TEST(Sidecar, StreamedRecordsAreWrittenOnceAndChangedOnesAgain) {
  const std::string dir = TestDir("streamed");
  Fixture f;
  {
    absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
        Otf2Writer::Create(dir, Info(0));
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::vector<Region> regions = {f.regions[0]};
    std::vector<Communicator> comms = {{0, "world", {}}};
    std::vector<MappingRecord> mappings = {f.mappings[0]};
    std::vector<SyncSession> sessions;
    ASSERT_TRUE((*writer)->StreamRecords(regions, comms, mappings, sessions,
                                         std::nullopt).ok());
    ASSERT_TRUE((*writer)->StreamRecords(regions, comms, mappings, sessions,
                                         std::nullopt).ok());
    regions = f.regions;
    comms[0].ranks = {0, 1, 2};  // the world learned its ranks
    comms.push_back(f.comms[1]);
    mappings = f.mappings;
    sessions = f.sessions;
    ASSERT_TRUE(
        (*writer)->Finish(regions, comms, mappings, sessions, f.truth).ok());
  }
  std::ifstream in(dir + "/clocksync.sidecar");
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("\nregion "), f.regions.size()) << text;
  EXPECT_EQ(count("\ncomm id=0 "), 2u) << text;  // changed once
  EXPECT_EQ(count("\nmapping "), f.mappings.size()) << text;
  EXPECT_EQ(count("\nsession "), f.sessions.size()) << text;
  EXPECT_EQ(count("\ntruth "), 1u) << text;
  absl::StatusOr<sidecar::Contents> parsed = sidecar::Parse(text, "x");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->communicators.size(), 2u);
  EXPECT_EQ(parsed->communicators[0].ranks, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(parsed->mappings, f.mappings);
  EXPECT_EQ(parsed->sessions, f.sessions);
  absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->truncated) << trace->truncation_note;
}

TEST(Otf2Writer, ErrorsNameThePath) {
  absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
      Otf2Writer::Create("/nonexistent-parent/trace", Info(0));
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("/nonexistent-parent/trace"),
            std::string::npos)
      << writer.status();

  const std::string dir = TestDir("not_empty");
  fs::create_directories(dir);
  std::ofstream(dir + "/x") << "x";
  writer = Otf2Writer::Create(dir, Info(0));
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(writer.status().message().find(dir), std::string::npos);
}

TEST(Otf2Writer, OutOfOrderStampsAreRejected) {
  const std::string dir = TestDir("order");
  absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
      Otf2Writer::Create(dir, Info(0));
  ASSERT_TRUE(writer.ok()) << writer.status();
  Event a;
  a.stamp = hull::PackStamp(10, 0);
  Event b = a;
  EXPECT_TRUE((*writer)->AppendEvents(0, "main", {a}).ok());
  EXPECT_EQ((*writer)->AppendEvents(0, "main", {b}).code(),
            absl::StatusCode::kInvalidArgument);
}

// What the child of FileSizeLimitIsAStatusNamingTheFileNotACrash checks;
// returns the exit code: 0 when all holds.
int WriteUntilTheFileSizeLimit(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Otf2Writer>> writer =
      Otf2Writer::Create(dir, Info(0));
  if (!writer.ok()) return 10;
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit;
  getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = 3 * 1024 * 1024;  // below the 4 MiB OTF2 flushes at once
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 11;
  hull::TraceStamper stamper;
  uint64_t tick = 0;
  std::mt19937_64 rng(1);
  absl::Status status;
  for (int i = 0; i < 400 && status.ok(); ++i) {
    status = (*writer)->AppendEvents(
        0, "main", MakeEvents(1000, &stamper, &tick, &rng));
  }
  if (status.ok()) return 12;
  std::fprintf(stderr, "AppendEvents: %s\n", status.ToString().c_str());
  if (status.message().find(dir) == std::string::npos) return 13;
  if ((*writer)->AppendEvents(0, "main", MakeEvents(1, &stamper, &tick, &rng)) !=
      status) {
    return 14;
  }
  if ((*writer)->Finish({}, {}, {}, {}, std::nullopt) != status) return 15;
  return 0;
}

TEST(Otf2Writer, FileSizeLimitIsAStatusNamingTheFileNotACrash) {
  // RLIMIT_FSIZE makes write() fail with EFBIG once a file reaches the
  // limit: the same path as a full disk. In a child process, because the
  // abandoned OTF2 archive leaks by design (LeakSanitizer would object at
  // exit) and the limit must not touch the other tests.
  const std::string dir = TestDir("full");
  std::fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(WriteUntilTheFileSizeLimit(dir));
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status)) << "child crashed: " << wait_status;
  EXPECT_EQ(WEXITSTATUS(wait_status), 0);
}

TEST(Otf2Writer, Otf2PrintReadsTheArchive) {
  const char* tool = "/usr/bin/otf2-print";
  if (access(tool, X_OK) != 0) {
    GTEST_SKIP() << tool << " is not installed (Debian package otf2-tools)";
  }
  const std::string dir = TestDir("otf2print");
  const Fixture f;
  std::vector<std::string> names;
  WriteTrace(dir, Info(0), f, 2, 8, &names);
  const std::string out = dir + ".txt";
  const std::string command = absl::StrCat(tool, " ", dir, "/traces.otf2 > ",
                                           out, " 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("ENTER"), std::string::npos) << text.substr(0, 2000);
  EXPECT_NE(text.find("MPI_SEND"), std::string::npos);
  EXPECT_NE(text.find("MPI_COLLECTIVE_END"), std::string::npos);
  EXPECT_EQ(text.find("rror"), std::string::npos) << text.substr(0, 2000);
}

TEST(Sidecar, EncodeDecodeAnyBytes) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string encoded = sidecar::Encode(all);
  EXPECT_EQ(encoded.find(' '), std::string::npos);
  EXPECT_EQ(encoded.find('\n'), std::string::npos);
  absl::StatusOr<std::string> decoded = sidecar::Decode(encoded);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, all);
  EXPECT_FALSE(sidecar::Decode("%4").ok());
  EXPECT_FALSE(sidecar::Decode("%zz").ok());
}

TEST(Sidecar, ErrorsNameFileAndLine) {
  const std::string text = sidecar::VersionLine() +
                           sidecar::ProcessLine(Info(0)) +
                           "mapping local_ns=x\n";
  absl::StatusOr<sidecar::Contents> parsed = sidecar::Parse(text, "f.sidecar");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("f.sidecar:3:"), std::string::npos)
      << parsed.status();
  parsed = sidecar::Parse("clocksync-sidecar 99\n", "f.sidecar");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("version 99"), std::string::npos);
}

}  // namespace
}  // namespace clocksync::trace
