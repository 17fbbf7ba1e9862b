// collector/collector_service.cc: the Collector service's Stream handler and
// the collector's gRPC server (collector_service.h).

#include "collector/collector_service.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "collector/contact.h"
#include "collector/wire.h"

namespace clocksync::collector {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::StatusOr<std::string> ReadPem(const std::string& flag,
                                    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The call's deadline, at most kMaxAttachWaitS from now.
absl::Time CallDeadline(const grpc::ServerContext* context) {
  const absl::Time limit = absl::Now() + absl::Seconds(kMaxAttachWaitS);
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return limit;
  return std::min(limit, absl::FromChrono(deadline));
}

void ToProto(const AttachedGroup& group, AttachGroup* out) {
  out->set_parent_rank(group.parent_rank);
  out->set_group(group.group);
  for (int32_t child : group.children) out->add_children(child);
}

}  // namespace

CollectorService::CollectorService(Collection* collection,
                                   std::function<void(const std::string&)> log)
    : collection_(collection), log_(std::move(log)) {}

CollectorService::Registration::Registration(CollectorService* service,
                                             Open* open)
    : service_(service), open_(open) {
  std::lock_guard<std::mutex> lock(service_->streams_mutex_);
  service_->open_.push_back(open_);
}

CollectorService::Registration::~Registration() {
  std::unique_lock<std::mutex> lock(service_->streams_mutex_);
  service_->open_.remove(open_);
  service_->streams_changed_.wait(lock, [&] { return open_->users == 0; });
}

bool CollectorService::Write(Open* open, const CollectorMessage& message) {
  std::lock_guard<std::mutex> lock(open->write_mutex);
  return open->stream->Write(message);
}

void CollectorService::TellPeersLost(int32_t rank, const std::string& why) {
  std::vector<Open*> targets;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    for (Open* open : open_) {
      if (open->rank == rank) continue;
      ++open->users;
      targets.push_back(open);
    }
  }
  CollectorMessage message;
  message.mutable_peer_lost()->set_rank(rank);
  message.mutable_peer_lost()->set_why(why);
  // A stream that cannot take it is ending (its own Read says so).
  for (Open* open : targets) Write(open, message);
  std::lock_guard<std::mutex> lock(streams_mutex_);
  for (Open* open : targets) --open->users;
  streams_changed_.notify_all();
}

