// The packed event encoding (trace/packed_events.h) and the raw archive that
// stores it (trace/raw_archive.h): every event survives the round trip,
// Enter/Leave take a few bytes, hostile chunks are refused with the event
// named and never read past their end, and a raw archive of either version
// reads back (a cut last chunk marks the trace truncated).

#include "trace/packed_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trace/raw_archive.h"

namespace clocksync::trace {
namespace {

std::vector<Event> RandomEvents(std::mt19937_64& rng, size_t n) {
  std::vector<Event> events;
  uint64_t stamp = rng() % 1000000;
  for (size_t i = 0; i < n; ++i) {
    Event e;
    stamp += 1 + rng() % (i % 50 == 0 ? (uint64_t{1} << 40) : 100000);
    e.stamp = stamp;
    e.kind = static_cast<EventKind>(rng() % 6);
    switch (rng() % 4) {
      case 0:  // defaults everywhere but the kind
        break;
      case 1:
        e.region = static_cast<uint32_t>(rng());
        break;
      case 2:
        e.bytes = rng();
        e.peer = static_cast<int32_t>(rng());
        e.tag = static_cast<uint32_t>(rng());
        e.comm = static_cast<uint32_t>(rng() % 3);
        break;
      default:
        e.bytes = rng() % 4096;
        e.peer = static_cast<int32_t>(rng() % 64) - 1;
        e.comm = 1;
        e.collective = static_cast<CollectiveKind>(
            rng() % (static_cast<int>(CollectiveKind::kOther) + 1));
        break;
    }
    events.push_back(e);
  }
  return events;
}

TEST(PackedEventsTest, RoundTripsEveryField) {
  std::mt19937_64 rng(7);
  for (size_t n : {0, 1, 2, 1000}) {
    const std::vector<Event> events = RandomEvents(rng, n);
    std::string chunk;
    PackEvents(events, &chunk);
    EXPECT_LE(chunk.size(), PackedBound(n));
    PackedChunkInfo info;
    std::vector<Event> back;
    ASSERT_TRUE(UnpackChunk(chunk, &info, &back).ok()) << n;
    EXPECT_EQ(back, events);
    EXPECT_EQ(info.chunk_bytes, chunk.size());
    EXPECT_EQ(info.events, n);
    if (n > 0) {
      EXPECT_EQ(info.first_stamp, events.front().stamp);
      EXPECT_EQ(info.last_stamp, events.back().stamp);
    }
  }
}

TEST(PackedEventsTest, ExtremeValuesRoundTrip) {
  std::vector<Event> events(3);
  events[0].stamp = 1;
  events[0].bytes = std::numeric_limits<uint64_t>::max();
  events[0].peer = std::numeric_limits<int32_t>::min();
  events[0].tag = std::numeric_limits<uint32_t>::max();
  events[0].comm = std::numeric_limits<uint32_t>::max();
  events[0].region = std::numeric_limits<uint32_t>::max();
  events[0].kind = EventKind::kCollectiveEnd;
  events[0].collective = CollectiveKind::kBarrier;
  events[1].stamp = std::numeric_limits<uint64_t>::max() - 1;
  events[1].peer = std::numeric_limits<int32_t>::max();
  events[2].stamp = std::numeric_limits<uint64_t>::max();
  std::string chunk;
  PackEvents(events, &chunk);
  // 1 + 1 + 10 + 5 + 5 + 5 + 5 + 1 bytes (every field, the widest values
  // but the stamp), 1 + 10 + 5 + 1 + 1 (a 64-bit delta, a peer), 1 + 1.
  EXPECT_EQ(chunk.size(), kPackedChunkHeaderBytes + 33 + 18 + 2);
  std::vector<Event> back;
  ASSERT_TRUE(UnpackChunk(chunk, nullptr, &back).ok());
  EXPECT_EQ(back, events);
}

// What the tracer streams most: Enter/Leave pairs some 10-100 ticks apart
// (the stamp is tick << 13 | counter).
TEST(PackedEventsTest, EnterLeaveTakeAFewBytes) {
  std::vector<Event> events;
  uint64_t tick = 1'000'000'000;
  for (int i = 0; i < 10000; ++i) {
    Event e;
    tick += 10 + i % 90;
    e.stamp = tick << 13;
    e.kind = i % 2 == 0 ? EventKind::kEnter : EventKind::kLeave;
    e.region = 1 + i % 20;
    events.push_back(e);
  }
  std::string chunk;
  PackEvents(events, &chunk);
  const double per_event = static_cast<double>(chunk.size()) / events.size();
  std::printf("Enter/Leave: %.2f bytes per event (fixed layout: %zu)\n",
              per_event, kEventWireBytes);
  EXPECT_LE(per_event, 6.0);
}

TEST(PackedEventsTest, HostileChunksAreRefusedNamingTheEvent) {
  std::vector<Event> events(2);
  events[0].stamp = 100;
  events[1].stamp = 200;
  std::string good;
  PackEvents(events, &good);
  // Every cut: OutOfRange (header or payload short), never a crash.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    const absl::Status s =
        UnpackChunk(absl::string_view(good).substr(0, cut), nullptr, nullptr);
    EXPECT_TRUE(absl::IsOutOfRange(s)) << cut << ": " << s;
  }
  std::string bad = good;
  bad[kPackedChunkHeaderBytes] = 9;  // kind 9
  absl::Status s = UnpackChunk(bad, nullptr, nullptr);
  EXPECT_EQ(s.message(), "event 0: kind 9 is not an event kind") << s;
  // A zero stamp delta on the second event: stamps must rise.
  bad = good;
  bad[kPackedChunkHeaderBytes + 3] = 0;
  s = UnpackChunk(bad, nullptr, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("event 1: stamp 100 is not above"),
            std::string::npos) << s;
  // A count the payload cannot hold, and one that leaves bytes over.
  bad = good;
  bad[4] = 100;
  EXPECT_TRUE(absl::IsInvalidArgument(UnpackChunk(bad, nullptr, nullptr)));
  bad = good;
  bad[4] = 1;
  s = UnpackChunk(bad, nullptr, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  // A varint that runs on past 64 bits, and one past the payload.
  std::string varint(8, '\0');
  varint += std::string(1, '\0');           // head: Enter
  varint += std::string(11, '\xff');        // 11 continuation bytes
  varint[0] = 12;
  varint[4] = 1;
  s = UnpackChunk(varint, nullptr, nullptr);
  EXPECT_EQ(s.message(), "event 0: malformed stamp") << s;
  // A refused chunk leaves *out as it was.
  std::vector<Event> out(1);
  bad = good;
  bad[kPackedChunkHeaderBytes + 3] = 0;
  EXPECT_FALSE(UnpackChunk(bad, nullptr, &out).ok());
  EXPECT_EQ(out.size(), 1u);
}

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

ProcessInfo Info() {
  ProcessInfo info;
  info.rank = 3;
  info.tick_period_ns = 1.0;
  return info;
}

TEST(RawArchiveTest, PackedArchiveReadsBackAndACutChunkTruncates) {
  std::mt19937_64 rng(11);
  const std::vector<Event> events = RandomEvents(rng, 5000);
  const std::string dir = TempDir("packed_archive");
  auto writer = RawArchiveWriter::Create(dir, Info());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const absl::Span<const Event> all(events);
  ASSERT_TRUE((*writer)->AppendEvents(0, "main", all.subspan(0, 2000)).ok());
  std::string chunk;
  PackEvents(all.subspan(2000, 1000), &chunk);
  ASSERT_TRUE((*writer)->AppendPacked(0, "main", chunk).ok());
  // Version 1 input (the fixed layout) is packed on the way in.
  std::string fixed;
  EncodeEvents(all.subspan(3000), &fixed);
  ASSERT_TRUE((*writer)->AppendEncoded(0, "main", fixed).ok());
  // A chunk whose stamps do not continue the thread's is refused whole.
  absl::Status s = (*writer)->AppendPacked(0, "main", chunk);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("is not above the previous stamp"), std::string::npos);
  ASSERT_TRUE((*writer)->Finish({}, {}, {}, {}, std::nullopt).ok());
  EXPECT_EQ((*writer)->events_written(), events.size());

  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->threads.size(), 1u);
  EXPECT_EQ(trace->threads[0].name, "main");
  EXPECT_EQ(trace->threads[0].events, events);
  EXPECT_FALSE(trace->truncated) << trace->truncation_note;

