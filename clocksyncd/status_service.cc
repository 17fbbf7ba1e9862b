// clocksyncd/status_service.cc: the Clocksync handlers (one function per
// RPC), the recursive topology gathering, and StatusServer.
#include "clocksyncd/status_service.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "clocksyncd/request_validation.h"
#include "clocksyncd/rpc_auth.h"
#include "grpcpp/grpcpp.h"
#include "membership/membership.h"
#include "proto/clocksync.grpc.pb.h"

namespace clocksync {

NodeView::~NodeView() = default;

absl::StatusOr<PeerResponse> NodeView::Peer(const PeerRequest&) {
  return absl::UnimplementedError("this node takes no part in mastership");
}

absl::Status NodeView::Handover(const HandoverRequest&) {
  return absl::UnimplementedError("this node takes no part in mastership");
}

// --- validation ---------------------------------------------------------

namespace {

// absl and gRPC status codes have the same values (both are the canonical
// codes).
grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Time DeadlineOf(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

// How often a blocked handler looks at whether its client cancelled (gRPC's
// synchronous API has no notification for it).
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(20);
// Each hop of GetTopology keeps this share of its remaining time, and at
// least kMinHopReserve, to merge and answer after its children's deadline.
constexpr double kHopReserveFraction = 0.1;
constexpr absl::Duration kMinHopReserve = absl::Milliseconds(20);

}  // namespace

namespace status_internal {

// The tree's key as the handlers check it; a reload may replace it.
class MembershipKey {
 public:
  explicit MembershipKey(std::optional<probe::ProbeKeys> key) : key_(std::move(key)) {}
  void Set(const std::optional<probe::ProbeKeys>& key) {
    absl::MutexLock lock(&mu_);
    key_ = key;
  }
  std::optional<probe::ProbeKeys> Get() const {
    absl::MutexLock lock(&mu_);
    return key_;
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<probe::ProbeKeys> key_ ABSL_GUARDED_BY(mu_);
};

// Raised once by StatusServer::Shutdown(); wakes every waiting WatchStatus
// and GetTopology.
class ShutdownSignal {
 public:
  void Raise() {
    absl::MutexLock lock(&mu_);
    raised_ = true;
  }
  bool raised() const {
    absl::MutexLock lock(&mu_);
    return raised_;
  }
  // Waits until `deadline` or the signal; true if raised.
  bool WaitUntil(absl::Time deadline) const {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(&raised_), deadline);
    return raised_;
  }

 private:
  mutable absl::Mutex mu_;
  bool raised_ ABSL_GUARDED_BY(mu_) = false;
};

// Counts the long calls in progress (WatchStatus streams, GetTopology
// gatherings) so that they can never hold every serving thread; shared by
// both listeners.
class CallLimits {
 public:
  explicit CallLimits(const StatusServerOptions& options)
      : max_watches_(options.max_watch_streams),
        max_watches_per_client_(options.max_watch_streams_per_client),
        max_gathers_(options.max_topology_gathers) {}

  // Takes a watch slot for `client` (a host), or says why not.
  absl::Status AcquireWatch(const std::string& client) {
    absl::MutexLock lock(&mu_);
    if (watches_ >= max_watches_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "WatchStatus: ", watches_, " streams open, the limit; try later"));
    }
    int& mine = watches_by_client_[client];
    if (mine >= max_watches_per_client_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("WatchStatus: ", mine, " streams open from ", client,
                       ", the limit per client"));
    }
    ++mine;
    ++watches_;
    return absl::OkStatus();
  }
  void ReleaseWatch(const std::string& client) {
    absl::MutexLock lock(&mu_);
    --watches_;
    auto it = watches_by_client_.find(client);
    if (it != watches_by_client_.end() && --it->second <= 0) {
      watches_by_client_.erase(it);
    }
  }

