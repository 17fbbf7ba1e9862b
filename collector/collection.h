// collector/collection.h: the collector's state for one run: which ranks
// joined, each rank's raw archive (trace/raw_archive.h) that its stream
// appends to, which finished and which were lost, and the counters of
// refused streams and malformed messages. The gRPC service
// (collector_service.h) drives it, one stream thread per rank; nothing here
// knows gRPC, so tests drive it directly.
//
// Dynamic spawning (attach groups): a child of a streaming rank joins with
// its parent's attach contact string (JoinChild) and waits there until the
// parent's Attach took the group whole; the children then get the ranks
// after every rank given so far (the world's first: world_size,
// world_size + 1, ...), the run grows, and each learns the group.
//
// Thread safety: Join, JoinChild, Attach, Status, Stats, WaitUntilDone,
// Stop and the counters are safe from any thread. A Rank's methods are called by its one stream
// thread; its archive is touched by nobody else.
#ifndef CLOCKSYNC_COLLECTOR_COLLECTION_H_
#define CLOCKSYNC_COLLECTOR_COLLECTION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collector/wire.h"
#include "proto/collector.pb.h"
#include "trace/raw_archive.h"
#include "trace/trace.h"

namespace clocksync::collector {

struct CollectionOptions {
  // The run's session token (contact.h); streams without it are refused.
  std::string token;
  // Where the ranks' raw archives go: <raw_dir>/rank.<N> (the directory
  // must exist).
  std::string raw_dir;
  // Processes in the run: ranks 0..world_size-1, >= 1.
  int32_t world_size = 1;
  // Event bytes a process may have unacknowledged (Welcome).
  uint64_t max_unacked_bytes = kDefaultMaxUnackedBytes;
};

enum class RankState {
  kStreaming,      // joined, no Finish yet
  kFinished,       // Finish received, everything stored
  kLost,           // the stream ended without Finish, or was refused mid-way
  kBetweenPhases,  // a phase ended with Finish.more_phases: the next one
                   // is awaited (the rank is not done)
};

// streaming, finished, lost, between phases
absl::string_view RankStateName(RankState state);

struct RankStatus {
  int32_t rank = 0;
  RankState state = RankState::kStreaming;
  trace::ProcessInfo info;
  std::string archive_dir;   // its raw archive (of phase 0)
  // The raw archives of its phases, phase 0 first (rank.N, rank.N.phase.1,
  // ...): its tracing phases, each a tracing session of the process.
  std::vector<std::string> phase_dirs;
  uint32_t phase = 0;        // the current (or last) phase
  uint64_t events = 0;       // stored
  uint64_t batches = 0;      // stored
  std::string note;          // why it was lost
  // A child of an attach group: its parent's rank and the group's number;
  // -1: a rank of the world.
  int32_t parent_rank = -1;
  uint32_t attach_group = 0;
};

// A complete attach group, as its members learn it (AttachGroup).
struct AttachedGroup {
  int32_t parent_rank = -1;
  uint32_t group = 0;
  std::vector<int32_t> children;  // ranks, ascending
  int32_t ranks_in_run = 0;       // when it completed
};

struct CollectionStats {
  uint64_t streams_accepted = 0;
  uint64_t refused_token = 0;     // wrong or missing session token
  uint64_t refused_hello = 0;     // bad version, rank taken or out of range,
                                  // run full, malformed Hello
  uint64_t malformed_messages = 0;  // refused after the Hello (stream ended)
  uint64_t events = 0;              // stored, all ranks
  uint64_t event_bytes = 0;
  uint64_t attach_groups = 0;       // complete
  uint64_t attach_failures = 0;     // refused or failed Attach calls
};

class Collection {
 public:
  // One rank's stream after its Hello.
  class Rank {
   public:
    int32_t rank() const { return rank_; }
    // Appends a batch to the archive: consecutive batch numbers, at most
    // kMaxBatchBytes, rising stamps per thread. InvalidArgument names what
    // is wrong; the archive is unharmed (nothing of the batch written).
    absl::Status AddEvents(const EventBatch& batch);
    // Checks and stores records (the sidecar).
    absl::Status AddRecords(const Records& records);
    // Ends the stream: the event count must match; finishes the archive.
    // With more_phases the rank is between phases, else finished.
    absl::Status Finish(const ::clocksync::collector::Finish& finish);
    // The stream ended without Finish, or was refused: the rank is lost
    // (its archive keeps what was stored, without an end line).
    void Lost(absl::string_view why);
    uint64_t last_batch() const { return last_batch_; }

   private:
    friend class Collection;
    Rank(Collection* collection, int32_t rank,
         std::unique_ptr<trace::RawArchiveWriter> archive);
    absl::Status StoreRecords();

    Collection* const collection_;
    const int32_t rank_;
    std::unique_ptr<trace::RawArchiveWriter> archive_;
    uint64_t last_batch_ = 0;
    uint64_t events_ = 0;
    bool ended_ = false;
    // Every record received, accumulated (the sidecar appends the new).
    std::map<uint32_t, trace::Region> regions_;
    std::map<uint32_t, trace::Communicator> communicators_;
    std::vector<trace::MappingRecord> mappings_;
    std::vector<trace::SyncSession> sessions_;
    std::optional<trace::GroundTruth> truth_;
  };

  explicit Collection(CollectionOptions options);
  Collection(const Collection&) = delete;
  Collection& operator=(const Collection&) = delete;

