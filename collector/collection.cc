// collector/collection.cc: ranks joining, their streams stored into raw
// archives, and the run's progress (collection.h).

#include "collector/collection.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collector/contact.h"

namespace clocksync::collector {
namespace {

// FailedPrecondition when `hello` speaks another protocol version.
absl::Status CheckProtocolVersion(const Hello& hello) {
  if (hello.protocol_version() == kProtocolVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("hello.protocol_version: ", hello.protocol_version(),
                   " (this collector speaks ", kProtocolVersion, ")"));
}

}  // namespace

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
    : options_(std::move(options)), next_rank_(options_.world_size) {}

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
  if (absl::Status s = CheckProtocolVersion(hello); !s.ok()) {
    return refuse(s);
  }
  int32_t rank = hello.requested_rank();
  const uint32_t phase = hello.phase();
  if (phase > 0) {
    if (absl::Status s = CheckPhaseLocked(rank, phase); !s.ok()) {
      return refuse(s);
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
  return CreateRankLocked(rank, phase, *info);
}

absl::Status Collection::CheckPhaseLocked(int32_t rank, uint32_t phase) const {
  auto it = status_.find(rank);
  if (it == status_.end() || it->second.state != RankState::kBetweenPhases ||
      it->second.phase + 1 != phase) {
    return absl::FailedPreconditionError(absl::StrCat(
        "hello.phase: ", phase, " for rank ", rank,
        it == status_.end()
            ? std::string(", which never joined")
            : absl::StrCat(", whose phase ", it->second.phase, " is ",
                           RankStateName(it->second.state)),
        " (a phase continues a rank whose previous phase ended with "
        "more_phases)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Collection::Rank*> Collection::CreateRankLocked(
    int32_t rank, uint32_t phase, const trace::ProcessInfo& info) {
  const std::string dir =
      phase == 0 ? absl::StrCat(options_.raw_dir, "/rank.", rank)
                 : absl::StrCat(options_.raw_dir, "/rank.", rank, ".phase.",
                                phase);
  absl::StatusOr<std::unique_ptr<trace::RawArchiveWriter>> archive =
      trace::RawArchiveWriter::Create(dir, info);
  if (!archive.ok()) {
    // The collector's own problem (disk), not the process's.
    return absl::UnavailableError(absl::StrCat(
        "collector cannot store rank ", rank, ": ",
        archive.status().message()));
  }
  RankStatus& status = status_[rank];
  status.rank = rank;
  status.info = info;
  status.state = RankState::kStreaming;
  status.phase = phase;
  if (phase == 0) status.archive_dir = dir;
  status.phase_dirs.push_back(dir);
  ++stats_.streams_accepted;
  ranks_.push_back(
      std::unique_ptr<Rank>(new Rank(this, rank, *std::move(archive))));
  changed_.notify_all();
  return ranks_.back().get();
}

// --- dynamic spawning -------------------------------------------------------

std::string Collection::AttachKey(int32_t rank) const {
  return RankAttachKey(options_.token, rank);
}

absl::Status Collection::CheckGroupTokenLocked(absl::string_view field,
                                               absl::string_view token,
                                               int32_t parent,
                                               uint32_t group) {
  if (parent >= 0 &&
      TokensEqual(token, AttachGroupToken(AttachKey(parent), group))) {
    return absl::OkStatus();
  }
  ++stats_.refused_token;
  return absl::PermissionDeniedError(
      absl::StrCat(field, ": not the token of attach group ",
                   AttachGroupName(parent, group)));
}

int32_t Collection::ranks_in_run() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_rank_;
}

absl::StatusOr<Collection::Rank*> Collection::JoinChild(
    const Hello& hello, absl::Time deadline,
    const std::function<bool()>& cancelled, AttachedGroup* out) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int32_t parent = hello.attach().parent_rank();
  const uint32_t group_id = hello.attach().group();
  const std::string name = AttachGroupName(parent, group_id);
  if (absl::Status s =
          CheckGroupTokenLocked("hello.token", hello.token(), parent, group_id);
      !s.ok()) {
    return s;
  }
  auto refuse = [&](absl::Status status) {
    ++stats_.refused_hello;
    return status;
  };
  if (absl::Status s = CheckProtocolVersion(hello); !s.ok()) {
    return refuse(s);
  }
  absl::StatusOr<trace::ProcessInfo> info = FromProto(hello.process(), 0);
  if (!info.ok()) return refuse(info.status());
  auto fill = [&](const Group& group) {
    out->parent_rank = parent;
    out->group = group_id;
    out->children = group.children;
    out->ranks_in_run = next_rank_;
  };
  if (hello.phase() > 0) {
    const int32_t rank = hello.requested_rank();
    auto it = status_.find(rank);
    if (it == status_.end() || it->second.parent_rank != parent ||
        it->second.attach_group != group_id) {
      return refuse(absl::FailedPreconditionError(
          absl::StrCat("hello.requested_rank: rank ", rank,
                       " is not a child of attach group ", name)));
    }
    if (absl::Status s = CheckPhaseLocked(rank, hello.phase()); !s.ok()) {
      return refuse(s);
    }
    info->rank = rank;
    fill(groups_[{parent, group_id}]);
    return CreateRankLocked(rank, hello.phase(), *info);
  }
  if (hello.requested_rank() != -1) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
        "hello.requested_rank: ", hello.requested_rank(),
        " for a child of attach group ", name,
        " (the collector gives children their ranks: -1)")));
  }
  Group& group = groups_[{parent, group_id}];
  if (!group.failure.empty()) {
    return refuse(absl::FailedPreconditionError(group.failure));
  }
  if (group.complete) {
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("attach group ", name, " is complete (",
                     group.children.size(), " children)")));
  }
  auto parent_it = status_.find(parent);
  if (parent_it == status_.end() ||
      parent_it->second.state != RankState::kStreaming) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        "hello.attach: the parent of attach group ", name, ", rank ", parent,
        ", is not streaming (",
        parent_it == status_.end()
            ? std::string("it never joined")
            : std::string(RankStateName(parent_it->second.state)),
        ")")));
  }
  auto child = std::make_shared<PendingChild>();
  child->info = *info;
  group.pending.push_back(child);
  changed_.notify_all();
  auto withdraw = [&](absl::Status status) {
    // (groups_ entries are never erased: `group` stays valid.)
    auto& pending = group.pending;
    pending.erase(std::remove(pending.begin(), pending.end(), child),
                  pending.end());
    return status;
  };
  while (child->rank < 0 && child->refused.empty()) {
    if (stopped_) {
      return withdraw(absl::UnavailableError(absl::StrCat(
          "the collector ended before attach group ", name, " was complete")));
    }
    if (cancelled && cancelled()) {
      return withdraw(absl::CancelledError(absl::StrCat(
          "the child left before attach group ", name, " was complete")));
    }
    if (absl::Now() >= deadline) {
      return withdraw(absl::DeadlineExceededError(absl::StrCat(
          "attach group ", name, " was not complete in time")));
    }
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  if (!child->refused.empty()) {
    return refuse(absl::FailedPreconditionError(child->refused));
  }
  info->rank = child->rank;
  fill(group);
  absl::StatusOr<Rank*> created = CreateRankLocked(child->rank, 0, *info);
  if (!created.ok()) {
    // Its rank was given: the run must not wait for it.
    RankStatus& status = status_[child->rank];
    status.state = RankState::kLost;
    status.note = std::string(created.status().message());
    changed_.notify_all();
  }
  return created;
}