  absl::Status AcquireGather() {
    absl::MutexLock lock(&mu_);
    if (gathers_ >= max_gathers_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "GetTopology: ", gathers_, " gatherings in progress, the limit"));
    }
    ++gathers_;
    return absl::OkStatus();
  }
  void ReleaseGather() {
    absl::MutexLock lock(&mu_);
    --gathers_;
  }

 private:
  const int max_watches_;
  const int max_watches_per_client_;
  const int max_gathers_;
  absl::Mutex mu_;
  int watches_ ABSL_GUARDED_BY(mu_) = 0;
  int gathers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> watches_by_client_ ABSL_GUARDED_BY(mu_);
};

}  // namespace status_internal

namespace {

// The client's host from gRPC's peer string ("ipv4:10.0.0.7:51234",
// "ipv6:[::1]:5555", "unix:/run/..."): the port changes per connection, the
// host does not.
std::string ClientHost(const grpc::ServerContext& context) {
  const std::string peer = context.peer();
  if (absl::StartsWith(peer, "unix:")) return "unix";
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string::npos || colon == scheme) return peer;
  return peer.substr(0, colon);
}

// What every handler works with; one per listener.
struct HandlerEnv {
  NodeView* view;
  const StatusServerOptions* options;
  const status_internal::ShutdownSignal* shutdown;
  status_internal::CallLimits* limits;
  // False on TCP when admin RPCs are limited to the Unix socket.
  bool admin_allowed;
  // The address served ("0.0.0.0:3191", "unix:/run/..."), for messages.
  std::string listener;
  // Membership calls must carry the tag of the tree's key, when there is
  // one (TCP).
  bool require_tags = false;
  const status_internal::MembershipKey* membership_key = nullptr;
};

// --- GetStatus ----------------------------------------------------------

grpc::Status HandleGetStatus(const HandlerEnv& env, NodeStatus* response) {
  *response = env.view->Status();
  return grpc::Status::OK;
}

// --- WatchStatus --------------------------------------------------------

grpc::Status HandleWatchStatus(const HandlerEnv& env,
                               grpc::ServerContext* context,
                               const WatchStatusRequest& request,
                               grpc::ServerWriter<NodeStatus>* writer) {
  const absl::Status valid = ValidateWatchRequest(request);
  if (!valid.ok()) return ToGrpc(valid);
  const std::string client = ClientHost(*context);
  const absl::Status slot = env.limits->AcquireWatch(client);
  if (!slot.ok()) return ToGrpc(slot);
  const absl::Cleanup release = [&] { env.limits->ReleaseWatch(client); };
  const absl::Duration interval = absl::Milliseconds(request.interval_ms());
  absl::Time next = absl::Now();
  while (true) {
    if (!writer->Write(env.view->Status())) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          "WatchStatus: the client went away");
    }
    // The next tick; after a write that blocked past it (a slow reader),
    // the next update goes out at once and the cadence resumes from there.
    next = std::max(next + interval, absl::Now());
    for (absl::Time now = absl::Now(); now < next; now = absl::Now()) {
      if (env.shutdown->WaitUntil(std::min(next, now + kCancelPollInterval))) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "WatchStatus: the server is shutting down");
      }
      if (context->IsCancelled()) {
        return grpc::Status(grpc::StatusCode::CANCELLED,
                            "WatchStatus: cancelled by the client");
      }
    }
  }
}

// --- GetTopology --------------------------------------------------------

// One child's answer to GetTopology.
struct ChildAnswer {
  grpc::Status status;
  Topology topology;
};

