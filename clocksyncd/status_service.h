// clocksyncd/status_service.h: the Clocksync gRPC service
// (proto/clocksync.proto) and StatusServer, which serves it on a TCP address
// and optionally on a Unix socket.
//
// The service reaches the daemon only through NodeView, so tests serve fake
// nodes and the daemon uses no gRPC API. One handler per RPC:
//   GetStatus    NodeView::Status(), a snapshot.
//   WatchStatus  Status() every interval_ms (50..60000) until the client
//                cancels or the server shuts down.
//   GetTopology  this node, then GetTopology on every child's grpc_address in
//                parallel, each with a deadline inside ours (shrinking by a
//                reserve per hop, at most topology_hop_timeout per level
//                below), merged into one flat list with each node once;
//                children that do not answer in time are listed unreachable.
//   Join, Leave, Heartbeat, Peer, Handover
//                validated, then forwarded to NodeView (membership lives in
//                the daemon); Join and Leave are refused with
//                PERMISSION_DENIED on TCP when admin_on_unix_only is set.
// Every request is validated first; a bad one gets INVALID_ARGUMENT with a
// reason naming the field ("interval_ms: must be 50..60000, got 10").
//
// Example:
//   StatusServer server;
//   RETURN_IF_ERROR(server.Start("0.0.0.0:3191", "/run/clocksyncd/admin.sock",
//                                &node_view));
//   ...
//   server.Shutdown(absl::Now() + absl::Seconds(1));
//
// Thread safety: StatusServer's methods are called from one thread (the
// daemon's lifecycle); handlers run on gRPC's threads and call NodeView
// concurrently.
#ifndef CLOCKSYNC_CLOCKSYNCD_STATUS_SERVICE_H_
#define CLOCKSYNC_CLOCKSYNCD_STATUS_SERVICE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "probe/address.h"
#include "probe/auth.h"
#include "proto/clocksync.pb.h"
#include "proto/limits.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace clocksync {
namespace status_internal {
class CallLimits;
class MembershipKey;
class ServiceImpl;
class ShutdownSignal;
}  // namespace status_internal

// The node as the service sees it; implemented by the daemon, faked in
// tests. Every method is called from gRPC's threads, concurrently: an
// implementation must be thread-safe and must not block on the network
// beyond the deadline it is given.
class NodeView {
 public:
  virtual ~NodeView();

  // A consistent snapshot of the node's status (ages measured now). Called
  // on every GetStatus, every WatchStatus tick and every GetTopology, so it
  // should be cheap: no I/O.
  virtual NodeStatus Status() const = 0;

  // The nodes currently synchronizing to this one, in a stable order, each
  // with its node_id and grpc_address (GetTopology asks them in turn; a
  // child without grpc_address is listed as unreachable).
  virtual std::vector<NodeAddress> Children() const = 0;

  // A node asks to synchronize to this one (Membership::HandleJoin).
  // `request` is already validated (node well-formed, counts >= 0,
  // avoid_ids valid ids). Answer by `deadline` with exactly one outcome set
  // (accepted, redirect_to or rejected); an error status goes back to the
  // caller unchanged (UNIMPLEMENTED while the daemon has no membership).
  virtual absl::StatusOr<JoinResponse> Join(const JoinRequest& request,
                                            absl::Time deadline) = 0;

  // A child stops synchronizing to this one (Membership::HandleLeave), or,
  // with `successor` set, this node's parent leaves and names where to
  // rejoin (Membership::OnParentLeft). `request` is already validated.
  // NOT_FOUND when the sender is neither a child nor the parent;
  // UNIMPLEMENTED while the daemon has no membership.
  virtual absl::Status Leave(const LeaveRequest& request) = 0;

  // A child's heartbeat (Membership::OnChildHeard, AttachmentForChild).
  // `request` is already validated. NOT_FOUND when the sender is not a
  // child; UNIMPLEMENTED while the daemon has no membership.
  virtual absl::StatusOr<HeartbeatResponse> Heartbeat(
      const HeartbeatRequest& request) = 0;

  // A peer's mastership for ours (docs/MEMBERSHIP.md, "Terms, takeover and
  // handover"). `request` is already validated. By default UNIMPLEMENTED
  // (a node without membership).
  virtual absl::StatusOr<PeerResponse> Peer(const PeerRequest& request);