  // The collector killed mid-write: the last chunk cut.
  const std::string path = dir + "/events.0.raw";
  const int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const off_t size = lseek(fd, 0, SEEK_END);
  ASSERT_EQ(ftruncate(fd, size - 5), 0);
  close(fd);
  trace = ReadRawArchive(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(trace->truncated);
  EXPECT_NE(trace->truncation_note.find("ends in a cut chunk"), std::string::npos)
      << trace->truncation_note;
  EXPECT_EQ(trace->threads[0].events.size(), 3000u);
}

TEST(RawArchiveTest, Version1ArchivesStillRead) {
  std::mt19937_64 rng(13);
  const std::vector<Event> events = RandomEvents(rng, 300);
  const std::string dir = TempDir("version1_archive");
  {
    auto writer = RawArchiveWriter::Create(dir, Info());
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Finish({}, {}, {}, {}, std::nullopt).ok());
  }
  // What a version 1 collector left: its marker and 40-byte records.
  std::string fixed;
  EncodeEvents(events, &fixed);
  for (const auto& [name, text] :
       {std::pair<std::string, std::string>{"clocksync.raw", "clocksync-raw 1\n"},
        {"events.0.raw", fixed}}) {
    const int fd = open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->threads.size(), 1u);
  EXPECT_EQ(trace->threads[0].events, events);
}

}  // namespace
}  // namespace clocksync::trace
