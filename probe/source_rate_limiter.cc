// probe/source_rate_limiter.cc: per-host token buckets in a fixed 4-way
// table (source_rate_limiter.h).

#include "probe/source_rate_limiter.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace clocksync::probe {
namespace {

// The host part of a source address as 16 bytes (IPv4 mapped into IPv6),
// false for other families.
bool HostOf(const sockaddr_storage& from, std::array<uint8_t, 16>* host) {
  host->fill(0);
  if (from.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(from);
    (*host)[10] = 0xff;
    (*host)[11] = 0xff;
    std::memcpy(host->data() + 12, &v4.sin_addr, 4);
    return true;
  }
  if (from.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(from);
    std::memcpy(host->data(), &v6.sin6_addr, 16);
    return true;
  }
  return false;
}

uint64_t Fnv1a(const std::array<uint8_t, 16>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (const uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

}  // namespace

std::string SourceRateLimiter::Validate(const Options& o) {
  if (!(o.rate_per_s > 0)) return absl::StrCat("rate_per_s: must be > 0, got ", o.rate_per_s);
  if (!(o.burst_packets >= 1)) {
    return absl::StrCat("burst_packets: must be >= 1, got ", o.burst_packets);
  }
  if (o.hosts < 1 || o.hosts > (1u << 24)) {
    return absl::StrCat("hosts: must be 1..2^24, got ", o.hosts);
  }
  return "";
}

SourceRateLimiter::SourceRateLimiter(Options options)
    : options_(options),
      entries_((std::max<size_t>(options.hosts, 1) + kWays - 1) / kWays * kWays) {}

bool SourceRateLimiter::Admit(const sockaddr_storage& from, int64_t now_ns) {
  std::array<uint8_t, 16> host;
  if (!HostOf(from, &host)) return true;
  const size_t sets = entries_.size() / kWays;
  Entry* set = &entries_[(Fnv1a(host) % sets) * kWays];
  Entry* entry = nullptr;
  for (size_t w = 0; w < kWays; ++w) {
    if (set[w].used && set[w].host == host) {
      entry = &set[w];
      break;
    }
  }
  if (entry == nullptr) {
    // A new host takes the way idle the longest (or an unused one), with a
    // full bucket.
    entry = &set[0];
    for (size_t w = 0; w < kWays; ++w) {
      if (!set[w].used) {
        entry = &set[w];
        break;
      }
      if (set[w].last_ns < entry->last_ns) entry = &set[w];
    }
    entry->used = true;
    entry->host = host;
    entry->tokens = options_.burst_packets;
    entry->last_ns = now_ns;
  }
  const double elapsed_s = static_cast<double>(std::max<int64_t>(0, now_ns - entry->last_ns)) * 1e-9;
  entry->tokens = std::min(options_.burst_packets, entry->tokens + elapsed_s * options_.rate_per_s);
  entry->last_ns = std::max(entry->last_ns, now_ns);
  if (entry->tokens < 1) return false;
  entry->tokens -= 1;
  return true;
}

}  // namespace clocksync::probe
