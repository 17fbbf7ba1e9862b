// tools/trace/clocksync_trace_main.cc
//
// clocksync-trace: merge, compare, export, profile, lod and view of clocksync trace
// archives (one per process, written by the tracer through
// trace/otf2_writer.h). docs/TRACE_FORMAT.md describes the archives and
// this tool.
//
// Exit status: 0 ok, 1 bad usage (the message names the flag or value),
// 2 an archive cannot be read or lacks what the command needs (the message
// names the archive).

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "metrics/http_server.h"
#include "tools/trace/view_data.h"
#include "tools/trace/view_html.h"
#include "tools/trace/view_png.h"
#include "trace/compare_report.h"
#include "trace/export.h"
#include "trace/lod.h"
#include "trace/otf2_reader.h"
#include "trace/perfetto_export.h"
#include "trace/timeline.h"
#include "trace/trace.h"

ABSL_FLAG(std::string, correction, "",
          "none, online, linear, spline or piecewise (merge, export: default "
          "online; profile: default none)");
ABSL_FLAG(std::string, out, "",
          "output file (merge: default standard output; export: required, a "
          "file for chrome and perfetto, a new directory for otf2)");
ABSL_FLAG(std::string, format, "chrome",
          "export format: chrome, perfetto or otf2");
ABSL_FLAG(bool, json, false, "compare, profile: JSON instead of a table");
ABSL_FLAG(int64_t, min_latency_ns, 0,
          "compare: a message received sooner than this after its send "
          "violates the clock condition");

ABSL_FLAG(int32_t, bins, 100,
          "lod: bins of the finest level (1..1000000)");
ABSL_FLAG(int32_t, levels, 1,
          "lod --json: levels, each with half the bins of the one before "
          "(1..30)");
ABSL_FLAG(int64_t, from_ns, std::numeric_limits<int64_t>::min(),
          "lod: start of the range, global ns (default: the first event)");
ABSL_FLAG(int64_t, to_ns, std::numeric_limits<int64_t>::max(),
          "lod: end of the range, global ns, excluded (default: after the "
          "last event)");
ABSL_FLAG(std::string, serve, "",
          "view: serve the page at HOST:PORT (e.g. 127.0.0.1:8080) and answer "
          "its /lod queries live from the index, until Ctrl-C");
ABSL_FLAG(std::string, svg, "", "view: also write a static SVG snapshot here");
ABSL_FLAG(std::string, png, "",
          "view: also write a PNG snapshot of the page here (the whole run under "
          "--correction, a --width x --png_height window), taken by headless "
          "Chromium: needs chromium installed (apt-get install chromium)");
ABSL_FLAG(int32_t, png_height, 900, "view --png: the window's height in pixels");
ABSL_FLAG(std::string, chromium, "",
          "view --png: the Chromium to run (default: chromium or "
          "chromium-browser in $PATH)");
ABSL_FLAG(std::string, index_dir, "",
          "view: where level-of-detail indexes are kept (default "
          "$XDG_CACHE_HOME/clocksync-trace or ~/.cache/clocksync-trace)");
ABSL_FLAG(int64_t, index_max_mb, 8192,
          "view: the index cache's size limit in MB: the least recently used "
          "indexes beyond it are removed (0: no limit)");
ABSL_FLAG(int32_t, index_max_age_days, 30,
          "view: indexes unused for longer than this are removed (0: never)");
ABSL_FLAG(int64_t, embed_records, 60000,
          "view: representatives embedded per correction in the page (the "
          "whole run's level and finer ones while they fit)");
ABSL_FLAG(int32_t, width, 1600, "view: the drawing's width in pixels (--svg, and "
          "the level embedded for the whole run)");
ABSL_FLAG(double, slow_fraction, 0.1,
          "linear, spline, piecewise: the fraction of sync exchanges with the "
          "longest round trip dropped before fitting (per session for spline "
          "and piecewise, over all exchanges for linear), in [0, 1)");

