// tools/collector/collector_main.cc: clocksync-collector, the program that
// collects the traces of a distributed program's processes over gRPC while
// they run and writes one OTF2 archive in global time (docs/COLLECTOR.md).
//
//   clocksync-collector --processes=4 --output=run.otf2 [--listen=HOST:PORT]
//   clocksync-collector --output=run.otf2 CONTACT...   (reverse start-up)
//
// With contact strings of listening processes (cs_trace_client_listen),
// it dials each after it serves and tells it its rank (the i-th string is
// rank i) and the collector's own contact string (collector/dial.h).
//
// It prints its contact string ("contact TOKEN@HOST:PORT") as the first
// line of standard output (and into --contact_file); the processes get it
// in CLOCKSYNC_COLLECTOR. When every rank finished or was lost (or on
// SIGINT/SIGTERM, or after --wait_timeout), it writes the archive from
// the ranks' raw archives (--raw_dir, kept), prints one line per rank and
// the clock-condition table of `clocksync-trace compare`.
//
// After a collector was killed, --recover_raw_dir=DIR ARCHIVE... writes
// the run's archive from the raw archives it left and the processes' local
// fallback archives (nothing served).
//
// Exit status: 0 every process finished and the archive is written; 1 bad
// usage (the message names the flag and value); 2 the collector could not
// serve or write the archive; 3 the archive is written but not every
// process finished (lost, or never joined).

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "collector/collection.h"
#include "collector/collector_service.h"
#include "collector/contact.h"
#include "collector/dial.h"
#include "collector/run_archive.h"
#include "hull/correction.h"
#include "probe/address.h"

ABSL_FLAG(int32_t, processes, 0,
          "processes in the run (ranks 0..N-1), 1..100000; required unless "
          "contact strings of listening processes are given (then their "
          "number)");
ABSL_FLAG(std::string, output, "",
          "the run's OTF2 archive, a directory that must not exist; required");
ABSL_FLAG(std::string, listen, "0.0.0.0:0",
          "where to serve: HOST:PORT (port 0: any free port) or unix:PATH");
ABSL_FLAG(std::string, advertise, "",
          "the host in the contact string (default: the --listen host, or "
          "this machine's name when that is a wildcard)");
ABSL_FLAG(std::string, contact_file, "",
          "also write the contact string into this file (atomically)");
ABSL_FLAG(std::string, token, "",
          "the session token, 32 lowercase hex digits (default: random)");
ABSL_FLAG(std::string, raw_dir, "",
          "where the ranks' raw archives go, kept after the run (default: "
          "<output>.raw; must not exist or be empty)");
ABSL_FLAG(std::string, correction, "online",
          "the archive's timescale: online, linear, spline, piecewise or none");
ABSL_FLAG(int64_t, min_latency_ns, 0,
          "the clock condition's minimum message latency, ns");
ABSL_FLAG(double, slow_fraction, 0.1,
          "post-mortem corrections: the fraction of slowest sync exchanges "
          "dropped, in [0, 1)");
ABSL_FLAG(int64_t, wait_timeout_s, 0,
          "stop waiting for processes after this many seconds (0: no limit)");
ABSL_FLAG(uint64_t, max_unacked_bytes, clocksync::collector::kDefaultMaxUnackedBytes,
          "event bytes a process may send ahead of the collector's acks "
          "(back-pressure), 1 MiB..1 GiB");
ABSL_FLAG(std::string, recover_raw_dir, "",
          "do not serve: write --output from the raw archives a killed "
          "collector left in this directory, each rank joined with its local "
          "fallback archive given as an argument");
ABSL_FLAG(std::string, tls_cert, "",
          "TLS: the collector's certificate chain (PEM); with --tls_key");
ABSL_FLAG(std::string, tls_key, "", "TLS: the collector's private key (PEM)");
ABSL_FLAG(int64_t, dial_timeout_s, 60,
          "with contact strings of listening processes: how long to keep "
          "dialing each before its rank is given up (lost)");

namespace clocksync::collector {
namespace {

// Seconds the streams still open get to end once the collector stops
// waiting (every rank done, a signal, --wait_timeout_s).
constexpr int kShutdownGraceS = 5;

int Usage(const std::string& message) {
  std::cerr << "clocksync-collector: " << message
            << "\n(clocksync-collector --help lists the flags)\n";
  return 1;
}

// Writes `text` to `path` through a temporary file and rename.
bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp);
    out << text;
    if (!out.flush()) return false;
  }
  return rename(temp.c_str(), path.c_str()) == 0;
}

