/*
 * shm/shm_layout.h: the layout of clocksyncd's shared-memory segment, the
 * one definition that the daemon (writer, shm/shm_publisher.h) and the
 * readers (shm/segment_reader.h, under client/clock.h, client/clocksync.h
 * and the tracer) all use.
 *
 * The segment is a small file (default CLOCKSYNC_DEFAULT_SHM_PATH) that the
 * daemon creates at a temporary name, initializes and renames into place, so
 * a reader never sees a half-written header and a restarted daemon leaves a
 * new inode behind the path. It holds three 64-byte cache lines:
 *
 *   offset 0   clocksync_shm_header   immutable after the rename: magic,
 *                                     layout version, sizes, writer identity
 *                                     (but for tree_id: see there)
 *   offset 64  clocksync_shm_mapping  the seqlocked local->global mapping
 *   offset 128 clocksync_shm_tsc      the seqlocked TSC->raw mapping
 *                                     (version 2; readers also accept a
 *                                     version-1 segment, without it)
 *
 * TSC section semantics (x86-64 with an invariant TSC that the daemon has
 * checked against CLOCK_MONOTONIC_RAW; see shm/tsc_calibrator.h):
 *   ticks   = tsc - anchor_tsc                  (unsigned)
 *   valid only while ticks < max_ticks          (max_ticks 0: invalid)
 *   raw_ns  = anchor_raw_ns + floor(ticks * raw_ns_per_tick_q32 / 2^32)
 *   |raw_ns - true CLOCK_MONOTONIC_RAW| <= error_ns
 * A reader that uses it adds error_ns to the bound of the global time it
 * computes from raw_ns, and falls back to clock_gettime() outside the range.
 *
 * Mapping semantics, for a host CLOCK_MONOTONIC_RAW reading raw_ns:
 *   dt_ns          = raw_ns - anchor_raw_ns
 *   rate_adj       = rate_adj_q64 / 2^64        (global ns per raw ns) - 1
 *   bound_growth   = bound_growth_q36 / 2^36    ns of bound per ns of |dt|
 *   global_ns      = anchor_global_ns + dt_ns + dt_ns * rate_adj
 *   error_bound_ns = bound_at_anchor_ns + |dt_ns| * bound_growth
 *   earliest_ns    = global_ns - error_bound_ns
 *   latest_ns      = global_ns + error_bound_ns
 * Both coefficients are fixed point so that a reader evaluates the mapping
 * with one 64x64->128-bit integer multiply per result and no conversion:
 * rate_adj_q64 resolves 5.4e-20 (1 ppb = 18446744073.7 units), i.e. 5e-8 ns
 * over 1000 s; bound_growth_q36 resolves 0.0146 ppb (the writer rounds up)
 * and reaches 6.25e7 ppb. docs/SHM_LAYOUT.md describes every field.
 *
 * Seqlock protocol (one writer; any number of readers; all fields of the
 * mapping section are accessed atomically, so the protocol is data-race free
 * in the C and C++ memory models and clean under ThreadSanitizer):
 *   writer: s = seq (even); store seq = s + 1 (relaxed);
 *           store each payload field with release ordering;
 *           store seq = s + 2 (release).
 *   reader: s1 = load seq (acquire); odd -> retry;
 *           load each payload field with acquire ordering;
 *           s2 = load seq (relaxed); s1 != s2 -> retry (bounded).
 * A reader that sees any payload value of a newer write synchronizes with
 * that release store, so its later load of seq sees the odd value or later
 * and the read is retried. This needs no standalone fences (which GCC's TSan
 * does not model); on x86-64 every one of these accesses is a plain mov.
 * In C++ use the helpers at the end of this file. In C, access the fields
 * with __atomic_load_n / __atomic_store_n (GCC/Clang builtins) and the
 * orderings above; never with plain loads and stores.
 *
 * The writer starts seq at an even value taken from CLOCK_MONOTONIC_RAW when
 * it creates the file, so the sequence values of two daemon instances never
 * coincide (a reader that re-maps a new file in place under a concurrent read
 * sees s1 != s2 and retries).
 */
