// clocksyncd/status_service_testing.h: FakeNodeView, a NodeView whose status,
// children and membership answers a test sets, SampleNodeStatus(), a
// plausible status of a synchronized node, and ListenOnLoopback(). For
// tests of the status service, the membership agent and clocksyncctl only
// (testonly).
//
// Example:
//   FakeNodeView view(SampleNodeStatus("n1"));
//   view.SetChildren({ChildRef("n2", other_server_address)});
//   StatusServer server;
//   ASSERT_TRUE(server.Start("127.0.0.1:0", "", &view).ok());
//
// Thread safety: every method may be called from any thread.
#ifndef CLOCKSYNC_CLOCKSYNCD_STATUS_SERVICE_TESTING_H_
#define CLOCKSYNC_CLOCKSYNCD_STATUS_SERVICE_TESTING_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "clocksyncd/status_service.h"
#include "proto/clocksync.pb.h"

namespace clocksync {

// A synchronized node at depth 2 below "m0" via "n1", every field set to a
// distinct plausible value (so a dropped field shows in comparisons).
NodeStatus SampleNodeStatus(const std::string& node_id);

// A TCP socket listening on 127.0.0.1 at a port the kernel picks (set in
// *port); -1 on failure. The caller closes it.
int ListenOnLoopback(int* port);

// A child as NodeView::Children() lists it.
NodeAddress ChildRef(const std::string& node_id, const std::string& grpc_address);

class FakeNodeView : public NodeView {
 public:
  explicit FakeNodeView(NodeStatus status);

  void SetStatus(NodeStatus status);
  void SetChildren(std::vector<NodeAddress> children);
  // What Join() answers (initially UNIMPLEMENTED, like a daemon without
  // membership).
  void SetJoinAnswer(absl::StatusOr<JoinResponse> answer);

  // How many times Status() was called (WatchStatus ticks and the rest).
  int status_calls() const;
  // The requests Join() and Leave() received, in order.
  std::vector<JoinRequest> join_requests() const;
  std::vector<LeaveRequest> leave_requests() const;

  NodeStatus Status() const override;
  std::vector<NodeAddress> Children() const override;
  absl::StatusOr<JoinResponse> Join(const JoinRequest& request,
                                    absl::Time deadline) override;
  absl::Status Leave(const LeaveRequest& request) override;
  // UNIMPLEMENTED, like a daemon without membership.
  absl::StatusOr<HeartbeatResponse> Heartbeat(
      const HeartbeatRequest& request) override;

 private:
  mutable absl::Mutex mu_;
  NodeStatus status_ ABSL_GUARDED_BY(mu_);
  std::vector<NodeAddress> children_ ABSL_GUARDED_BY(mu_);
  absl::StatusOr<JoinResponse> join_answer_ ABSL_GUARDED_BY(mu_);
  mutable int status_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<JoinRequest> join_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<LeaveRequest> leave_requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_STATUS_SERVICE_TESTING_H_
