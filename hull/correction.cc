// hull/correction.cc: the correction kinds' names and the one factory (see
// correction.h); each kind's math is in its own file.

#include "hull/correction.h"

#include <utility>

#include "absl/base/internal/raw_logging.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hull/online_correction.h"
#include "hull/postmortem.h"

namespace clocksync::hull {

void Correction::ToGlobalSorted(absl::Span<const int64_t> local_ns,
                                absl::Span<int64_t> global_ns) const {
  ABSL_RAW_CHECK(local_ns.size() == global_ns.size(),
                 "ToGlobalSorted: input and output sizes differ");
  for (size_t i = 0; i < local_ns.size(); ++i) {
    global_ns[i] = ToGlobalNs(local_ns[i]);
  }
}

absl::string_view CorrectionKindName(CorrectionKind kind) {
  switch (kind) {
    case CorrectionKind::kNone:
      return "none";
    case CorrectionKind::kOnline:
      return "online";
    case CorrectionKind::kLinear:
      return "linear";
    case CorrectionKind::kSpline:
      return "spline";
    case CorrectionKind::kPiecewise:
      return "piecewise";
  }
  return "unknown";
}

std::vector<CorrectionKind> AllCorrectionKinds() {
  return {CorrectionKind::kNone, CorrectionKind::kOnline,
          CorrectionKind::kLinear, CorrectionKind::kSpline,
          CorrectionKind::kPiecewise};
}

absl::StatusOr<CorrectionKind> ParseCorrectionKind(absl::string_view name) {
  for (CorrectionKind kind : AllCorrectionKinds()) {
    if (CorrectionKindName(kind) == name) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown correction '", name,
                   "' (expected none, online, linear, spline or piecewise)"));
}

bool IsPostmortem(CorrectionKind kind) {
  return kind == CorrectionKind::kLinear || kind == CorrectionKind::kSpline ||
         kind == CorrectionKind::kPiecewise;
}

absl::StatusOr<std::unique_ptr<Correction>> MakeCorrection(
    CorrectionKind kind, const CorrectionInput& input, std::string* report) {
  std::string ignored;
  if (report == nullptr) report = &ignored;
  switch (kind) {
    case CorrectionKind::kNone:
      *report = "none: local time as is";
      return std::unique_ptr<Correction>(new IdentityCorrection);
    case CorrectionKind::kOnline: {
      if (input.segments.empty()) {
        return absl::FailedPreconditionError(
            "online correction: no mapping segment");
      }
      *report =
          absl::StrCat("online: ", input.segments.size(), " mapping segments",
                       input.raw_at_local ? ", local != raw" : "");
      return std::unique_ptr<Correction>(new OnlineCorrection(
          std::vector<MappingSegment>(input.segments.begin(),
                                      input.segments.end()),
          input.raw_at_local));
    }
    case CorrectionKind::kLinear:
    case CorrectionKind::kSpline:
    case CorrectionKind::kPiecewise: {
      absl::StatusOr<std::unique_ptr<PostmortemCorrection>> made =
          FitPostmortemCorrection(kind, input.sessions, input.postmortem);
      if (!made.ok()) return made.status();
      *report = (*made)->report().ToString();
      return std::unique_ptr<Correction>(*std::move(made));
    }
  }
  return absl::InvalidArgumentError("unknown correction kind");
}

}  // namespace clocksync::hull