#ifndef CLOCKSYNC_SHM_SHM_LAYOUT_H_
#define CLOCKSYNC_SHM_SHM_LAYOUT_H_

#include <stdint.h>

#ifdef __cplusplus
#include <atomic>
#include <cmath>
#include <cstddef>
#include <type_traits>
#define CLOCKSYNC_ALIGNAS_64 alignas(64)
#else
#define CLOCKSYNC_ALIGNAS_64 _Alignas(64)
#endif

/* "CLKSYNCM" as little-endian bytes at offset 0 of the file. */
#define CLOCKSYNC_SHM_MAGIC UINT64_C(0x4D434E59534B4C43)
/* Bumped on any incompatible change of the structs below. */
#define CLOCKSYNC_SHM_LAYOUT_VERSION 2u
/* The previous layout (header and mapping only, 128 bytes): still read. */
#define CLOCKSYNC_SHM_LAYOUT_VERSION_1 1u
#define CLOCKSYNC_SHM_SIZE_VERSION_1 128u
/* Scales of the fixed-point coefficients (as doubles, for conversions). */
#define CLOCKSYNC_RATE_ADJ_SCALE 18446744073709551616.0 /* 2^64 */
#define CLOCKSYNC_BOUND_GROWTH_SCALE 68719476736.0      /* 2^36 */
/* Where clocksyncd publishes by default (its --shm_path flag). */
#define CLOCKSYNC_DEFAULT_SHM_PATH "/run/clocksyncd/clocksync.shm"

/*
 * Synchronization state, the low byte of clocksync_shm_mapping.status. The
 * values mirror enum SyncState in proto/clocksync.proto (a test checks it).
 */
typedef enum clocksync_state {
  /* Never written by a daemon; treated like UNSYNCED. */
  CLOCKSYNC_STATE_UNSPECIFIED = 0,
  /* No estimate yet: the mapping carries no information. */
  CLOCKSYNC_STATE_UNSYNCED = 1,
  /* Estimate and bound valid, fed by recent samples. */
  CLOCKSYNC_STATE_SYNCED = 2,
  /* Samples contradicted a line; the estimator restarted its window. */
  CLOCKSYNC_STATE_RECOVERING = 3,
  /* No samples from the parent for a while; the bound grows with time. */
  CLOCKSYNC_STATE_HOLDOVER = 4
} clocksync_state;

/* status: bits 0..7 hold a clocksync_state. */
#define CLOCKSYNC_STATUS_STATE_MASK 0x00FFu
/*
 * Written by the daemon: this mapping stepped global time (first
 * synchronization or a detected jump) instead of slewing it, so global time
 * read across this update may be discontinuous.
 */
#define CLOCKSYNC_STATUS_STEPPED 0x0100u
/*
 * Written by the daemon when it shuts down: nobody updates this segment any
 * more. Readers extrapolate the last mapping and look for a new file.
 */
#define CLOCKSYNC_STATUS_CLOSED 0x0200u
/*
 * Never stored in the segment; set by the client library in a reading whose
 * mapping was last updated longer ago than its staleness limit.
 */
#define CLOCKSYNC_STATUS_STALE 0x1000u

/*
 * The first cache line. Written once by the daemon before it renames the
 * file into place, never changed afterwards, so it needs no seqlock.
 */