std::string GlobalTime(int64_t ns) {
  return absl::StrFormat("%d.%09d", ns / 1'000'000'000,
                         (ns % 1'000'000'000 + 1'000'000'000) % 1'000'000'000);
}

// The archive options from the flags; false (and *exit_code) on a bad one.
bool ArchiveOptionsFromFlags(RunArchiveOptions* options, int* exit_code) {
  absl::StatusOr<hull::CorrectionKind> correction =
      hull::ParseCorrectionKind(absl::GetFlag(FLAGS_correction));
  if (!correction.ok()) {
    *exit_code = Usage(absl::StrCat("bad flag --correction: ",
                                    correction.status().message()));
    return false;
  }
  const double slow_fraction = absl::GetFlag(FLAGS_slow_fraction);
  if (!(slow_fraction >= 0 && slow_fraction < 1)) {
    *exit_code = Usage(absl::StrCat("bad flag --slow_fraction: ",
                                    slow_fraction, " is not in [0, 1)"));
    return false;
  }
  if (absl::GetFlag(FLAGS_min_latency_ns) < 0) {
    *exit_code = Usage("bad flag --min_latency_ns: must be >= 0");
    return false;
  }
  options->correction = *correction;
  options->min_latency_ns = absl::GetFlag(FLAGS_min_latency_ns);
  options->postmortem.slow_fraction = slow_fraction;
  return true;
}

// After a killed collector: the raw archives it left, joined with the
// processes' local archives, written as the run's archive.
int Recover(const std::vector<std::string>& local_archives) {
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) return Usage("bad flag --output: required");
  RunArchiveOptions options;
  int exit_code = 0;
  if (!ArchiveOptionsFromFlags(&options, &exit_code)) return exit_code;
  const std::string raw_dir = absl::GetFlag(FLAGS_recover_raw_dir);
  absl::StatusOr<std::vector<trace::ProcessTrace>> traces =
      ReadRecoveredRun(raw_dir, local_archives);
  if (!traces.ok()) {
    std::cerr << "clocksync-collector: " << traces.status().message() << "\n";
    return 2;
  }
  if (traces->empty()) {
    std::cerr << "clocksync-collector: no rank in " << raw_dir << "\n";
    return 2;
  }
  std::vector<trace::ProcessTrace> copy = *traces;
  absl::StatusOr<RunArchiveResult> result =
      WriteRunArchive(std::move(copy), output, options);
  if (!result.ok()) {
    std::cerr << "clocksync-collector: cannot write the archive: "
              << result.status().message() << "\n";
    return 2;
  }
  if (!result->correction_note.empty()) {
    std::cerr << "clocksync-collector: " << result->correction_note << "\n";
  }
  std::string summary;
  bool complete = true;
  for (size_t i = 0; i < traces->size(); ++i) {
    const trace::ProcessTrace& t = (*traces)[i];
    const RankSpan& span = result->ranks[i];
    complete &= !t.truncated;
    absl::StrAppend(
        &summary,
        absl::StrFormat("rank %d %s: %d events, host %s pid %d", span.rank,
                        t.truncated ? "incomplete" : "recovered", span.events,
                        t.info.hostname, t.info.pid),
        span.has_events
            ? absl::StrCat(", last event at ",
                           GlobalTime(span.last_event_global_ns))
            : std::string(),
        t.truncated ? absl::StrCat("; ", t.truncation_note) : std::string(),
        "\n");
  }
  absl::StrAppend(&summary, "archive ", output, ": ", traces->size(),
                  " ranks, ", result->events, " events, ",
                  hull::CorrectionKindName(result->correction_used),
                  " correction; recovered from ", raw_dir, " and ",
                  local_archives.size(), " local archives\n");
  WriteFileAtomically(output + "/clocksync.collection", summary);
  std::cout << summary << trace::FormatCompareTable(result->compare)
            << std::flush;
  return complete ? 0 : 3;
}

