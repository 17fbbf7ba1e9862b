// probe/tx_stamps.h: kernel transmit timestamps of the datagrams a UDP
// socket sends (SO_TIMESTAMPING, software stamps), matched to the sends by
// the kernel's per-socket counter (SOF_TIMESTAMPING_OPT_ID). Internal to
// probe/ (the responder's t3 and the requester's t1).
//
// The kernel stamps a datagram when the driver hands it to the device
// (loopback and veth: inside the send call), after the sender's system call
// and queueing, and returns the stamp on the socket's error queue with the
// datagram's key: 0 for the first datagram sent after Enable() or Rearm(),
// then 1, 2, ... The owner counts its accepted sends the same way
// (NoteSent()) to know which key is which datagram's. A refused send may
// or may not have used a key, so after one the owner calls Rearm(), which
// drains what is queued and restarts the count at 0. Stamps are
// CLOCK_REALTIME; callers convert them early-biased
// (RealtimeToRaw::ToRawEarly), so that a transmit instant is never later
// than the truth, and check them against raw readings around the send.
//
// Thread safety: one owner thread, the one that sends on the socket.
// Drain() does not allocate.
#ifndef CLOCKSYNC_PROBE_TX_STAMPS_H_
#define CLOCKSYNC_PROBE_TX_STAMPS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace clocksync::probe::probe_internal {

class TxStamps {
 public:
  // Asks the kernel for software transmit stamps on `fd` (not owned).
  // Errors (a kernel without SO_TIMESTAMPING) leave it disabled: the
  // caller keeps its user-space stamps.
  absl::Status Enable(int fd);
  bool enabled() const { return fd_ >= 0; }

  // The key of the datagram the kernel just accepted.
  uint32_t NoteSent() { return next_key_++; }

  // After a refused send: drains the error queue (stamps go to
  // `on_stamp`) and restarts the kernel's and our count at 0.
  using StampCallback =
      absl::FunctionRef<void(uint32_t key, int64_t realtime_ns)>;
  void Rearm(StampCallback on_stamp);

  // Reads the error queue without waiting and calls on_stamp(key,
  // realtime_ns) for each software transmit stamp; other messages are
  // skipped. Returns the number of stamps.
  int Drain(StampCallback on_stamp);

 private:
  int fd_ = -1;
  uint32_t next_key_ = 0;
};

}  // namespace clocksync::probe::probe_internal

#endif  // CLOCKSYNC_PROBE_TX_STAMPS_H_