  // Our master hands mastership to us (Membership::AcceptHandover); OK once
  // this node is master, else FAILED_PRECONDITION saying why. Already
  // validated. By default UNIMPLEMENTED.
  virtual absl::Status Handover(const HandoverRequest& request);
};

struct StatusServerOptions {
  // Serve Join and Leave only on the Unix socket (PERMISSION_DENIED on
  // TCP). Off by default: daemons join each other over TCP. Start() refuses
  // it without a Unix socket (nobody could join).
  bool admin_on_unix_only = false;
  // A child's GetTopology gets at most this long per level it may descend
  // (its max_depth + 1), and never past our own deadline minus a reserve.
  absl::Duration topology_hop_timeout = absl::Milliseconds(500);
  // Longest a GetTopology gathers when the caller set no (or a later)
  // deadline.
  absl::Duration topology_budget = absl::Seconds(10);
  // Most threads serving RPCs, per listener (a WatchStatus holds one while
  // it streams, a GetTopology while it gathers); beyond, calls get
  // RESOURCE_EXHAUSTED.
  int max_threads = 64;
  // Long calls are bounded so that they can never take every thread: the
  // control RPCs (Heartbeat, Join, Leave, GetStatus) always find one.
  // WatchStatus streams open at once, over both listeners, and per client
  // host; GetTopology gatherings at once. Beyond: RESOURCE_EXHAUSTED at
  // once. Start() requires max_watch_streams + max_topology_gathers to
  // leave at least half of max_threads free.
  int max_watch_streams = 16;
  int max_watch_streams_per_client = 4;
  int max_topology_gathers = 8;
  // Permissions of the Unix socket file (who may use the admin RPCs).
  mode_t unix_socket_mode = 0660;
  // The tree's key: Join, Heartbeat, Leave, Peer and Handover over TCP must
  // carry its tag
  // (clocksyncd/rpc_auth.h), else UNAUTHENTICATED. The Unix socket is
  // guarded by its file permissions instead. None: no tags asked. The key
  // at start: SetMembershipKey() replaces it.
  std::optional<probe::ProbeKeys> membership_key;
};

// OK when a TCP listener could bind `address` ("host:port"; port 0 always
// can) now; else why not, in words (in use, not permitted, not an address
// of this host). For a clear error before gRPC's own logs of a failed bind.
absl::Status CheckTcpListenAddressFree(const std::string& address);

// Serves the Clocksync service for one NodeView.
class StatusServer {
 public:
  explicit StatusServer(StatusServerOptions options = {});
  // Shuts down (deadline now) if still running.
  ~StatusServer();
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Listens on `listen_address` ("host:port", port 0 picks one; empty: no
  // TCP) and, when `unix_socket_path` is not empty, on that Unix socket
  // (its directory must exist; a stale socket file is replaced, one another
  // server listens on is refused; removed again at Shutdown). At least one
  // of the two. A port already in use is refused (no SO_REUSEPORT sharing).
  // `view` must outlive the server. Errors name the address. Call once.
  absl::Status Start(const std::string& listen_address,
                     const std::string& unix_socket_path, NodeView* view);

  // The TCP port listened on (the one picked for port 0); 0 without TCP.
  int tcp_port() const { return tcp_port_; }

  // Replaces the tree's key (a reload): membership calls on TCP are checked
  // against it from now on; none: no tags asked. Safe from any thread.
  void SetMembershipKey(const std::optional<probe::ProbeKeys>& key);

  // Stops accepting calls, ends every WatchStatus and GetTopology at once
  // and cancels whatever is still running at `deadline`; returns when all
  // handlers have returned. Idempotent.
  void Shutdown(absl::Time deadline);

 private:
  StatusServerOptions options_;
  std::unique_ptr<status_internal::ShutdownSignal> shutdown_;
  std::unique_ptr<status_internal::CallLimits> limits_;
  std::unique_ptr<status_internal::MembershipKey> membership_key_;
  std::unique_ptr<status_internal::ServiceImpl> tcp_service_;
  std::unique_ptr<status_internal::ServiceImpl> unix_service_;
  std::unique_ptr<grpc::Server> tcp_server_;
  std::unique_ptr<grpc::Server> unix_server_;
  int tcp_port_ = 0;
  bool started_ = false;
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_STATUS_SERVICE_H_
