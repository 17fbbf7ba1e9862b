// clocksyncd/status_service_testing.cc: FakeNodeView and SampleNodeStatus().
#include "clocksyncd/status_service_testing.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

namespace clocksync {

int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

NodeStatus SampleNodeStatus(const std::string& node_id) {
  NodeStatus status;
  status.set_node_id(node_id);
  status.set_role(ROLE_NODE);
  status.set_depth(2);
  status.set_parent("10.0.0.1:3190");
  status.set_state(SYNC_STATE_SYNCED);
  status.set_offset_to_parent_ns(-1'234'567);
  status.set_drift_ppb(12'345.678);
  status.set_error_bound_ns(2'137);
  status.set_min_round_trip_ns(45'210);
  status.set_samples_in_window(2'997);
  status.set_lower_hull_size(12);
  status.set_upper_hull_size(14);
  status.set_probes_sent(3'000);
  status.set_probes_answered(2'998);
  status.set_probes_lost(1);
  status.set_probes_rejected(1);
  status.set_inconsistencies(1);
  status.set_uptime_ns(3'723'000'000'000);  // 1h 02m 03s
  status.set_version("0.3.0");
  NodeAddress* master = status.add_ancestors();  // Root first.
  master->set_node_id("m0");
  master->set_probe_address("10.0.0.0:3190");
  master->set_grpc_address("10.0.0.0:3191");
  NodeAddress* parent = status.add_ancestors();
  parent->set_node_id("n1");
  parent->set_probe_address("10.0.0.1:3190");
  parent->set_grpc_address("10.0.0.1:3191");
  status.set_children_count(3);
  status.set_joins(2);
  status.set_parent_losses(1);
  (*status.mutable_dropped_on_probe_port())["bad_mac"] = 4;
  (*status.mutable_dropped_on_probe_port())["rate_limited"] = 120;
  (*status.mutable_dropped_from_parent())["late"] = 2;
  status.set_last_inconsistency_age_ns(42'000'000'000);
  status.set_last_inconsistency("step: samples contradict every line");
  status.set_holdover(false);
  status.set_last_answer_age_ns(102'000'000);
  status.set_probe_address("10.0.0.2:3190");
  status.set_grpc_address("10.0.0.2:3191");
  status.set_global_time_ns(1'732'240'000'123'456'789);
  return status;
}

NodeAddress ChildRef(const std::string& node_id,
                     const std::string& grpc_address) {
  NodeAddress ref;
  ref.set_node_id(node_id);
  ref.set_probe_address("127.0.0.1:3190");
  ref.set_grpc_address(grpc_address);
  return ref;
}

FakeNodeView::FakeNodeView(NodeStatus status)
    : status_(std::move(status)),
      join_answer_(absl::UnimplementedError("membership: not in this fake")) {}

void FakeNodeView::SetStatus(NodeStatus status) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
}

void FakeNodeView::SetChildren(std::vector<NodeAddress> children) {
  absl::MutexLock lock(&mu_);
  children_ = std::move(children);
}

void FakeNodeView::SetJoinAnswer(absl::StatusOr<JoinResponse> answer) {
  absl::MutexLock lock(&mu_);
  join_answer_ = std::move(answer);
}

int FakeNodeView::status_calls() const {
  absl::MutexLock lock(&mu_);
  return status_calls_;
}

std::vector<JoinRequest> FakeNodeView::join_requests() const {
  absl::MutexLock lock(&mu_);
  return join_requests_;
}

std::vector<LeaveRequest> FakeNodeView::leave_requests() const {
  absl::MutexLock lock(&mu_);
  return leave_requests_;
}

NodeStatus FakeNodeView::Status() const {
  absl::MutexLock lock(&mu_);
  ++status_calls_;
  return status_;
}

std::vector<NodeAddress> FakeNodeView::Children() const {
  absl::MutexLock lock(&mu_);
  return children_;
}

absl::StatusOr<JoinResponse> FakeNodeView::Join(const JoinRequest& request,
                                                absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  join_requests_.push_back(request);
  return join_answer_;
}

absl::Status FakeNodeView::Leave(const LeaveRequest& request) {
  absl::MutexLock lock(&mu_);
  leave_requests_.push_back(request);
  return absl::OkStatus();
}

absl::StatusOr<HeartbeatResponse> FakeNodeView::Heartbeat(
    const HeartbeatRequest& request) {
  return absl::UnimplementedError("this fake node has no membership");
}

}  // namespace clocksync
