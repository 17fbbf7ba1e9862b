// collector/attach_test.cc: dynamic spawning against an in-process
// collector: a parent's children join with its attach contact string and
// get the ranks after the run's when the parent attaches them (recursively:
// a child attaches its own); their communicators are accepted and reach
// the run's archive; a wrong token is refused; a child that never connects
// fails the group with an error naming its pid (the others refused); a
// parent that ends before attaching refuses its waiting children; a child
// lost after the attach is told to the others (PeerLost); a child's later
// tracing phase continues its rank under its group's token.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "collector/collection.h"
#include "collector/collector_service.h"
#include "collector/contact.h"
#include "collector/run_archive.h"
#include "collector/streaming_sink.h"
#include "grpcpp/grpcpp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/otf2_reader.h"

namespace clocksync::collector {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string templ = absl::StrCat(
      std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp",
      "/attach_test.XXXXXX");
  EXPECT_NE(mkdtemp(templ.data()), nullptr);
  return templ;
}

// A few events of one thread: enter, send to `peer` of `comm`, leave.
std::vector<trace::Event> Events(uint64_t first, int32_t peer, uint32_t comm) {
  std::vector<trace::Event> events(3);
  events[0].stamp = first;
  events[0].kind = trace::EventKind::kEnter;
  events[1].stamp = first + 1;
  events[1].kind = trace::EventKind::kSend;
  events[1].peer = peer;
  events[1].comm = comm;
  events[1].tag = 1;
  events[2].stamp = first + 2;
  events[2].kind = trace::EventKind::kLeave;
  return events;
}

class AttachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    raw_dir_ = dir_ + "/raw";
    ASSERT_EQ(mkdir(raw_dir_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((dir_ + "/local").c_str(), 0755), 0);
    token_ = *NewToken();
    CollectionOptions options;
    options.token = token_;
    options.raw_dir = raw_dir_;
    options.world_size = 1;
    collection_ = std::make_unique<Collection>(options);
    service_ = std::make_unique<CollectorService>(collection_.get(), nullptr);
    absl::StatusOr<std::unique_ptr<grpc::Server>> server =
        BuildCollectorServer("127.0.0.1:0", service_.get(), nullptr, &port_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    collection_->Stop();
    if (server_ != nullptr) server_->Shutdown();
  }

  std::string Address() const { return absl::StrCat("127.0.0.1:", port_); }

  // A process connecting with `contact` (the collector's, or an attach
  // contact string), pid `pid`.
  absl::StatusOr<std::unique_ptr<StreamingSink>> Connect(
      const std::string& contact, int64_t pid, int64_t timeout_ns = 20'000'000'000) {
    absl::StatusOr<Contact> parsed = ParseContact("test", contact);
    if (!parsed.ok()) return parsed.status();
    StreamingOptions options;
    options.contact = *parsed;
    options.info.process_name = "app";
    options.info.pid = pid;
    options.info.hostname = "here";
    options.info.origin_ns = 1000;
    options.fallback_trace_dir = dir_ + "/local";
    options.fallback_name = absl::StrCat("app", pid);
    options.timeout_ns = timeout_ns;
    options.warn = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      warnings_.push_back(line);
    };
    return StreamingSink::Connect(options);
  }

  // Children connecting with `contact` in threads (pids 100 + i).
  struct Children {
    std::vector<std::thread> threads;
    // Reserved: the threads write their elements in place.
    std::deque<absl::StatusOr<std::unique_ptr<StreamingSink>>> sinks;
  };
  void StartChildren(Children* children, const std::string& contact, int n,
                     int64_t first_pid = 100) {
    for (int i = 0; i < n; ++i) {
      children->sinks.emplace_back(absl::UnknownError("not run"));
    }
    for (int i = 0; i < n; ++i) {
      children->threads.emplace_back([this, children, contact, i, first_pid] {
        children->sinks[i] = Connect(contact, first_pid + i);
      });
    }
  }

  std::string dir_, raw_dir_, token_;
  int port_ = 0;
  std::unique_ptr<Collection> collection_;
  std::unique_ptr<CollectorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mutex_;
  std::vector<std::string> warnings_;
};