grpc::Status CollectorService::Stream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<CollectorMessage, ProcessMessage>* stream) {
  ProcessMessage message;
  if (!stream->Read(&message)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the stream ended before its Hello");
  }
  if (message.body_case() != ProcessMessage::kHello) {
    collection_->NoteMalformed();
    Log(absl::StrCat("refused a stream from ", context->peer(),
                     ": the first message is not a Hello"));
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message must be a Hello");
  }
  const bool child = message.hello().has_attach();
  AttachedGroup attached;
  absl::StatusOr<Collection::Rank*> joined =
      child ? collection_->JoinChild(
                  message.hello(), CallDeadline(context),
                  [context] { return context->IsCancelled(); }, &attached)
            : collection_->Join(message.hello());
  if (!joined.ok()) {
    Log(absl::StrCat("refused a stream from ", context->peer(), ": ",
                     joined.status().message()));
    return ToGrpc(joined.status());
  }
  Collection::Rank* rank = *joined;
  CollectorMessage reply;
  Welcome* welcome = reply.mutable_welcome();
  welcome->set_rank(rank->rank());
  welcome->set_world_size(collection_->world_size());
  welcome->set_max_unacked_bytes(collection_->max_unacked_bytes());
  welcome->set_attach_key(collection_->AttachKey(rank->rank()));
  welcome->set_ranks_in_run(collection_->ranks_in_run());
  if (child) ToProto(attached, welcome->mutable_attached());
  if (!stream->Write(reply)) {
    const std::string why = "the process went away before its Welcome";
    rank->Lost(why);
    TellPeersLost(rank->rank(), why);
    return grpc::Status(grpc::StatusCode::CANCELLED, "peer gone");
  }
  Open open;
  open.rank = rank->rank();
  open.stream = stream;
  const Registration registration(this, &open);
  // The ranks lost before this one joined.
  for (const RankStatus& other : collection_->Status()) {
    if (other.state != RankState::kLost || other.rank == open.rank) continue;
    reply.Clear();
    reply.mutable_peer_lost()->set_rank(other.rank);
    reply.mutable_peer_lost()->set_why(other.note);
    Write(&open, reply);
  }
  // A refused message: the rank is lost (the process falls back to its
  // local archive for what was not acknowledged).
  auto refuse = [&](const absl::Status& status) {
    collection_->NoteMalformed();
    const std::string why =
        absl::StrCat("refused a message: ", status.message());
    rank->Lost(why);
    Log(absl::StrCat("rank ", rank->rank(), " (", context->peer(), "): ", why));
    TellPeersLost(rank->rank(), why);
    return ToGrpc(status);
  };
  while (stream->Read(&message)) {
    switch (message.body_case()) {
      case ProcessMessage::kEvents: {
        absl::Status status = rank->AddEvents(message.events());
        if (!status.ok()) return refuse(status);
        reply.Clear();
        reply.mutable_ack()->set_batch(rank->last_batch());
        // An ack that cannot be sent: the process is gone; the next Read
        // says so.
        Write(&open, reply);
        break;
      }
      case ProcessMessage::kRecords: {
        absl::Status status = rank->AddRecords(message.records());
        if (!status.ok()) return refuse(status);
        break;
      }
      case ProcessMessage::kFinish: {
        absl::Status status = rank->Finish(message.finish());
        if (!status.ok()) return refuse(status);
        reply.Clear();
        reply.mutable_ack()->set_batch(rank->last_batch());
        reply.mutable_ack()->set_finished(true);
        Write(&open, reply);
        return grpc::Status::OK;
      }
      case ProcessMessage::kHello:
        return refuse(absl::InvalidArgumentError("a second Hello"));
      case ProcessMessage::BODY_NOT_SET:
        return refuse(absl::InvalidArgumentError("an empty message"));
    }
  }
  const std::string why =
      context->IsCancelled()
          ? "the stream was cancelled without Finish (process killed or "
            "connection lost)"
          : "the stream ended without Finish (process killed or connection "
            "lost)";
  rank->Lost(why);
  Log(absl::StrCat("rank ", rank->rank(), " (", context->peer(), "): ", why));
  TellPeersLost(rank->rank(), why);
  return grpc::Status(grpc::StatusCode::CANCELLED, why);
}

grpc::Status CollectorService::Attach(grpc::ServerContext* context,
                                      const AttachRequest* request,
                                      AttachReply* reply) {
  absl::Time deadline = CallDeadline(context);
  if (request->wait_ms() > 0) {
    deadline = std::min(deadline,
                        absl::Now() + absl::Milliseconds(request->wait_ms()));
  }
  absl::StatusOr<AttachedGroup> group = collection_->Attach(
      *request, deadline,
      [context] { return context->IsCancelled(); });
  const std::string name = AttachGroupName(request->group().parent_rank(),
                                           request->group().group());
  if (!group.ok()) {
    Log(absl::StrCat("attach group ", name, " (", context->peer(),
                     "): ", group.status().message()));
    return ToGrpc(group.status());
  }
  ToProto(*group, reply->mutable_group());
  reply->set_ranks_in_run(group->ranks_in_run);
  Log(absl::StrCat("attach group ", name, ": ranks ",
                   absl::StrJoin(group->children, ", "), " attached (",
                   group->ranks_in_run, " ranks in the run)"));
  return grpc::Status::OK;
}

void TuneMallocForCollector() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> BuildCollectorServer(
    const std::string& address, Collector::Service* service,
    const ServerTls* tls, int* selected_port) {
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (tls != nullptr) {
    absl::StatusOr<std::string> cert = ReadPem("--tls_cert", tls->cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--tls_key", tls->key_file);
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions options;
    options.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(options);
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, selected_port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // No silent sharing of the port with another collector.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *selected_port == 0) {
    if (server != nullptr) server->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot serve on ", address,
        ": bind failed (address in use, not permitted, or a bad TLS key; "
        "gRPC logged the cause)"));
  }
  return server;
}

}  // namespace clocksync::collector