typedef struct clocksync_shm_header {
  /* CLOCKSYNC_SHM_MAGIC. */
  uint64_t magic;
  /* CLOCKSYNC_SHM_LAYOUT_VERSION of the writer. */
  uint32_t layout_version;
  /* sizeof(clocksync_shm) of the writer, in bytes. */
  uint32_t segment_size;
  /* Byte offset of the clocksync_shm_mapping section (64). */
  uint32_t mapping_offset;
  /* Process id of the daemon that created the file. */
  int32_t writer_pid;
  /* Host CLOCK_MONOTONIC_RAW when the daemon created the file, in ns. */
  int64_t writer_start_raw_ns;
  /* CLOCK_REALTIME when the daemon created the file, in ns since the epoch
   * (for people and tools; readers do not compute with it). */
  int64_t writer_start_realtime_ns;
  /* Identity of the sync tree this node belongs to: a 64-bit hash of its
   * master's node_id (ShmPublisher::TreeIdOfMaster), the same on every node
   * of one tree; 0 while unknown (a node not attached yet, a node of a
   * static tree, or a daemon older than this field). The one header field
   * written after the rename: by the daemon when it learns or changes its
   * tree, with a release store; readers load it atomically. */
  uint64_t tree_id;
  /* Zero; room for later fields without moving the mapping. */
  uint8_t reserved[16];
} clocksync_shm_header;

/*
 * The second cache line: one local->global mapping, seqlocked. All "raw"
 * times are host CLOCK_MONOTONIC_RAW readings in ns.
 */
typedef struct clocksync_shm_mapping {
  /* Seqlock sequence counter: odd while a write is in progress. */
  CLOCKSYNC_ALIGNAS_64 uint64_t seq;
  /* Raw time of the anchor point, in ns. */
  int64_t anchor_raw_ns;
  /* Global time at the anchor point, in ns. */
  int64_t anchor_global_ns;
  /* ((Global ns per raw ns) - 1) * 2^64, the drift; positive when the local
   * clock is slow. 1 ppb = 18446744073.7; |value| <= 0.01 * 2^64. */
  int64_t rate_adj_q64;
  /* Half-width of [earliest, latest] at the anchor, in ns (0..2^61). */
  int64_t bound_at_anchor_ns;
  /* Growth of the half-width, ns per ns of |dt| from the anchor, * 2^36
   * (1 unit = 0.0146 ppb); the daemon rounds it up. */
  uint32_t bound_growth_q36;
  /* clocksync_state in bits 0..7, CLOCKSYNC_STATUS_* flags above. */
  uint16_t status;
  /* Depth of this node in the sync tree (0 = master). */
  uint16_t depth;
  /* Raw time at which the daemon wrote this mapping, in ns; readers compare
   * it with their clock for the staleness limit. */
  int64_t update_raw_ns;
  /* Number of mappings published into this file (0 before the first). */
  uint64_t generation;
} clocksync_shm_mapping;

/*
 * The third cache line (layout version 2): the TSC -> CLOCK_MONOTONIC_RAW
 * mapping, seqlocked like the mapping section, rewritten about once a
 * second. max_ticks == 0 means "do not use the TSC" (not invariant, not
 * verified yet, or seen to jump).
 */
typedef struct clocksync_shm_tsc {
  /* Seqlock sequence counter: odd while a write is in progress. */
  CLOCKSYNC_ALIGNAS_64 uint64_t seq;
  /* TSC (rdtsc) at the anchor. */
  uint64_t anchor_tsc;
  /* CLOCK_MONOTONIC_RAW at the anchor, in ns. */
  int64_t anchor_raw_ns;
  /* Raw ns per TSC tick * 2^32. */
  uint64_t raw_ns_per_tick_q32;
  /* Ticks after anchor_tsc for which the mapping holds; 0: invalid. */
  uint64_t max_ticks;
  /* Largest |raw from the TSC - true raw| within max_ticks, in ns. */
  int64_t error_ns;
  /* Number of TSC mappings published into this file. */
  uint64_t generation;
  /* Zero. */
  uint64_t reserved;
} clocksync_shm_tsc;

/* The whole segment. */
typedef struct clocksync_shm {
  clocksync_shm_header header;
  clocksync_shm_mapping mapping;
  clocksync_shm_tsc tsc;
} clocksync_shm;

/* The C++ helpers below (the writer's and the reader's seqlock access) need
 * C++20 (std::atomic_ref); C++ programs of older standards that include
 * this header through clocksync.h see the C declarations only. */
