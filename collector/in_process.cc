// collector/in_process.cc: a collector served by a traced process
// (in_process.h).

#include "collector/in_process.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "collector/contact.h"
#include "probe/address.h"

namespace clocksync::collector {
namespace {

// Seconds the streams still open get once every rank is done.
constexpr int kShutdownGraceS = 5;

}  // namespace

absl::StatusOr<std::unique_ptr<InProcessCollector>> InProcessCollector::Start(
    const InProcessOptions& options) {
  if (options.world_size < 1 || options.world_size > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("server-init: world_size ", options.world_size,
                     " (want 1..100000: the processes of the run)"));
  }
  if (options.output.empty()) {
    return absl::InvalidArgumentError("server-init: no output archive");
  }
  struct stat st;
  if (stat(options.output.c_str(), &st) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server-init: the output archive ", options.output, " exists"));
  }
  absl::StatusOr<probe::HostPort> listen = probe::ParseHostPort(
      "CLOCKSYNC_COLLECTOR_LISTEN", options.listen,
      {.allow_port_zero = true, .allow_empty_host = true});
  if (!listen.ok()) return listen.status();
  std::unique_ptr<InProcessCollector> c(new InProcessCollector());
  c->options_ = options;
  c->raw_dir_ = options.output + ".raw";
  if (mkdir(c->raw_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server-init: cannot create ", c->raw_dir_, ": ", strerror(errno)));
  }
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) return token.status();
  CollectionOptions collection;
  collection.token = *token;
  collection.raw_dir = c->raw_dir_;
  collection.world_size = options.world_size;
  c->collection_ = std::make_unique<Collection>(collection);
  c->service_ = std::make_unique<CollectorService>(
      c->collection_.get(), [](const std::string& line) {
        fprintf(stderr, "clocksync collector (in-process): %s\n",
                line.c_str());
      });
  int port = 0;
  const std::string address = probe::JoinHostPort(
      listen->host.empty() ? "0.0.0.0" : listen->host, listen->port);
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      BuildCollectorServer(address, c->service_.get(), nullptr, &port);
  if (!server.ok()) return server.status();
  c->server_ = *std::move(server);
  const std::string host = AdvertisedHost(options.advertise, listen->host);
  c->contact_ =
      FormatContact(Contact{*token, probe::JoinHostPort(host, port)});
  c->self_contact_ = FormatContact(Contact{
      *token, probe::JoinHostPort(
                  IsWildcardHost(listen->host) ? "127.0.0.1" : listen->host, port)});
  return c;
}

InProcessCollector::~InProcessCollector() {
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
}

absl::StatusOr<CollectedRun> InProcessCollector::Finish() {
  collection_->WaitUntilDone(absl::InfiniteDuration());
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::seconds(kShutdownGraceS));
  server_.reset();
  return WriteCollectedRun(collection_->Status(), collection_->ranks_in_run(),
                           options_.output, raw_dir_, options_.archive);
}

}  // namespace clocksync::collector