// Asks every child for its subtree in parallel, each call ending by
// `child_deadline`; returns when all have answered or failed. Cancels the
// calls early when our own caller cancels or the server shuts down.
std::vector<ChildAnswer> GatherChildren(
    const HandlerEnv& env, grpc::ServerContext* context,
    const std::vector<NodeAddress>& children,
    const GetTopologyRequest& child_request, absl::Time child_deadline) {
  // Shared with the callbacks, which may still be unlocking the mutex when
  // the last one has counted itself done.
  struct Pending {
    absl::Mutex mu;
    int count ABSL_GUARDED_BY(mu) = 0;
  };
  auto pending = std::make_shared<Pending>();
  std::vector<ChildAnswer> answers(children.size());
  std::vector<grpc::ClientContext> contexts(children.size());
  std::vector<std::unique_ptr<Clocksync::Stub>> stubs(children.size());
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(kMaxTopologyMessageBytes);
  for (size_t i = 0; i < children.size(); ++i) {
    const NodeAddress& child = children[i];
    const absl::Status address =
        probe::ValidateGrpcAddress("grpc_address", child.grpc_address());
    if (!address.ok()) {
      answers[i].status = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("no usable gRPC address: ", address.message()));
      continue;
    }
    contexts[i].set_deadline(absl::ToChronoTime(child_deadline));
    stubs[i] = Clocksync::NewStub(grpc::CreateCustomChannel(
        child.grpc_address(), grpc::InsecureChannelCredentials(),
        channel_args));
    {
      absl::MutexLock lock(&pending->mu);
      ++pending->count;
    }
    stubs[i]->async()->GetTopology(&contexts[i], &child_request,
                                   &answers[i].topology,
                                   [pending, &answers, i](grpc::Status status) {
                                     absl::MutexLock lock(&pending->mu);
                                     answers[i].status = std::move(status);
                                     --pending->count;
                                   });
  }
  bool cancelled = false;
  while (true) {
    {
      absl::MutexLock lock(&pending->mu);
      pending->mu.AwaitWithTimeout(
          absl::Condition(
              +[](int* count) { return *count == 0; }, &pending->count),
          kCancelPollInterval);
      if (pending->count == 0) break;
    }
    if (!cancelled && (context->IsCancelled() || env.shutdown->raised())) {
      cancelled = true;
      for (size_t i = 0; i < children.size(); ++i) {
        if (stubs[i] != nullptr) contexts[i].TryCancel();
      }
    }
  }
  return answers;
}

std::string DescribeChildError(const grpc::Status& status,
                               const NodeAddress& child) {
  return absl::StrCat(absl::StatusCodeToString(
                          static_cast<absl::StatusCode>(status.error_code())),
                      ": ", status.error_message(), " (", child.grpc_address(),
                      ")");
}

// Appends the children's subtrees below `self_id` (out->nodes(0)): each node
// once (the first time it is seen), at most `max_nodes` in all; a child that
// did not answer becomes an unreachable entry.
void MergeChildren(const std::string& self_id,
                   const std::vector<NodeAddress>& children,
                   std::vector<ChildAnswer>& answers, uint32_t max_nodes,
                   Topology* out) {
  absl::flat_hash_map<std::string, int> index_of = {{self_id, 0}};
  auto append = [&](TopologyNode* node) {
    const std::string id = node->status().node_id();
    if (index_of.contains(id)) return;  // Moved between parents meanwhile.
    if (out->nodes_size() >= static_cast<int>(max_nodes)) {
      out->set_truncated(true);
      const auto parent = index_of.find(node->parent_id());
      if (parent != index_of.end()) {
        out->mutable_nodes(parent->second)->set_children_omitted(true);
      }
      return;
    }
    index_of[id] = out->nodes_size();
    out->add_nodes()->Swap(node);
  };
  for (size_t i = 0; i < children.size(); ++i) {
    const NodeAddress& child = children[i];
    ChildAnswer& answer = answers[i];
    if (!answer.status.ok() || answer.topology.nodes_size() == 0) {
      TopologyNode unreachable;
      unreachable.mutable_status()->set_node_id(
          child.node_id().empty() ? child.grpc_address() : child.node_id());
      unreachable.set_parent_id(self_id);
      *unreachable.mutable_ref() = child;
      unreachable.set_unreachable(true);
      unreachable.set_error(
          answer.status.ok()
              ? absl::StrCat("empty answer (", child.grpc_address(), ")")
              : DescribeChildError(answer.status, child));
      append(&unreachable);
      continue;
    }
    if (answer.topology.truncated()) out->set_truncated(true);
    for (int j = 0; j < answer.topology.nodes_size(); ++j) {
      TopologyNode* node = answer.topology.mutable_nodes(j);
      if (j == 0) {
        node->set_parent_id(self_id);
        *node->mutable_ref() = child;
      }
      // The tree gives every node's ancestors; only the asked node keeps
      // them (keeps large answers small).
      node->mutable_status()->clear_ancestors();
      append(node);
    }
  }
}

