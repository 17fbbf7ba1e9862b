// collector/contact_test.cc: contact strings parsed, refused with the value
// named, formatted back; tokens fresh and compared;
// the host a contact string advertises.

#include "collector/contact.h"

#include <unistd.h>

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace clocksync::collector {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

TEST(ContactTest, ParsesHostPortV6AndUnix) {
  for (const char* address :
       {"127.0.0.1:4242", "[::1]:4242", "collector.example:1", "unix:/tmp/c.sock"}) {
    const std::string text = std::string(kToken) + "@" + address;
    absl::StatusOr<Contact> contact = ParseContact("CLOCKSYNC_COLLECTOR", text);
    ASSERT_TRUE(contact.ok()) << contact.status();
    EXPECT_EQ(contact->token, kToken);
    EXPECT_EQ(contact->address, address);
    EXPECT_EQ(FormatContact(*contact), text);
  }
}

TEST(ContactTest, RefusesNamingFieldAndValue) {
  const std::string good = std::string(kToken) + "@";
  for (const std::string& bad :
       {std::string("127.0.0.1:4242"),                 // no token
        std::string("abc@127.0.0.1:4242"),             // short token
        std::string(kToken).substr(0, 31) + "G@127.0.0.1:1",  // not hex
        std::string("0123456789ABCDEF0123456789ABCDEF@127.0.0.1:1"),  // upper
        good,                                          // no address
        good + "127.0.0.1",                            // no port
        good + "127.0.0.1:0",                          // port 0
        good + "127.0.0.1:70000",                      // port too big
        good + "unix:"}) {                             // empty path
    absl::StatusOr<Contact> contact = ParseContact("CLOCKSYNC_COLLECTOR", bad);
    ASSERT_FALSE(contact.ok()) << bad;
    EXPECT_EQ(contact.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(contact.status().message());
    EXPECT_NE(message.find("CLOCKSYNC_COLLECTOR"), std::string::npos) << message;
    EXPECT_NE(message.find("\"" + bad + "\""), std::string::npos) << message;
  }
}

TEST(ContactTest, TokensAreFreshHex) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::string> token = NewToken();
    ASSERT_TRUE(token.ok()) << token.status();
    ASSERT_EQ(token->size(), kTokenHexDigits);
    EXPECT_TRUE(ParseContact("t", *token + "@127.0.0.1:1").ok()) << *token;
    EXPECT_TRUE(seen.insert(*token).second) << "repeated token " << *token;
  }
}

TEST(ContactTest, TokensEqual) {
  EXPECT_TRUE(TokensEqual(kToken, kToken));
  std::string other = kToken;
  other.back() = '0';
  EXPECT_FALSE(TokensEqual(kToken, other));
  EXPECT_FALSE(TokensEqual(kToken, ""));
  EXPECT_FALSE(TokensEqual("", kToken));
  EXPECT_TRUE(TokensEqual("", ""));
}

TEST(ContactTest, AdvertisedHost) {
  EXPECT_EQ(AdvertisedHost("node7", "0.0.0.0"), "node7");
  EXPECT_EQ(AdvertisedHost("", "10.0.0.5"), "10.0.0.5");
  EXPECT_EQ(AdvertisedHost("", "[::1]"), "[::1]");
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  for (const char* wildcard : {"", "0.0.0.0", "::", "[::]"}) {
    EXPECT_TRUE(IsWildcardHost(wildcard)) << wildcard;
    EXPECT_EQ(AdvertisedHost("", wildcard), name) << wildcard;
  }
  EXPECT_FALSE(IsWildcardHost("127.0.0.1"));
}

}  // namespace
}  // namespace clocksync::collector
