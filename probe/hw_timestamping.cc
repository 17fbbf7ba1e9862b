// probe/hw_timestamping.cc: interface lookup (getifaddrs) and
// ETHTOOL_GET_TS_INFO (see probe/hw_timestamping.h).

#include "probe/hw_timestamping.h"

#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace clocksync::probe {
namespace {

bool SameAddress(const sockaddr* a, const sockaddr_storage& b) {
  if (a == nullptr || a->sa_family != b.ss_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(&b)->sin6_addr,
                       sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

HardwareTimestamping ProbeHardwareTimestamping(const sockaddr_storage& local) {
  HardwareTimestamping hw;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    hw.summary = absl::StrCat("no interface list: ", std::strerror(errno));
    return hw;
  }
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (SameAddress(i->ifa_addr, local)) {
      hw.interface = i->ifa_name;
      break;
    }
  }
  freeifaddrs(list);
  if (hw.interface.empty()) {
    hw.summary = "no interface holds the probe socket's address";
    return hw;
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    hw.summary = absl::StrCat(hw.interface, ": ", std::strerror(errno));
    return hw;
  }
  ethtool_ts_info info{};
  info.cmd = ETHTOOL_GET_TS_INFO;
  ifreq request{};
  std::strncpy(request.ifr_name, hw.interface.c_str(), IFNAMSIZ - 1);
  request.ifr_data = reinterpret_cast<char*>(&info);
  const int rc = ioctl(fd, SIOCETHTOOL, &request);
  const int error = errno;
  close(fd);
  if (rc != 0) {
    hw.summary = absl::StrCat(hw.interface, ": no timestamping information (",
                              std::strerror(error), ")");
    return hw;
  }
  hw.tx = (info.so_timestamping & SOF_TIMESTAMPING_TX_HARDWARE) != 0 &&
          (info.tx_types & (1u << HWTSTAMP_TX_ON)) != 0;
  hw.rx = (info.so_timestamping & SOF_TIMESTAMPING_RX_HARDWARE) != 0 &&
          (info.rx_filters & (1u << HWTSTAMP_FILTER_ALL)) != 0;
  hw.phc_index = info.phc_index;
  if (!hw.tx || !hw.rx || hw.phc_index < 0) {
    hw.summary = absl::StrCat(hw.interface, ": no hardware timestamps (",
                              hw.tx ? "" : "no transmit stamps, ",
                              hw.rx ? "" : "no stamps of all received packets, ",
                              hw.phc_index < 0 ? "no PHC" : "has a PHC", ")");
  } else {
    hw.summary = absl::StrCat(hw.interface, ": hardware timestamps with /dev/ptp",
                              hw.phc_index);
  }
  return hw;
}

HardwareTimestamping ProbeHardwareTimestampingOfSocket(int fd) {
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    HardwareTimestamping hw;
    hw.summary = absl::StrCat("getsockname: ", std::strerror(errno));
    return hw;
  }
  return ProbeHardwareTimestamping(local);
}

}  // namespace clocksync::probe