grpc::Status HandleGetTopology(const HandlerEnv& env,
                               grpc::ServerContext* context,
                               const GetTopologyRequest& request,
                               Topology* response) {
  const absl::Status valid = ValidateTopologyRequest(request);
  if (!valid.ok()) return ToGrpc(valid);
  NodeStatus self = env.view->Status();
  const std::string self_id = self.node_id();
  for (const std::string& id : request.path_node_ids()) {
    if (id == self_id) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("cycle: node ", self_id, " is already on the path ",
                       absl::StrJoin(request.path_node_ids(), " > ")));
    }
  }
  const uint32_t max_nodes =
      request.max_nodes() == 0 ? kDefaultTopologyMaxNodes : request.max_nodes();
  const uint32_t max_depth =
      request.has_max_depth() ? request.max_depth() : kDefaultTopologyMaxDepth;
  TopologyNode* root = response->add_nodes();
  *root->mutable_status() = std::move(self);
  std::vector<NodeAddress> children = env.view->Children();
  if (children.empty()) return grpc::Status::OK;
  // Gathering holds this thread while the children answer: bounded.
  const absl::Status slot = env.limits->AcquireGather();
  if (!slot.ok()) return ToGrpc(slot);
  const absl::Cleanup release = [&] { env.limits->ReleaseGather(); };
  if (max_depth == 0 || max_nodes == 1 ||
      request.path_node_ids_size() >= kMaxTopologyPathLength) {
    root->set_children_omitted(true);
    response->set_truncated(true);
    return grpc::Status::OK;
  }
  if (children.size() > max_nodes - 1) {
    // Children beyond the node budget could not be listed: not asked.
    children.resize(max_nodes - 1);
    root->set_children_omitted(true);
    response->set_truncated(true);
  }
  // Our children must answer before we do: they get our deadline minus a
  // reserve to merge and reply in, and at most one hop timeout per level
  // they may still descend (themselves included).
  const absl::Time now = absl::Now();
  const absl::Time deadline =
      std::min(DeadlineOf(*context), now + env.options->topology_budget);
  const absl::Duration reserve =
      std::max(kMinHopReserve, (deadline - now) * kHopReserveFraction);
  const absl::Time child_deadline =
      std::min(deadline - reserve,
               now + env.options->topology_hop_timeout * int64_t{max_depth});
  GetTopologyRequest child_request;
  child_request.set_max_nodes(max_nodes - 1);
  child_request.set_max_depth(max_depth - 1);
  *child_request.mutable_path_node_ids() = request.path_node_ids();
  child_request.add_path_node_ids(self_id);
  std::vector<ChildAnswer> answers;
  if (child_deadline <= now) {
    answers.resize(children.size());
    for (ChildAnswer& answer : answers) {
      answer.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                   "no time left to ask it");
    }
  } else {
    answers =
        GatherChildren(env, context, children, child_request, child_deadline);
  }
  MergeChildren(self_id, children, answers, max_nodes, response);
  return grpc::Status::OK;
}

// --- Join and Leave (membership, forwarded to the daemon) ---------------

grpc::Status RefuseAdmin(const HandlerEnv& env, absl::string_view rpc) {
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(rpc,
                                   " is served only on this node's Unix socket "
                                   "(admin_on_unix_only), not on ",
                                   env.listener));
}

// OK unless the listener asks for tags and the call's is absent or wrong.
grpc::Status Authenticate(const HandlerEnv& env, absl::string_view rpc,
                          const google::protobuf::MessageLite& request,
                          const grpc::ServerContext& context) {
  if (!env.require_tags) return grpc::Status::OK;
  const std::optional<probe::ProbeKeys> key = env.membership_key->Get();
  if (!key) return grpc::Status::OK;
  return ToGrpc(VerifyRpc(*key, rpc, request, context));
}

