// Damaged archives: every file of a real archive flipped, overwritten, cut,
// emptied or removed, at random places (fixed seeds). The reader must give
// either a trace or an error naming the archive, never crash or hang; what
// it gives must go through everything clocksync-trace does with a trace
// (timelines under every correction, message matching, profile, Chrome
// JSON, merged text) without crashing either.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trace/export.h"
#include "trace/otf2_reader.h"
#include "trace/synthetic_trace.h"
#include "trace/timeline.h"

namespace clocksync::trace {
namespace {

namespace fs = std::filesystem;

enum class Damage { kFlipBytes, kOverwriteSpan, kCut, kEmpty, kRemove };

const char* DamageName(Damage d) {
  switch (d) {
    case Damage::kFlipBytes: return "flip";
    case Damage::kOverwriteSpan: return "overwrite";
    case Damage::kCut: return "cut";
    case Damage::kEmpty: return "empty";
    case Damage::kRemove: return "remove";
  }
  return "?";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

void Apply(Damage damage, const fs::path& file, std::mt19937_64* rng) {
  if (damage == Damage::kRemove) {
    fs::remove(file);
    return;
  }
  std::string data = ReadFile(file);
  auto at = [&](size_t size) {
    return size == 0 ? size_t{0} : static_cast<size_t>((*rng)() % size);
  };
  switch (damage) {
    case Damage::kFlipBytes: {
      const int flips = 1 + static_cast<int>((*rng)() % 8);
      for (int i = 0; i < flips && !data.empty(); ++i) {
        data[at(data.size())] ^= static_cast<char>(1 + (*rng)() % 255);
      }
      break;
    }
    case Damage::kOverwriteSpan: {
      const size_t start = at(data.size());
      const size_t length = std::min<size_t>(data.size() - start,
                                             1 + (*rng)() % 64);
      for (size_t i = 0; i < length; ++i) {
        data[start + i] = static_cast<char>((*rng)() & 0xff);
      }
      break;
    }
    case Damage::kCut:
      data.resize(at(data.size()));
      break;
    case Damage::kEmpty:
      data.clear();
      break;
    case Damage::kRemove:
      break;
  }
  WriteFile(file, data);
}

class ReaderRobustness : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = new std::string(
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/reader_robustness"));
    fs::remove_all(*root_);
    fs::create_directories(*root_ + "/good");
    absl::StatusOr<SyntheticAnswers> written =
        WriteSyntheticTraces(*root_ + "/good");
    ASSERT_TRUE(written.ok()) << written.status();
    answers_ = new SyntheticAnswers(*written);
    absl::StatusOr<ProcessTrace> rank0 = ReadProcessTrace(written->rank0_dir);
    ASSERT_TRUE(rank0.ok()) << rank0.status();
    rank0_ = new ProcessTrace(*std::move(rank0));
  }
  static void TearDownTestSuite() {
    delete rank0_;
    delete answers_;
    delete root_;
  }

  // Everything clocksync-trace does with a trace, on the healthy rank 0
  // and `damaged`; only crashes matter here.
  static void UseLikeTheTool(const ProcessTrace& damaged) {
    const std::vector<ProcessTrace> traces = {*rank0_, damaged};
    absl::StatusOr<MessageMatch> messages = MatchMessages(traces);
    bool exported = false;
    for (hull::CorrectionKind kind : hull::AllCorrectionKinds()) {
      absl::StatusOr<Timeline> timeline = BuildTimeline(traces, kind);
      if (!timeline.ok()) continue;
      if (messages.ok()) (void)Summarize(traces, *timeline, *messages, 0);
      // The exports do not depend on the correction: once is enough.
      if (!exported && timeline->complete()) {
        exported = true;
        if (messages.ok()) {
          std::ostringstream json;
          WriteChromeJson(traces, *timeline, *messages, json);
        }
        std::ostringstream text;
        WriteMergedText(traces, *timeline, text);
        (void)ProfileRegions(traces, *timeline);
      }
    }
  }

  static std::string* root_;
  static SyntheticAnswers* answers_;
  static ProcessTrace* rank0_;
};

std::string* ReaderRobustness::root_ = nullptr;
SyntheticAnswers* ReaderRobustness::answers_ = nullptr;
ProcessTrace* ReaderRobustness::rank0_ = nullptr;

TEST_F(ReaderRobustness, DamagedFilesGiveATraceOrAnErrorNamingTheArchive) {
  // Rank 1: two threads, a clock model, sessions, mapping records.
  const fs::path good(answers_->rank1_dir);
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(good)) {
    if (entry.is_regular_file()) files.push_back(fs::relative(entry.path(), good));
  }
  ASSERT_GE(files.size(), 5u);  // anchor, global defs, sidecar, 2 x evt (+ defs)

  int cases = 0, read_ok = 0;
  for (const fs::path& file : files) {
    for (Damage damage : {Damage::kFlipBytes, Damage::kOverwriteSpan,
                          Damage::kCut, Damage::kEmpty, Damage::kRemove}) {
      const int seeds =
          (damage == Damage::kEmpty || damage == Damage::kRemove) ? 1 : 6;
      for (int seed = 0; seed < seeds; ++seed) {
        SCOPED_TRACE(absl::StrCat(file.string(), " ", DamageName(damage),
                                  " seed ", seed));
        const std::string copy =
            absl::StrCat(*root_, "/case_", cases++);
        fs::remove_all(copy);
        fs::copy(good, copy, fs::copy_options::recursive);
        std::mt19937_64 rng(1000 * seed + static_cast<int>(damage));
        Apply(damage, fs::path(copy) / file, &rng);

        absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(copy);
        if (!trace.ok()) {
          EXPECT_NE(trace.status().message().find(copy), std::string::npos)
              << trace.status();
        } else {
          ++read_ok;
          UseLikeTheTool(*trace);
        }
        fs::remove_all(copy);
      }
    }
  }
  // Some damage is harmless or repaired (a cut event file), some is not.
  EXPECT_GT(read_ok, 0);
  EXPECT_LT(read_ok, cases);
  std::printf("%d damaged archives: %d read, %d refused with an error\n",
              cases, read_ok, cases - read_ok);
}

}  // namespace
}  // namespace clocksync::trace
