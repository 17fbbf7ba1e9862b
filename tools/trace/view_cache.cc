// tools/trace/view_cache.cc: the view's index cache: the .src record of
// what an index was built from, and pruning stale, old, excess and
// unfinished files (see view_cache.h).

#include "tools/trace/view_cache.h"

#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/trace/view_data.h"

namespace clocksync::trace {
namespace {

namespace fs = std::filesystem;

constexpr char kSourceHeader[] = "clocksync lod index source 1";
constexpr absl::Duration kTempAge = absl::Hours(1);

// The archives, correction and options of an index from its .src; false
// when it is not one.
bool ReadSource(const std::string& path, std::vector<std::string>* archives,
                hull::CorrectionKind* kind, hull::PostmortemOptions* postmortem) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != kSourceHeader) return false;
  bool have_kind = false, have_fraction = false;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "correction ")) {
      absl::StatusOr<hull::CorrectionKind> k =
          hull::ParseCorrectionKind(line.substr(11));
      if (!k.ok()) return false;
      *kind = *k;
      have_kind = true;
    } else if (absl::StartsWith(line, "slow_fraction ")) {
      if (!absl::SimpleAtod(line.substr(14), &postmortem->slow_fraction)) return false;
      have_fraction = true;
    } else if (absl::StartsWith(line, "archive ")) {
      archives->push_back(line.substr(8));
    } else {
      return false;
    }
  }
  return have_kind && have_fraction && !archives->empty();
}

absl::Time ModTime(const struct stat& st) {
  return absl::TimeFromTimespec(st.st_mtim);
}

}  // namespace

absl::Status RecordIndexUse(const std::string& index_path,
                            const std::vector<std::string>& archives,
                            hull::CorrectionKind kind,
                            const hull::PostmortemOptions& postmortem) {
  std::string text = absl::StrCat(kSourceHeader, "\ncorrection ",
                                  hull::CorrectionKindName(kind), "\nslow_fraction ",
                                  absl::StrFormat("%.17g", postmortem.slow_fraction), "\n");
  for (const std::string& archive : archives) {
    std::error_code error;
    absl::StrAppend(&text, "archive ", fs::absolute(archive, error).string(), "\n");
  }
  const std::string path = index_path + ".src";
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temp);
    out << text;
    out.close();
    if (!out || std::rename(temp.c_str(), path.c_str()) != 0) {
      std::remove(temp.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write ", path));
    }
  }
  if (utimensat(AT_FDCWD, index_path.c_str(), nullptr, 0) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot touch ", index_path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<IndexCachePruned> PruneIndexCache(
    const std::string& dir, const std::vector<std::string>& in_use,
    const IndexCacheLimits& limits, absl::Time now) {
  std::set<std::string> keep;
  for (const std::string& p : in_use) keep.insert(fs::path(p).filename().string());
  struct Index {
    std::string name;
    int64_t bytes;
    absl::Time used;
  };
  std::vector<Index> indexes;
  std::set<std::string> sources;
  IndexCachePruned pruned;
  auto remove = [&](const std::string& name, int64_t bytes, int* counter) {
    std::error_code error;
    if (fs::remove(fs::path(dir) / name, error)) {
      ++*counter;
      pruned.bytes += bytes;
    }
    fs::remove(fs::path(dir) / (name + ".src"), error);
  };
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    struct stat st;
    if (stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (absl::StrContains(name, ".lodidx") && absl::StrContains(name, ".tmp.")) {
      if (now - ModTime(st) > kTempAge) remove(name, st.st_size, &pruned.temp);
    } else if (absl::EndsWith(name, ".lodidx")) {
      indexes.push_back(Index{name, st.st_size, ModTime(st)});
    } else if (absl::EndsWith(name, ".lodidx.src")) {
      sources.insert(name.substr(0, name.size() - 4));
    }
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot list the index directory ", dir, ": ", error.message()));
  }
  // .src files whose index is gone.
  for (const std::string& index : sources) {
    if (!fs::exists(fs::path(dir) / index)) {
      std::error_code e;
      if (fs::remove(fs::path(dir) / (index + ".src"), e)) ++pruned.stale;
    }
  }
  std::vector<Index> left;
  for (const Index& index : indexes) {
    if (keep.count(index.name) > 0) {
      left.push_back(index);
      continue;
    }
    std::vector<std::string> archives;
    hull::CorrectionKind kind;
    hull::PostmortemOptions postmortem;
    if (sources.count(index.name) > 0 &&
        ReadSource((fs::path(dir) / (index.name + ".src")).string(), &archives, &kind,
                   &postmortem) &&
        fs::path(IndexPath(dir, archives, kind, postmortem)).filename() != index.name) {
      remove(index.name, index.bytes, &pruned.stale);
    } else if (limits.max_age > absl::ZeroDuration() && now - index.used > limits.max_age) {
      remove(index.name, index.bytes, &pruned.old);
    } else {
      left.push_back(index);
    }
  }
  // Over the size limit: the least recently used first.
  int64_t total = 0;
  for (const Index& index : left) total += index.bytes;
  std::sort(left.begin(), left.end(),
            [](const Index& a, const Index& b) { return a.used < b.used; });
  for (const Index& index : left) {
    if (limits.max_bytes > 0 && total > limits.max_bytes && keep.count(index.name) == 0) {
      remove(index.name, index.bytes, &pruned.over);
      total -= index.bytes;
    } else {
      ++pruned.kept;
      pruned.kept_bytes += index.bytes;
    }
  }
  return pruned;
}

}  // namespace clocksync::trace
