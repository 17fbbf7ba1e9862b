// Reading raw archives of both versions: events come back as written
// across the reader's pieces, a cut last record (version 1) or chunk
// (version 2) is dropped with a note, and an unknown kind is an error
// naming the file and the event.

#include "trace/raw_archive.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace clocksync::trace {
namespace {

namespace fs = std::filesystem;

std::string Fresh(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  return dir.string();
}

std::vector<Event> Events(size_t n, uint32_t seed) {
  std::vector<Event> events(n);
  for (size_t i = 0; i < n; ++i) {
    Event& e = events[i];
    e.stamp = 1000 + i * 3;
    e.bytes = i * seed;
    e.region = static_cast<uint32_t>(i % 7);
    e.peer = static_cast<int32_t>(i % 5) - 1;
    e.tag = seed;
    e.comm = static_cast<uint32_t>(i % 3);
    e.kind = static_cast<EventKind>(i % 6);
    e.collective = static_cast<CollectiveKind>(i % 9);
  }
  return events;
}

// Writes two threads: 40,000 events (several of the reader's chunks) and 3.
std::string WriteArchive(const std::string& name) {
  const std::string dir = Fresh(name);
  ProcessInfo info;
  info.rank = 2;
  absl::StatusOr<std::unique_ptr<RawArchiveWriter>> w = RawArchiveWriter::Create(dir, info);
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE((*w)->AppendEvents(0, "main", Events(40000, 7)).ok());
  EXPECT_TRUE((*w)->AppendEvents(1, "worker", Events(3, 9)).ok());
  EXPECT_TRUE((*w)->Finish({}, {}, {}, {}, std::nullopt).ok());
  return dir;
}

// The same archive as a version 1 collector left it: its marker and the
// events in the fixed 40-byte layout (the sidecar is the same).
std::string WriteVersion1Archive(const std::string& name) {
  const std::string dir = WriteArchive(name);
  std::ofstream(dir + "/clocksync.raw", std::ios::trunc) << "clocksync-raw 1\n";
  for (const auto& [file, events] :
       {std::pair<std::string, std::vector<Event>>{"events.0.raw", Events(40000, 7)},
        {"events.1.raw", Events(3, 9)}}) {
    std::string fixed;
    EncodeEvents(events, &fixed);
    std::ofstream(dir + "/" + file, std::ios::trunc | std::ios::binary) << fixed;
  }
  return dir;
}

TEST(RawArchiveRead, Version1EventsComeBackAsWritten) {
  const std::string dir = WriteVersion1Archive("as_written_v1");
  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->threads.size(), 2u);
  EXPECT_EQ(trace->threads[0].events, Events(40000, 7));
  EXPECT_EQ(trace->threads[1].events, Events(3, 9));
  EXPECT_FALSE(trace->truncated);
}

TEST(RawArchiveRead, ACutLastChunkIsDroppedWithANote) {
  const std::string dir = WriteArchive("cut_chunk");
  std::ofstream(dir + "/events.0.raw", std::ios::app | std::ios::binary)
      << std::string(17, '\x01');
  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->threads[0].events, Events(40000, 7));
  EXPECT_TRUE(trace->truncated);
  EXPECT_NE(trace->truncation_note.find("events.0.raw ends in a cut chunk (17 bytes dropped)"),
            std::string::npos)
      << trace->truncation_note;
}

TEST(RawArchiveRead, AnUnknownPackedKindIsAnErrorNamingTheFileAndEvent) {
  const std::string dir = WriteArchive("bad_packed_kind");
  {
    std::fstream f(dir + "/events.0.raw", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);  // the first record's head byte
    f.put(static_cast<char>(15));
  }
  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(trace.status().message().find(
                "events.0.raw: chunk at byte 0: event 0: kind 15 is not an event kind"),
            std::string::npos)
      << trace.status();
}

TEST(RawArchiveRead, EventsComeBackAsWritten) {
  const std::string dir = WriteArchive("as_written");
  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->threads.size(), 2u);
  EXPECT_EQ(trace->threads[0].events, Events(40000, 7));
  EXPECT_EQ(trace->threads[1].events, Events(3, 9));
  EXPECT_EQ(trace->threads[1].name, "worker");
  EXPECT_FALSE(trace->truncated);
}

TEST(RawArchiveRead, ACutLastRecordIsDroppedWithANote) {
  const std::string dir = WriteVersion1Archive("cut");
  std::ofstream(dir + "/events.0.raw", std::ios::app | std::ios::binary)
      << std::string(17, '\0');
  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->threads[0].events, Events(40000, 7));
  EXPECT_TRUE(trace->truncated);
  EXPECT_NE(trace->truncation_note.find("events.0.raw ends in a cut record (17 bytes dropped)"),
            std::string::npos)
      << trace->truncation_note;
}

TEST(RawArchiveRead, AnUnknownKindIsAnErrorNamingTheFileAndEvent) {
  const std::string dir = WriteVersion1Archive("bad_kind");
  {
    std::fstream f(dir + "/events.0.raw", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(33333 * kEventWireBytes + 32);
    f.put(static_cast<char>(200));
  }
  absl::StatusOr<ProcessTrace> trace = ReadRawArchive(dir);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(trace.status().message().find(
                "events.0.raw: event 33333: kind 200 is not an event kind"),
            std::string::npos)
      << trace.status();
}

}  // namespace
}  // namespace clocksync::trace