TEST(AttachContactTest, TokensDeriveAndContactsRoundTrip) {
  const std::string session(32, 'a');
  const std::string key0 = RankAttachKey(session, 0);
  EXPECT_EQ(key0.size(), kTokenHexDigits);
  EXPECT_EQ(key0, RankAttachKey(session, 0));
  EXPECT_NE(key0, RankAttachKey(session, 1));
  EXPECT_NE(key0, RankAttachKey(std::string(32, 'b'), 0));
  EXPECT_NE(AttachGroupToken(key0, 0), AttachGroupToken(key0, 1));
  EXPECT_NE(AttachGroupToken(key0, 0), key0);
  Contact contact{AttachGroupToken(key0, 2), "127.0.0.1:4242", 7, 2};
  const std::string text = FormatContact(contact);
  EXPECT_EQ(text, absl::StrCat(contact.token, ".7.2@127.0.0.1:4242"));
  absl::StatusOr<Contact> back = ParseContact("X", text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->token, contact.token);
  EXPECT_EQ(back->attach_parent, 7);
  EXPECT_EQ(back->attach_group, 2u);
  EXPECT_EQ(ParseContact("X", session + "@h:1")->attach_parent, -1);
  for (const std::string bad : {".7@h:1", ".7.2.1@h:1", ".-1.0@h:1", ".a.0@h:1",
                                ".07.0@h:1", "..@h:1", ".1.@h:1"}) {
    absl::StatusOr<Contact> refused = ParseContact("CLOCKSYNC_COLLECTOR", session + bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("CLOCKSYNC_COLLECTOR"));
  }
}

