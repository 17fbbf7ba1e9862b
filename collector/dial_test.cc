// collector/dial_test.cc: the reverse start-up on loopback: a process's
// endpoint dialed by the collector gets its rank, the run's size and the
// collector's contact; a dial with another token is refused and the
// endpoint keeps waiting; bad dial lines are refused naming what is wrong;
// the wait ends on abort and on its timeout.

#include "collector/dial.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "collector/contact.h"
#include "gtest/gtest.h"

namespace clocksync::collector {
namespace {

TEST(DialTest, TheCollectorDialsEveryProcessInOrder) {
  std::vector<std::unique_ptr<ListenEndpoint>> endpoints;
  std::vector<Contact> contacts;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<ListenEndpoint>> e =
        ListenEndpoint::Open("listen", "127.0.0.1:0", "");
    ASSERT_TRUE(e.ok()) << e.status();
    absl::StatusOr<Contact> c = ParseContact("contact", (*e)->contact());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->address.rfind("127.0.0.1:", 0), 0u) << c->address;
    contacts.push_back(*c);
    endpoints.push_back(*std::move(e));
  }
  const Contact collector{*NewToken(), "127.0.0.1:4242"};
  std::vector<absl::StatusOr<DialOrder>> orders(3, absl::UnknownError(""));
  std::vector<std::thread> waiting;
  for (int i = 0; i < 3; ++i) {
    waiting.emplace_back([&, i] {
      orders[i] = endpoints[i]->WaitForDial(20'000'000'000, nullptr);
    });
  }
  // A dial with another token first: refused, the endpoint waits on.
  std::vector<Contact> wrong = {Contact{*NewToken(), contacts[0].address}};
  std::vector<absl::Status> refused =
      DialProcesses(wrong, collector, absl::Seconds(10));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused[0].message().find("token"), std::string::npos)
      << refused[0];
  const std::vector<absl::Status> dialed =
      DialProcesses(contacts, collector, absl::Seconds(10));
  for (std::thread& t : waiting) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(dialed[i].ok()) << dialed[i];
    ASSERT_TRUE(orders[i].ok()) << orders[i].status();
    EXPECT_EQ(orders[i]->rank, i);
    EXPECT_EQ(orders[i]->world_size, 3);
    EXPECT_EQ(FormatContact(orders[i]->collector), FormatContact(collector));
  }
}

TEST(DialTest, BadLinesAreRefusedNamingWhatIsWrong) {
  const std::string token = *NewToken();
  const Contact collector{*NewToken(), "127.0.0.1:4242"};
  const std::string good = FormatDialLine(token, DialOrder{1, 2, collector});
  absl::StatusOr<DialOrder> order =
      ParseDialLine(good.substr(0, good.size() - 1), token);
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(order->rank, 1);
  EXPECT_EQ(ParseDialLine("hello", token).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDialLine(good.substr(0, good.size() - 1), *NewToken())
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  const std::string out_of_range =
      FormatDialLine(token, DialOrder{2, 2, collector});
  absl::StatusOr<DialOrder> bad =
      ParseDialLine(out_of_range.substr(0, out_of_range.size() - 1), token);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("rank 2 of 2"), std::string::npos)
      << bad.status();
  EXPECT_FALSE(
      ListenEndpoint::Open("CLOCKSYNC_COLLECTOR_LISTEN", "nonsense", "").ok());
}

TEST(DialTest, TheWaitEndsOnAbortAndOnItsTimeout) {
  absl::StatusOr<std::unique_ptr<ListenEndpoint>> e =
      ListenEndpoint::Open("listen", "127.0.0.1:0", "");
  ASSERT_TRUE(e.ok()) << e.status();
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  absl::StatusOr<DialOrder> order = (*e)->WaitForDial(60'000'000'000, &abort);
  aborter.join();
  EXPECT_EQ(order.status().code(), absl::StatusCode::kCancelled);
  order = (*e)->WaitForDial(100'000'000, nullptr);
  EXPECT_EQ(order.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace clocksync::collector
