// tracer/clocksync_trace.cc: the C API of the tracer (clocksync_trace.h)
// over clocksync::Tracer (tracer.h): options, absl::Status to CLOCKSYNC_E*
// codes, the last error's message.

#include "tracer/clocksync_trace.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "shm/shm_layout.h"
#include "tracer/tracer.h"
#include "trace/trace.h"

namespace {

using clocksync::Tracer;
using clocksync::TracerOptions;

thread_local std::string t_last_error;

static_assert(static_cast<int>(CS_TRACE_OTHER_COLLECTIVE) ==
              static_cast<int>(clocksync::trace::CollectiveKind::kOther));
static_assert(static_cast<int>(CS_TRACE_ALLGATHER) ==
              static_cast<int>(clocksync::trace::CollectiveKind::kAllgather));
static_assert(CS_TRACE_COMM_WORLD == clocksync::trace::kWorldCommunicator);

// The code of a failed Status, remembering its message for
// cs_trace_last_error.
int Fail(const absl::Status& status) {
  try {
    t_last_error = status.ToString();
  } catch (const std::bad_alloc&) {
    t_last_error.clear();
  }
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return CLOCKSYNC_OK;
    case absl::StatusCode::kInvalidArgument:
      // The environment's errors name the variable.
      return status.message().find("CLOCKSYNC_") == 0 ? CLOCKSYNC_ECONFIG
                                                       : CLOCKSYNC_EINVAL;
    case absl::StatusCode::kFailedPrecondition:
      return Tracer::IsActive() ? CLOCKSYNC_EALREADY : CLOCKSYNC_ENOTINIT;
    case absl::StatusCode::kResourceExhausted:
      return CLOCKSYNC_ENOMEM;
    case absl::StatusCode::kCancelled:
      return CLOCKSYNC_EABORTED;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kAlreadyExists:
    default:
      return CLOCKSYNC_EIO;
  }
}

// Why a recording call was refused (computed only when it was).
int RecordError() {
  return Tracer::IsActive() ? CLOCKSYNC_EINVAL : CLOCKSYNC_ENOTINIT;
}

}  // namespace

extern "C" {

void cs_trace_options_init(cs_trace_options* options) {
  if (options == nullptr) return;
  const TracerOptions defaults;
  *options = cs_trace_options{};
  options->rank = defaults.rank;
  options->world_size = defaults.world_size;
  options->sync_max_messages = defaults.sync_max_messages;
  options->install_signal_handlers = defaults.install_signal_handlers ? 1 : 0;
  options->sync_max_duration_ns = defaults.sync_max_duration_ns;
  options->sync_period_ns = defaults.sync_period_ns;
  options->buffer_events = defaults.buffer_events;
  options->read_environment = defaults.read_environment ? 1 : 0;
}

}  // extern "C"

namespace {

// The C options as TracerOptions (NULL: the defaults).
TracerOptions ToTracerOptions(const cs_trace_options* options) {
  cs_trace_options given;
  cs_trace_options_init(&given);
  if (options != nullptr) given = *options;
  TracerOptions o;
  if (given.trace_dir != nullptr) o.trace_dir = given.trace_dir;
  if (given.name != nullptr) o.name = given.name;
  o.rank = given.rank;
  o.world_size = given.world_size;
  if (given.shm_path != nullptr) o.shm_path = given.shm_path;
  if (given.node_id != nullptr) o.node_id = given.node_id;
  if (given.master_probe != nullptr) o.master_probe = given.master_probe;
  if (given.probe_key_file != nullptr) o.probe_key_file = given.probe_key_file;
  if (given.clock_model_file != nullptr) {
    o.clock_model_file = given.clock_model_file;
  }
  if (given.truth_master_shm != nullptr) {
    o.truth_master_shm = given.truth_master_shm;
  }
  o.sync_max_messages = given.sync_max_messages;
  o.install_signal_handlers = given.install_signal_handlers != 0;
  o.sync_max_duration_ns = given.sync_max_duration_ns;
  o.sync_period_ns = given.sync_period_ns;
  o.buffer_events = given.buffer_events;
  o.read_environment = given.read_environment != 0;
  return o;
}

// An init's error code: Init's preconditions are about files (a trace_dir
// that is not a directory, an unreadable model file), not about the
// tracer's state.
int InitError(const absl::Status& status) {
  const int code = Fail(status);
  return code == CLOCKSYNC_ENOTINIT ? CLOCKSYNC_EIO : code;
}

// Copies a contact string out; EINVAL when it does not fit.
int CopyContact(const std::string& contact, char* out, size_t size) {
  if (contact.size() + 1 > size) {
    t_last_error = "contact buffer too small: " +
                   std::to_string(contact.size() + 1) + " bytes needed";
    return CLOCKSYNC_EINVAL;
  }
  std::memcpy(out, contact.c_str(), contact.size() + 1);
  return CLOCKSYNC_OK;
}

}  // namespace