TEST_F(AttachTest, ChildrenGetRanksAfterTheRunsRecursively) {
  absl::StatusOr<std::unique_ptr<StreamingSink>> parent =
      Connect(FormatContact(Contact{token_, Address()}), 10);
  ASSERT_TRUE(parent.ok()) << parent.status();
  ASSERT_EQ((*parent)->rank(), 0);
  EXPECT_EQ((*parent)->ranks_in_run(), 1);
  const std::string contact = (*parent)->AttachContact(0, Address());
  EXPECT_TRUE(absl::StrContains(contact, ".0.0@")) << contact;
  Children children;
  StartChildren(&children, contact, 3);
  // pids in an order of their own: the ranks follow it.
  absl::StatusOr<AttachGroupInfo> group =
      (*parent)->Attach(0, 3, {102, 100, 101}, 20'000'000'000, nullptr);
  for (auto& t : children.threads) t.join();
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->parent_rank, 0);
  EXPECT_EQ(group->children, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(group->ranks_in_run, 4);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(children.sinks[i].ok()) << children.sinks[i].status();
    StreamingSink& child = **children.sinks[i];
    EXPECT_EQ(child.rank(), i == 2 ? 1 : i + 2);  // pid 102 first
    EXPECT_EQ(child.world_size(), 1);
    ASSERT_TRUE(child.attached().has_value());
    EXPECT_EQ(child.attached()->parent_rank, 0);
    EXPECT_EQ(child.attached()->children, group->children);
  }
  // The same group again: refused.
  absl::StatusOr<AttachGroupInfo> again =
      (*parent)->Attach(0, 1, {}, 1'000'000'000, nullptr);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.status().message()),
              HasSubstr("attach group r0.g0 was attached before"));

  // Rank 1 (pid 102) attaches a child of its own: rank 4.
  StreamingSink& rank1 = **children.sinks[2];
  Children grandchildren;
  StartChildren(&grandchildren, rank1.AttachContact(0, Address()), 1, 200);
  absl::StatusOr<AttachGroupInfo> sub = rank1.Attach(0, 1, {}, 20'000'000'000, nullptr);
  grandchildren.threads[0].join();
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ(sub->children, (std::vector<int32_t>{4}));
  ASSERT_TRUE(grandchildren.sinks[0].ok()) << grandchildren.sinks[0].status();
  StreamingSink& rank4 = **grandchildren.sinks[0];
  EXPECT_EQ(rank4.rank(), 4);
  EXPECT_EQ(rank4.attached()->parent_rank, 1);

  // Everyone streams a send in the group's communicators (ranks beyond the
  // world are accepted) and finishes.
  const std::vector<trace::Region> regions = {{0, "work"}};
  const std::vector<trace::Communicator> family = {
      {0, "world", {0}}, {1, "attach r0.g0 children", {1, 2, 3}},
      {2, "attach r0.g0", {0, 1, 2, 3}}};
  std::vector<StreamingSink*> all = {parent->get()};
  for (auto& s : children.sinks) all.push_back(s->get());
  all.push_back(&rank4);
  for (StreamingSink* sink : all) {
    std::vector<trace::Communicator> comms = family;
    if (sink == &rank4 || sink == &rank1) {
      comms.push_back({3, "attach r1.g0", {1, 4}});
    }
    ASSERT_TRUE(sink->AppendEvents(0, "main", Events(10, 0, 2)).ok());
    ASSERT_TRUE(sink->Finish(regions, comms, {}, {}, std::nullopt).ok())
        << sink->rank();
  }
  ASSERT_TRUE(collection_->WaitUntilDone(absl::Seconds(10)));
  std::vector<RankStatus> status = collection_->Status();
  ASSERT_EQ(status.size(), 5u);
  EXPECT_EQ(status[0].parent_rank, -1);
  EXPECT_EQ(status[3].parent_rank, 0);
  EXPECT_EQ(status[4].parent_rank, 1);
  EXPECT_EQ(collection_->Stats().attach_groups, 2u);

  absl::StatusOr<CollectedRun> run =
      WriteCollectedRun(status, collection_->ranks_in_run(),
                        dir_ + "/run.otf2", raw_dir_, RunArchiveOptions());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->every_rank_finished) << run->summary;
  EXPECT_THAT(run->summary, HasSubstr("attached by rank 1 (group r1.g0)"));
  EXPECT_THAT(run->summary, HasSubstr(": 5 of 5 ranks, 15 events"));
}

TEST_F(AttachTest, WrongTokensAreRefused) {
  absl::StatusOr<std::unique_ptr<StreamingSink>> parent =
      Connect(FormatContact(Contact{token_, Address()}), 10);
  ASSERT_TRUE(parent.ok()) << parent.status();
  // A child with rank 0's group 1 token presenting it for group 0; one
  // with the session token itself.
  for (const std::string& token :
       {AttachGroupToken(RankAttachKey(token_, 0), 1), token_}) {
    absl::StatusOr<std::unique_ptr<StreamingSink>> child =
        Connect(FormatContact(Contact{token, Address(), 0, 0}), 100);
    ASSERT_FALSE(child.ok());
    EXPECT_EQ(child.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(child.status().message()),
                HasSubstr("not the token of attach group r0.g0"));
  }
  // The parent's side: an Attach with another group's token.
  AttachRequest request;
  request.set_token(AttachGroupToken(RankAttachKey(token_, 0), 1));
  request.mutable_group()->set_parent_rank(0);
  request.mutable_group()->set_group(0);
  request.set_children(1);
  absl::StatusOr<AttachedGroup> group =
      collection_->Attach(request, absl::Now() + absl::Seconds(1), nullptr);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(collection_->Stats().refused_token, 3u);
  // Bad counts name the field.
  request.set_token(AttachGroupToken(RankAttachKey(token_, 0), 0));
  request.add_pids(5);
  request.add_pids(6);
  group = collection_->Attach(request, absl::Now() + absl::Seconds(1), nullptr);
  ASSERT_FALSE(group.ok());
  EXPECT_THAT(std::string(group.status().message()),
              HasSubstr("attach.pids: 2 pids for 1 children"));
}

