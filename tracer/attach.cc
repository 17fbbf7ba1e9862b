// tracer/attach.cc: dynamic spawning, the tracer's side (attach.h):
// attach contact strings for children, the parent's attach, the group's
// two communicators in every member's trace.

#include "tracer/attach.h"

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collector/contact.h"
#include "collector/streaming_sink.h"
#include "tracer/start_modes.h"
#include "tracer/tracer.h"

namespace clocksync {
namespace {

using tracer::g_lifecycle_mutex;
using tracer::g_session;
using tracer::TracingSession;

// Under g_lifecycle_mutex: this rank's next attach group, and the group
// that attached this process (a child).
uint32_t g_next_group = 0;
std::optional<AttachResult> g_attached;

// Defines the group's communicators in `session`'s trace: "attach
// r<P>.g<G> children" (the children) and "attach r<P>.g<G>" (the parent,
// then the children).
absl::StatusOr<AttachResult> DefineGroup(
    TracingSession* session, const collector::AttachGroupInfo& group) {
  session->records().AllowRanksBelow(group.ranks_in_run);
  const std::string name = absl::StrCat(
      "attach ", collector::AttachGroupName(group.parent_rank, group.group));
  AttachResult result;
  result.parent_rank = group.parent_rank;
  result.group = group.group;
  result.children = group.children;
  absl::StatusOr<uint32_t> children = session->records().DefineCommunicator(
      absl::StrCat(name, " children"), group.children);
  if (!children.ok()) return children.status();
  std::vector<int32_t> family = {group.parent_rank};
  family.insert(family.end(), group.children.begin(), group.children.end());
  absl::StatusOr<uint32_t> parent_and_children =
      session->records().DefineCommunicator(name, family);
  if (!parent_and_children.ok()) return parent_and_children.status();
  result.children_comm = *children;
  result.family_comm = *parent_and_children;
  return result;
}

// The collector's address as children reach it: a server-init process's
// advertised one, else the one this process streams to.
absl::StatusOr<std::string> CollectorAddressForChildren(
    const TracingSession& session) {
  const std::string served = tracer::ServerRoleAddress();
  if (!served.empty()) return served;
  absl::StatusOr<collector::Contact> contact = collector::ParseContact(
      "CLOCKSYNC_COLLECTOR", session.options().collector);
  if (!contact.ok()) return contact.status();
  return contact->address;
}

}  // namespace

namespace tracer {

void NoteAttachAtInit(TracingSession* session, uint32_t phase) {
  if (phase == 0) {
    g_next_group = 0;
    g_attached.reset();
  }
  collector::StreamingSink* sink = session->streaming();
  if (sink == nullptr) return;
  session->records().AllowRanksBelow(sink->ranks_in_run());
  if (!sink->attached().has_value()) return;
  absl::StatusOr<AttachResult> group = DefineGroup(session, *sink->attached());
  if (group.ok()) g_attached = *std::move(group);
}

}  // namespace tracer

absl::StatusOr<std::string> Tracer::AttachContact() {
  // Before the lock (a fork's copy of it may be held).
  if (absl::Status s = tracer::CheckNotForkedSession(); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
  TracingSession* session = g_session.load(std::memory_order_acquire);
  if (session == nullptr) {
    return absl::FailedPreconditionError("tracer: not initialized");
  }
  collector::StreamingSink* sink = session->streaming();
  if (sink == nullptr || sink->fell_back()) {
    return absl::FailedPreconditionError(
        "attach: this process does not stream to a collector (its trace "
        "goes to a local archive): it cannot attach children");
  }
  absl::StatusOr<std::string> address = CollectorAddressForChildren(*session);
  if (!address.ok()) return address.status();
  return sink->AttachContact(g_next_group, *address);
}

absl::StatusOr<AttachResult> Tracer::Attach(int32_t children,
                                            absl::Span<const int64_t> pids) {
  TracingSession* session = nullptr;
  uint32_t group = 0;
  if (absl::Status s = tracer::CheckNotForkedSession(); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    session = g_session.load(std::memory_order_acquire);
    if (session == nullptr) {
      return absl::FailedPreconditionError("tracer: not initialized");
    }
    if (children < 1 || children > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("attach: ", children, " children (want 1..4096)"));
    }
    if (!pids.empty() && static_cast<int64_t>(pids.size()) != children) {
      return absl::InvalidArgumentError(
          absl::StrCat("attach: ", pids.size(), " pids for ", children,
                       " children (want none, or one each)"));
    }
    if (session->streaming() == nullptr || session->streaming()->fell_back()) {
      return absl::FailedPreconditionError(
          "attach: this process does not stream to a collector (its trace "
          "goes to a local archive): it cannot attach children");
    }
    // The group is used up whatever happens (the collector never takes it
    // again).
    group = g_next_group++;
  }
  // Not under the lifecycle lock: Stats and the others stay available
  // while the children come.
  absl::StatusOr<collector::AttachGroupInfo> info = session->streaming()->Attach(
      group, children, std::vector<int64_t>(pids.begin(), pids.end()),
      session->options().collector_timeout_ns, tracer::BeginAbortableWait());
  tracer::EndAbortableWait();
  if (!info.ok()) {
    return absl::Status(info.status().code(),
                        absl::StrCat("attach: ", info.status().message()));
  }
  return DefineGroup(session, *info);
}

std::optional<AttachResult> Tracer::Attached() {
  std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
  return g_attached;
}

}  // namespace clocksync