namespace clocksync::trace {
namespace {

// The post-mortem corrections' options from the flags (validated in Run).
hull::PostmortemOptions PostmortemOptionsFromFlags() {
  hull::PostmortemOptions options;
  options.slow_fraction = absl::GetFlag(FLAGS_slow_fraction);
  return options;
}

constexpr char kUsage[] =
    R"(clocksync-trace: merge, compare, export, profile, lod and view of clocksync traces.

Usage:
  clocksync-trace merge   [--correction=C] [--out=FILE] ARCHIVE...
  clocksync-trace compare [--json] [--min_latency_ns=N] [--slow_fraction=F] ARCHIVE...
  clocksync-trace export  --format=chrome|perfetto|otf2 [--correction=C] --out=PATH ARCHIVE...
  clocksync-trace profile [--correction=C] [--json] ARCHIVE...
  clocksync-trace lod     [--correction=C] [--bins=N] [--levels=L] [--from_ns=T --to_ns=T] [--json] ARCHIVE...
  clocksync-trace view    [--correction=C] --out=run.html | --serve=HOST:PORT [--svg=run.svg] [--png=run.png] ARCHIVE...

ARCHIVE is a trace directory the tracer wrote (one per process: traces.otf2,
traces.def, traces/, clocksync.sidecar). Corrections C:
  none       local clock readings as they are
  online     the daemon's published mapping as the tracer saw it
  linear     least-squares line through all sync exchanges (Intel TC)
  spline     monotone cubic spline through the sync sessions (VampirTrace)
  piecewise  straight lines between the sync sessions (OTF2 ClockOffset)
The post-mortem ones drop the --slow_fraction (default 0.1) of exchanges
with the longest round trip first.

Commands:
  merge    one global timeline, one event per line, in global order:
           <global_ns> rank=R thread=T <kind> ... local_ns=L
  compare  one row per correction: messages matched (send i->j, tag, comm,
           FIFO), clock-condition violations (received before sent; and
           within --min_latency_ns), the worst latency in ns, and, where the
           traces carry ground truth, RMS and max error vs truth in ns over
           all events
  export   chrome:   Chrome/Perfetto trace-event JSON (ui.perfetto.dev);
           perfetto: Perfetto's protobuf trace (ui.perfetto.dev,
                     trace_processor), several times smaller than chrome;
           otf2:     one OTF2 archive of all processes in global ns
  profile  per process and region: calls, total, min, max, mean inclusive
           time in ns, from enter/leave pairs
  lod      a level-of-detail timeline: every thread's time in --bins bins
           of global time, split between the regions innermost in it; as
           text, a line per thread with the dominant region of each bin; as
           JSON (--json), --levels zoom levels with each bin's time per
           region, events, sends and receives (default correction online)
  view     the run in a browser: one self-contained HTML file (--out) or
           served with live level-of-detail queries (--serve); rows per
           thread, the function representing each slot coloured by
           region, messages (red: received before sent), collectives, the
           profile; every correction switchable (default online). The
           index behind it is built once per archive set (--index_dir);
           the cache drops indexes of archives gone or changed, unused
           for --index_max_age_days (30), or beyond --index_max_mb (8192).
           --svg writes a static snapshot; --png a picture of the page,
           taken by headless Chromium, which must be installed (Debian:
           apt-get install chromium; --chromium=PATH). docs/VIEW.md

Exit status: 0 ok, 1 bad usage, 2 an archive cannot be read (or lacks what
the command needs). A truncated archive is read up to its last complete
event, with a warning.

Example:
  clocksync-trace compare /tmp/run/rank0 /tmp/run/rank1
  clocksync-trace export --format=chrome --correction=spline --out=run.json /tmp/run/rank*
)";

int Usage(const std::string& message) {
  std::cerr << "clocksync-trace: " << message
            << "\n(clocksync-trace --help describes the commands)\n";
  return 1;
}

int Unreadable(const std::string& message) {
  std::cerr << "clocksync-trace: " << message << "\n";
  return 2;
}

// Reads every archive; warns about truncated ones.
std::optional<std::vector<ProcessTrace>> ReadAll(
    const std::vector<std::string>& archives, int* exit_code) {
  std::vector<ProcessTrace> traces;
  for (const std::string& archive : archives) {
    absl::StatusOr<ProcessTrace> trace = ReadProcessTrace(archive);
    if (!trace.ok()) {
      *exit_code = Unreadable(std::string(trace.status().message()));
      return std::nullopt;
    }
    if (trace->truncated) {
      std::cerr << "clocksync-trace: warning: " << archive
                << " is incomplete: " << trace->truncation_note << "\n";
    }
    traces.push_back(*std::move(trace));
  }
  return traces;
}

