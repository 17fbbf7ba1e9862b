// testing/bench_segment.cc: the benchmarks' temporary segment and its
// republishing thread (see testing/bench_segment.h).

#include "testing/bench_segment.h"

#include <ftw.h>
#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "shm/tsc_calibrator.h"
#include "absl/strings/str_cat.h"

namespace clocksync::bench {
namespace {

int64_t RawNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  return remove(path);
}

}  // namespace

Mapping FreshMapping() {
  Mapping mapping;
  mapping.anchor_raw_ns = RawNowNs();
  mapping.anchor_global_ns = mapping.anchor_raw_ns + 1'000'000'000;
  mapping.rate_adj = 12.345e-6;
  mapping.bound_at_anchor_ns = 800;
  mapping.bound_growth_ppb = 0.5;
  mapping.state = CLOCKSYNC_STATE_SYNCED;
  return mapping;
}

std::unique_ptr<BenchSegment> BenchSegment::Create(const std::string& name) {
  const char* base = getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/", name,
                                 ".XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror(("mkdtemp " + dir).c_str());
    std::exit(1);
  }
  absl::StatusOr<ShmPublisher> publisher =
      ShmPublisher::Open(dir + "/clocksync.shm");
  absl::Status status = publisher.status();
  if (status.ok()) status = publisher->Publish(FreshMapping());
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::exit(1);
  }
  return std::unique_ptr<BenchSegment>(
      new BenchSegment(std::move(dir), std::move(*publisher)));
}

BenchSegment::BenchSegment(std::string dir, ShmPublisher publisher)
    : dir_(std::move(dir)),
      shm_path_(dir_ + "/clocksync.shm"),
      publisher_(std::move(publisher)) {
  republisher_ = std::thread([this] {
    // As clocksyncd does: a TSC -> raw mapping where the TSC is invariant,
    // re-checked every second (every tenth republication).
    std::string why;
    std::optional<TscCalibrator> tsc;
    if (HasInvariantTsc(&why)) {
      TscCalibrator::Options options;
      options.min_baseline_ns = 200'000'000;
      tsc.emplace(options);
    }
    for (int round = 0; !stop_.load(); ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!publisher_->Publish(FreshMapping()).ok()) std::abort();
      if (tsc && (round < 10 || round % 10 == 0)) {
        const uint64_t jumps_before = tsc->jumps();
        if (!publisher_->PublishTsc(tsc->Update()).ok()) std::abort();
        // The figures then mix both read paths for a while: say so.
        if (tsc->jumps() != jumps_before) {
          std::fprintf(stderr, "bench segment: TSC mapping withdrawn: %s\n",
                       tsc->problem().c_str());
        }
      }
    }
  });
}

BenchSegment::~BenchSegment() {
  Stop();
  nftw(dir_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

void BenchSegment::Stop() {
  stop_ = true;
  if (republisher_.joinable()) republisher_.join();
  if (publisher_.has_value()) publisher_->Close();
}

}  // namespace clocksync::bench