TEST_F(AttachTest, AChildThatNeverConnectsFailsTheGroupNamingIt) {
  absl::StatusOr<std::unique_ptr<StreamingSink>> parent =
      Connect(FormatContact(Contact{token_, Address()}), 10);
  ASSERT_TRUE(parent.ok()) << parent.status();
  Children children;
  StartChildren(&children, (*parent)->AttachContact(0, Address()), 1);
  // pid 100 comes, pid 4242 never does.
  absl::StatusOr<AttachGroupInfo> group =
      (*parent)->Attach(0, 2, {100, 4242}, 700'000'000, nullptr);
  children.threads[0].join();
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded)
      << group.status();
  EXPECT_THAT(std::string(group.status().message()),
              HasSubstr("attach group r0.g0: 1 of 2 children never connected "
                        "within "));
  EXPECT_THAT(std::string(group.status().message()), HasSubstr("ms: pid 4242"));
  // The child that came is refused with the same reason.
  ASSERT_FALSE(children.sinks[0].ok());
  EXPECT_EQ(children.sinks[0].status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(children.sinks[0].status().message()),
              HasSubstr("pid 4242"));
  // Nothing of it in the run: rank 0 alone, the next group works.
  EXPECT_EQ(collection_->ranks_in_run(), 1);
  Children next;
  StartChildren(&next, (*parent)->AttachContact(1, Address()), 1, 300);
  absl::StatusOr<AttachGroupInfo> second =
      (*parent)->Attach(1, 1, {}, 20'000'000'000, nullptr);
  next.threads[0].join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->children, (std::vector<int32_t>{1}));
}