grpc::Status HandleJoin(const HandlerEnv& env,
                        const grpc::ServerContext& context,
                        const JoinRequest& request, JoinResponse* response) {
  if (!env.admin_allowed) return RefuseAdmin(env, "Join");
  const grpc::Status authentic = Authenticate(env, "Join", request, context);
  if (!authentic.ok()) return authentic;
  const absl::Status valid = ValidateJoinRequest(request);
  if (!valid.ok()) return ToGrpc(valid);
  absl::StatusOr<JoinResponse> answer =
      env.view->Join(request, DeadlineOf(context));
  if (!answer.ok()) return ToGrpc(answer.status());
  if (answer->outcome_case() == JoinResponse::OUTCOME_NOT_SET) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "Join: the node answered without an outcome");
  }
  *response = *std::move(answer);
  return grpc::Status::OK;
}

grpc::Status HandleLeave(const HandlerEnv& env, const grpc::ServerContext& context,
                         const LeaveRequest& request) {
  if (!env.admin_allowed) return RefuseAdmin(env, "Leave");
  const grpc::Status authentic = Authenticate(env, "Leave", request, context);
  if (!authentic.ok()) return authentic;
  const absl::Status valid = ValidateLeaveRequest(request);
  if (!valid.ok()) return ToGrpc(valid);
  return ToGrpc(env.view->Leave(request));
}

grpc::Status HandleHeartbeat(const HandlerEnv& env,
                             const grpc::ServerContext& context,
                             const HeartbeatRequest& request,
                             HeartbeatResponse* response) {
  const grpc::Status authentic = Authenticate(env, "Heartbeat", request, context);
  if (!authentic.ok()) return authentic;
  const absl::Status valid = ValidateHeartbeatRequest(request);
  if (!valid.ok()) return ToGrpc(valid);
  absl::StatusOr<HeartbeatResponse> answer = env.view->Heartbeat(request);
  if (!answer.ok()) return ToGrpc(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

// Peer and Handover: between daemons, tagged like Heartbeat.
grpc::Status HandlePeer(const HandlerEnv& env, const grpc::ServerContext& context,
                        const PeerRequest& request, PeerResponse* response) {
  grpc::Status status = Authenticate(env, "Peer", request, context);
  if (status.ok()) status = ToGrpc(ValidatePeerRequest(request));
  if (!status.ok()) return status;
  absl::StatusOr<PeerResponse> answer = env.view->Peer(request);
  if (!answer.ok()) return ToGrpc(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

grpc::Status HandleHandover(const HandlerEnv& env, const grpc::ServerContext& context,
                            const HandoverRequest& request) {
  grpc::Status status = Authenticate(env, "Handover", request, context);
  if (status.ok()) status = ToGrpc(ValidateHandoverRequest(request));
  if (!status.ok()) return status;
  return ToGrpc(env.view->Handover(request));
}

}  // namespace

namespace status_internal {

// The generated service, each RPC forwarded to its handler.
class ServiceImpl final : public Clocksync::Service {
 public:
  explicit ServiceImpl(HandlerEnv env) : env_(std::move(env)) {}

  grpc::Status GetStatus(grpc::ServerContext* context,
                         const GetStatusRequest* request,
                         NodeStatus* response) override {
    return HandleGetStatus(env_, response);
  }
  grpc::Status WatchStatus(grpc::ServerContext* context,
                           const WatchStatusRequest* request,
                           grpc::ServerWriter<NodeStatus>* writer) override {
    return HandleWatchStatus(env_, context, *request, writer);
  }
  grpc::Status GetTopology(grpc::ServerContext* context,
                           const GetTopologyRequest* request,
                           Topology* response) override {
    return HandleGetTopology(env_, context, *request, response);
  }
  grpc::Status Join(grpc::ServerContext* context, const JoinRequest* request,
                    JoinResponse* response) override {
    return HandleJoin(env_, *context, *request, response);
  }
  grpc::Status Leave(grpc::ServerContext* context, const LeaveRequest* request,
                     LeaveResponse* response) override {
    return HandleLeave(env_, *context, *request);
  }
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const HeartbeatRequest* request,
                         HeartbeatResponse* response) override {
    return HandleHeartbeat(env_, *context, *request, response);
  }
  grpc::Status Peer(grpc::ServerContext* context, const PeerRequest* request,
                    PeerResponse* response) override {
    return HandlePeer(env_, *context, *request, response);
  }
  grpc::Status Handover(grpc::ServerContext* context,
                        const HandoverRequest* request,
                        HandoverResponse*) override {
    return HandleHandover(env_, *context, *request);
  }

 private:
  const HandlerEnv env_;
};

}  // namespace status_internal

// --- StatusServer -------------------------------------------------------

namespace {

// gRPC replaces whatever socket sits at a Unix socket path, a live one
// included: refuse when another server answers there (a second daemon
// would silently take the first one's admin socket), and when the path is
// something else than a socket. A stale socket (nobody accepting) is fine.
absl::Status CheckUnixSocketFree(const std::string& path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) return absl::OkStatus();  // Free.
  if (!S_ISSOCK(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("unix:", path, ": exists and is not a socket"));
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix:", path, ": longer than ",
                     sizeof(address.sun_path) - 1, " bytes"));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::OkStatus();  // Let the bind report it.
  const bool live = connect(fd, reinterpret_cast<const sockaddr*>(&address),
                            sizeof(address)) == 0;
  close(fd);
  if (live) {
    return absl::FailedPreconditionError(
        absl::StrCat("unix:", path, ": another server is listening there"));
  }
  return absl::OkStatus();
}

// Builds and starts a server for `service` on `address` ("host:port" or
// "unix:PATH"); the port it got in *selected_port.
absl::StatusOr<std::unique_ptr<grpc::Server>> BuildServer(
    const std::string& address, grpc::Service* service, int max_threads,
    int* selected_port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(),
                           selected_port);
  builder.RegisterService(service);
  // gRPC sets SO_REUSEPORT by default: a second daemon on the same port
  // would then share our calls silently instead of failing to start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  grpc::ResourceQuota quota(absl::StrCat("clocksync status ", address));
  quota.SetMaxThreads(max_threads);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *selected_port == 0) {
    if (server != nullptr) server->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot serve gRPC on ", address,
        ": bind failed (address in use, not permitted, or directory "
        "missing; gRPC logged the cause)"));
  }
  return server;
}

}  // namespace

