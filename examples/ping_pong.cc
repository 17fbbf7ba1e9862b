// examples/ping_pong.cc: a traced program of several processes that
// exchange messages over socket pairs (no MPI), each process attached to a
// different clocksyncd of a local cluster.
//
//   ping_pong --ranks=4 --duration_s=150 --trace_dir=/tmp/run
//       --shm=/w/n1.shm,/w/n2.shm,/w/n3.shm,/w/n4.shm --node_ids=n1,n2,n3,n4
//       --master_probe=127.0.0.1:31900 --truth_master_shm=/w/master.shm
//   clocksync-trace compare /tmp/run/ping_pong.r*
//
// A launcher forks --ranks processes (rank 0..N-1), connected as a ring
// (rank r has a socket pair to r+1 and one to r-1) and as a star around rank
// 0 (for collectives). Each rank traces, until --duration_s has passed:
//   compute   0.2..2 ms of sleep (a region); --busy spins instead. Sleep by
//             default: the local cluster runs every daemon on the same
//             (small) machine, and busy ranks would starve their probe
//             loops, which a real cluster's daemons do not suffer
//   exchange  a region around: a message to the right neighbour and one
//             from the left (tag 1), then one to the left and one from the
//             right (tag 2), 64..16384 bytes each
//   every 8th iteration a barrier, every 32nd a broadcast from rank 0 (both
//             over the star, recorded as collectives)
//   every --timesync_every_s a Tracer::Timesync() (a sync session with the
//             master: the intermediate points of the spline correction)
// Rank r reads the mapping of the r-th segment of --shm (cycling), so with a
// local cluster every rank sits on a different node with its own modeled
// clock (the daemons leave <shm>.model beside their segments): the events
// carry real offsets and drifts for the post-mortem corrections to correct.
// Each rank writes <trace_dir>/<name>.r<rank>. With a collector, a rank
// whose peer went away asks the tracer which rank the collector says was
// lost (Tracer::LostPeers) and prints it. Exit status: 0 when every rank
// finished and wrote its trace, 1 otherwise.

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/clock.h"
#include "tracer/tracer.h"

ABSL_FLAG(int, ranks, 4, "processes to start (1..64)");
ABSL_FLAG(double, duration_s, 120, "how long each rank runs, in seconds");
ABSL_FLAG(std::string, trace_dir, "/tmp/clocksync-ping-pong",
          "where the archives go (<trace_dir>/<name>.r<rank>)");
ABSL_FLAG(std::string, name, "ping_pong", "archive name");
ABSL_FLAG(std::string, shm, "",
          "comma-separated clocksyncd segments; rank r uses the r-th "
          "(cycling); empty: the tracer's default (CLOCKSYNC_SHM or "
          "/run/clocksyncd/clocksync.shm)");
ABSL_FLAG(std::string, node_ids, "",
          "comma-separated node ids matching --shm (recorded in the trace)");
ABSL_FLAG(std::string, master_probe, "",
          "the master's probe address host:port for sync sessions (empty: "
          "CLOCKSYNC_MASTER_PROBE)");
ABSL_FLAG(std::string, truth_master_shm, "",
          "TEST: the master's segment, for the ground truth of modeled clocks");
ABSL_FLAG(double, timesync_every_s, 10, "seconds between Timesync() calls");
ABSL_FLAG(uint64_t, seed, 1, "seed of the compute times and message sizes");
ABSL_FLAG(bool, busy, false, "compute by spinning instead of sleeping");