std::vector<std::shared_ptr<Collection::PendingChild>>
Collection::SelectLocked(const Group& group) const {
  std::vector<std::shared_ptr<PendingChild>> chosen;
  if (group.pids.empty()) {
    for (const auto& child : group.pending) {
      if (static_cast<int32_t>(chosen.size()) == group.expected) break;
      chosen.push_back(child);
    }
    return chosen;
  }
  for (int64_t pid : group.pids) {
    for (const auto& child : group.pending) {
      if (child->info.pid == pid) {
        chosen.push_back(child);
        break;
      }
    }
  }
  return chosen;
}

void Collection::FailGroupLocked(Group* group, const std::string& why) {
  if (group->complete || !group->failure.empty()) return;
  group->failure = why;
  for (const auto& child : group->pending) child->refused = why;
  group->pending.clear();
  ++stats_.attach_failures;
  changed_.notify_all();
}

void Collection::FailGroupsOfLocked(int32_t parent, const std::string& why) {
  for (auto& [key, group] : groups_) {
    if (key.first != parent) continue;
    FailGroupLocked(&group, absl::StrCat("attach group ",
                                         AttachGroupName(key.first, key.second),
                                         ": ", why));
  }
}

absl::StatusOr<AttachedGroup> Collection::Attach(
    const AttachRequest& request, absl::Time deadline,
    const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int32_t parent = request.group().parent_rank();
  const uint32_t group_id = request.group().group();
  const std::string name = AttachGroupName(parent, group_id);
  if (absl::Status s = CheckGroupTokenLocked("attach.token", request.token(),
                                             parent, group_id);
      !s.ok()) {
    ++stats_.attach_failures;
    return s;
  }
  auto refuse = [&](absl::Status status) {
    ++stats_.attach_failures;
    return status;
  };
  const int32_t n = request.children();
  if (n < 1 || n > kMaxAttachChildren) {
    return refuse(absl::InvalidArgumentError(
        absl::StrCat("attach.children: ", n, " (want 1..",
                     kMaxAttachChildren, ")")));
  }
  if (request.pids_size() != 0 && request.pids_size() != n) {
    return refuse(absl::InvalidArgumentError(
        absl::StrCat("attach.pids: ", request.pids_size(), " pids for ", n,
                     " children (want none, or one each)")));
  }
  for (int i = 0; i < request.pids_size(); ++i) {
    if (request.pids(i) <= 0) {
      return refuse(absl::InvalidArgumentError(absl::StrCat(
          "attach.pids[", i, "]: ", request.pids(i), " is not a pid")));
    }
    for (int j = 0; j < i; ++j) {
      if (request.pids(j) == request.pids(i)) {
        return refuse(absl::InvalidArgumentError(absl::StrCat(
            "attach.pids[", i, "]: pid ", request.pids(i), " listed twice")));
      }
    }
  }
  if (next_rank_ > kMaxRanksInRun - n) {
    return refuse(absl::ResourceExhaustedError(absl::StrCat(
        "attach.children: ", n, " more ranks would pass the run's limit of ",
        kMaxRanksInRun, " (", next_rank_, " now)")));
  }
  auto streaming = [&] {
    auto it = status_.find(parent);
    return it != status_.end() && it->second.state == RankState::kStreaming;
  };
  if (!streaming()) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        "attach.group: rank ", parent, " is not streaming (attach group ",
        name, ")")));
  }
  Group& group = groups_[{parent, group_id}];
  if (group.expected != 0 || group.complete || !group.failure.empty()) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        "attach.group: attach group ", name, " was attached before")));
  }
  group.expected = n;
  group.pids.assign(request.pids().begin(), request.pids().end());
  const absl::Time start = absl::Now();
  auto fail = [&](absl::StatusCode code, const std::string& why) {
    const std::string message = absl::StrCat("attach group ", name, ": ", why);
    FailGroupLocked(&group, message);
    return absl::Status(code, message);
  };
  std::vector<std::shared_ptr<PendingChild>> chosen;
  for (;;) {
    chosen = SelectLocked(group);
    if (static_cast<int32_t>(chosen.size()) == n) break;
    if (!streaming()) {
      return fail(absl::StatusCode::kFailedPrecondition,
                  "the parent stopped streaming while it waited");
    }
    if (stopped_) {
      return fail(absl::StatusCode::kUnavailable, "the collector is ending");
    }
    if (cancelled && cancelled()) {
      return fail(absl::StatusCode::kCancelled, "the attach was cancelled");
    }
    if (absl::Now() >= deadline) {
      std::string missing;
      if (!group.pids.empty()) {
        std::vector<std::string> pids;
        for (int64_t pid : group.pids) {
          bool seen = false;
          for (const auto& child : chosen) seen |= child->info.pid == pid;
          if (!seen) pids.push_back(absl::StrCat("pid ", pid));
        }
        missing = absl::StrCat(": ", absl::StrJoin(pids, ", "));
      }
      return fail(absl::StatusCode::kDeadlineExceeded,
                  absl::StrCat(n - static_cast<int32_t>(chosen.size()), " of ",
                               n, " children never connected within ",
                               absl::ToInt64Milliseconds(absl::Now() - start),
                               " ms", missing));
    }
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  AttachedGroup out;
  out.parent_rank = parent;
  out.group = group_id;
  for (const auto& child : chosen) {
    child->rank = next_rank_++;
    // Streaming from now on (the run waits for it); its archive comes when
    // its stream thread wakes (CreateRankLocked).
    RankStatus& status = status_[child->rank];
    status.rank = child->rank;
    status.info = child->info;
    status.info.rank = child->rank;
    status.state = RankState::kStreaming;
    status.parent_rank = parent;
    status.attach_group = group_id;
    group.children.push_back(child->rank);
  }
  for (const auto& child : group.pending) {
    if (child->rank >= 0) continue;
    child->refused =
        group.pids.empty()
            ? absl::StrCat("attach group ", name, " took its ", n,
                           " children before this one")
            : absl::StrCat("attach group ", name, ": pid ", child->info.pid,
                           " is not among its children's pids");
  }
  group.pending.clear();
  group.complete = true;
  ++stats_.attach_groups;
  out.children = group.children;
  out.ranks_in_run = next_rank_;
  changed_.notify_all();
  return out;
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
  if (state != RankState::kStreaming) {
    // Its children that were still to be attached will not be.
    FailGroupsOfLocked(rank.rank(),
                       absl::StrCat("the parent, rank ", rank.rank(), ", ",
                                    state == RankState::kLost
                                        ? "was lost"
                                        : "ended its stream",
                                    " before attaching its children"));
  }
  status.events += new_events;
  status.batches += new_batch ? 1 : 0;
  stats_.events += new_events;
  stats_.event_bytes += new_bytes;
  if (state != RankState::kStreaming) changed_.notify_all();
}