std::optional<hull::CorrectionKind> CorrectionFlag(
    hull::CorrectionKind fallback, int* exit_code) {
  const std::string value = absl::GetFlag(FLAGS_correction);
  if (value.empty()) return fallback;
  absl::StatusOr<hull::CorrectionKind> kind = hull::ParseCorrectionKind(value);
  if (!kind.ok()) {
    *exit_code = Usage(absl::StrCat("bad flag --correction: ",
                                    kind.status().message()));
    return std::nullopt;
  }
  return *kind;
}

// A timeline on which every process has the correction.
std::optional<Timeline> CompleteTimeline(
    const std::vector<ProcessTrace>& traces,
    const std::vector<std::string>& archives, hull::CorrectionKind kind,
    int* exit_code) {
  absl::StatusOr<Timeline> timeline =
      BuildTimeline(traces, kind, PostmortemOptionsFromFlags());
  if (!timeline.ok()) {
    *exit_code = Unreadable(std::string(timeline.status().message()));
    return std::nullopt;
  }
  for (size_t p = 0; p < traces.size(); ++p) {
    if (!timeline->processes[p].available) {
      *exit_code = Unreadable(absl::StrCat(
          archives[p], ": no ", hull::CorrectionKindName(kind),
          " correction: ", timeline->processes[p].unavailable_reason));
      return std::nullopt;
    }
  }
  return *std::move(timeline);
}

// The archives read and put on one timeline under --correction (default
// `fallback`), every process with the correction.
struct Loaded {
  std::vector<ProcessTrace> traces;
  Timeline timeline;
};

std::optional<Loaded> LoadOnTimeline(const std::vector<std::string>& archives,
                                     hull::CorrectionKind fallback,
                                     int* exit_code) {
  std::optional<hull::CorrectionKind> kind =
      CorrectionFlag(fallback, exit_code);
  if (!kind) return std::nullopt;
  std::optional<std::vector<ProcessTrace>> traces = ReadAll(archives, exit_code);
  if (!traces) return std::nullopt;
  std::optional<Timeline> timeline =
      CompleteTimeline(*traces, archives, *kind, exit_code);
  if (!timeline) return std::nullopt;
  return Loaded{*std::move(traces), *std::move(timeline)};
}

int Merge(const std::vector<std::string>& archives) {
  int exit_code = 0;
  std::optional<Loaded> loaded =
      LoadOnTimeline(archives, hull::CorrectionKind::kOnline, &exit_code);
  if (!loaded) return exit_code;
  const auto& [traces, timeline] = *loaded;
  const std::string out_path = absl::GetFlag(FLAGS_out);
  if (out_path.empty() || out_path == "-") {
    WriteMergedText(traces, timeline, std::cout);
    std::cout.flush();
    return std::cout ? 0 : Unreadable("cannot write standard output");
  }
  std::ofstream out(out_path);
  if (!out) return Usage(absl::StrCat("bad flag --out: cannot create ", out_path));
  WriteMergedText(traces, timeline, out);
  out.close();
  if (!out) return Usage(absl::StrCat("bad flag --out: cannot write ", out_path));
  return 0;
}

int Compare(const std::vector<std::string>& archives) {
  int exit_code = 0;
  std::optional<std::vector<ProcessTrace>> traces = ReadAll(archives, &exit_code);
  if (!traces) return exit_code;
  absl::StatusOr<CompareReport> report = CompareCorrections(
      *traces, absl::GetFlag(FLAGS_min_latency_ns), PostmortemOptionsFromFlags());
  if (!report.ok()) return Unreadable(std::string(report.status().message()));
  std::cout << (absl::GetFlag(FLAGS_json) ? FormatCompareJson(*report)
                                          : FormatCompareTable(*report));
  return 0;
}

