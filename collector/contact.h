// collector/contact.h: contact strings, how a collector and the traced
// processes find each other and prove they belong to one run: one word
//
//   <token>@<address>      e.g. 3f9a0c1e...d4@10.0.0.7:4242
//                               3f9a0c1e...d4@[fd00::7]:4242
//                               3f9a0c1e...d4@unix:/tmp/collector.sock
//
// where <token> is the run's random session token (32 lowercase hex
// digits: 128 bits from getrandom) and <address> the collector's gRPC
// address ("host:port", "[v6]:port" or "unix:PATH", probe/address.h's
// rules). The collector prints its contact string; processes get it in
// CLOCKSYNC_COLLECTOR. Only streams that present the token are accepted.
//
// Dynamic spawning: a streaming process hands its children an attach
// contact string, the same with the attach group in the token part:
//
//   <group token>.<parent rank>.<group>@<address>   e.g. 5be0...91.0.1@10.0.0.7:4242
//
// for the group-th attach (0, 1, ...) of rank <parent rank>. The group
// token is derived (AttachGroupToken) from the parent's attach key, which
// the collector derives from the session token (RankAttachKey) and tells
// each rank in its Welcome: a child can join that group only, and learns
// no other token.
#ifndef CLOCKSYNC_COLLECTOR_CONTACT_H_
#define CLOCKSYNC_COLLECTOR_CONTACT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace clocksync::collector {

inline constexpr size_t kTokenHexDigits = 32;

struct Contact {
  std::string token;    // kTokenHexDigits lowercase hex digits
  std::string address;  // gRPC target: host:port, [v6]:port, unix:PATH
  // An attach contact string: group attach_group of rank attach_parent
  // (token is the group's token). -1: the collector's contact string.
  int32_t attach_parent = -1;
  uint32_t attach_group = 0;
};

// Parses a contact string. InvalidArgument names `field` and the value:
// "CLOCKSYNC_COLLECTOR: the token must be 32 lowercase hex digits, got
// \"xyz@127.0.0.1:4242\"".
absl::StatusOr<Contact> ParseContact(absl::string_view field,
                                     absl::string_view text);

// "<token>@<address>", or "<token>.<parent>.<group>@<address>".
std::string FormatContact(const Contact& contact);

// The attach key of `rank` in the run whose session token is
// `session_token` (both kTokenHexDigits hex digits): the two SipHash-2-4
// values, under the session token as the 128-bit key, of "clocksync
// attach key <rank> 0" and "... 1", in hex.
std::string RankAttachKey(absl::string_view session_token, int32_t rank);
// The token of attach group `group` of the rank whose attach key is
// `rank_key`: the same under rank_key, of "clocksync attach group
// <group> 0" and "... 1".
std::string AttachGroupToken(absl::string_view rank_key, uint32_t group);
// "r<parent>.g<group>": how messages and communicators name a group.
std::string AttachGroupName(int32_t parent_rank, uint32_t group);

// A fresh token: kTokenHexDigits hex digits of getrandom(2) output.
// Unavailable when the kernel gives no randomness.
absl::StatusOr<std::string> NewToken();

// Whether two tokens are equal, in time that depends only on their
// lengths (no early exit a remote peer could time).
bool TokensEqual(absl::string_view a, absl::string_view b);

// The host a contact string names for an endpoint listening on
// `listen_host`: `advertise` when set, else this machine's name for a
// wildcard ("", 0.0.0.0, ::, [::]), else `listen_host` itself.
std::string AdvertisedHost(absl::string_view advertise,
                           absl::string_view listen_host);
// Whether `host` is a wildcard listen address ("", 0.0.0.0, ::, [::]).
bool IsWildcardHost(absl::string_view host);

}  // namespace clocksync::collector

#endif  // CLOCKSYNC_COLLECTOR_CONTACT_H_
