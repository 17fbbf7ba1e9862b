// probe/auth_benchmark.cc: what authentication adds to a probe:
// encoding and decoding one packet with and without the shared key, side by
// side in the same run (the MAC is one SipHash-2-4 of 66 bytes each way).
//
//   bazel run -c opt //probe:auth_benchmark
//
// Ends with
//   FIGURE probe_mac_ns_per_packet <v> ns   (encode+decode, keyed minus plain)

#include <cstdio>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "probe/packet.h"
#include "testing/side_by_side.h"

namespace clocksync::probe {
namespace {

const ProbeKeys kKey(ProbeKey{0x0123456789abcdefULL, 0xfedcba9876543210ULL});

ProbePacket Reply(uint64_t nonce) {
  ProbePacket p;
  p.type = ProbeType::kReply;
  p.nonce = nonce;
  p.sender_id = 42;
  p.t1_ns = 1'000'000'000 + static_cast<int64_t>(nonce);
  p.t2_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(nonce);
  p.t3_ns = p.t2_ns + 1500;
  p.parent_bound_ns = 800;
  p.parent_state = kProbeStateSynced;
  p.parent_depth = 1;
  return p;
}

// One packet encoded and decoded per iteration (as a reply is encoded by
// the parent and decoded by the child).
void RoundTrip(benchmark::State& state, const ProbeKeys* key) {
  uint8_t buffer[kProbePacketSize];
  ProbePacket out;
  uint64_t nonce = 1;
  for (auto _ : state) {
    EncodeProbe(Reply(nonce++), buffer, key);
    benchmark::DoNotOptimize(buffer);
    if (DecodeProbe(buffer, sizeof(buffer), &out, key) != DecodeStatus::kOk) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(out);
  }
}
void BM_ProbeRoundTripPlain(benchmark::State& state) { RoundTrip(state, nullptr); }
void BM_ProbeRoundTripKeyed(benchmark::State& state) { RoundTrip(state, &kKey); }
BENCHMARK(BM_ProbeRoundTripPlain)->Repetitions(9);
BENCHMARK(BM_ProbeRoundTripKeyed)->Repetitions(9);


}  // namespace
}  // namespace clocksync::probe

int main(int argc, char** argv) {
  clocksync::bench::InitializeInterleaved(argc, argv);
  clocksync::bench::MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const double plain = reporter.MedianCpuNs("BM_ProbeRoundTripPlain");
  const double keyed = reporter.MedianCpuNs("BM_ProbeRoundTripKeyed");
  std::printf("encode+decode of one probe (CPU time medians): plain %.2f ns, "
              "authenticated %.2f ns\n", plain, keyed);
  std::printf("FIGURE probe_mac_ns_per_packet %.2f ns\n", keyed - plain);
  return 0;
}
