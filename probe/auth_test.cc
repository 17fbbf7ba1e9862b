// SipHash-2-4 against the reference vectors (Aumasson and Bernstein's
// vectors.h: key bytes 00..0f, message bytes 00..len-1), and the key file.
#include "probe/auth.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace clocksync::probe {
namespace {

using ::testing::HasSubstr;

constexpr ProbeKey kReferenceKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

TEST(SipHashTest, ReferenceVectors) {
  const std::vector<std::pair<size_t, uint64_t>> vectors = {
      {0, 0x726fdb47dd0e0e31ULL}, {1, 0x74f839c593dc67fdULL},
      {2, 0x0d6c8009d9a94f5aULL}, {3, 0x85676696d7fb7e2dULL},
      {4, 0xcf2794e0277187b7ULL}, {5, 0x18765564cd99a68dULL},
      {6, 0xcbc9466e58fee3ceULL}, {7, 0xab0200f58b01d137ULL},
      {8, 0x93f5f5799a932462ULL}, {9, 0x9e0082df0ba9e4b0ULL},
      {15, 0xa129ca6149be45e5ULL}};
  uint8_t message[64];
  for (int i = 0; i < 64; ++i) message[i] = static_cast<uint8_t>(i);
  for (const auto& [length, want] : vectors) {
    EXPECT_EQ(SipHash24(kReferenceKey, message, length), want) << length;
  }
}

TEST(ProbeKeyTest, ParsesThirtyTwoHexDigits) {
  absl::StatusOr<ProbeKey> key =
      ParseProbeKey("  000102030405060708090a0B0c0d0e0f\n");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, kReferenceKey);
  EXPECT_THAT(std::string(ParseProbeKey("0011").status().message()),
              HasSubstr("32 hexadecimal digits"));
  EXPECT_THAT(
      std::string(
          ParseProbeKey("000102030405060708090a0b0c0d0e0g").status().message()),
      HasSubstr("character 32"));
}

std::string WriteKeyFile(const std::string& name, const std::string& text,
                         mode_t mode) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
  return path;
}

TEST(ProbeKeyTest, KeyFilesAreCheckedAndErrorsNameThem) {
  const std::string good =
      WriteKeyFile("good.key", "000102030405060708090a0b0c0d0e0f\n", 0600);
  absl::StatusOr<ProbeKeys> key = ReadProbeKeyFile(good);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->signing, kReferenceKey);
  EXPECT_FALSE(key->other.has_value());

  const std::string two = WriteKeyFile(
      "two.key",
      "# new key first, then the old one\n\n"
      "ffeeddccbbaa99887766554433221100\n000102030405060708090a0b0c0d0e0f\n",
      0600);
  absl::StatusOr<ProbeKeys> keys = ReadProbeKeyFile(two);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->signing, (ProbeKey{0x8899aabbccddeeffULL, 0x0011223344556677ULL}));
  EXPECT_EQ(keys->other, kReferenceKey);
  const std::string three = WriteKeyFile(
      "three.key",
      "000102030405060708090a0b0c0d0e0f\n000102030405060708090a0b0c0d0e0f\n"
      "000102030405060708090a0b0c0d0e0f\n",
      0600);
  EXPECT_THAT(std::string(ReadProbeKeyFile(three).status().message()),
              HasSubstr(three + ":3: a third key"));
  const std::string empty = WriteKeyFile("empty.key", "# nothing\n", 0600);
  EXPECT_THAT(std::string(ReadProbeKeyFile(empty).status().message()),
              HasSubstr("no key"));

  const std::string open =
      WriteKeyFile("open.key", "000102030405060708090a0b0c0d0e0f\n", 0644);
  EXPECT_THAT(std::string(ReadProbeKeyFile(open).status().message()),
              HasSubstr(open + ": readable by everyone"));
  const std::string short_key = WriteKeyFile("short.key", "abcd\n", 0600);
  EXPECT_THAT(std::string(ReadProbeKeyFile(short_key).status().message()),
              HasSubstr(short_key + ":1: a probe key is 32"));
  EXPECT_THAT(std::string(ReadProbeKeyFile("/nonexistent/k").status().message()),
              HasSubstr("/nonexistent/k"));
}

}  // namespace
}  // namespace clocksync::probe
