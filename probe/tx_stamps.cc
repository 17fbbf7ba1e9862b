// probe/tx_stamps.cc: SO_TIMESTAMPING set-up and error-queue reading (see
// probe/tx_stamps.h).

#include "probe/tx_stamps.h"

#include <errno.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <cstring>

namespace clocksync::probe::probe_internal {
namespace {

constexpr int kTxFlags = SOF_TIMESTAMPING_TX_SOFTWARE |
                         SOF_TIMESTAMPING_SOFTWARE |
                         SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;

int SetFlags(int fd, int flags) {
  return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof(flags));
}

}  // namespace

absl::Status TxStamps::Enable(int fd) {
  if (SetFlags(fd, kTxFlags) != 0) {
    return absl::ErrnoToStatus(errno, "SO_TIMESTAMPING (transmit stamps)");
  }
  fd_ = fd;
  next_key_ = 0;
  return absl::OkStatus();
}

void TxStamps::Rearm(StampCallback on_stamp) {
  if (!enabled()) return;
  Drain(on_stamp);
  // Turning OPT_ID off and on again restarts the kernel's key at 0.
  if (SetFlags(fd_, kTxFlags & ~SOF_TIMESTAMPING_OPT_ID) != 0 ||
      SetFlags(fd_, kTxFlags) != 0) {
    fd_ = -1;  // Cannot trust the keys any more: no stamps.
    return;
  }
  next_key_ = 0;
}

int TxStamps::Drain(StampCallback on_stamp) {
  if (!enabled()) return 0;
  int stamps = 0;
  for (;;) {
    alignas(cmsghdr) uint8_t control[256];
    uint8_t data[64];  // OPT_TSONLY: no payload comes back.
    iovec iov = {data, sizeof(data)};
    msghdr header{};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    if (recvmsg(fd_, &header, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      if (errno == EINTR) continue;
      return stamps;  // EAGAIN: empty.
    }
    bool have_time = false;
    int64_t realtime_ns = 0;
    bool have_key = false;
    uint32_t key = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr;
         c = CMSG_NXTHDR(&header, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING &&
          c->cmsg_len >= CMSG_LEN(sizeof(scm_timestamping))) {
        scm_timestamping stamp;
        std::memcpy(&stamp, CMSG_DATA(c), sizeof(stamp));
        const timespec& software = stamp.ts[0];
        if (software.tv_sec > 0 &&
            software.tv_sec < INT64_MAX / 1'000'000'000 - 1) {
          realtime_ns =
              static_cast<int64_t>(software.tv_sec) * 1'000'000'000 +
              software.tv_nsec;
          have_time = true;
        }
      } else if (((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                  (c->cmsg_level == SOL_IPV6 &&
                   c->cmsg_type == IPV6_RECVERR)) &&
                 c->cmsg_len >= CMSG_LEN(sizeof(sock_extended_err))) {
        sock_extended_err error;
        std::memcpy(&error, CMSG_DATA(c), sizeof(error));
        if (error.ee_errno == ENOMSG &&
            error.ee_origin == SO_EE_ORIGIN_TIMESTAMPING &&
            error.ee_info == SCM_TSTAMP_SND) {
          key = error.ee_data;
          have_key = true;
        }
      }
    }
    if (have_time && have_key) {
      ++stamps;
      on_stamp(key, realtime_ns);
    }
  }
}

}  // namespace clocksync::probe::probe_internal
