// trace/otf2_common.cc: OTF2 conventions shared by writer and reader.

#include "trace/otf2_common.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>
#include <mutex>

namespace clocksync::trace {
namespace {

// The last OTF2 error message of this thread. A fixed buffer, so that the
// callback does not allocate (it may run on a crash path).
thread_local char last_error[512] = "";

OTF2_ErrorCode CaptureError(void* /*user_data*/, const char* /*file*/,
                            uint64_t /*line*/, const char* function,
                            OTF2_ErrorCode code, const char* format,
                            va_list args) {
  // Keep the first error since ClearOtf2Error: later ones are usually
  // consequences ("chunk handling failed") of the first (the errno text).
  if (last_error[0] != '\0') return code;
  char message[400];
  std::vsnprintf(message, sizeof(message), format, args);
  std::snprintf(last_error, sizeof(last_error), "%s: %s (%s)",
                function != nullptr ? function : "OTF2", message,
                OTF2_Error_GetName(code));
  return code;
}

OTF2_FlushType PreFlush(void* /*user_data*/, OTF2_FileType /*file_type*/,
                        OTF2_LocationRef /*location*/, void* /*caller_data*/,
                        bool /*final*/) {
  return OTF2_FLUSH;
}

// Post-flush is left null: OTF2 then writes no BufferFlush records, whose
// timestamps would not be ours.
const OTF2_FlushCallbacks kFlushCallbacks = {PreFlush, nullptr};

// OTF2's default memory pool holds 128 MiB of chunks per writer before it
// flushes. A tracer wants its events on disk sooner and its memory bounded:
// each event writer gets at most kEventChunksInMemory chunks; when OTF2 asks
// for one more, the callback says no (NULL), which makes OTF2 flush the
// buffer to its file and free the chunks. Definition buffers are unbounded
// (they are small and written once, at Finish).
constexpr size_t kEventChunksInMemory = 4;

// A buffer's chunks: those OTF2 holds, and those it gave back, kept for
// its next ones until the buffer's final free. Handing 1 MiB chunks back to
// malloc after every flush made it return their pages to the kernel and
// fault them in again (a tenth of a tracer writer thread's time).
struct ChunkPool {
  std::vector<void*> chunks;
  std::vector<void*> spare;
  uint64_t spare_bytes = 0;  // The size of each spare chunk.
};

void* AllocateChunk(void* /*user_data*/, OTF2_FileType file_type,
                    OTF2_LocationRef /*location*/, void** per_buffer,
                    uint64_t chunk_bytes) {
  if (*per_buffer == nullptr) *per_buffer = new (std::nothrow) ChunkPool;
  auto* pool = static_cast<ChunkPool*>(*per_buffer);
  if (pool == nullptr) return nullptr;
  if (file_type == OTF2_FILETYPE_EVENTS &&
      pool->chunks.size() >= kEventChunksInMemory) {
    return nullptr;  // flush first
  }
  void* chunk = nullptr;
  if (!pool->spare.empty() && pool->spare_bytes == chunk_bytes) {
    chunk = pool->spare.back();
    pool->spare.pop_back();
  } else {
    chunk = std::malloc(chunk_bytes);
  }
  if (chunk != nullptr) {
    pool->chunks.push_back(chunk);
    pool->spare_bytes = chunk_bytes;  // OTF2 uses one size per buffer.
  }
  return chunk;
}

void FreeAllChunks(void* /*user_data*/, OTF2_FileType /*file_type*/,
                   OTF2_LocationRef /*location*/, void** per_buffer,
                   bool final) {
  auto* pool = static_cast<ChunkPool*>(*per_buffer);
  if (pool == nullptr) return;
  if (final) {
    for (void* chunk : pool->chunks) std::free(chunk);
    for (void* chunk : pool->spare) std::free(chunk);
    delete pool;
    *per_buffer = nullptr;
    return;
  }
  pool->spare.insert(pool->spare.end(), pool->chunks.begin(),
                     pool->chunks.end());
  pool->chunks.clear();
}

const OTF2_MemoryCallbacks kMemoryCallbacks = {AllocateChunk, FreeAllChunks};

}  // namespace

OTF2_ErrorCode SetFlushCallbacks(OTF2_Archive* archive) {
  return OTF2_Archive_SetFlushCallbacks(archive, &kFlushCallbacks, nullptr);
}

OTF2_ErrorCode SetStreamingMemoryCallbacks(OTF2_Archive* archive) {
  return OTF2_Archive_SetMemoryCallbacks(archive, &kMemoryCallbacks, nullptr);
}

OTF2_CollectiveOp ToOtf2CollectiveOp(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kBarrier:
      return OTF2_COLLECTIVE_OP_BARRIER;
    case CollectiveKind::kBcast:
      return OTF2_COLLECTIVE_OP_BCAST;
    case CollectiveKind::kGather:
      return OTF2_COLLECTIVE_OP_GATHER;
    case CollectiveKind::kScatter:
      return OTF2_COLLECTIVE_OP_SCATTER;
    case CollectiveKind::kReduce:
      return OTF2_COLLECTIVE_OP_REDUCE;
    case CollectiveKind::kAllreduce:
      return OTF2_COLLECTIVE_OP_ALLREDUCE;
    case CollectiveKind::kAlltoall:
      return OTF2_COLLECTIVE_OP_ALLTOALL;
    case CollectiveKind::kAllgather:
      return OTF2_COLLECTIVE_OP_ALLGATHER;
    case CollectiveKind::kOther:
      break;
  }
  return OTF2_UNDEFINED_TYPE;
}

CollectiveKind FromOtf2CollectiveOp(OTF2_CollectiveOp op) {
  switch (op) {
    case OTF2_COLLECTIVE_OP_BARRIER:
      return CollectiveKind::kBarrier;
    case OTF2_COLLECTIVE_OP_BCAST:
      return CollectiveKind::kBcast;
    case OTF2_COLLECTIVE_OP_GATHER:
      return CollectiveKind::kGather;
    case OTF2_COLLECTIVE_OP_SCATTER:
      return CollectiveKind::kScatter;
    case OTF2_COLLECTIVE_OP_REDUCE:
      return CollectiveKind::kReduce;
    case OTF2_COLLECTIVE_OP_ALLREDUCE:
      return CollectiveKind::kAllreduce;
    case OTF2_COLLECTIVE_OP_ALLTOALL:
      return CollectiveKind::kAlltoall;
    case OTF2_COLLECTIVE_OP_ALLGATHER:
      return CollectiveKind::kAllgather;
    default:
      return CollectiveKind::kOther;
  }
}

void InstallOtf2ErrorCapture() {
  static std::once_flag once;
  std::call_once(once,
                 [] { OTF2_Error_RegisterCallback(CaptureError, nullptr); });
}

void ClearOtf2Error() { last_error[0] = '\0'; }

std::string LastOtf2Error() { return last_error; }

bool Otf2ErrorPending() { return last_error[0] != '\0'; }

}  // namespace clocksync::trace