int Export(const std::vector<std::string>& archives) {
  int exit_code = 0;
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "chrome" && format != "perfetto" && format != "otf2") {
    return Usage(absl::StrCat("bad flag --format: '", format,
                              "' (expected chrome, perfetto or otf2)"));
  }
  const std::string out_path = absl::GetFlag(FLAGS_out);
  if (out_path.empty()) return Usage("bad flag --out: export needs --out=PATH");
  std::optional<Loaded> loaded =
      LoadOnTimeline(archives, hull::CorrectionKind::kOnline, &exit_code);
  if (!loaded) return exit_code;
  const auto& [traces, timeline] = *loaded;
  if (format == "otf2") {
    absl::Status status = WriteMergedOtf2(traces, timeline, out_path);
    if (!status.ok()) {
      return Usage(absl::StrCat("bad flag --out: ", status.message()));
    }
    return 0;
  }
  absl::StatusOr<MessageMatch> messages = MatchMessages(traces);
  if (!messages.ok()) return Unreadable(std::string(messages.status().message()));
  std::ofstream out(out_path, std::ios::binary);
  if (!out) return Usage(absl::StrCat("bad flag --out: cannot create ", out_path));
  if (format == "perfetto") {
    absl::Status status = WritePerfettoTrace(traces, timeline, *messages, out);
    if (!status.ok()) {
      return Unreadable(absl::StrCat(out_path, ": ", status.message()));
    }
    return 0;
  }
  WriteChromeJson(traces, timeline, *messages, out);
  out.close();
  if (!out) return Usage(absl::StrCat("bad flag --out: cannot write ", out_path));
  return 0;
}

int ProfileCommand(const std::vector<std::string>& archives) {
  int exit_code = 0;
  std::optional<Loaded> loaded =
      LoadOnTimeline(archives, hull::CorrectionKind::kNone, &exit_code);
  if (!loaded) return exit_code;
  const auto& [traces, timeline] = *loaded;
  const Profile profile = ProfileRegions(traces, timeline);
  if (absl::GetFlag(FLAGS_json)) {
    std::string json = absl::StrCat(
        "{\"correction\":\"", hull::CorrectionKindName(timeline.kind),
        "\",\"unmatched_leaves\":", profile.unmatched_leaves,
        ",\"open_enters\":", profile.open_enters, ",\"regions\":[");
    for (size_t i = 0; i < profile.regions.size(); ++i) {
      const RegionProfile& r = profile.regions[i];
      std::string name;
      for (char ch : r.name) {
        if (ch == '"' || ch == '\\') name.push_back('\\');
        if (static_cast<unsigned char>(ch) >= 0x20) name.push_back(ch);
      }
      absl::StrAppend(&json, i == 0 ? "" : ",", "{\"rank\":",
                      traces[r.process].info.rank, ",\"region\":\"", name,
                      "\",\"calls\":", r.calls, ",\"total_ns\":", r.total_ns,
                      ",\"min_ns\":", r.min_ns, ",\"max_ns\":", r.max_ns,
                      ",\"mean_ns\":", absl::StrFormat("%.1f", r.mean_ns()),
                      "}");
    }
    json += "]}\n";
    std::cout << json;
    return 0;
  }
  std::cout << absl::StrFormat("%5s  %-30s %9s %15s %12s %12s %14s\n", "rank",
                               "region", "calls", "total_ns", "min_ns",
                               "max_ns", "mean_ns");
  for (const RegionProfile& r : profile.regions) {
    std::cout << absl::StrFormat("%5d  %-30s %9d %15d %12d %12d %14.1f\n",
                                 traces[r.process].info.rank, r.name,
                                 r.calls, r.total_ns, r.min_ns, r.max_ns,
                                 r.mean_ns());
  }
  if (profile.unmatched_leaves > 0 || profile.open_enters > 0) {
    std::cout << absl::StrFormat(
        "(%d leaves without their enter, %d enters never left)\n",
        profile.unmatched_leaves, profile.open_enters);
  }
  return 0;
}

int LodCommand(const std::vector<std::string>& archives) {
  int exit_code = 0;
  std::optional<Loaded> loaded =
      LoadOnTimeline(archives, hull::CorrectionKind::kOnline, &exit_code);
  if (!loaded) return exit_code;
  const auto& [traces, timeline] = *loaded;
  LodOptions options;
  options.bins = absl::GetFlag(FLAGS_bins);
  options.levels = absl::GetFlag(FLAGS_levels);
  options.from_ns = absl::GetFlag(FLAGS_from_ns);
  options.to_ns = absl::GetFlag(FLAGS_to_ns);
  absl::StatusOr<Lod> lod = BuildLod(traces, timeline, options);
  if (!lod.ok()) {
    if (lod.status().code() == absl::StatusCode::kInvalidArgument) {
      return Usage(absl::StrCat("bad flag --", lod.status().message()));
    }
    return Usage(std::string(lod.status().message()));
  }
  if (absl::GetFlag(FLAGS_json)) {
    WriteLodJson(*lod, std::cout);
  } else {
    std::cout << FormatLodText(*lod, 0);
  }
  std::cout.flush();
  return std::cout ? 0 : Unreadable("cannot write standard output");
}