bool Collection::AllDoneLocked() const {
  // Every rank of the world joined (attached children come on top) ...
  for (int32_t rank = 0; rank < options_.world_size; ++rank) {
    if (status_.count(rank) == 0) return false;
  }
  // ... and every rank given is done.
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
                       std::unique_ptr<trace::RawArchiveWriter> archive)
    : collection_(collection), rank_(rank), archive_(std::move(archive)) {}

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
  if (batch.packed().size() > kMaxBatchBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("events.packed: ", batch.packed().size(),
                     " bytes, more than ", kMaxBatchBytes));
  }
  if (!batch.packed().empty() && !batch.events().empty()) {
    return absl::InvalidArgumentError(
        "events: both packed and fixed-layout events in one batch");
  }
  if (batch.thread_name().size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("events.thread_name: ", batch.thread_name().size(),
                     " bytes, more than ", kMaxNameBytes));
  }
  const uint64_t before = archive_->events_written();
  absl::Status status =
      batch.packed().empty()
          ? archive_->AppendEncoded(batch.thread_index(), batch.thread_name(),
                                    batch.events())
          : archive_->AppendPacked(batch.thread_index(), batch.thread_name(),
                                   batch.packed());
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(
          absl::StrCat("events: ", status.message()));
    }
    return status;  // the collector's disk
  }
  last_batch_ = batch.batch();
  const uint64_t n = archive_->events_written() - before;
  events_ += n;
  collection_->Update(*this, RankState::kStreaming, "", n,
                      batch.events().size() + batch.packed().size(), true);
  return absl::OkStatus();
}

absl::Status Collection::Rank::AddRecords(const Records& records) {
  if (ended_) return absl::FailedPreconditionError("records after the end");
  absl::StatusOr<DecodedRecords> decoded = FromProto(records, collection_->ranks_in_run());
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