TEST_F(AttachTest, AChildWaitsLongerThanItsParentsLaterAttach) {
  // The child says Hello first and its parent's Attach comes 1.2 s later,
  // each with a 2-s timeout: the child waits twice its timeout for the
  // Welcome, so the Attach decides (and names the child that never came)
  // rather than the child leaving first ("2 of 2 never connected").
  absl::StatusOr<std::unique_ptr<StreamingSink>> parent =
      Connect(FormatContact(Contact{token_, Address()}), 10);
  ASSERT_TRUE(parent.ok()) << parent.status();
  const std::string contact = (*parent)->AttachContact(0, Address());
  absl::StatusOr<std::unique_ptr<StreamingSink>> child =
      absl::UnknownError("not run");
  std::thread child_thread(
      [&] { child = Connect(contact, 100, 2'000'000'000); });
  absl::SleepFor(absl::Milliseconds(1200));
  absl::StatusOr<AttachGroupInfo> group =
      (*parent)->Attach(0, 2, {100, 4242}, 2'000'000'000, nullptr);
  child_thread.join();
  ASSERT_FALSE(group.ok());
  EXPECT_THAT(std::string(group.status().message()),
              HasSubstr("1 of 2 children never connected within "));
  EXPECT_THAT(std::string(group.status().message()), HasSubstr("ms: pid 4242"));
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kFailedPrecondition)
      << child.status();
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("pid 4242"));
}

TEST_F(AttachTest, AParentEndingFirstRefusesItsWaitingChildren) {
  absl::StatusOr<std::unique_ptr<StreamingSink>> parent =
      Connect(FormatContact(Contact{token_, Address()}), 10);
  ASSERT_TRUE(parent.ok()) << parent.status();
  Children children;
  StartChildren(&children, (*parent)->AttachContact(0, Address()), 1);
  // Most likely the child waits at the collector by now; if not, it is
  // refused at its Hello for the same reason.
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE((*parent)->Finish({}, {{0, "world", {0}}}, {}, {}, std::nullopt).ok());
  children.threads[0].join();
  ASSERT_FALSE(children.sinks[0].ok());
  EXPECT_EQ(children.sinks[0].status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(children.sinks[0].status().message()),
              HasSubstr("rank 0"));
  EXPECT_TRUE(collection_->WaitUntilDone(absl::Seconds(5)));
}

TEST_F(AttachTest, AChildLostAfterTheAttachIsToldToTheOthers) {
  absl::StatusOr<std::unique_ptr<StreamingSink>> parent =
      Connect(FormatContact(Contact{token_, Address()}), 10);
  ASSERT_TRUE(parent.ok()) << parent.status();
  Children children;
  StartChildren(&children, (*parent)->AttachContact(0, Address()), 2);
  absl::StatusOr<AttachGroupInfo> group =
      (*parent)->Attach(0, 2, {100, 101}, 20'000'000'000, nullptr);
  for (auto& t : children.threads) t.join();
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE(children.sinks[0].ok() && children.sinks[1].ok());
  // Rank 1 (pid 100) goes away without Finish (as if killed).
  children.sinks[0]->reset();
  std::vector<int32_t> lost;
  for (int i = 0; i < 100 && lost.empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    lost = (*parent)->lost_peers();
  }
  EXPECT_EQ(lost, (std::vector<int32_t>{1}));
  EXPECT_EQ((*children.sinks[1])->lost_peers(), (std::vector<int32_t>{1}));
  std::vector<RankStatus> status = collection_->Status();
  ASSERT_EQ(status.size(), 3u);
  EXPECT_EQ(status[1].state, RankState::kLost);
}

TEST_F(AttachTest, AChildsLaterPhaseContinuesItsRankWithItsGroupsToken) {
  absl::StatusOr<std::unique_ptr<StreamingSink>> parent =
      Connect(FormatContact(Contact{token_, Address()}), 10);
  ASSERT_TRUE(parent.ok()) << parent.status();
  const std::string contact = (*parent)->AttachContact(0, Address());
  Children children;
  StartChildren(&children, contact, 1);
  ASSERT_TRUE((*parent)->Attach(0, 1, {}, 20'000'000'000, nullptr).ok());
  children.threads[0].join();
  ASSERT_TRUE(children.sinks[0].ok()) << children.sinks[0].status();
  StreamingSink& child = **children.sinks[0];
  child.set_more_phases(true);
  ASSERT_TRUE(child.Finish({}, {}, {}, {}, std::nullopt).ok());
  EXPECT_EQ(collection_->Status()[1].state, RankState::kBetweenPhases);
  // Phase 1 with the same contact string and its rank.
  StreamingOptions options;
  options.contact = *ParseContact("test", contact);
  options.requested_rank = 1;
  options.phase = 1;
  options.info.process_name = "app";
  options.info.pid = 100;
  options.info.hostname = "here";
  options.info.origin_ns = 1000;
  options.fallback_trace_dir = dir_ + "/local";
  options.fallback_name = "phase";
  options.timeout_ns = 20'000'000'000;
  absl::StatusOr<std::unique_ptr<StreamingSink>> phase1 =
      StreamingSink::Connect(options);
  ASSERT_TRUE(phase1.ok()) << phase1.status();
  EXPECT_EQ((*phase1)->rank(), 1);
  ASSERT_TRUE((*phase1)->attached().has_value());
  EXPECT_EQ((*phase1)->attached()->children, (std::vector<int32_t>{1}));
  // Another rank cannot continue under this group's token.
  options.requested_rank = 0;
  absl::StatusOr<std::unique_ptr<StreamingSink>> other =
      StreamingSink::Connect(options);
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("rank 0 is not a child of attach group r0.g0"));
  ASSERT_TRUE((*phase1)->Finish({}, {}, {}, {}, std::nullopt).ok());
  ASSERT_TRUE((*parent)->Finish({}, {}, {}, {}, std::nullopt).ok());
  ASSERT_TRUE(collection_->WaitUntilDone(absl::Seconds(5)));
  EXPECT_EQ(collection_->Status()[1].phase, 1u);
}

}  // namespace
}  // namespace clocksync::collector
