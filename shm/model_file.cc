// shm/model_file.cc: writing and parsing the `<shm_path>.model` side file
// (model_file.h).

#include "shm/model_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace clocksync {
namespace shm {
namespace {

constexpr absl::string_view kOriginKey = "origin_raw_ns=";
constexpr absl::string_view kSpecKey = "spec=";

bool HasWhitespace(absl::string_view text) {
  for (char c : text) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

}  // namespace

std::string ModelFilePath(const std::string& shm_path) {
  return shm_path + ".model";
}

std::string FormatModelFile(const ModelFile& model) {
  return absl::StrCat(kOriginKey, model.origin_raw_ns, " ", kSpecKey,
                      model.spec, "\n");
}

absl::StatusOr<ModelFile> ParseModelFile(absl::string_view text,
                                         const std::string& path) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  auto bad = [&](size_t line, absl::string_view what,
                 absl::string_view got) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", line, ": ", what, ", got '", got, "'"));
  };
  // Line 1 holds the fields; later lines must be blank.
  for (size_t i = 1; i < lines.size(); ++i) {
    if (!absl::StripAsciiWhitespace(lines[i]).empty()) {
      return bad(i + 1, "expected the end of the file", lines[i]);
    }
  }
  const absl::string_view line = absl::StripAsciiWhitespace(lines[0]);
  const char* const kExpected =
      "expected 'origin_raw_ns=<int64> spec=<clock model>'";
  if (line.empty()) return bad(1, kExpected, line);
  ModelFile model;
  bool have_origin = false;
  bool have_spec = false;
  for (absl::string_view field : absl::StrSplit(
           line, absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&field, kOriginKey)) {
      if (have_origin) return bad(1, "origin_raw_ns given twice", line);
      if (!absl::SimpleAtoi(field, &model.origin_raw_ns)) {
        return bad(1, "origin_raw_ns: not an int64", field);
      }
      have_origin = true;
    } else if (absl::ConsumePrefix(&field, kSpecKey)) {
      if (have_spec) return bad(1, "spec given twice", line);
      if (field.empty()) return bad(1, "spec: empty", line);
      model.spec = std::string(field);
      have_spec = true;
    } else {
      return bad(1, absl::StrCat(kExpected, ": unknown field"), field);
    }
  }
  if (!have_origin || !have_spec) return bad(1, kExpected, line);
  return model;
}

absl::StatusOr<ModelFile> ReadModelFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read clock model file ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseModelFile(text.str(), path);
}

absl::Status WriteModelFile(const std::string& path, const ModelFile& model) {
  if (model.spec.empty() || HasWhitespace(model.spec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": clock model spec '", model.spec,
                     "' is empty or holds whitespace"));
  }
  const std::string text = FormatModelFile(model);
  std::string temp = path + ".XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  auto fail = [&](const char* what, int error) {
    unlink(temp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", what,
                                            ": ", std::strerror(error)));
  };
  const ssize_t written = write(fd, text.data(), text.size());
  if (written != static_cast<ssize_t>(text.size())) {
    const int error = written < 0 ? errno : EIO;
    close(fd);
    return fail("write", error);
  }
  // Readable by the node's tracers, like the segment (mkstemp gives 0600).
  if (fchmod(fd, 0644) != 0) {
    const int error = errno;
    close(fd);
    return fail("fchmod", error);
  }
  if (close(fd) != 0) return fail("close", errno);
  if (rename(temp.c_str(), path.c_str()) != 0) return fail("rename", errno);
  return absl::OkStatus();
}

}  // namespace shm
}  // namespace clocksync
