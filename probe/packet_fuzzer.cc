// probe/packet_fuzzer.cc: hostile datagrams through DecodeProbe, without a
// key and with one (the first byte picks), and key files through
// ReadProbeKeyFile. Whatever decodes must encode back to the same bytes
// (nothing is accepted that the encoder would not write).

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "probe/auth.h"
#include "probe/packet.h"

namespace {

using clocksync::probe::DecodeProbe;
using clocksync::probe::DecodeStatus;
using clocksync::probe::EncodeProbe;
using clocksync::probe::kProbePacketSize;
using clocksync::probe::ProbeKey;
using clocksync::probe::ProbeKeys;
using clocksync::probe::ProbePacket;

void CheckRoundTrip(const uint8_t* data, size_t size, const ProbeKeys* keys) {
  ProbePacket packet;
  if (DecodeProbe(data, size, &packet, keys) != DecodeStatus::kOk) return;
  uint8_t again[kProbePacketSize];
  if (EncodeProbe(packet, again, keys) != kProbePacketSize || size != kProbePacketSize ||
      std::memcmp(again, data, kProbePacketSize) != 0) {
    std::fprintf(stderr, "decoded packet does not encode back to its bytes\n");
    std::abort();
  }
}

// A key file's text, read back through the file path the daemon uses (a
// memfd with mode 0600).
void CheckKeyFile(const uint8_t* data, size_t size) {
  const int fd = memfd_create("probe.key", MFD_CLOEXEC);
  if (fd < 0) return;
  if (fchmod(fd, 0600) == 0 && write(fd, data, size) == static_cast<ssize_t>(size)) {
    (void)clocksync::probe::ReadProbeKeyFile("/proc/self/fd/" + std::to_string(fd));
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  static const ProbeKeys kKeys(ProbeKey{0x0706050403020100, 0x0f0e0d0c0b0a0908},
                               ProbeKey{1, 2});
  switch (mode % 3) {
    case 0:
      CheckRoundTrip(data, size, nullptr);
      break;
    case 1:
      CheckRoundTrip(data, size, &kKeys);
      break;
    case 2:
      CheckKeyFile(data, size);
      (void)clocksync::probe::ParseProbeKey(
          std::string(reinterpret_cast<const char*>(data), size));
      break;
  }
  return 0;
}
