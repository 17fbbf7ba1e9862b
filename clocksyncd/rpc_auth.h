// clocksyncd/rpc_auth.h: authentication of the membership RPCs (Join,
// Heartbeat, Leave, Peer, Handover) with the tree's probe key
// (probe/auth.h).
//
// A caller that holds the key sends, as gRPC metadata,
//   clocksync-auth: v1 <unix time, ns> <SipHash-2-4 tag, 16 hex digits>
// where the tag covers a domain label, the method name, the time and the
// request's deterministic serialization. A node started with
// --probe_key_file refuses a membership call without a valid tag (under its
// signing key or the other key of a rotation) with UNAUTHENTICATED, and one
// whose time lies more than kRpcAuthMaxSkewNs from its own clock (a replay
// is possible within that window: a replayed Heartbeat or Join repeats what
// the node already did; docs/SECURITY.md). The read-only calls (GetStatus,
// WatchStatus, GetTopology) need no tag.
//
// Thread safety: pure functions.
#ifndef CLOCKSYNC_CLOCKSYNCD_RPC_AUTH_H_
#define CLOCKSYNC_CLOCKSYNCD_RPC_AUTH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "probe/auth.h"

namespace clocksync {

inline constexpr char kRpcAuthMetadataKey[] = "clocksync-auth";
// Largest difference between the caller's stamp and the callee's clock.
inline constexpr int64_t kRpcAuthMaxSkewNs = 300'000'000'000;

// The metadata value for `request` to `method` ("Join", "Heartbeat",
// "Leave") at unix_ns under `key`.
std::string RpcAuthValue(const probe::ProbeKey& key, absl::string_view method,
                         int64_t unix_ns, const google::protobuf::MessageLite& request);

// Adds the metadata to `context` (signing key of `keys`, the host's
// CLOCK_REALTIME).
void SignRpc(const probe::ProbeKeys& keys, absl::string_view method,
             const google::protobuf::MessageLite& request, grpc::ClientContext* context);

// OK when `value` (the metadata, empty if absent) authenticates `request`
// to `method` under one of `keys` at now_unix_ns; else UNAUTHENTICATED
// saying what is wrong (absent, malformed, stale, bad tag).
absl::Status VerifyRpcAuthValue(const probe::ProbeKeys& keys, absl::string_view method,
                                const google::protobuf::MessageLite& request,
                                absl::string_view value, int64_t now_unix_ns);

// VerifyRpcAuthValue on the call's metadata, at the host's CLOCK_REALTIME.
absl::Status VerifyRpc(const probe::ProbeKeys& keys, absl::string_view method,
                       const google::protobuf::MessageLite& request,
                       const grpc::ServerContext& context);

}  // namespace clocksync

#endif  // CLOCKSYNC_CLOCKSYNCD_RPC_AUTH_H_
