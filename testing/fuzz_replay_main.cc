// testing/fuzz_replay_main.cc: a main() for fuzz harnesses built without
// libFuzzer (testing/fuzz.bzl): runs LLVMFuzzerTestOneInput over every file
// of the corpus directories given as arguments, then over deterministic
// mutations of them (bit flips, byte changes, cuts, insertions, splices of
// two seeds), so that every `bazel test` exercises the harness a few
// thousand times. A crash or a sanitizer report fails the test; the
// input that caused it can be kept as a seed (CLOCKSYNC_FUZZ_LAST_INPUT below). CLOCKSYNC_FUZZ_RUNS sets the
// number of mutations (default 5000).

#include <dirent.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> ReadCorpus(const std::string& dir) {
  std::vector<std::string> seeds;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    std::fprintf(stderr, "fuzz replay: cannot open corpus directory %s\n", dir.c_str());
    std::exit(2);
  }
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

// With CLOCKSYNC_FUZZ_LAST_INPUT=FILE each input is written there before it
// runs: after a crash, FILE holds the input that caused it.
void Run(const std::string& input) {
  static const char* last = std::getenv("CLOCKSYNC_FUZZ_LAST_INPUT");
  if (last != nullptr) std::ofstream(last, std::ios::binary | std::ios::trunc) << input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  std::string s = seeds[rng() % seeds.size()];
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits; ++i) {
    const size_t pos = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
        break;
      case 1:  // an interesting byte
        if (!s.empty()) {
          static constexpr unsigned char kBytes[] = {0, 1, 0x7f, 0x80, 0xff, '\n', ',', ':', '-', '9'};
          s[pos] = static_cast<char>(kBytes[rng() % sizeof(kBytes)]);
        }
        break;
      case 2:  // cut the tail
        s.resize(pos);
        break;
      case 3:  // erase a run
        s.erase(pos, rng() % 16);
        break;
      case 4:  // insert random bytes
        for (int n = static_cast<int>(rng() % 8); n > 0; --n) {
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<char>(rng()));
        }
        break;
      case 5: {  // splice in a piece of another seed
        const std::string& other = seeds[rng() % seeds.size()];
        if (!other.empty()) {
          const size_t from = rng() % other.size();
          s.insert(pos, other.substr(from, rng() % 32));
        }
        break;
      }
      case 6:  // duplicate a run
        if (!s.empty()) s.insert(pos, s.substr(pos, rng() % 16));
        break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> seeds;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> more = ReadCorpus(argv[i]);
    seeds.insert(seeds.end(), more.begin(), more.end());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "fuzz replay: no seeds (give corpus directories)\n");
    return 2;
  }
  for (const std::string& seed : seeds) Run(seed);
  const char* runs_text = std::getenv("CLOCKSYNC_FUZZ_RUNS");
  const long runs = runs_text != nullptr ? std::atol(runs_text) : 5000;
  std::mt19937_64 rng(20261125);
  for (long i = 0; i < runs; ++i) Run(Mutate(seeds, rng));
  std::printf("fuzz replay: %zu seeds and %ld mutations, no crash\n", seeds.size(), runs);
  return 0;
}