// The PNG of the page (the --out file, or a temporary copy) under `kind`.
int WritePng(const ViewModel& model, const std::string& out_path,
             const std::string& png_path, const std::string& chromium,
             int32_t width, int32_t height, int64_t embed, hull::CorrectionKind kind) {
  std::string page = out_path;
  std::string temp;
  if (page.empty()) {
    temp = absl::StrCat(png_path, ".", getpid(), ".html");
    std::ofstream html(temp);
    html << ViewHtml(ModelJson(model, width, embed, /*serve=*/false));
    html.close();
    if (!html) {
      std::remove(temp.c_str());
      return Usage(absl::StrCat("bad flag --png: cannot write ", temp));
    }
    page = temp;
  }
  PngOptions options;
  options.chromium = chromium;
  options.html_path = page;
  options.correction = std::string(hull::CorrectionKindName(kind));
  options.png_path = png_path;
  options.width_px = width;
  options.height_px = height;
  const absl::Status s = TakePngSnapshot(options);
  if (!temp.empty()) std::remove(temp.c_str());
  if (!s.ok()) return Usage(absl::StrCat("bad flag --png: ", s.message()));
  std::cerr << "clocksync-trace: wrote " << png_path << "\n";
  return 0;
}

int ViewCommand(const std::vector<std::string>& archives) {
  int exit_code = 0;
  const std::string out_path = absl::GetFlag(FLAGS_out);
  const std::string serve = absl::GetFlag(FLAGS_serve);
  const std::string svg_path = absl::GetFlag(FLAGS_svg);
  const std::string png_path = absl::GetFlag(FLAGS_png);
  if (out_path.empty() && serve.empty() && svg_path.empty() && png_path.empty()) {
    return Usage("bad flag --out: view needs --out=FILE.html, --serve=HOST:PORT, "
                 "--svg=FILE.svg or --png=FILE.png");
  }
  // Chromium is looked for before anything is built.
  std::string chromium;
  if (!png_path.empty()) {
    const std::string name = absl::GetFlag(FLAGS_chromium);
    chromium = FindChromium(name);
    if (chromium.empty()) {
      return Usage(absl::StrCat(
          "bad flag --png: ", name.empty() ? "chromium (or chromium-browser)" : name,
          " not found; the PNG is taken by headless Chromium: apt-get install "
          "chromium, or --chromium=PATH"));
    }
  }
  const int32_t png_height = absl::GetFlag(FLAGS_png_height);
  if (png_height < 100 || png_height > 20000) {
    return Usage(absl::StrCat("bad flag --png_height: ", png_height,
                              " is not in 100..20000"));
  }
  const int32_t width = absl::GetFlag(FLAGS_width);
  if (width < 200 || width > 20000) {
    return Usage(absl::StrCat("bad flag --width: ", width, " is not in 200..20000"));
  }
  const int64_t embed = absl::GetFlag(FLAGS_embed_records);
  if (embed < 0) {
    return Usage(absl::StrCat("bad flag --embed_records: ", embed, " is negative"));
  }
  const int64_t max_mb = absl::GetFlag(FLAGS_index_max_mb);
  if (max_mb < 0 || max_mb > (int64_t{1} << 40)) {
    return Usage(absl::StrCat("bad flag --index_max_mb: ", max_mb, " is not in 0..2^40"));
  }
  const int32_t max_age_days = absl::GetFlag(FLAGS_index_max_age_days);
  if (max_age_days < 0) {
    return Usage(absl::StrCat("bad flag --index_max_age_days: ", max_age_days,
                              " is negative"));
  }
  std::optional<hull::CorrectionKind> kind =
      CorrectionFlag(hull::CorrectionKind::kOnline, &exit_code);
  if (!kind) return exit_code;
  std::optional<std::vector<ProcessTrace>> traces = ReadAll(archives, &exit_code);
  if (!traces) return exit_code;
  ViewOptions options;
  options.index_dir = absl::GetFlag(FLAGS_index_dir);
  options.cache_limits.max_bytes = max_mb * 1000 * 1000;
  options.cache_limits.max_age = absl::Hours(24) * max_age_days;
  options.initial = *kind;
  options.postmortem = PostmortemOptionsFromFlags();
  absl::StatusOr<ViewModel> model = MakeViewModel(archives, *traces, options);
  if (!model.ok()) return Unreadable(std::string(model.status().message()));
  for (const std::string& note : model->notes) {
    std::cerr << "clocksync-trace: " << note << "\n";
  }
  if (!svg_path.empty()) {
    std::ofstream svg(svg_path);
    svg << ViewSvg(*model, width);
    svg.close();
    if (!svg) return Usage(absl::StrCat("bad flag --svg: cannot write ", svg_path));
    std::cerr << "clocksync-trace: wrote " << svg_path << "\n";
  }
  if (!out_path.empty()) {
    const absl::Time start = absl::Now();
    const std::string page = ViewHtml(ModelJson(*model, width, embed, /*serve=*/false));
    std::ofstream html(out_path);
    html << page;
    html.close();
    if (!html) return Usage(absl::StrCat("bad flag --out: cannot write ", out_path));
    std::cerr << absl::StrFormat("clocksync-trace: wrote %s (%d bytes in %.2f s)\n",
                                 out_path, page.size(),
                                 absl::ToDoubleSeconds(absl::Now() - start));
  }
  if (!png_path.empty()) {
    if (int code = WritePng(*model, out_path, png_path, chromium, width, png_height,
                            embed, *kind);
        code != 0) {
      return code;
    }
  }
  if (serve.empty()) return 0;
  // The page embeds the whole run's level only; /lod answers the rest.
  const std::string page = ViewHtml(ModelJson(*model, width, 0, /*serve=*/true));
  std::map<std::string, metrics::HttpPage> pages;
  pages["/"] = metrics::HttpPage{"text/html; charset=utf-8", [&page] { return page; }};
  metrics::HttpPage lod;
  lod.content_type = "application/json";
  lod.body_for_query = [&model](const std::string& query) {
    return AnswerLodQuery(*model, query);
  };
  pages["/lod"] = std::move(lod);
  metrics::HttpServerOptions server_options;
  server_options.log_name = "view server";
  server_options.write_timeout = absl::Seconds(30);
  metrics::HttpServer server(server_options, std::move(pages));
  // SIGINT and SIGTERM are waited for, not delivered.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (absl::Status s = server.Start(serve); !s.ok()) {
    return Usage(absl::StrCat("bad flag --serve: ", serve, ": ", s.message()));
  }
  const size_t colon = serve.rfind(':');
  std::cerr << "clocksync-trace: serving http://" << serve.substr(0, colon) << ":"
            << server.port() << "/ (Ctrl-C stops)" << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  server.Stop();
  return 0;
}

