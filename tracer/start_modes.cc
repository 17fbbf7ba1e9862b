// tracer/start_modes.cc: server-init and client-listen (start_modes.h).

#include "tracer/start_modes.h"

#include <stdlib.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collector/contact.h"
#include "collector/dial.h"
#include "collector/in_process.h"
#include "tracer/session.h"
#include "tracer/warn.h"

namespace clocksync {
namespace {

// Under tracer::g_lifecycle_mutex.
std::unique_ptr<collector::InProcessCollector> g_server;
std::unique_ptr<collector::ListenEndpoint> g_endpoint;

std::string Env(const char* name, const std::string& fallback) {
  const char* value = getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

}  // namespace

absl::StatusOr<std::string> Tracer::ServerInit(const TracerOptions& given) {
  TracerOptions options = given;
  if (options.read_environment) {
    if (absl::Status s = ApplyTracerEnvironment(&options); !s.ok()) return s;
    options.read_environment = false;
  }
  if (options.name.empty()) options.name = program_invocation_short_name;
  collector::InProcessOptions serve;
  serve.world_size = options.world_size;
  serve.output = Env("CLOCKSYNC_COLLECTOR_OUTPUT",
                     absl::StrCat(options.trace_dir, "/", options.name, ".otf2"));
  serve.listen = Env("CLOCKSYNC_COLLECTOR_LISTEN", "0.0.0.0:0");
  serve.advertise = Env("CLOCKSYNC_COLLECTOR_ADVERTISE", "");
  {
    std::lock_guard<std::mutex> lock(tracer::g_lifecycle_mutex);
    if (g_server != nullptr || tracer::g_session.load() != nullptr) {
      return absl::FailedPreconditionError("tracer: already initialized");
    }
    if (options.world_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server-init: world_size ", options.world_size,
          " (the run's processes, this one included, must be given)"));
    }
    absl::StatusOr<std::unique_ptr<collector::InProcessCollector>> server =
        collector::InProcessCollector::Start(serve);
    if (!server.ok()) return server.status();
    g_server = *std::move(server);
    options.collector = g_server->self_contact();
  }
  options.rank = 0;
  const std::string contact = g_server->contact();
  if (absl::Status s = Init(options); !s.ok()) {
    std::lock_guard<std::mutex> lock(tracer::g_lifecycle_mutex);
    g_server.reset();
    return s;
  }
  if (Stats().collector_fallback) {
    Finalize().IgnoreError();
    std::lock_guard<std::mutex> lock(tracer::g_lifecycle_mutex);
    g_server.reset();
    return absl::UnavailableError(
        "server-init: this process could not stream to its own collector");
  }
  return contact;
}

absl::StatusOr<std::string> Tracer::ClientListen(const std::string& listen) {
  std::lock_guard<std::mutex> lock(tracer::g_lifecycle_mutex);
  if (tracer::g_session.load() != nullptr) {
    return absl::FailedPreconditionError("tracer: already initialized");
  }
  absl::StatusOr<std::unique_ptr<collector::ListenEndpoint>> endpoint =
      collector::ListenEndpoint::Open(
          "CLOCKSYNC_COLLECTOR_LISTEN",
          listen.empty() ? Env("CLOCKSYNC_COLLECTOR_LISTEN", "0.0.0.0:0")
                         : listen,
          Env("CLOCKSYNC_COLLECTOR_ADVERTISE", ""));
  if (!endpoint.ok()) return endpoint.status();
  g_endpoint = *std::move(endpoint);
  return g_endpoint->contact();
}

namespace tracer {

absl::Status AwaitDialIfListening(TracerOptions* options,
                                  const std::atomic<bool>* abort) {
  if (g_endpoint == nullptr) return absl::OkStatus();
  std::unique_ptr<collector::ListenEndpoint> endpoint = std::move(g_endpoint);
  if (!options->collector.empty()) return absl::OkStatus();
  absl::StatusOr<collector::DialOrder> order =
      endpoint->WaitForDial(options->collector_timeout_ns, abort);
  if (!order.ok()) {
    if (order.status().code() == absl::StatusCode::kCancelled) {
      return order.status();
    }
    Warn(absl::StrCat(order.status().message(),
                      ": writing the local archive instead"));
    return absl::OkStatus();
  }
  options->collector = collector::FormatContact(order->collector);
  options->rank = order->rank;
  options->world_size = order->world_size;
  return absl::OkStatus();
}

std::string ServerRoleAddress() {
  if (g_server == nullptr) return "";
  absl::StatusOr<collector::Contact> contact =
      collector::ParseContact("server-init", g_server->contact());
  return contact.ok() ? contact->address : "";
}

absl::Status EndServerRole() {
  std::unique_ptr<collector::InProcessCollector> server;
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    server = std::move(g_server);
  }
  if (server == nullptr) return absl::OkStatus();
  absl::StatusOr<collector::CollectedRun> run = server->Finish();
  if (!run.ok()) {
    Warn(absl::StrCat("collector (in-process): ", run.status().message()));
    return run.status();
  }
  if (!run->correction_note.empty()) {
    Warn(absl::StrCat("collector (in-process): ", run->correction_note));
  }
  fprintf(stderr, "%s%s", run->summary.c_str(), run->compare_table.c_str());
  if (!run->every_rank_finished) {
    return absl::DataLossError(
        "collector (in-process): not every rank finished (see the summary)");
  }
  return absl::OkStatus();
}

}  // namespace tracer
}  // namespace clocksync
