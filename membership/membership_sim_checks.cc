// membership/membership_sim_checks.cc: the membership simulator's
// invariant checks (membership_sim.h): the full safety check, the
// incremental one over the nodes a tick changed, convergence, and the
// tree's shape (paths, depths, real children) they and the callers read.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "membership/membership_sim.h"

namespace clocksync {
namespace {

std::string Ids(const std::vector<NodeRef>& chain) {
  std::vector<std::string> ids;
  for (const NodeRef& r : chain) ids.push_back(r.node_id);
  return absl::StrJoin(ids, ",");
}

}  // namespace

std::vector<MembershipSim::Idx> MembershipSim::PathUp(Idx i,
                                                      bool* cycle) const {
  std::vector<Idx> path;
  *cycle = false;
  const size_t limit = nodes_.size();
  Idx cur = i;
  for (;;) {
    path.push_back(cur);
    // Longer than there are nodes: a node repeats. Find where.
    if (path.size() > limit) {
      *cycle = true;
      return path;
    }
    if (std::find(path.begin(), path.end() - 1, cur) != path.end() - 1) {
      *cycle = true;
      return path;
    }
    const Idx parent = ParentOf(cur);
    if (parent < 0) {
      // Attached to an id the simulator does not know: show it, stop.
      return path;
    }
    cur = parent;
  }
}

std::string MembershipSim::PathString(const std::vector<Idx>& path,
                                      const char* separator) const {
  std::vector<std::string> ids;
  ids.reserve(path.size());
  for (const Idx i : path) ids.push_back(IdOf(i));
  return absl::StrJoin(ids, separator);
}

const std::string& MembershipSim::IdOf(Idx i) const {
  static const std::string* const kNone = new std::string();
  return i >= 0 ? nodes_[i].id : *kNone;
}

std::vector<std::string> MembershipSim::RealChildren(
    const std::string& id) const {
  const Idx p = IndexOf(id);
  std::vector<std::string> out;
  if (p < 0) return out;
  for (Idx c = 0; c < static_cast<Idx>(nodes_.size()); ++c) {
    if (ParentOf(c) == p) out.push_back(nodes_[c].id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string MembershipSim::CheckNode(Idx i) const {
  const Node& n = nodes_[i];
  const std::string& id = n.id;
  const Membership& m = n.m;
  // Local consistency of the view (chains are a few entries long).
  const std::vector<NodeRef>& chain = m.ancestors();
  for (size_t k = 0; k < chain.size(); ++k) {
    if (chain[k].node_id == id) {
      return absl::StrCat(id, " is in its own chain ", Ids(chain));
    }
    for (size_t l = 0; l < k; ++l) {
      if (chain[l].node_id == chain[k].node_id) {
        return absl::StrCat(id, "'s chain repeats ", chain[k].node_id);
      }
    }
  }
  if (m.state() == MembershipState::kAttached &&
      (!m.parent() || chain.empty() ||
       chain.back().node_id != m.parent()->node_id)) {
    return absl::StrCat(id, "'s chain does not end at its parent");
  }
  // Capacity: dynamic newcomers only while below max_children (pinned
  // children, counted only past it, come on top).
  if (static_cast<int>(m.children().size()) > options_.max_children) {
    int pinned_children = 0;
    for (const auto& [cid, c] : m.children()) {
      pinned_children += c.pinned || (m.is_master() && c.master_priority > 0);
    }
    if (static_cast<int>(m.children().size()) >
        options_.max_children + pinned_children) {
      return absl::StrCat(id, " has ", m.children().size(), " children, max ",
                          options_.max_children);
    }
  }
  // Leases flow down: whoever holds one has a parent that is dead, the
  // master, a holder of a lease at least as long, or detached with grants
  // outstanding at least as long (it may not attach before they expire).
  if (m.state() == MembershipState::kAttached && m.HasLease(now_ns_)) {
    const std::string& pid = m.parent()->node_id;
    const Idx pi = IndexOf(pid);
    if (!AliveAt(pi)) return "";
    const Membership& p = nodes_[pi].m;
    const int64_t mine = m.lease_expiry_ns();
    switch (p.state()) {
      case MembershipState::kMaster:
        break;
      case MembershipState::kAttached:
        if (!p.HasLease(now_ns_) || p.lease_expiry_ns() < mine) {
          return absl::StrCat(id, " holds a lease to ", mine,
                              " ns but its "
                              "parent ",
                              pid, " only to ", p.lease_expiry_ns(), " ns");
        }
        break;
      case MembershipState::kDetached:
        if (p.granted_until_ns() < mine) {
          return absl::StrCat(id, " holds a lease to ", mine,
                              " ns that its detached parent ", pid,
                              " never granted");
        }
        break;
      case MembershipState::kLeft:
        break;
    }
  }
  return "";
}

std::string MembershipSim::CheckSafety() const {
  if (!violations_.empty()) return violations_.front();
  // At most one master per connected side, but for the time two masters
  // that meet need to settle it (TrackMasters keeps the pairs).
  for (const auto& [pair, since_ns] : masters_together_) {
    if (now_ns_ - since_ns > master_resolution_ns()) {
      return absl::StrCat("masters ", IdOf(pair.first), " (term ",
                          nodes_[pair.first].m.term(), ") and ",
                          IdOf(pair.second), " (term ",
                          nodes_[pair.second].m.term(),
                          ") have reached each other for ",
                          (now_ns_ - since_ns) / 1'000'000, " ms");
    }
  }
  // No cycle through the real parent pointers. One pass: each node is
  // walked once (1: on the current walk, 2: known to end).
  const Idx count = static_cast<Idx>(nodes_.size());
  std::vector<uint8_t> mark(count, 0);
  std::vector<Idx> walked;
  for (Idx i = 0; i < count; ++i) {
    if (!nodes_[i].alive || mark[i] == 2) continue;
    walked.clear();
    Idx cur = i;
    for (;;) {
      uint8_t& state = mark[cur];
      if (state == 2) break;
      if (state == 1) {
        bool cycle = false;
        return absl::StrCat("cycle: ", PathString(PathUp(cur, &cycle), " -> "));
      }
      state = 1;
      walked.push_back(cur);
      const Idx parent = ParentOf(cur);
      if (parent < 0) break;
      cur = parent;
    }
    for (const Idx w : walked) mark[w] = 2;
  }
  for (Idx i = 0; i < count; ++i) {
    if (!nodes_[i].alive) continue;
    if (std::string e = CheckNode(i); !e.empty()) return e;
  }
  return "";
}

std::string MembershipSim::CheckSafetyIncremental() {
  if (!violations_.empty()) return violations_.front();
  for (const auto& [pair, since_ns] : masters_together_) {
    if (now_ns_ - since_ns > master_resolution_ns()) {
      return CheckSafety();  // The full check words it.
    }
  }
  // Refresh the real-children index for the changed nodes, then check each
  // changed node and its real children.
  std::vector<Idx> changed;
  changed.swap(changed_);
  // The changed nodes whose real parent changed (by index, reset per call).
  thread_local std::vector<bool> moved;
  moved.assign(nodes_.size(), false);
  for (const Idx i : changed) {
    nodes_[i].changed = false;
    const Idx parent = ParentOf(i);
    Idx& old = checked_parent_[i];
    if (parent == old) continue;
    moved[i] = true;
    if (old >= 0) {
      std::vector<Idx>& siblings = checked_children_[old];
      siblings.erase(std::find(siblings.begin(), siblings.end(), i));
    }
    if (parent >= 0) checked_children_[parent].push_back(i);
    old = parent;
  }
  const size_t limit = nodes_.size();
  for (const Idx i : changed) {
    // A cycle needs a changed parent pointer: walk up from every node whose
    // pointer changed (a walk longer than there are nodes has met a cycle).
    if (moved[i]) {
      Idx cur = i;
      for (size_t hops = 0; cur >= 0; ++hops) {
        if (hops > limit) {
          bool cycle = false;
          return absl::StrCat("cycle: ", PathString(PathUp(i, &cycle), " -> "));
        }
        cur = ParentOf(cur);
      }
    }
    if (nodes_[i].alive) {
      if (std::string e = CheckNode(i); !e.empty()) return e;
    }
    // Its children's lease checks read only its LeaseView (a lease that
    // expires with time cannot break them: a child's own runs out first).
    const LeaseView view = LeaseViewOf(i);
    if (view == checked_lease_view_[i]) continue;
    checked_lease_view_[i] = view;
    for (const Idx c : checked_children_[i]) {
      if (nodes_[c].alive) {
        if (std::string e = CheckNode(c); !e.empty()) return e;
      }
    }
  }
  return "";
}

MembershipSim::LeaseView MembershipSim::LeaseViewOf(Idx i) const {
  const Node& n = nodes_[i];
  return LeaseView{n.alive, n.m.state(), n.m.lease_expiry_ns(),
                   n.m.granted_until_ns()};
}

std::string MembershipSim::CheckConverged() const {
  if (!violations_.empty()) return violations_.front();
  const std::vector<Idx> masters = LiveMasterIndices();
  if (masters.size() != 1) {
    return absl::StrCat(masters.size(), " live masters: ",
                        PathString(masters, ","));
  }
  const Idx root = masters.front();
  const std::string lists = CheckCandidateLists();
  if (!lists.empty()) return lists;
  const Idx count = static_cast<Idx>(nodes_.size());
  // The real children of every node, by id as Membership lists them.
  std::vector<std::vector<Idx>> real(count);
  for (Idx i = 0; i < count; ++i) {
    const Idx p = ParentOf(i);
    if (p >= 0) real[p].push_back(i);
  }
  std::vector<std::string> path_ids;
  std::vector<std::string> listed;
  std::vector<std::string> real_ids;
  for (Idx i = 0; i < count; ++i) {
    const Node& n = nodes_[i];
    if (!n.alive) continue;
    const std::string& id = n.id;
    const Membership& m = n.m;
    if (m.state() != MembershipState::kMaster &&
        !(m.state() == MembershipState::kAttached && m.HasLease(now_ns_))) {
      return absl::StrCat("not attached: ", Describe(id));
    }
    bool cycle = false;
    std::vector<Idx> path = PathUp(i, &cycle);
    if (cycle || path.back() != root || !AliveAt(path.back())) {
      return absl::StrCat(id, " does not reach the master: ",
                          PathString(path, " -> "));
    }
    // Root first, without self: what the chain must be.
    const std::vector<NodeRef>& chain = m.ancestors();
    bool same = chain.size() + 1 == path.size();
    for (size_t k = 0; same && k < chain.size(); ++k) {
      same = chain[k].node_id == IdOf(path[path.size() - 1 - k]);
    }
    if (!same) {
      std::reverse(path.begin(), path.end());
      path.pop_back();
      return absl::StrCat(id, "'s chain ", Ids(chain), " is not its path ",
                          PathString(path, ","));
    }
    if (m.WantsToMoveUp()) {
      return absl::StrCat(id, " at depth ", m.depth(),
                          " wants to move up to depth ", m.landing_depth());
    }
    listed.clear();
    for (const auto& [cid, c] : m.children()) listed.push_back(cid);
    real_ids.clear();
    for (const Idx c : real[i]) real_ids.push_back(nodes_[c].id);
    std::sort(real_ids.begin(), real_ids.end());
    if (listed != real_ids) {
      return absl::StrCat(id, " lists children ", absl::StrJoin(listed, ","),
                          " but has ", absl::StrJoin(real_ids, ","));
    }
  }
  // Subtree sizes, bottom-up over the real tree.
  std::vector<int64_t> size(count, 0);
  std::vector<Idx> order;
  for (Idx i = 0; i < count; ++i) {
    if (nodes_[i].alive) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](Idx a, Idx b) {
    return nodes_[a].m.depth() > nodes_[b].m.depth();
  });
  for (const Idx i : order) {
    size[i] += 1;
    const Membership& m = nodes_[i].m;
    if (m.SubtreeSize() != size[i]) {
      return absl::StrCat(nodes_[i].id, " counts a subtree of ",
                          m.SubtreeSize(), ", real ", size[i]);
    }
    const Idx p = ParentOf(i);
    if (p >= 0) size[p] += size[i];
  }
  return "";
}

std::string MembershipSim::Describe(const std::string& id) const {
  const Idx i = IndexOf(id);
  if (i < 0) return id + ": unknown";
  const Node& n = nodes_[i];
  const Membership& m = n.m;
  std::vector<std::string> kids;
  for (const auto& [cid, c] : m.children()) kids.push_back(cid);
  std::vector<std::string> candidates;
  for (const NodeRef& r : m.RejoinCandidates()) {
    candidates.push_back(r.node_id.empty() ? "@" + r.grpc_address : r.node_id);
  }
  return absl::StrCat(
      id, n.alive ? "" : " (dead)", ": ", MembershipStateName(m.state()),
      " term=", m.term(), " prio=", m.master_priority(),
      " parent=", m.parent() ? m.parent()->node_id : "-",
      " chain=", Ids(m.ancestors()), " children=", absl::StrJoin(kids, ","),
      " lease_to=", m.lease_expiry_ns(), " granted_to=", m.granted_until_ns(),
      " now=", now_ns_, " walk=",
      n.walk ? (n.walk->target() ? n.walk->target()->node_id : "exhausted")
             : "none",
      n.walk_is_move ? "(move)" : "",
      " candidates=", absl::StrJoin(candidates, ","));
}

int MembershipSim::MaxDepth() const {
  int max_depth = 0;
  for (const auto& [d, count] : DepthHistogram())
    max_depth = std::max(max_depth, d);
  return max_depth;
}

std::map<int, int> MembershipSim::DepthHistogram() const {
  std::map<int, int> histogram;
  for (Idx i = 0; i < static_cast<Idx>(nodes_.size()); ++i) {
    if (!nodes_[i].alive) continue;
    bool cycle = false;
    const std::vector<Idx> path = PathUp(i, &cycle);
    if (cycle || !AliveAt(path.back()) ||
        nodes_[path.back()].m.state() != MembershipState::kMaster) {
      continue;
    }
    ++histogram[static_cast<int>(path.size()) - 1];
  }
  return histogram;
}

double MembershipSim::MeanParentRttNs() const {
  double sum = 0;
  int count = 0;
  for (Idx i = 0; i < static_cast<Idx>(nodes_.size()); ++i) {
    const Node& n = nodes_[i];
    if (!n.alive || n.m.state() != MembershipState::kAttached) continue;
    const Idx p = IndexOf(n.m.parent()->node_id);
    if (!AliveAt(p)) continue;
    sum += static_cast<double>(RttAt(i, p));
    ++count;
  }
  return count == 0 ? 0 : sum / count;
}

}  // namespace clocksync
