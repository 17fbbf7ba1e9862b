// trace/packed_events.cc: the packed event encoding (packed_events.h).

#include "trace/packed_events.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace clocksync::trace {
namespace {

constexpr uint8_t kLastEventKind = static_cast<uint8_t>(EventKind::kCollectiveEnd);
constexpr uint8_t kLastCollectiveKind = static_cast<uint8_t>(CollectiveKind::kOther);
constexpr uint8_t kHasBytes = 1 << 4;
constexpr uint8_t kHasRegion = 1 << 5;
constexpr uint8_t kHasMessage = 1 << 6;
constexpr uint8_t kHasCollective = 1 << 7;

inline char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

void Put32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

uint32_t Get32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}

// Reads a varint of at most `bits` bits from [*p, end); false when it is
// cut, too long, or carries bits beyond `bits`.
inline bool GetVarint(const char** p, const char* end, int bits, uint64_t* v) {
  uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p == end) return false;
    const uint64_t byte = static_cast<unsigned char>(*(*p)++);
    if (shift == 63 && (byte & 0x7e) != 0) return false;  // beyond 64 bits
    value |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      if (bits < 64 && (value >> bits) != 0) return false;
      *v = value;
      return true;
    }
  }
  return false;
}

inline uint32_t ZigZag(int32_t v) {
  return (static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31);
}
inline int32_t UnZigZag(uint32_t v) {
  return static_cast<int32_t>((v >> 1) ^ (~(v & 1) + 1));
}

}  // namespace

size_t PackEventsTo(absl::Span<const Event> events, char* out) {
  char* p = out + kPackedChunkHeaderBytes;
  uint64_t previous = 0;
  for (const Event& e : events) {
    uint8_t head = static_cast<uint8_t>(e.kind);
    if (e.bytes != 0) head |= kHasBytes;
    if (e.region != 0) head |= kHasRegion;
    if (e.peer != -1 || e.tag != 0 || e.comm != 0) head |= kHasMessage;
    if (e.collective != CollectiveKind::kOther) head |= kHasCollective;
    *p++ = static_cast<char>(head);
    p = PutVarint(p, e.stamp - previous);
    previous = e.stamp;
    if (head & kHasBytes) p = PutVarint(p, e.bytes);
    if (head & kHasRegion) p = PutVarint(p, e.region);
    if (head & kHasMessage) {
      p = PutVarint(p, ZigZag(e.peer));
      p = PutVarint(p, e.tag);
      p = PutVarint(p, e.comm);
    }
    if (head & kHasCollective) *p++ = static_cast<char>(e.collective);
  }
  const size_t size = static_cast<size_t>(p - out);
  Put32(out, static_cast<uint32_t>(size - kPackedChunkHeaderBytes));
  Put32(out + 4, static_cast<uint32_t>(events.size()));
  return size;
}

void PackEvents(absl::Span<const Event> events, std::string* out) {
  const size_t start = out->size();
  out->resize(start + PackedBound(events.size()));
  out->resize(start + PackEventsTo(events, out->data() + start));
}

absl::Status UnpackChunk(absl::string_view data, PackedChunkInfo* info,
                         std::vector<Event>* out) {
  if (data.size() < kPackedChunkHeaderBytes) {
    return absl::OutOfRangeError(absl::StrCat(
        "chunk header of ", kPackedChunkHeaderBytes, " bytes, ", data.size(),
        " present"));
  }
  const uint32_t payload = Get32(data.data());
  const uint32_t count = Get32(data.data() + 4);
  if (data.size() - kPackedChunkHeaderBytes < payload) {
    return absl::OutOfRangeError(absl::StrCat(
        "chunk of ", kPackedChunkHeaderBytes + uint64_t{payload}, " bytes, ",
        data.size(), " present"));
  }
  // Every record takes at least 2 bytes: a count beyond that is a lie
  // (and must not size the output).
  if (count > payload / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk header: ", count, " events cannot fit in ", payload, " bytes"));
  }
  const char* p = data.data() + kPackedChunkHeaderBytes;
  const char* const end = p + payload;
  const size_t first_out = out != nullptr ? out->size() : 0;
  // Geometric growth: a reader appends chunk after chunk to one vector.
  if (out != nullptr && out->capacity() < first_out + count) {
    out->reserve(std::max(first_out + count, 2 * out->capacity()));
  }
  uint64_t stamp = 0;
  uint64_t first_stamp = 0;
  for (uint32_t i = 0; i < count; ++i) {
    auto bad = [&](absl::string_view what) {
      if (out != nullptr) out->resize(first_out);
      return absl::InvalidArgumentError(absl::StrCat("event ", i, ": ", what));
    };
    if (p == end) return bad("cut (the chunk's bytes end)");
    const uint8_t head = static_cast<uint8_t>(*p++);
    Event e;
    const uint8_t kind = head & 0x0f;
    if (kind > kLastEventKind) {
      return bad(absl::StrCat("kind ", kind, " is not an event kind"));
    }
    e.kind = static_cast<EventKind>(kind);
    uint64_t delta = 0;
    if (!GetVarint(&p, end, 64, &delta)) return bad("malformed stamp");
    if (i > 0 && delta == 0) {
      return bad(absl::StrCat("stamp ", stamp,
                              " is not above the previous stamp ", stamp));
    }
    if (delta > ~uint64_t{0} - stamp) return bad("stamp beyond 64 bits");
    stamp += delta;
    e.stamp = stamp;
    if (i == 0) first_stamp = stamp;
    uint64_t v = 0;
    if (head & kHasBytes) {
      if (!GetVarint(&p, end, 64, &v)) return bad("malformed bytes");
      e.bytes = v;
    }
    if (head & kHasRegion) {
      if (!GetVarint(&p, end, 32, &v)) return bad("malformed region");
      e.region = static_cast<uint32_t>(v);
    }
    if (head & kHasMessage) {
      if (!GetVarint(&p, end, 32, &v)) return bad("malformed peer");
      e.peer = UnZigZag(static_cast<uint32_t>(v));
      if (!GetVarint(&p, end, 32, &v)) return bad("malformed tag");
      e.tag = static_cast<uint32_t>(v);
      if (!GetVarint(&p, end, 32, &v)) return bad("malformed comm");
      e.comm = static_cast<uint32_t>(v);
    }
    if (head & kHasCollective) {
      if (p == end) return bad("cut collective");
      const uint8_t collective = static_cast<uint8_t>(*p++);
      if (collective > kLastCollectiveKind) {
        return bad(absl::StrCat("collective ", collective,
                                " is not a collective kind"));
      }
      e.collective = static_cast<CollectiveKind>(collective);
    }
    if (out != nullptr) out->push_back(e);
  }
  if (p != end) {
    if (out != nullptr) out->resize(first_out);
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk header: ", count, " events end ", end - p,
        " bytes before the payload's ", payload));
  }
  if (info != nullptr) {
    info->chunk_bytes = kPackedChunkHeaderBytes + size_t{payload};
    info->events = count;
    info->first_stamp = first_stamp;
    info->last_stamp = stamp;
  }
  return absl::OkStatus();
}

}  // namespace clocksync::trace