extern "C" {

int cs_trace_init(const cs_trace_options* options) {
  t_last_error.clear();
  try {
    const TracerOptions o = ToTracerOptions(options);
    // (Already initialized: EALREADY with Init's message, which also names
    // a fork of a traced process that did not exec.)
    const absl::Status status = Tracer::Init(o);
    if (status.ok()) return CLOCKSYNC_OK;
    return InitError(status);
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int cs_trace_server_init(const cs_trace_options* options, char* contact,
                         size_t size) {
  t_last_error.clear();
  if (contact == nullptr) {
    t_last_error = "cs_trace_server_init: contact is NULL";
    return CLOCKSYNC_EINVAL;
  }
  try {
    if (Tracer::IsActive()) {
      t_last_error = "tracer: already initialized";
      return CLOCKSYNC_EALREADY;
    }
    absl::StatusOr<std::string> c = Tracer::ServerInit(ToTracerOptions(options));
    if (!c.ok()) return InitError(c.status());
    return CopyContact(*c, contact, size);
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int cs_trace_client_listen(const char* listen, char* contact, size_t size) {
  t_last_error.clear();
  if (contact == nullptr) {
    t_last_error = "cs_trace_client_listen: contact is NULL";
    return CLOCKSYNC_EINVAL;
  }
  try {
    absl::StatusOr<std::string> c =
        Tracer::ClientListen(listen != nullptr ? listen : "");
    if (!c.ok()) {
      const int code = Fail(c.status());
      return c.status().code() == absl::StatusCode::kInvalidArgument
                 ? CLOCKSYNC_EINVAL
                 : code;
    }
    return CopyContact(*c, contact, size);
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

}  // extern "C"

namespace {

int FinalizeC(bool phase) {
  t_last_error.clear();
  if (!Tracer::IsActive()) {
    t_last_error = "tracer: not initialized";
    return CLOCKSYNC_ENOTINIT;
  }
  try {
    const absl::Status status =
        phase ? Tracer::FinalizePhase() : Tracer::Finalize();
    if (status.ok()) return CLOCKSYNC_OK;
    t_last_error = status.ToString();
    return CLOCKSYNC_EIO;
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

}  // namespace

extern "C" {

int cs_trace_finalize(void) { return FinalizeC(false); }

int cs_trace_finalize_phase(void) { return FinalizeC(true); }

int cs_trace_abort(void) {
  return Tracer::AbortInit() ? CLOCKSYNC_OK : CLOCKSYNC_ENOTINIT;
}

int32_t cs_trace_region_def(const char* name) {
  if (name == nullptr) {
    t_last_error = "cs_trace_region_def: name is NULL";
    return CLOCKSYNC_EINVAL;
  }
  try {
    absl::StatusOr<uint32_t> id = Tracer::DefineRegion(name);
    if (!id.ok()) return Fail(id.status());
    return static_cast<int32_t>(*id);
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int32_t cs_trace_comm_def(const char* name, const int32_t* ranks, int32_t n) {
  if (name == nullptr || ranks == nullptr || n <= 0) {
    t_last_error = "cs_trace_comm_def: name or ranks NULL, or n <= 0";
    return CLOCKSYNC_EINVAL;
  }
  try {
    absl::StatusOr<uint32_t> id = Tracer::DefineCommunicator(
        name, absl::MakeConstSpan(ranks, static_cast<size_t>(n)));
    if (!id.ok()) return Fail(id.status());
    return static_cast<int32_t>(*id);
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int cs_trace_enter(uint32_t region) {
  return Tracer::Enter(region) ? CLOCKSYNC_OK : RecordError();
}

int cs_trace_leave(uint32_t region) {
  return Tracer::Leave(region) ? CLOCKSYNC_OK : RecordError();
}

int cs_trace_send(int32_t peer, uint32_t tag, uint64_t bytes, uint32_t comm) {
  return Tracer::Send(peer, tag, bytes, comm) ? CLOCKSYNC_OK : RecordError();
}

int cs_trace_recv(int32_t peer, uint32_t tag, uint64_t bytes, uint32_t comm) {
  return Tracer::Recv(peer, tag, bytes, comm) ? CLOCKSYNC_OK : RecordError();
}

int cs_trace_collective_begin(cs_trace_collective kind, uint32_t comm,
                              int32_t root, uint64_t bytes_sent) {
  return Tracer::CollectiveBegin(
             static_cast<clocksync::trace::CollectiveKind>(kind), comm, root,
             bytes_sent)
             ? CLOCKSYNC_OK
             : RecordError();
}

int cs_trace_collective_end(cs_trace_collective kind, uint32_t comm,
                            int32_t root, uint64_t bytes_received) {
  return Tracer::CollectiveEnd(
             static_cast<clocksync::trace::CollectiveKind>(kind), comm, root,
             bytes_received)
             ? CLOCKSYNC_OK
             : RecordError();
}

int cs_trace_timesync(void) {
  t_last_error.clear();
  try {
    const absl::Status status = Tracer::Timesync();
    if (status.ok()) return CLOCKSYNC_OK;
    t_last_error = status.ToString();
    if (status.code() == absl::StatusCode::kFailedPrecondition &&
        !Tracer::IsActive()) {
      return CLOCKSYNC_ENOTINIT;
    }
    return CLOCKSYNC_ENOMASTER;
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int32_t cs_trace_peer_lost(int32_t* ranks, int32_t capacity) {
  t_last_error.clear();
  if (capacity < 0 || (capacity > 0 && ranks == nullptr)) {
    t_last_error = "cs_trace_peer_lost: ranks is NULL or capacity < 0";
    return CLOCKSYNC_EINVAL;
  }
  try {
    const std::vector<int32_t> lost = Tracer::LostPeers();
    for (size_t i = 0; i < lost.size() && i < static_cast<size_t>(capacity);
         ++i) {
      ranks[i] = lost[i];
    }
    return static_cast<int32_t>(lost.size());
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int cs_trace_attach_contact(char* contact, size_t size) {
  t_last_error.clear();
  if (contact == nullptr) {
    t_last_error = "cs_trace_attach_contact: contact is NULL";
    return CLOCKSYNC_EINVAL;
  }
  try {
    absl::StatusOr<std::string> c = Tracer::AttachContact();
    if (!c.ok()) {
      t_last_error = c.status().ToString();
      return Tracer::IsActive() ? CLOCKSYNC_EIO : CLOCKSYNC_ENOTINIT;
    }
    return CopyContact(*c, contact, size);
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int cs_trace_attach(int32_t n, const int64_t* pids, uint32_t* children_comm,
                    uint32_t* family_comm) {
  t_last_error.clear();
  try {
    absl::StatusOr<clocksync::AttachResult> group = Tracer::Attach(
        n, pids == nullptr || n <= 0
               ? absl::Span<const int64_t>()
               : absl::MakeConstSpan(pids, static_cast<size_t>(n)));
    if (!group.ok()) {
      t_last_error = group.status().ToString();
      if (!Tracer::IsActive()) return CLOCKSYNC_ENOTINIT;
      switch (group.status().code()) {
        case absl::StatusCode::kInvalidArgument:
          return CLOCKSYNC_EINVAL;
        case absl::StatusCode::kDeadlineExceeded:
          return CLOCKSYNC_ETIMEDOUT;
        case absl::StatusCode::kCancelled:
          return CLOCKSYNC_EABORTED;
        case absl::StatusCode::kResourceExhausted:
          return CLOCKSYNC_ENOMEM;
        default:
          return CLOCKSYNC_EIO;
      }
    }
    if (children_comm != nullptr) *children_comm = group->children_comm;
    if (family_comm != nullptr) *family_comm = group->family_comm;
    return CLOCKSYNC_OK;
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int cs_trace_attached(int32_t* parent_rank, uint32_t* children_comm,
                      uint32_t* family_comm) {
  try {
    const std::optional<clocksync::AttachResult> group = Tracer::Attached();
    if (!group.has_value()) return CLOCKSYNC_ENOTINIT;
    if (parent_rank != nullptr) *parent_rank = group->parent_rank;
    if (children_comm != nullptr) *children_comm = group->children_comm;
    if (family_comm != nullptr) *family_comm = group->family_comm;
    return CLOCKSYNC_OK;
  } catch (const std::bad_alloc&) {
    return CLOCKSYNC_ENOMEM;
  }
}

int32_t cs_trace_rank(void) { return Tracer::Rank(); }

int32_t cs_trace_world_size(void) { return Tracer::WorldSize(); }

const char* cs_trace_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