#if defined(__cplusplus) && __cplusplus >= 202002L

static_assert(sizeof(clocksync_shm_header) == 64, "header is one cache line");
static_assert(sizeof(clocksync_shm_mapping) == 64, "mapping is one cache line");
static_assert(alignof(clocksync_shm_mapping) == 64, "mapping starts a line");
static_assert(sizeof(clocksync_shm_tsc) == 64, "TSC section is one line");
static_assert(sizeof(clocksync_shm) == 192, "segment is three cache lines");
static_assert(offsetof(clocksync_shm, tsc) == 128, "TSC section at 128");
static_assert(offsetof(clocksync_shm_tsc, anchor_tsc) == 8);
static_assert(offsetof(clocksync_shm_tsc, anchor_raw_ns) == 16);
static_assert(offsetof(clocksync_shm_tsc, raw_ns_per_tick_q32) == 24);
static_assert(offsetof(clocksync_shm_tsc, max_ticks) == 32);
static_assert(offsetof(clocksync_shm_tsc, error_ns) == 40);
static_assert(offsetof(clocksync_shm_tsc, generation) == 48);
static_assert(offsetof(clocksync_shm, mapping) == 64, "mapping at offset 64");
static_assert(offsetof(clocksync_shm_header, layout_version) == 8);
static_assert(offsetof(clocksync_shm_header, segment_size) == 12);
static_assert(offsetof(clocksync_shm_header, mapping_offset) == 16);
static_assert(offsetof(clocksync_shm_header, writer_pid) == 20);
static_assert(offsetof(clocksync_shm_header, writer_start_raw_ns) == 24);
static_assert(offsetof(clocksync_shm_header, writer_start_realtime_ns) == 32);
static_assert(offsetof(clocksync_shm_header, tree_id) == 40);
static_assert(offsetof(clocksync_shm_header, reserved) == 48);
static_assert(offsetof(clocksync_shm_mapping, seq) == 0);
static_assert(offsetof(clocksync_shm_mapping, anchor_raw_ns) == 8);
static_assert(offsetof(clocksync_shm_mapping, anchor_global_ns) == 16);
static_assert(offsetof(clocksync_shm_mapping, rate_adj_q64) == 24);
static_assert(offsetof(clocksync_shm_mapping, bound_at_anchor_ns) == 32);
static_assert(offsetof(clocksync_shm_mapping, bound_growth_q36) == 40);
static_assert(offsetof(clocksync_shm_mapping, status) == 44);
static_assert(offsetof(clocksync_shm_mapping, depth) == 46);
static_assert(offsetof(clocksync_shm_mapping, update_raw_ns) == 48);
static_assert(offsetof(clocksync_shm_mapping, generation) == 56);
static_assert(std::is_standard_layout_v<clocksync_shm>);
static_assert(std::is_trivially_copyable_v<clocksync_shm>);

