// collector/collection.cc: ranks joining, their streams stored into raw
// archives, and the run's progress (collection.h).

#include "collector/collection.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "collector/contact.h"

namespace clocksync::collector {

absl::string_view RankStateName(RankState state) {
  switch (state) {
    case RankState::kStreaming:
      return "streaming";
    case RankState::kFinished:
      return "finished";
    case RankState::kLost:
      return "lost";
    case RankState::kBetweenPhases:
      return "between phases";
  }
  return "?";
}

Collection::Collection(CollectionOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<Collection::Rank*> Collection::Join(const Hello& hello) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!TokensEqual(hello.token(), options_.token)) {
    ++stats_.refused_token;
    return absl::PermissionDeniedError(
        "hello.token: not this run's session token");
  }
  auto refuse = [&](absl::Status status) {
    ++stats_.refused_hello;
    return status;
  };
  if (hello.protocol_version() != kProtocolVersion) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        "hello.protocol_version: ", hello.protocol_version(),
        " (this collector speaks ", kProtocolVersion, ")")));
  }
  int32_t rank = hello.requested_rank();
  const uint32_t phase = hello.phase();
  if (phase > 0) {
    auto it = status_.find(rank);
    if (it == status_.end() || it->second.state != RankState::kBetweenPhases ||
        it->second.phase + 1 != phase) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "hello.phase: ", phase, " for rank ", rank,
          it == status_.end()
              ? std::string(", which never joined")
              : absl::StrCat(", whose phase ", it->second.phase, " is ",
                             RankStateName(it->second.state)),
          " (a phase continues a rank whose previous phase ended with "
          "more_phases)")));
    }
  } else if (rank == -1) {
    rank = 0;
    while (rank < options_.world_size && status_.count(rank) != 0) ++rank;
    if (rank == options_.world_size) {
      return refuse(absl::ResourceExhaustedError(
          absl::StrCat("hello.requested_rank: every rank of the run's ",
                       options_.world_size, " is taken")));
    }
  } else if (rank < 0 || rank >= options_.world_size) {
    return refuse(absl::OutOfRangeError(
        absl::StrCat("hello.requested_rank: ", rank, " outside 0..",
                     options_.world_size - 1, " (the run has ",
                     options_.world_size, " processes)")));
  } else if (status_.count(rank) != 0) {
    return refuse(absl::AlreadyExistsError(absl::StrCat(
        "hello.requested_rank: rank ", rank, " is taken (",
        RankStateName(status_[rank].state), ")")));
  }
  absl::StatusOr<trace::ProcessInfo> info = FromProto(hello.process(), rank);
  if (!info.ok()) return refuse(info.status());
  const std::string dir =
      phase == 0 ? absl::StrCat(options_.raw_dir, "/rank.", rank)
                 : absl::StrCat(options_.raw_dir, "/rank.", rank, ".phase.",
                                phase);
  absl::StatusOr<std::unique_ptr<trace::RawArchiveWriter>> archive =
      trace::RawArchiveWriter::Create(dir, *info);
  if (!archive.ok()) {
    // The collector's own problem (disk), not the process's.
    return absl::UnavailableError(absl::StrCat(
        "collector cannot store rank ", rank, ": ",
        archive.status().message()));
  }
  RankStatus& status = status_[rank];
  status.rank = rank;
  status.info = *info;
  status.state = RankState::kStreaming;
  status.phase = phase;
  if (phase == 0) status.archive_dir = dir;
  status.phase_dirs.push_back(dir);
  ++stats_.streams_accepted;
  ranks_.push_back(std::unique_ptr<Rank>(
      new Rank(this, rank, *std::move(archive), options_.world_size)));
  changed_.notify_all();
  return ranks_.back().get();
}

void Collection::Abandon(int32_t rank, absl::string_view why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (status_.count(rank) != 0) return;
  RankStatus& status = status_[rank];
  status.rank = rank;
  status.state = RankState::kLost;
  status.note = std::string(why);
  changed_.notify_all();
}

void Collection::NoteMalformed() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.malformed_messages;
}

void Collection::Update(const Rank& rank, RankState state,
                        absl::string_view note, uint64_t new_events,
                        uint64_t new_bytes, bool new_batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  RankStatus& status = status_[rank.rank()];
  status.state = state;
  if (!note.empty()) status.note = std::string(note);
  status.events += new_events;
  status.batches += new_batch ? 1 : 0;
  stats_.events += new_events;
  stats_.event_bytes += new_bytes;
  if (state != RankState::kStreaming) changed_.notify_all();
}

bool Collection::AllDoneLocked() const {
  if (static_cast<int32_t>(status_.size()) < options_.world_size) return false;
  for (const auto& [rank, status] : status_) {
    if (status.state == RankState::kStreaming ||
        status.state == RankState::kBetweenPhases) {
      return false;
    }
  }
  return true;
}

