// clocksyncd/rpc_auth.cc: tags over membership requests (rpc_auth.h).

#include "clocksyncd/rpc_auth.h"

#include <time.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace clocksync {
namespace {

constexpr char kDomain[] = "clocksync membership rpc v1";

int64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string Deterministic(const google::protobuf::MessageLite& request) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  request.SerializeWithCachedSizes(&coded);
  coded.Trim();
  return bytes;
}

uint64_t Tag(const probe::ProbeKey& key, absl::string_view method, int64_t unix_ns,
             const std::string& request_bytes) {
  std::string data = absl::StrCat(kDomain, absl::string_view("\0", 1), method,
                                  absl::string_view("\0", 1));
  for (int i = 0; i < 8; ++i) {
    data.push_back(static_cast<char>(static_cast<uint64_t>(unix_ns) >> (8 * i)));
  }
  data += request_bytes;
  return probe::SipHash24(key, reinterpret_cast<const uint8_t*>(data.data()), data.size());
}

std::string Hex16(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[i] = kDigits[v & 0xf];
  return out;
}

}  // namespace

std::string RpcAuthValue(const probe::ProbeKey& key, absl::string_view method,
                         int64_t unix_ns, const google::protobuf::MessageLite& request) {
  request.ByteSizeLong();  // Caches the sizes SerializeWithCachedSizes needs.
  return absl::StrCat("v1 ", unix_ns, " ",
                      Hex16(Tag(key, method, unix_ns, Deterministic(request))));
}

void SignRpc(const probe::ProbeKeys& keys, absl::string_view method,
             const google::protobuf::MessageLite& request, grpc::ClientContext* context) {
  context->AddMetadata(kRpcAuthMetadataKey,
                       RpcAuthValue(keys.signing, method, RealtimeNs(), request));
}

absl::Status VerifyRpcAuthValue(const probe::ProbeKeys& keys, absl::string_view method,
                                const google::protobuf::MessageLite& request,
                                absl::string_view value, int64_t now_unix_ns) {
  if (value.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, ": this node requires the tree's key (metadata ",
                     kRpcAuthMetadataKey, " missing: start the caller with the "
                     "same --probe_key_file)"));
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(value, ' ');
  int64_t unix_ns = 0;
  uint64_t tag = 0;
  if (parts.size() != 3 || parts[0] != "v1" || !absl::SimpleAtoi(parts[1], &unix_ns) ||
      parts[2].size() != 16 || !absl::SimpleHexAtoi(parts[2], &tag)) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, ": malformed ", kRpcAuthMetadataKey,
                     " metadata (want \"v1 <unix ns> <16 hex digits>\")"));
  }
  const int64_t skew_ns = unix_ns > now_unix_ns ? unix_ns - now_unix_ns : now_unix_ns - unix_ns;
  if (skew_ns > kRpcAuthMaxSkewNs) {
    return absl::UnauthenticatedError(absl::StrCat(
        method, ": request stamped ", (unix_ns - now_unix_ns) / 1'000'000,
        " ms from this node's clock (at most ", kRpcAuthMaxSkewNs / 1'000'000'000,
        " s): a replay, or CLOCK_REALTIME far off on one side"));
  }
  request.ByteSizeLong();
  const std::string bytes = Deterministic(request);
  if (Tag(keys.signing, method, unix_ns, bytes) == tag ||
      (keys.other && Tag(*keys.other, method, unix_ns, bytes) == tag)) {
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      absl::StrCat(method, ": the tag does not match this node's key (a "
                   "different --probe_key_file, or a forged request)"));
}

absl::Status VerifyRpc(const probe::ProbeKeys& keys, absl::string_view method,
                       const google::protobuf::MessageLite& request,
                       const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kRpcAuthMetadataKey);
  const absl::string_view value =
      it == metadata.end() ? absl::string_view()
                           : absl::string_view(it->second.data(), it->second.size());
  return VerifyRpcAuthValue(keys, method, request, value, RealtimeNs());
}

}  // namespace clocksync