namespace {

using clocksync::Tracer;
using clocksync::trace::CollectiveKind;
using clocksync::trace::kWorldCommunicator;

// The sockets one rank holds.
struct RankSockets {
  int right = -1;             // to rank + 1
  int left = -1;              // to rank - 1
  std::vector<int> star;      // rank 0: one per rank (index 0 unused)
  int hub = -1;               // ranks > 0: to rank 0
};

// Message header on the wire.
struct Header {
  uint32_t tag;
  uint32_t bytes;
};

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A traced point-to-point message: Send is recorded before the data leaves.
bool SendMessage(int fd, int32_t peer, uint32_t tag, uint32_t bytes,
                 std::vector<char>& buffer) {
  Tracer::Send(peer, tag, bytes);
  const Header header{tag, bytes};
  return WriteAll(fd, &header, sizeof(header)) &&
         WriteAll(fd, buffer.data(), bytes);
}

// Recv is recorded once the whole message is in.
bool RecvMessage(int fd, int32_t peer, std::vector<char>& buffer) {
  Header header;
  if (!ReadAll(fd, &header, sizeof(header))) return false;
  if (header.bytes > buffer.size()) return false;
  if (!ReadAll(fd, buffer.data(), header.bytes)) return false;
  Tracer::Recv(peer, header.tag, header.bytes);
  return true;
}

// A barrier over the star: everyone tells rank 0, rank 0 releases everyone.
bool Barrier(const RankSockets& s, int rank, int ranks) {
  Tracer::CollectiveBegin(CollectiveKind::kBarrier, kWorldCommunicator, -1, 0);
  char byte = 'b';
  if (rank == 0) {
    for (int r = 1; r < ranks; ++r) {
      if (!ReadAll(s.star[r], &byte, 1)) return false;
    }
    for (int r = 1; r < ranks; ++r) {
      if (!WriteAll(s.star[r], &byte, 1)) return false;
    }
  } else if (!WriteAll(s.hub, &byte, 1) || !ReadAll(s.hub, &byte, 1)) {
    return false;
  }
  Tracer::CollectiveEnd(CollectiveKind::kBarrier, kWorldCommunicator, -1, 0);
  return true;
}

// A broadcast of `bytes` from rank 0 over the star.
bool Broadcast(const RankSockets& s, int rank, int ranks, uint32_t bytes,
               std::vector<char>& buffer) {
  Tracer::CollectiveBegin(CollectiveKind::kBcast, kWorldCommunicator, 0,
                          rank == 0 ? bytes : 0);
  if (rank == 0) {
    for (int r = 1; r < ranks; ++r) {
      if (!WriteAll(s.star[r], buffer.data(), bytes)) return false;
    }
  } else if (!ReadAll(s.hub, buffer.data(), bytes)) {
    return false;
  }
  Tracer::CollectiveEnd(CollectiveKind::kBcast, kWorldCommunicator, 0,
                        rank == 0 ? 0 : bytes);
  return true;
}

// "Computes" for ns: spins with --busy, else sleeps.
void ComputeFor(int64_t ns) {
  if (!absl::GetFlag(FLAGS_busy)) {
    const struct timespec pause = {0, static_cast<long>(ns)};
    nanosleep(&pause, nullptr);
    return;
  }
  const int64_t end = clocksync::Clock::RawNowNs() + ns;
  while (clocksync::Clock::RawNowNs() < end) {
  }
}

std::string Pick(const std::vector<std::string>& list, int rank) {
  if (list.empty()) return "";
  return list[static_cast<size_t>(rank) % list.size()];
}

// One rank's life. Returns the process exit status.
int RunRank(int rank, int ranks, const RankSockets& sockets) {
  const std::vector<std::string> shms =
      absl::StrSplit(absl::GetFlag(FLAGS_shm), ',', absl::SkipEmpty());
  const std::vector<std::string> node_ids =
      absl::StrSplit(absl::GetFlag(FLAGS_node_ids), ',', absl::SkipEmpty());
  // The CLOCKSYNC_* variables first, then the flags that were given.
  clocksync::TracerOptions options;
  if (absl::Status s = clocksync::ApplyTracerEnvironment(&options); !s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 1;
  }
  options.read_environment = false;
  options.trace_dir = absl::GetFlag(FLAGS_trace_dir);
  options.name = absl::GetFlag(FLAGS_name);
  options.rank = rank;
  options.world_size = ranks;
  if (!shms.empty()) options.shm_path = Pick(shms, rank);
  if (!node_ids.empty()) options.node_id = Pick(node_ids, rank);
  if (!absl::GetFlag(FLAGS_master_probe).empty()) {
    options.master_probe = absl::GetFlag(FLAGS_master_probe);
  }
  if (!absl::GetFlag(FLAGS_truth_master_shm).empty()) {
    options.truth_master_shm = absl::GetFlag(FLAGS_truth_master_shm);
  }
  if (absl::Status s = Tracer::Init(options); !s.ok()) {
    std::fprintf(stderr, "rank %d: tracer: %s\n", rank, s.ToString().c_str());
    return 1;
  }
  const uint32_t compute = *Tracer::DefineRegion("compute");
  const uint32_t exchange = *Tracer::DefineRegion("exchange");
  const uint32_t collective = *Tracer::DefineRegion("collective");

  std::mt19937_64 random(absl::GetFlag(FLAGS_seed) * 1000 +
                         static_cast<uint64_t>(rank));
  std::uniform_int_distribution<int64_t> compute_ns(200'000, 2'000'000);
  std::uniform_int_distribution<uint32_t> message_bytes(64, 16384);
  std::vector<char> buffer(16384, 'x');
  const int right = (rank + 1) % ranks;
  const int left = (rank + ranks - 1) % ranks;
  const int64_t start_ns = clocksync::Clock::RawNowNs();
  const int64_t end_ns =
      start_ns + static_cast<int64_t>(absl::GetFlag(FLAGS_duration_s) * 1e9);
  const int64_t timesync_every_ns =
      static_cast<int64_t>(absl::GetFlag(FLAGS_timesync_every_s) * 1e9);
  int64_t next_timesync_ns = start_ns + timesync_every_ns;
  uint64_t iterations = 0;
  bool ok = true;
  // Every rank runs the same number of iterations (rank 0 decides when to
  // stop and says so with the broadcast's first byte), so no rank waits
  // forever for a neighbour that already left.
  for (bool go_on = true; go_on && ok; ++iterations) {
    {
      clocksync::ScopedRegion region(compute);
      ComputeFor(compute_ns(random));
    }
    {
      clocksync::ScopedRegion region(exchange);
      ok = ok && SendMessage(sockets.right, right, 1, message_bytes(random),
                             buffer);
      ok = ok && RecvMessage(sockets.left, left, buffer);
      ok = ok && SendMessage(sockets.left, left, 2, message_bytes(random),
                             buffer);
      ok = ok && RecvMessage(sockets.right, right, buffer);
    }
    if (iterations % 8 == 7 && ok) {
      clocksync::ScopedRegion region(collective);
      ok = Barrier(sockets, rank, ranks);
      if (ok && iterations % 32 == 31) {
        if (rank == 0) {
          buffer[0] = clocksync::Clock::RawNowNs() < end_ns ? 1 : 0;
        }
        ok = Broadcast(sockets, rank, ranks, 1024, buffer);
        go_on = buffer[0] != 0;
        buffer[0] = 'x';
      }
    }
    // No timesync within half a period of the end: the finalize session
    // follows at once, and two sessions a few ms apart give the spline
    // correction a slope made of noise.
    if (ok && clocksync::Clock::RawNowNs() >= next_timesync_ns &&
        end_ns - clocksync::Clock::RawNowNs() > timesync_every_ns / 2) {
      const absl::Status s = Tracer::Timesync();
      if (!s.ok()) {
        std::fprintf(stderr, "rank %d: timesync: %s\n", rank,
                     s.ToString().c_str());
      }
      next_timesync_ns += timesync_every_ns;
    }
  }
  if (!ok && !options.collector.empty()) {
    // A peer went away: the collector says which rank was lost (it tells
    // every process when one dies).
    std::vector<int32_t> lost;
    for (int i = 0; i < 100 && lost.empty(); ++i) {
      lost = Tracer::LostPeers();
      if (lost.empty()) usleep(50'000);
    }
    std::fprintf(stderr, "rank %d: the collector says rank(s) %s lost\n", rank,
                 lost.empty() ? "none" : absl::StrJoin(lost, ",").c_str());
  }
  const absl::Status finalized = Tracer::Finalize();
  const clocksync::TracerStats stats = Tracer::Stats();
  std::fprintf(stderr,
               "rank %d: %llu iterations, %llu events, %llu mapping records, "
               "%llu sync sessions (%llu exchanges)%s -> %s%s%s\n",
               rank, static_cast<unsigned long long>(iterations),
               static_cast<unsigned long long>(stats.events_written),
               static_cast<unsigned long long>(stats.mapping_records),
               static_cast<unsigned long long>(stats.sync_sessions),
               static_cast<unsigned long long>(stats.sync_exchanges),
               stats.has_model ? ", modeled clock" : "",
               stats.archive_dir.c_str(), finalized.ok() ? "" : ": ",
               finalized.ok() ? "" : finalized.ToString().c_str());
  if (!ok) std::fprintf(stderr, "rank %d: a peer went away\n", rank);
  return ok && finalized.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "traced ring and star message exchange between forked processes; "
      "see examples/ping_pong.cc");
  absl::ParseCommandLine(argc, argv);
  // A peer that dies must read as "a peer went away" (EPIPE), not kill the
  // rank that writes to it next with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  const int ranks = absl::GetFlag(FLAGS_ranks);
  if (ranks < 1 || ranks > 64) {
    std::fprintf(stderr, "ping_pong: --ranks must be 1..64, got %d\n", ranks);
    return 1;
  }
  if (absl::GetFlag(FLAGS_duration_s) <= 0) {
    std::fprintf(stderr, "ping_pong: --duration_s must be > 0\n");
    return 1;
  }
  // links[k] joins rank k (its right end, [0]) and rank k+1 (left end, [1]).
  std::vector<std::array<int, 2>> links(static_cast<size_t>(ranks));
  std::vector<std::array<int, 2>> star(static_cast<size_t>(ranks));
  for (int k = 0; k < ranks; ++k) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, links[k].data()) !=
            0 ||
        (k > 0 &&
         socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, star[k].data()) !=
             0)) {
      std::perror("ping_pong: socketpair");
      return 1;
    }
  }
  std::vector<pid_t> children;
  for (int rank = 0; rank < ranks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("ping_pong: fork");
      for (pid_t child : children) kill(child, SIGTERM);
      return 1;
    }
    if (pid == 0) {
      RankSockets s;
      s.right = links[rank][0];
      s.left = links[(rank + ranks - 1) % ranks][1];
      if (rank == 0) {
        s.star.assign(static_cast<size_t>(ranks), -1);
        for (int r = 1; r < ranks; ++r) s.star[r] = star[r][0];
      } else {
        s.hub = star[rank][1];
      }
      // Close what belongs to others, so a rank that dies is seen (EOF).
      for (int k = 0; k < ranks; ++k) {
        for (int end = 0; end < 2; ++end) {
          const int fd = links[k][end];
          if (fd != s.right && fd != s.left) close(fd);
          if (k > 0) {
            const int star_fd = star[k][end];
            const bool mine = rank == 0 ? end == 0 : (k == rank && end == 1);
            if (!mine) close(star_fd);
          }
        }
      }
      std::_Exit(RunRank(rank, ranks, s));
    }
    children.push_back(pid);
  }
  for (auto& link : links) {
    close(link[0]);
    close(link[1]);
  }
  for (int k = 1; k < ranks; ++k) {
    close(star[k][0]);
    close(star[k][1]);
  }
  int failed = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed > 0) {
    std::fprintf(stderr, "ping_pong: %d of %d ranks failed\n", failed, ranks);
    return 1;
  }
  return 0;
}