namespace clocksync {

// The payload of one seqlocked mapping section, as plain values: what the
// writer stores and what a consistent read returns. Field meanings as in
// clocksync_shm_mapping.
struct MappingValues {
  int64_t anchor_raw_ns = 0;
  int64_t anchor_global_ns = 0;
  int64_t rate_adj_q64 = 0;
  int64_t bound_at_anchor_ns = 0;
  uint32_t bound_growth_q36 = 0;
  uint16_t status = CLOCKSYNC_STATE_UNSYNCED;
  uint16_t depth = 0;
  int64_t update_raw_ns = 0;
  uint64_t generation = 0;
};

// The payload of the TSC section, as plain values.
struct TscValues {
  uint64_t anchor_tsc = 0;
  int64_t anchor_raw_ns = 0;
  uint64_t raw_ns_per_tick_q32 = 0;
  uint64_t max_ticks = 0;  // 0: invalid.
  int64_t error_ns = 0;
  uint64_t generation = 0;
};

namespace shm {

// raw_ns of a TSC reading under `v`; false outside [anchor, anchor +
// max_ticks) (or when invalid).
inline bool TscToRaw(const TscValues& v, uint64_t tsc, int64_t* raw_ns) {
  const uint64_t ticks = tsc - v.anchor_tsc;
  if (__builtin_expect(ticks >= v.max_ticks, 0)) return false;
  *raw_ns = v.anchor_raw_ns +
            static_cast<int64_t>(
                (static_cast<unsigned __int128>(ticks) * v.raw_ns_per_tick_q32) >>
                32);
  return true;
}

// rate_adj ((global ns per raw ns) - 1; |rate_adj| < 0.5) in the layout's
// fixed point, rounded to nearest.
inline int64_t RateAdjToQ64(double rate_adj) {
  return static_cast<int64_t>(
      std::llround(rate_adj * CLOCKSYNC_RATE_ADJ_SCALE));
}
inline double RateAdjFromQ64(int64_t rate_adj_q64) {
  return static_cast<double>(rate_adj_q64) / CLOCKSYNC_RATE_ADJ_SCALE;
}

// A bound growth in ppb (0 <= ppb < 6.25e7) in the layout's fixed point,
// rounded up so that the published bound never understates the writer's.
// The factor 1 + 2^-50 covers the rounding of the double arithmetic.
inline uint32_t BoundGrowthPpbToQ36(double growth_ppb) {
  return static_cast<uint32_t>(std::ceil(
      growth_ppb * (CLOCKSYNC_BOUND_GROWTH_SCALE / 1e9) * (1.0 + 0x1p-50)));
}
inline double BoundGrowthQ36ToPpb(uint32_t bound_growth_q36) {
  return static_cast<double>(bound_growth_q36) *
         (1e9 / CLOCKSYNC_BOUND_GROWTH_SCALE);
}

// Atomic access to one field of a (possibly read-only) shared mapping.
// std::atomic_ref on a naturally aligned, lock-free scalar is a plain mov on
// x86-64 for loads and release stores; a read-only mapping only ever sees
// loads, never a read-modify-write.
template <typename T>
inline T LoadAcquire(const T& field) noexcept {
  static_assert(std::atomic_ref<T>::is_always_lock_free);
  return std::atomic_ref<T>(const_cast<T&>(field))
      .load(std::memory_order_acquire);
}

template <typename T>
inline T LoadRelaxed(const T& field) noexcept {
  static_assert(std::atomic_ref<T>::is_always_lock_free);
  return std::atomic_ref<T>(const_cast<T&>(field))
      .load(std::memory_order_relaxed);
}

template <typename T>
inline void StoreRelease(T& field, T value) noexcept {
  static_assert(std::atomic_ref<T>::is_always_lock_free);
  std::atomic_ref<T>(field).store(value, std::memory_order_release);
}

template <typename T>
inline void StoreRelaxed(T& field, T value) noexcept {
  static_assert(std::atomic_ref<T>::is_always_lock_free);
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}

// Seqlock write of `values` into `section`. Only one thread (the owner of the
// writable mapping) may call it for a given section at a time.
inline void WriteSection(clocksync_shm_mapping* section,
                         const MappingValues& values) noexcept {
  const uint64_t seq = LoadRelaxed(section->seq);
  StoreRelaxed(section->seq, seq + 1);  // odd: write in progress
  StoreRelease(section->anchor_raw_ns, values.anchor_raw_ns);
  StoreRelease(section->anchor_global_ns, values.anchor_global_ns);
  StoreRelease(section->rate_adj_q64, values.rate_adj_q64);
  StoreRelease(section->bound_at_anchor_ns, values.bound_at_anchor_ns);
  StoreRelease(section->bound_growth_q36, values.bound_growth_q36);
  StoreRelease(section->status, values.status);
  StoreRelease(section->depth, values.depth);
  StoreRelease(section->update_raw_ns, values.update_raw_ns);
  StoreRelease(section->generation, values.generation);
  StoreRelease(section->seq, seq + 2);  // even: consistent again
}

// One seqlock read attempt. Returns true and fills *out with a consistent
// snapshot, or returns false (out partly written) when a write overlapped;
// the caller retries a bounded number of times.
inline bool TryReadSection(const clocksync_shm_mapping* section,
                           MappingValues* out) noexcept {
  const uint64_t seq_before = LoadAcquire(section->seq);
  if (__builtin_expect(seq_before & 1, 0)) return false;
  out->anchor_raw_ns = LoadAcquire(section->anchor_raw_ns);
  out->anchor_global_ns = LoadAcquire(section->anchor_global_ns);
  out->rate_adj_q64 = LoadAcquire(section->rate_adj_q64);
  out->bound_at_anchor_ns = LoadAcquire(section->bound_at_anchor_ns);
  out->bound_growth_q36 = LoadAcquire(section->bound_growth_q36);
  out->status = LoadAcquire(section->status);
  out->depth = LoadAcquire(section->depth);
  out->update_raw_ns = LoadAcquire(section->update_raw_ns);
  out->generation = LoadAcquire(section->generation);
  return LoadRelaxed(section->seq) == seq_before;
}

// As TryReadSection, but loads only what evaluating the mapping needs (not
// depth and generation, which keep their values in *out): the readers' hot
// path.
inline bool TryReadSectionForEvaluation(const clocksync_shm_mapping* section,
                                        MappingValues* out) noexcept {
  const uint64_t seq_before = LoadAcquire(section->seq);
  if (__builtin_expect(seq_before & 1, 0)) return false;
  out->anchor_raw_ns = LoadAcquire(section->anchor_raw_ns);
  out->anchor_global_ns = LoadAcquire(section->anchor_global_ns);
  out->rate_adj_q64 = LoadAcquire(section->rate_adj_q64);
  out->bound_at_anchor_ns = LoadAcquire(section->bound_at_anchor_ns);
  out->bound_growth_q36 = LoadAcquire(section->bound_growth_q36);
  out->status = LoadAcquire(section->status);
  out->update_raw_ns = LoadAcquire(section->update_raw_ns);
  return LoadRelaxed(section->seq) == seq_before;
}

// Seqlock write of the TSC section (one writer, as WriteSection).
inline void WriteTscSection(clocksync_shm_tsc* section,
                            const TscValues& values) noexcept {
  const uint64_t seq = LoadRelaxed(section->seq);
  StoreRelaxed(section->seq, seq + 1);
  StoreRelease(section->anchor_tsc, values.anchor_tsc);
  StoreRelease(section->anchor_raw_ns, values.anchor_raw_ns);
  StoreRelease(section->raw_ns_per_tick_q32, values.raw_ns_per_tick_q32);
  StoreRelease(section->max_ticks, values.max_ticks);
  StoreRelease(section->error_ns, values.error_ns);
  StoreRelease(section->generation, values.generation);
  StoreRelease(section->seq, seq + 2);
}

// One seqlock read attempt of the TSC section (as TryReadSection).
inline bool TryReadTscSection(const clocksync_shm_tsc* section,
                              TscValues* out) noexcept {
  const uint64_t seq_before = LoadAcquire(section->seq);
  if (__builtin_expect(seq_before & 1, 0)) return false;
  out->anchor_tsc = LoadAcquire(section->anchor_tsc);
  out->anchor_raw_ns = LoadAcquire(section->anchor_raw_ns);
  out->raw_ns_per_tick_q32 = LoadAcquire(section->raw_ns_per_tick_q32);
  out->max_ticks = LoadAcquire(section->max_ticks);
  out->error_ns = LoadAcquire(section->error_ns);
  out->generation = LoadAcquire(section->generation);
  return LoadRelaxed(section->seq) == seq_before;
}

// Spin-wait hint between read attempts.
inline void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace shm
}  // namespace clocksync

#endif /* __cplusplus >= 202002L */

#endif /* CLOCKSYNC_SHM_SHM_LAYOUT_H_ */
