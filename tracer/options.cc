// tracer/options.cc: the table of CLOCKSYNC_* variables, the one parser of
// the environment (ApplyTracerEnvironment) and the options' validation.

#include "tracer/options.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "collector/contact.h"

namespace clocksync {
namespace tracer {
namespace {

// The table. Defaults must match TracerOptions' (options_test checks).
constexpr EnvVariable kEnvVariables[] = {
    {"CLOCKSYNC_TRACE_DIR", ".",
     "directory the archive `<dir>/<name>.r<rank>` goes into (created if "
     "missing, one level)",
     [](TracerOptions* o, const char* v) { o->trace_dir = v; }, nullptr},
    {"CLOCKSYNC_TRACE_NAME", "",
     "archive name; empty: the program's name",
     [](TracerOptions* o, const char* v) { o->name = v; }, nullptr},
    {"CLOCKSYNC_TRACE_RANK", "-1",
     "this process's rank in the program (below the world size when known); "
     "-1: assigned by the collector, 0 without one",
     nullptr,
     [](TracerOptions* o, int64_t v) { o->rank = static_cast<int32_t>(v); },
     -1, INT32_MAX},
    {"CLOCKSYNC_TRACE_WORLD_SIZE", "0",
     "ranks in the program (the world communicator); 0: unknown", nullptr,
     [](TracerOptions* o, int64_t v) {
       o->world_size = static_cast<int32_t>(v);
     },
     0, INT32_MAX},
    {"CLOCKSYNC_SHM", CLOCKSYNC_DEFAULT_SHM_PATH,
     "the node's clocksyncd segment (mapping records: the online correction)",
     [](TracerOptions* o, const char* v) { o->shm_path = v; }, nullptr},
    {"CLOCKSYNC_NODE_ID", "",
     "clocksyncd node id, recorded in the trace; empty: unknown",
     [](TracerOptions* o, const char* v) { o->node_id = v; }, nullptr},
    {"CLOCKSYNC_MASTER_PROBE", "",
     "the master's probe address `host:port` for sync sessions; empty: no "
     "sessions (a warning at init)",
     [](TracerOptions* o, const char* v) { o->master_probe = v; }, nullptr},
    {"CLOCKSYNC_PROBE_KEY_FILE", "",
     "the tree's probe key file (clocksyncd `--probe_key_file`), when the "
     "master authenticates probes; empty: none",
     [](TracerOptions* o, const char* v) { o->probe_key_file = v; }, nullptr},
    {"CLOCKSYNC_SYNC_MAX_MESSAGES", "100",
     "most exchanges per sync session (0: sessions are empty)", nullptr,
     [](TracerOptions* o, int64_t v) {
       o->sync_max_messages = static_cast<int32_t>(v);
     },
     0, kMaxSyncMessages},
    {"CLOCKSYNC_SYNC_MAX_DURATION_MS", "1000", "longest sync session, ms",
     nullptr,
     [](TracerOptions* o, int64_t v) {
       o->sync_max_duration_ns = v * kNsPerMs;
     },
     1, kMaxSyncDurationMs},
    {"CLOCKSYNC_SYNC_PERIOD_MS", "0",
     "period of background sync sessions, ms; 0: none", nullptr,
     [](TracerOptions* o, int64_t v) { o->sync_period_ns = v * kNsPerMs; }, 0,
     kMaxSyncPeriodMs},
    {"CLOCKSYNC_TRACE_BUFFER_EVENTS", "65536",
     "events per thread buffer (40 B each; two per recording thread once "
     "the first filled)",
     nullptr, [](TracerOptions* o, int64_t v) { o->buffer_events = v; },
     kMinBufferEvents, kMaxBufferEvents},
    {"CLOCKSYNC_TRACE_SIGNALS", "1",
     "1: complete the archive on SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, "
     "and on SIGPIPE, SIGINT, SIGTERM without a handler of the program's; "
     "0: no handlers",
     nullptr,
     [](TracerOptions* o, int64_t v) { o->install_signal_handlers = v != 0; },
     0, 1},
    {"CLOCKSYNC_COLLECTOR", "",
     "the collector's contact string `TOKEN@HOST:PORT` (docs/COLLECTOR.md): "
     "stream the trace to it; empty: the local archive",
     [](TracerOptions* o, const char* v) { o->collector = v; }, nullptr},
    {"CLOCKSYNC_COLLECTOR_TIMEOUT_MS", "10000",
     "longest wait for the collector (connect, a write, an ack) before the "
     "local archive takes over, ms",
     nullptr,
     [](TracerOptions* o, int64_t v) {
       o->collector_timeout_ns = v * kNsPerMs;
     },
     1, kMaxCollectorTimeoutMs},
    {"CLOCKSYNC_COLLECTOR_TLS_CA", "",
     "TLS to the collector: the PEM file of the certificate authority; "
     "empty: plaintext",
     [](TracerOptions* o, const char* v) { o->collector_tls_ca_file = v; },
     nullptr},
    {"CLOCKSYNC_TSC", "auto",
     "`auto`: stamp events with one `rdtsc` through the daemon's TSC "
     "mapping where it publishes one, else `clock_gettime`; `off`: always "
     "`clock_gettime` (the client library's switch too)",
     [](TracerOptions* o, const char* v) { o->tsc = v; }, nullptr},
    {"CLOCKSYNC_CLOCK_MODEL_FILE", "",
     "test feature: the modeled-clock side file; empty: `<shm>.model` if it "
     "exists; `none`: never a model",
     [](TracerOptions* o, const char* v) { o->clock_model_file = v; },
     nullptr},
    {"CLOCKSYNC_TRUTH_MASTER_SHM", "",
     "test feature: the master's segment, read at init for the ground "
     "truth; empty: none",
     [](TracerOptions* o, const char* v) { o->truth_master_shm = v; },
     nullptr},
};

}  // namespace

absl::Span<const EnvVariable> EnvVariables() { return kEnvVariables; }

std::string EnvVariablesMarkdownTable() {
  std::string table =
      "| variable | default | values | meaning |\n"
      "|---|---|---|---|\n";
  for (const EnvVariable& v : kEnvVariables) {
    const std::string default_value =
        v.default_value[0] == '\0' ? std::string("(empty)")
                                   : absl::StrCat("`", v.default_value, "`");
    const std::string values = v.set_integer != nullptr
                                   ? absl::StrCat(v.min, "..", v.max)
                                   : std::string("text");
    absl::StrAppend(&table, "| `", v.name, "` | ", default_value, " | ",
                    values, " | ", v.meaning, " |\n");
  }
  return table;
}

absl::Status ValidateOptions(const TracerOptions& o) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("tracer options: ", what));
  };
  if (o.trace_dir.empty()) return bad("trace_dir is empty");
  if (o.name.find('/') != std::string::npos) {
    return bad(absl::StrCat("name '", o.name, "' contains '/'"));
  }
  if (o.rank < -1) return bad(absl::StrCat("rank ", o.rank, " < -1"));
  if (o.world_size < 0) {
    return bad(absl::StrCat("world_size ", o.world_size, " < 0"));
  }
  if (o.world_size > 0 && o.rank >= o.world_size) {
    return bad(absl::StrCat("rank ", o.rank, " outside world_size ",
                            o.world_size));
  }
  if (o.sync_max_messages < 0 || o.sync_max_messages > kMaxSyncMessages) {
    return bad(absl::StrCat("sync_max_messages ", o.sync_max_messages,
                            " outside 0..", kMaxSyncMessages));
  }
  if (o.sync_max_duration_ns <= 0 ||
      o.sync_max_duration_ns > kMaxSyncDurationMs * kNsPerMs) {
    return bad(absl::StrCat("sync_max_duration_ns ", o.sync_max_duration_ns,
                            " outside 1..", kMaxSyncDurationMs * kNsPerMs));
  }
  if (o.sync_reply_timeout_ns <= 0) {
    return bad(absl::StrCat("sync_reply_timeout_ns ", o.sync_reply_timeout_ns,
                            " <= 0"));
  }
  if (o.sync_period_ns < 0 || o.sync_period_ns > kMaxSyncPeriodMs * kNsPerMs) {
    return bad(absl::StrCat("sync_period_ns ", o.sync_period_ns,
                            " outside 0..", kMaxSyncPeriodMs * kNsPerMs));
  }
  if (!o.collector.empty()) {
    absl::StatusOr<collector::Contact> contact =
        collector::ParseContact("CLOCKSYNC_COLLECTOR (collector)", o.collector);
    if (!contact.ok()) return contact.status();
  }
  if (o.collector_timeout_ns <= 0 ||
      o.collector_timeout_ns > kMaxCollectorTimeoutMs * kNsPerMs) {
    return bad(absl::StrCat("collector_timeout_ns ", o.collector_timeout_ns,
                            " outside 1..", kMaxCollectorTimeoutMs * kNsPerMs));
  }
  if (o.tsc != "auto" && o.tsc != "off") {
    return bad(absl::StrCat("tsc '", o.tsc,
                            "' is neither auto nor off (CLOCKSYNC_TSC)"));
  }
  if (o.buffer_events < kMinBufferEvents ||
      o.buffer_events > kMaxBufferEvents) {
    return bad(absl::StrCat("buffer_events ", o.buffer_events, " outside ",
                            kMinBufferEvents, "..", kMaxBufferEvents));
  }
  return absl::OkStatus();
}

}  // namespace tracer

// Declared in tracer.h. Errors name the variable and the value; the C API
// maps an error starting with "CLOCKSYNC_" to CLOCKSYNC_ECONFIG.
absl::Status ApplyTracerEnvironment(TracerOptions* options) {
  for (const tracer::EnvVariable& v : tracer::EnvVariables()) {
    const char* value = std::getenv(v.name);
    if (value == nullptr) continue;
    if (v.set_string != nullptr) {
      v.set_string(options, value);
      continue;
    }
    int64_t parsed = 0;
    if (!absl::SimpleAtoi(value, &parsed) || parsed < v.min ||
        parsed > v.max) {
      return absl::InvalidArgumentError(
          absl::StrCat(v.name, ": expected an integer in ", v.min, "..",
                       v.max, ", got '", value, "'"));
    }
    v.set_integer(options, parsed);
  }
  return absl::OkStatus();
}

}  // namespace clocksync