bool Collection::WaitUntilDone(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto done = [&] { return stopped_ || AllDoneLocked(); };
  if (timeout == absl::InfiniteDuration()) {
    // (wait_for with the largest duration overflows the clock: no wait.)
    changed_.wait(lock, done);
  } else {
    changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout), done);
  }
  return AllDoneLocked();
}

void Collection::Stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopped_ = true;
  changed_.notify_all();
}

std::vector<RankStatus> Collection::Status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RankStatus> out;
  for (const auto& [rank, status] : status_) out.push_back(status);
  return out;
}

CollectionStats Collection::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

// --- one rank ---------------------------------------------------------------

Collection::Rank::Rank(Collection* collection, int32_t rank,
                       std::unique_ptr<trace::RawArchiveWriter> archive,
                       int32_t world_size)
    : collection_(collection),
      rank_(rank),
      world_size_(world_size),
      archive_(std::move(archive)) {}

absl::Status Collection::Rank::AddEvents(const EventBatch& batch) {
  if (ended_) return absl::FailedPreconditionError("events after the end");
  if (batch.batch() != last_batch_ + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("events.batch: ", batch.batch(), " after batch ",
                     last_batch_, " (batches are numbered 1, 2, ...)"));
  }
  if (batch.events().size() > kMaxBatchBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("events.events: ", batch.events().size(),
                     " bytes, more than ", kMaxBatchBytes));
  }
  if (batch.thread_name().size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("events.thread_name: ", batch.thread_name().size(),
                     " bytes, more than ", kMaxNameBytes));
  }
  absl::Status status = archive_->AppendEncoded(
      batch.thread_index(), batch.thread_name(), batch.events());
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(
          absl::StrCat("events: ", status.message()));
    }
    return status;  // the collector's disk
  }
  last_batch_ = batch.batch();
  const uint64_t n = batch.events().size() / trace::kEventWireBytes;
  events_ += n;
  collection_->Update(*this, RankState::kStreaming, "", n,
                      batch.events().size(), true);
  return absl::OkStatus();
}

absl::Status Collection::Rank::AddRecords(const Records& records) {
  if (ended_) return absl::FailedPreconditionError("records after the end");
  absl::StatusOr<DecodedRecords> decoded = FromProto(records, world_size_);
  if (!decoded.ok()) return decoded.status();
  if (decoded->truth.has_value() && truth_.has_value() &&
      !(*decoded->truth == *truth_)) {
    return absl::InvalidArgumentError(
        "records.truth: a second, different ground truth");
  }
  for (trace::Region& r : decoded->regions) regions_[r.id] = std::move(r);
  for (trace::Communicator& c : decoded->communicators) {
    communicators_[c.id] = std::move(c);
  }
  mappings_.insert(mappings_.end(), decoded->mappings.begin(),
                   decoded->mappings.end());
  for (trace::SyncSession& s : decoded->sessions) {
    sessions_.push_back(std::move(s));
  }
  if (decoded->truth.has_value()) truth_ = decoded->truth;
  return StoreRecords();
}

// The accumulated records into the archive's sidecar (only the new lines).
absl::Status Collection::Rank::StoreRecords() {
  std::vector<trace::Region> regions;
  for (const auto& [id, r] : regions_) regions.push_back(r);
  std::vector<trace::Communicator> communicators;
  for (const auto& [id, c] : communicators_) communicators.push_back(c);
  return archive_->StreamRecords(regions, communicators, mappings_, sessions_,
                                 truth_);
}

absl::Status Collection::Rank::Finish(
    const ::clocksync::collector::Finish& finish) {
  if (ended_) return absl::FailedPreconditionError("a second Finish");
  if (finish.events() != events_) {
    return absl::InvalidArgumentError(
        absl::StrCat("finish.events: ", finish.events(),
                     " events sent, but ", events_, " arrived"));
  }
  std::vector<trace::Region> regions;
  for (const auto& [id, r] : regions_) regions.push_back(r);
  std::vector<trace::Communicator> communicators;
  for (const auto& [id, c] : communicators_) communicators.push_back(c);
  absl::Status status = archive_->Finish(regions, communicators, mappings_,
                                         sessions_, truth_);
  if (!status.ok()) return status;
  ended_ = true;
  collection_->Update(
      *this,
      finish.more_phases() ? RankState::kBetweenPhases : RankState::kFinished,
      "", 0, 0, false);
  return absl::OkStatus();
}

void Collection::Rank::Lost(absl::string_view why) {
  if (ended_) return;
  ended_ = true;
  collection_->Update(*this, RankState::kLost, why, 0, 0, false);
}

}  // namespace clocksync::collector