int Run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "-help" || arg == "help") {
      std::cout << kUsage;
      return 0;
    }
  }
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) return Usage("missing command");
  const std::string command = positional[1];
  std::vector<std::string> archives(positional.begin() + 2, positional.end());
  if (command != "merge" && command != "compare" && command != "export" &&
      command != "profile" && command != "lod" && command != "view") {
    return Usage(absl::StrCat(
        "unknown command '", command,
        "' (expected merge, compare, export, profile, lod or view)"));
  }
  if (archives.empty()) return Usage(absl::StrCat(command, ": no archive given"));
  if (absl::GetFlag(FLAGS_min_latency_ns) < 0) {
    return Usage("bad flag --min_latency_ns: must be >= 0");
  }
  const double slow_fraction = absl::GetFlag(FLAGS_slow_fraction);
  if (!(slow_fraction >= 0 && slow_fraction < 1)) {
    return Usage(absl::StrCat("bad flag --slow_fraction: ", slow_fraction,
                              " is not in [0, 1)"));
  }
  if (command == "merge") return Merge(archives);
  if (command == "compare") return Compare(archives);
  if (command == "export") return Export(archives);
  if (command == "lod") return LodCommand(archives);
  if (command == "view") return ViewCommand(archives);
  return ProfileCommand(archives);
}

}  // namespace
}  // namespace clocksync::trace

int main(int argc, char** argv) { return clocksync::trace::Run(argc, argv); }
