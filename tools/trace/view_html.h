// tools/trace/view_html.h: the page and the snapshot of `clocksync-trace
// view`: one self-contained HTML file (inline CSS and JavaScript, nothing
// fetched but /lod from its own server under --serve) and a static SVG.
//
// The page draws the model of tools/trace/view_data.h as SVG elements:
// per row (thread) a <g class="row">, each function representative a
// <rect class="fn"> coloured by region (legend), each message
// representative a <line class="msg"> (class "msg back" when received
// before it was sent), each collective representative a <rect class="coll">
// band; a time axis in global time since the correction's origin; the
// correction switchable; a tooltip with the representative's details; the
// profile table. Zoom: wheel, drag to pan, buttons, +/- keys, and the URL
// hash `#c=<correction>&t0=<ns>&t1=<ns>` (read on load and on change,
// written on every zoom), which is also how tests drive it. The <svg> says
// what it shows in data-level, data-correction, data-t0, data-t1.
//
// Thread safety: pure functions.

#ifndef CLOCKSYNC_TOOLS_TRACE_VIEW_HTML_H_
#define CLOCKSYNC_TOOLS_TRACE_VIEW_HTML_H_

#include <cstdint>
#include <string>

#include "tools/trace/view_data.h"

namespace clocksync::trace {

// The page around `model_json` (ModelJson).
std::string ViewHtml(const std::string& model_json);

// A static picture of the whole run under the model's initial correction,
// `width` pixels wide: rows, function representatives, messages,
// collectives, the axis and the legend.
std::string ViewSvg(const ViewModel& model, int32_t width);

}  // namespace clocksync::trace

#endif  // CLOCKSYNC_TOOLS_TRACE_VIEW_HTML_H_