absl::Status CheckTcpListenAddressFree(const std::string& address) {
  const absl::StatusOr<probe::HostPort> parsed =
      probe::ParseHostPort("address", address, {.allow_port_zero = true});
  if (!parsed.ok()) return parsed.status();
  if (parsed->port == 0) return absl::OkStatus();
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  const std::string port = std::to_string(parsed->port);
  const int resolved = getaddrinfo(parsed->host.empty() ? nullptr : parsed->host.c_str(),
                                   port.c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host \"", parsed->host, "\": ", gai_strerror(resolved)));
  }
  absl::Status result = absl::OkStatus();
  for (const struct addrinfo* a = found; a != nullptr && result.ok(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // As gRPC binds: SO_REUSEADDR (a TIME_WAIT leftover is no conflict),
    // no SO_REUSEPORT (a live listener is).
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      const int error = errno;
      result = absl::UnavailableError(
          error == EADDRINUSE ? "address already in use (another clocksyncd, or "
                                "another service, listens there)"
          : error == EACCES ? "permission denied (ports below 1024 need root or "
                              "CAP_NET_BIND_SERVICE)"
          : error == EADDRNOTAVAIL ? "not an address of this host"
                                   : absl::StrCat("cannot bind: ", std::strerror(error)));
    }
    close(fd);
  }
  freeaddrinfo(found);
  return result;
}