  // A process's Hello: checks the token (PermissionDenied), the version
  // (FailedPrecondition), the rank (OutOfRange beyond the world,
  // AlreadyExists when taken; -1 gets the lowest free one, ResourceExhausted
  // when none is), the phase (a phase k > 0 continues a rank between
  // phases whose last phase is k-1, else FailedPrecondition), the process
  // info (InvalidArgument); creates the raw archive of the rank's phase.
  // Every refusal is counted.
  absl::StatusOr<Rank*> Join(const Hello& hello);

  // Dynamic spawning. A child's Hello (hello.attach set): the token must
  // be the group's (PermissionDenied), requested_rank -1 in phase 0
  // (InvalidArgument), the parent streaming and the group neither complete
  // nor failed (FailedPrecondition, naming the group). Then waits until
  // the parent's Attach takes the group (the child gets its rank and
  // *group), fails it (FailedPrecondition with the reason: the group's
  // missing children, the parent lost) or passes it over (FailedPrecondition:
  // not among its pids, or too late), or until `deadline`
  // (DeadlineExceeded), `cancelled()` (polled every 50 ms; Cancelled) or
  // Stop (Unavailable). A later phase of a child continues its rank as
  // Join does, with the group's token.
  absl::StatusOr<Rank*> JoinChild(const Hello& hello, absl::Time deadline,
                                  const std::function<bool()>& cancelled,
                                  AttachedGroup* group);
  // The parent's Attach: checks the token (PermissionDenied), the counts
  // (InvalidArgument), that the parent streams and the group was not
  // attached before (FailedPrecondition); waits until `children` children
  // of the group are waiting (with the request's pids when given, taken
  // in that order), gives them the next ranks and wakes them. Until
  // `deadline`: then the group fails (DeadlineExceeded naming the pids
  // that never connected, or how many did) and its waiting children are
  // refused; likewise when the parent is lost (FailedPrecondition),
  // `cancelled()` (Cancelled) or Stop (Unavailable).
  absl::StatusOr<AttachedGroup> Attach(const AttachRequest& request,
                                       absl::Time deadline,
                                       const std::function<bool()>& cancelled);
  // The attach key the Welcome gives `rank` (contact.h's RankAttachKey).
  std::string AttachKey(int32_t rank) const;
  // world_size plus the children attached so far.
  int32_t ranks_in_run() const;
  // A message after the Hello was refused.
  void NoteMalformed();
  // A rank that will never join (its process could not be dialed): lost
  // without a raw archive, so that the run can end. Nothing when the rank
  // joined already.
  void Abandon(int32_t rank, absl::string_view why);

  // Blocks until every rank of the world finished or was lost, Stop() was
  // called, or `timeout` passed; true when every rank is done.
  bool WaitUntilDone(absl::Duration timeout);
  // Ends WaitUntilDone (SIGINT, SIGTERM).
  void Stop();

  std::vector<RankStatus> Status() const;  // by rank
  CollectionStats Stats() const;
  uint64_t max_unacked_bytes() const { return options_.max_unacked_bytes; }
  int32_t world_size() const { return options_.world_size; }

 private:
  // A child waiting in JoinChild for its group.
  struct PendingChild {
    trace::ProcessInfo info;
    int32_t rank = -1;     // given when the group completes
    std::string refused;   // why not, when the group failed or passed it
  };
  struct Group {
    int32_t expected = 0;  // the Attach's children; 0 before the Attach
    std::vector<int64_t> pids;
    std::vector<std::shared_ptr<PendingChild>> pending;
    bool complete = false;
    std::string failure;   // non-empty: failed
    std::vector<int32_t> children;
  };
  using GroupKey = std::pair<int32_t, uint32_t>;  // parent rank, group

  void Update(const Rank& rank, RankState state, absl::string_view note,
              uint64_t new_events, uint64_t new_bytes, bool new_batch);
  bool AllDoneLocked() const;
  // PermissionDenied (counted in refused_token) unless `token` is attach
  // group (`parent`, `group`)'s and `parent` a rank; `field` names the
  // request's token field in the message (JoinChild's and Attach's check).
  absl::Status CheckGroupTokenLocked(absl::string_view field,
                                     absl::string_view token, int32_t parent,
                                     uint32_t group);
  // The phase checks of a Hello with phase > 0 for `rank`.
  absl::Status CheckPhaseLocked(int32_t rank, uint32_t phase) const;
  // The raw archive and status of `rank`'s `phase` (info.rank set).
  absl::StatusOr<Rank*> CreateRankLocked(int32_t rank, uint32_t phase,
                                         const trace::ProcessInfo& info);
  // The group's pending children to take: with pids, one per pid in that
  // order; else the first `expected`.
  std::vector<std::shared_ptr<PendingChild>> SelectLocked(
      const Group& group) const;
  // Fails a group that is not complete: its waiting children refused.
  void FailGroupLocked(Group* group, const std::string& why);
  // The groups of `parent` not complete when it stops streaming.
  void FailGroupsOfLocked(int32_t parent, const std::string& why);

  const CollectionOptions options_;
  mutable std::mutex mutex_;  // the members below
  std::condition_variable changed_;
  std::map<int32_t, RankStatus> status_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::map<GroupKey, Group> groups_;
  int32_t next_rank_ = 0;  // the next attached child's
  CollectionStats stats_;
  bool stopped_ = false;
};

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_COLLECTION_H_
