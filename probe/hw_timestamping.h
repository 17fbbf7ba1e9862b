// probe/hw_timestamping.h: what a network interface offers for hardware
// timestamps (ETHTOOL_GET_TS_INFO), for the daemon's `timestamping` choice.
//
// Hardware stamps need the NIC to stamp both directions and a PTP hardware
// clock (PHC) to map the stamps from; this build stamps in the kernel
// (software) and uses this check to say, in the log and in status, why a
// node asked for hardware gets kernel software stamps.
//
// Thread safety: stateless.
#ifndef CLOCKSYNC_PROBE_HW_TIMESTAMPING_H_
#define CLOCKSYNC_PROBE_HW_TIMESTAMPING_H_

#include <sys/socket.h>

#include <string>

namespace clocksync::probe {

struct HardwareTimestamping {
  std::string interface;  // "" when none was found for the address.
  bool tx = false;        // The NIC stamps transmitted packets.
  bool rx = false;        // The NIC stamps all received packets.
  int phc_index = -1;     // /dev/ptpN of its clock; -1: none.
  // One line for logs and status: "lo: no hardware timestamps", ...
  std::string summary;
};

// The interface holding the local address `local` (getifaddrs) and its
// hardware timestamping capabilities. Never fails: what cannot be found is
// said in `summary`.
HardwareTimestamping ProbeHardwareTimestamping(const sockaddr_storage& local);

// The same for the local address of a connected socket (getsockname).
HardwareTimestamping ProbeHardwareTimestampingOfSocket(int fd);

}  // namespace clocksync::probe

#endif  // CLOCKSYNC_PROBE_HW_TIMESTAMPING_H_
