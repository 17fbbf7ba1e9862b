// tools/trace/view_html.cc: the view's page and its SVG snapshot (see
// view_html.h).

#include "tools/trace/view_html.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace clocksync::trace {
namespace {

constexpr char kPage[] =
#include "tools/trace/view_page.inc"
    ;

std::string Xml(absl::string_view s) {
  return absl::StrReplaceAll(
      s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string Duration(double ns) {
  const double a = std::fabs(ns);
  if (a >= 1e9) return absl::StrFormat("%.4g s", ns / 1e9);
  if (a >= 1e6) return absl::StrFormat("%.4g ms", ns / 1e6);
  if (a >= 1e3) return absl::StrFormat("%.4g µs", ns / 1e3);
  return absl::StrFormat("%.0f ns", ns);
}

}  // namespace

std::string ViewHtml(const std::string& model_json) {
  // "</" may not appear inside a script element; "<\/" is the same JSON.
  const std::string safe = absl::StrReplaceAll(model_json, {{"</", "<\\/"}});
  return absl::StrReplaceAll(kPage, {{"@MODEL@", safe}});
}

std::string ViewSvg(const ViewModel& model, int32_t width) {
  constexpr int kLabel = 170, kRowH = 16, kGap = 4, kAxis = 26, kLegendRow = 16;
  const ViewCorrection* c = model.Find(model.initial);
  if (c == nullptr || !c->available) return "";
  const LodIndex& index = *c->index;
  const int w = std::max(200, width - kLabel - 4);
  const int64_t origin = index.origin_ns();
  const double span = static_cast<double>(index.end_ns() - origin);
  const LodAnswer a = index.Query(origin, index.end_ns(), w);
  const size_t rows = index.rows().size();
  const int plot_h = kAxis + static_cast<int>(rows) * (kRowH + kGap) + 4;
  const int legend_rows = static_cast<int>((index.regions().size() + 3) / 4) + 1;
  const int height = plot_h + 10 + legend_rows * kLegendRow;
  auto x = [&](int64_t t) {
    return kLabel + std::clamp((t - origin) / span * w, -2.0, w + 2.0);
  };
  auto y = [&](uint32_t row) { return kAxis + static_cast<int>(row) * (kRowH + kGap); };

  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
      "<text x=\"4\" y=\"12\">%s · %s · level %d · slot %s</text>\n",
      kLabel + w + 4, height, Xml(model.title),
      hull::CorrectionKindName(model.initial), a.level,
      Duration(static_cast<double>(a.slot_ns)));
  // Axis: about 8 ticks at 1, 2 or 5 times a power of ten.
  const double raw = span / 8, p = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / p < 2 ? p : raw / p < 5 ? 2 * p : 5 * p;
  for (double t = 0; t <= span; t += step) {
    const double tx = kLabel + t / span * w;
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
                          "stroke=\"#dddddd\"/><text x=\"%.1f\" y=\"%d\" "
                          "text-anchor=\"middle\">%s</text>\n",
                          tx, tx, kAxis - 6, plot_h, tx, kAxis - 9, Duration(t));
  }
  for (size_t r = 0; r < rows; ++r) {
    const LodIndexRow& row = index.rows()[r];
    absl::StrAppendFormat(&out,
                          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                          "fill=\"#f4f4f4\"/><text x=\"4\" y=\"%d\">%s</text>\n",
                          kLabel, y(r), w, kRowH, y(r) + 12,
                          Xml(absl::StrCat("rank ", row.rank, " ", row.name)));
  }
  for (const LodCollectiveRecord& k : a.collectives) {
    const double x0 = x(k.begin_ns), x1 = std::max(x(k.end_ns), x0 + 1);
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                          "fill=\"#6a3d9a\" opacity=\"0.18\"/>\n",
                          x0, kAxis, x1 - x0, plot_h - kAxis);
  }
  for (const LodFunctionHit& f : a.functions) {
    const double x0 = x(f.record.begin_ns), x1 = std::max(x(f.record.end_ns), x0 + 1);
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                          "fill=\"%s\"/>\n",
                          x0, y(f.row), x1 - x0, kRowH,
                          RegionColor(index.regions()[f.record.region]));
  }
  for (const LodMessageRecord& m : a.messages) {
    const bool back = m.recv_ns < m.send_ns;
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                          "stroke=\"%s\" stroke-width=\"%s\" opacity=\"%s\"/>\n",
                          x(m.send_ns), y(m.send_row) + kRowH / 2, x(m.recv_ns),
                          y(m.recv_row) + kRowH / 2, back ? "#dd0000" : "#222222",
                          back ? "1.5" : "1", back ? "0.9" : "0.55");
  }
  for (size_t i = 0; i < index.regions().size(); ++i) {
    const int lx = 4 + static_cast<int>(i % 4) * ((kLabel + w) / 4);
    const int ly = plot_h + 10 + static_cast<int>(i / 4) * kLegendRow;
    absl::StrAppendFormat(&out,
                          "<rect x=\"%d\" y=\"%d\" width=\"11\" height=\"11\" "
                          "fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                          lx, ly, RegionColor(index.regions()[i]), lx + 15, ly + 10,
                          Xml(index.regions()[i]));
  }
  absl::StrAppendFormat(&out,
                        "<text x=\"4\" y=\"%d\">time since %d ns (global, %s); red "
                        "lines: received before sent</text>\n</svg>\n",
                        height - 4, origin, hull::CorrectionKindName(model.initial));
  return out;
}

}  // namespace clocksync::trace