StatusServer::StatusServer(StatusServerOptions options)
    : options_(std::move(options)),
      shutdown_(std::make_unique<status_internal::ShutdownSignal>()),
      limits_(std::make_unique<status_internal::CallLimits>(options_)),
      membership_key_(std::make_unique<status_internal::MembershipKey>(
          options_.membership_key)) {}

StatusServer::~StatusServer() { Shutdown(absl::Now()); }

absl::Status StatusServer::Start(const std::string& listen_address,
                                 const std::string& unix_socket_path,
                                 NodeView* view) {
  if (started_) {
    return absl::FailedPreconditionError("StatusServer: started twice");
  }
  if (view == nullptr) {
    return absl::InvalidArgumentError("StatusServer: no NodeView");
  }
  if (listen_address.empty() && unix_socket_path.empty()) {
    return absl::InvalidArgumentError(
        "StatusServer: neither a listen address nor a Unix socket");
  }
  if (options_.admin_on_unix_only && unix_socket_path.empty()) {
    return absl::InvalidArgumentError(
        "admin_on_unix_only: needs a Unix socket (else nobody could Join or "
        "Leave)");
  }
  if (options_.max_watch_streams < 0 ||
      options_.max_watch_streams_per_client < 1 ||
      options_.max_topology_gathers < 1 ||
      2 * (options_.max_watch_streams + options_.max_topology_gathers) >
          options_.max_threads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StatusServer: max_watch_streams (", options_.max_watch_streams,
        ") + max_topology_gathers (", options_.max_topology_gathers,
        ") must leave half of max_threads (", options_.max_threads,
        ") to the other calls"));
  }
  if (!listen_address.empty()) {
    const absl::Status valid = probe::ValidateHostPort(
        "gRPC listen address", listen_address, /*allow_port_zero=*/true);
    if (!valid.ok()) return valid;
  }
  started_ = true;
  if (!unix_socket_path.empty()) {
    const absl::Status free = CheckUnixSocketFree(unix_socket_path);
    if (!free.ok()) return free;
    const std::string address = "unix:" + unix_socket_path;
    unix_service_ = std::make_unique<status_internal::ServiceImpl>(HandlerEnv{
        view, &options_, shutdown_.get(), limits_.get(), /*admin_allowed=*/true,
        address});
    int selected = 0;
    absl::StatusOr<std::unique_ptr<grpc::Server>> server = BuildServer(
        address, unix_service_.get(), options_.max_threads, &selected);
    if (!server.ok()) return server.status();
    unix_server_ = *std::move(server);
    if (chmod(unix_socket_path.c_str(), options_.unix_socket_mode) != 0) {
      const int error = errno;
      Shutdown(absl::Now());
      return absl::InternalError(
          absl::StrCat("chmod ", unix_socket_path, ": ", std::strerror(error)));
    }
  }
  if (!listen_address.empty()) {
    tcp_service_ = std::make_unique<status_internal::ServiceImpl>(HandlerEnv{
        view, &options_, shutdown_.get(), limits_.get(),
        /*admin_allowed=*/!options_.admin_on_unix_only, listen_address,
        /*require_tags=*/true, membership_key_.get()});
    absl::StatusOr<std::unique_ptr<grpc::Server>> server = BuildServer(
        listen_address, tcp_service_.get(), options_.max_threads, &tcp_port_);
    if (!server.ok()) {
      Shutdown(absl::Now());
      return server.status();
    }
    tcp_server_ = *std::move(server);
  }
  return absl::OkStatus();
}

void StatusServer::SetMembershipKey(const std::optional<probe::ProbeKeys>& key) {
  membership_key_->Set(key);
}

void StatusServer::Shutdown(absl::Time deadline) {
  shutdown_->Raise();  // Ends watches and gatherings before the deadline.
  const auto chrono_deadline = absl::ToChronoTime(deadline);
  for (std::unique_ptr<grpc::Server>* server : {&tcp_server_, &unix_server_}) {
    if (*server == nullptr) continue;
    (*server)->Shutdown(chrono_deadline);
    (*server)->Wait();
    server->reset();
  }
}

}  // namespace clocksync