int Run(const std::vector<std::string>& process_contacts) {
  int32_t processes = absl::GetFlag(FLAGS_processes);
  // Reverse start-up: the processes listen, the collector dials them; the
  // i-th contact string is rank i.
  std::vector<Contact> dial;
  for (const std::string& text : process_contacts) {
    absl::StatusOr<Contact> c = ParseContact("contact argument", text);
    if (!c.ok()) return Usage(std::string(c.status().message()));
    if (c->address.rfind("unix:", 0) == 0) {
      return Usage(absl::StrCat("contact argument ", text,
                                ": a listening process has a TCP address"));
    }
    dial.push_back(*c);
  }
  if (!dial.empty()) {
    if (processes == 0) processes = static_cast<int32_t>(dial.size());
    if (processes != static_cast<int32_t>(dial.size())) {
      return Usage(absl::StrCat("bad flag --processes: ", processes, " but ",
                                dial.size(), " contact strings"));
    }
    if (absl::GetFlag(FLAGS_dial_timeout_s) < 1) {
      return Usage("bad flag --dial_timeout_s: must be >= 1");
    }
  }
  if (processes < 1 || processes > 100000) {
    return Usage(absl::StrCat("bad flag --processes: ", processes,
                              " (want 1..100000)"));
  }
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) return Usage("bad flag --output: required");
  struct stat st;
  if (stat(output.c_str(), &st) == 0) {
    return Usage(absl::StrCat("bad flag --output: ", output, " exists"));
  }
  std::string raw_dir = absl::GetFlag(FLAGS_raw_dir);
  if (raw_dir.empty()) raw_dir = output + ".raw";
  if (mkdir(raw_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Usage(absl::StrCat("bad flag --raw_dir: cannot create ", raw_dir,
                              ": ", std::strerror(errno)));
  }
  RunArchiveOptions archive_options;
  int exit_code = 0;
  if (!ArchiveOptionsFromFlags(&archive_options, &exit_code)) return exit_code;
  if (absl::GetFlag(FLAGS_wait_timeout_s) < 0) {
    return Usage("bad flag --wait_timeout_s: must be >= 0");
  }
  const uint64_t max_unacked = absl::GetFlag(FLAGS_max_unacked_bytes);
  if (max_unacked < (1u << 20) || max_unacked > (1u << 30)) {
    return Usage(absl::StrCat("bad flag --max_unacked_bytes: ", max_unacked,
                              " (want 1048576..1073741824)"));
  }
  const std::string listen = absl::GetFlag(FLAGS_listen);
  std::string advertise = absl::GetFlag(FLAGS_advertise);
  const bool unix_socket = listen.rfind("unix:", 0) == 0;
  if (unix_socket) {
    if (absl::Status s = probe::ValidateGrpcAddress("--listen", listen);
        !s.ok()) {
      return Usage(absl::StrCat("bad flag ", s.message()));
    }
  } else {
    absl::StatusOr<probe::HostPort> parsed = probe::ParseHostPort(
        "--listen", listen, {.allow_port_zero = true, .allow_empty_host = true});
    if (!parsed.ok()) {
      return Usage(absl::StrCat("bad flag ", parsed.status().message()));
    }
    advertise = collector::AdvertisedHost(advertise, parsed->host);
  }
  std::string token = absl::GetFlag(FLAGS_token);
  if (token.empty()) {
    absl::StatusOr<std::string> fresh = NewToken();
    if (!fresh.ok()) {
      std::cerr << "clocksync-collector: " << fresh.status().message() << "\n";
      return 2;
    }
    token = *fresh;
  } else if (absl::StatusOr<Contact> check =
                 ParseContact("--token", token + "@127.0.0.1:1");
             !check.ok()) {
    return Usage(absl::StrCat("bad flag --token: want ", kTokenHexDigits,
                              " lowercase hex digits"));
  }
  const std::string tls_cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string tls_key = absl::GetFlag(FLAGS_tls_key);
  if (tls_cert.empty() != tls_key.empty()) {
    return Usage("bad flag --tls_cert/--tls_key: give both or neither");
  }

  // SIGINT and SIGTERM end the wait (the archive is still written); they
  // are taken by a thread of their own, blocked everywhere else.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  TuneMallocForCollector();
  CollectionOptions options;
  options.token = token;
  options.raw_dir = raw_dir;
  options.world_size = processes;
  options.max_unacked_bytes = max_unacked;
  Collection collection(options);
  CollectorService service(&collection, [](const std::string& line) {
    std::cerr << "clocksync-collector: " << line << "\n";
  });
  ServerTls tls{tls_cert, tls_key};
  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = BuildCollectorServer(
      listen, &service, tls_cert.empty() ? nullptr : &tls, &port);
  if (!server.ok()) {
    std::cerr << "clocksync-collector: " << server.status().message() << "\n";
    return server.status().code() == absl::StatusCode::kInvalidArgument ? 1 : 2;
  }
  const std::string contact = FormatContact(Contact{
      token, unix_socket ? listen : probe::JoinHostPort(advertise, port)});
  std::cout << "contact " << contact << std::endl;
  const std::string contact_file = absl::GetFlag(FLAGS_contact_file);
  if (!contact_file.empty() &&
      !WriteFileAtomically(contact_file, contact + "\n")) {
    std::cerr << "clocksync-collector: cannot write --contact_file "
              << contact_file << "\n";
    (*server)->Shutdown();
    return 2;
  }

  // Dial the listening processes (rank i: the i-th); a process that cannot
  // be dialed is given up, lost, so that the run can end.
  std::thread dialer([&] {
    if (dial.empty()) return;
    const std::vector<absl::Status> dialed = DialProcesses(
        dial, Contact{token, contact.substr(contact.find('@') + 1)},
        absl::Seconds(absl::GetFlag(FLAGS_dial_timeout_s)));
    for (size_t i = 0; i < dialed.size(); ++i) {
      if (dialed[i].ok()) continue;
      std::cerr << "clocksync-collector: cannot dial: " << dialed[i].message()
                << "\n";
      collection.Abandon(static_cast<int32_t>(i),
                         absl::StrCat("never dialed: ", dialed[i].message()));
    }
  });
  std::atomic<bool> stopping{false};
  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (stopping.load()) return;
    std::cerr << "clocksync-collector: signal " << signal
              << ": writing the archive of what arrived\n";
    collection.Stop();
  });
  const int64_t wait_s = absl::GetFlag(FLAGS_wait_timeout_s);
  const bool all_done = collection.WaitUntilDone(
      wait_s > 0 ? absl::Seconds(wait_s) : absl::InfiniteDuration());
  if (!all_done) {
    std::cerr << "clocksync-collector: not every process finished; streams "
                 "still open are cut\n";
  }
  // Streams still open get kShutdownGraceS to end (processes interrupted
  // by the same Ctrl-C complete their traces), then are cancelled: their
  // ranks are lost.
  (*server)->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(kShutdownGraceS));
  if (!stopping.exchange(true)) kill(getpid(), SIGTERM);
  signal_thread.join();
  dialer.join();

  const CollectionStats stats = collection.Stats();
  if (stats.refused_token + stats.refused_hello + stats.malformed_messages +
          stats.attach_failures >
      0) {
    std::cerr << absl::StrFormat(
        "clocksync-collector: refused %d streams with a wrong token, %d "
        "Hellos, %d malformed messages; %d attaches failed\n",
        stats.refused_token, stats.refused_hello, stats.malformed_messages,
        stats.attach_failures);
  }
  absl::StatusOr<CollectedRun> run = WriteCollectedRun(
      collection.Status(), collection.ranks_in_run(), output, raw_dir,
      archive_options);
  if (!run.ok()) {
    std::cerr << "clocksync-collector: " << run.status().message() << "\n";
    return run.status().code() == absl::StatusCode::kFailedPrecondition ? 3
                                                                         : 2;
  }
  if (!run->correction_note.empty()) {
    std::cerr << "clocksync-collector: " << run->correction_note << "\n";
  }
  std::cout << run->summary << run->compare_table << std::flush;
  return run->every_rank_finished ? 0 : 3;
}

}  // namespace
}  // namespace clocksync::collector

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "clocksync-collector --processes=N --output=DIR [--listen=HOST:PORT] "
      "[CONTACT...]: collects the traces of N processes streamed over gRPC "
      "into one OTF2 archive in global time; with the contact strings of "
      "listening processes, dials them (docs/COLLECTOR.md)");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (!absl::GetFlag(FLAGS_recover_raw_dir).empty()) {
    return clocksync::collector::Recover(
        std::vector<std::string>(positional.begin() + 1, positional.end()));
  }
  return clocksync::collector::Run(
      std::vector<std::string>(positional.begin() + 1, positional.end()));
}
