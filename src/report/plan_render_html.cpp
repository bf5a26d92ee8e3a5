// PlanReport -> one self-contained HTML page: inline CSS, inline SVG charts drawn here, no
// script, no external font, style or image (clusters are often air-gapped, and the file must
// open the same way years later). Every text from the results is escaped. Formatting only.
#include <fabperf/core/units.hpp>
#include <fabperf/report/plan_report.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <zlib.h>
#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace fabperf {

namespace {

constexpr auto* esc = &xml_escape;
constexpr PlanCells kHtml{true};

constexpr const char* kTx = "#2563eb";
constexpr const char* kRx = "#14b8a6";
constexpr const char* kFail = "#dc2626";
constexpr const char* kInk = "#1f2937";
constexpr const char* kGrid = "#e5e7eb";
constexpr const char* kSeriesColors[] = {"#2563eb", "#db2777", "#16a34a", "#ea580c", "#7c3aed",
                                         "#0891b2", "#ca8a04", "#4b5563", "#be123c", "#059669"};

// A round axis step giving about `n` ticks up to `max`.
double nice_step(double max, int n) {
  if (max <= 0) return 1;
  const double raw = max / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

// The y axis' top: 12% above the largest value, rounded up to a whole step.
double axis_top(double max) {
  const double top = max > 0 ? max * 1.12 : 1;
  return std::ceil(top / nice_step(top, 5)) * nice_step(top, 5);
}

struct Geometry {
  double w{720}, h{260}, left{64}, right{16}, top{28}, bottom{56};
  [[nodiscard]] double pw() const { return w - left - right; }
  [[nodiscard]] double ph() const { return h - top - bottom; }
};

// An SVG text of class `cls` at (x, y): `attrs` are its other attributes, each with its leading space.
std::string svg_text(double x, double y, std::string_view cls, std::string_view attrs, std::string_view body,
                     std::string_view end = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"{}\"{}>{}</text>{}", x, y, cls, attrs, body, end);
}
constexpr std::string_view kMiddle = " text-anchor=\"middle\"", kEnd = " text-anchor=\"end\"";
// A text's or a line's other attributes: turned by `deg` about (x, y).
std::string rotated(int deg, double x, double y, std::string_view anchor = kMiddle) {
  return fmt::format("{} transform=\"rotate({} {:.1f} {:.1f})\"", anchor, deg, x, y);
}
// An SVG line from (x1, y1) to (x2, y2): `attrs` as svg_text's.
std::string svg_line(double x1, double x2, double y1, double y2, std::string_view stroke, std::string_view attrs = "") {
  return fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"{}/>", x1, x2, y1, y2,
                     stroke, attrs);
}

// An SVG rectangle of class `cls` with its tooltip: `attrs` as svg_text's.
std::string svg_rect(std::string_view cls, double x, double y, double w, double h, std::string_view fill,
                     std::string_view attrs, std::string_view title) {
  return fmt::format(
      "<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
      "fill=\"{}\"{}><title>{}</title></rect>\n",
      cls, x, y, w, h, fill, attrs, title);
}

// A legend's entry at `lx`, its swatch then its name `dx` to the right; `lx` moves past it.
std::string legend_entry(double& lx, const std::string& swatch, double dx, const std::string& name) {
  std::string out = swatch + svg_text(lx + dx, 17, "tick", "", esc(name));
  lx += dx + 10 + 7.0 * static_cast<double>(name.size());
  return out;
}

// A chart's figure, its caption and the opening of its SVG of w x h.
std::string figure_open(double w, double h, const std::string& cls, const std::string& title,
                        std::string_view figure_attrs = "", const std::string& svg_attrs = "") {
  return fmt::format(
      "<figure{}>\n<figcaption>{}</figcaption>\n<svg class=\"chart {}\" viewBox=\"0 0 {:.0f} {:.0f}\"{} role=\"img\" "
      "aria-label=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">\n",
      figure_attrs, esc(title), cls, w, h, svg_attrs, esc(title));
}

// A chart's figure with its horizontal grid lines and y labels from 0 to ymax.
std::string chart_open(const Geometry& g, const std::string& cls, const std::string& title, double ymax,
                       const std::string& unit) {
  std::string out = figure_open(g.w, g.h, cls, title);
  const double step = nice_step(ymax, 5);
  for (double v = 0; v <= ymax * 1.0001; v += step) {
    const double y = g.top + g.ph() * (1 - v / ymax);
    out +=
        svg_line(g.left, g.left + g.pw(), y, y, kGrid) + svg_text(g.left - 6, y + 4, "tick", kEnd, kHtml.num(v), "\n");
  }
  return out + svg_text(12, g.top + g.ph() / 2, "axis", rotated(-90, 12, g.top + g.ph() / 2), esc(unit), "\n");
}

struct BarGroup {
  std::string label;
  std::vector<double> values;  // one per series
  bool failed{false};          // a KPI check of this subject failed
};

// Vertical grouped bars (one group per node or link), an optional KPI threshold line.
std::string bar_chart(const std::string& title, const std::vector<std::string>& series,
                      const std::vector<BarGroup>& groups, const KpiCheck* t, const std::string& unit) {
  Geometry g;
  double ymax = t ? t->threshold : 0;
  for (const auto& gr : groups) {
    for (const double v : gr.values) ymax = std::max(ymax, v);
  }
  ymax = axis_top(ymax);
  const bool rotate = groups.size() > 8;
  if (rotate) g.bottom = 84;
  std::string out = chart_open(g, "bars", title, ymax, unit);
  const double slot = g.pw() / static_cast<double>(std::max<std::size_t>(groups.size(), 1));
  const double bw = std::min(36.0, slot * 0.8 / static_cast<double>(std::max<std::size_t>(series.size(), 1)));
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& gr = groups[i];
    const double x0 = g.left + slot * static_cast<double>(i) + (slot - bw * static_cast<double>(series.size())) / 2;
    for (std::size_t k = 0; k < gr.values.size() && k < series.size(); ++k) {
      const double v = gr.values[k];
      const double bh = g.ph() * v / ymax;
      out += svg_rect("bar", x0 + bw * static_cast<double>(k), g.top + g.ph() - bh, std::max(bw - 2, 1.0), bh,
                      k == 0 ? kTx : kRx, " rx=\"2\"",
                      fmt::format("{} {}: {:.1f} {}", esc(gr.label), esc(series[k]), v, esc(unit)));
    }
    const double cx = g.left + slot * (static_cast<double>(i) + 0.5);
    const double ly = g.top + g.ph() + 16;
    out += svg_text(cx, ly, "tick",
                    (rotate ? rotated(-40, cx, ly, kEnd) : std::string(kMiddle)) +
                        (gr.failed ? fmt::format(" style=\"fill:{}\"", kFail) : ""),
                    esc(gr.failed ? gr.label + " \u2717" : gr.label), "\n");
  }
  if (t) {
    const double y = g.top + g.ph() * (1 - t->threshold / ymax);
    const auto label =
        fmt::format("KPI {} {} {:g} {}", t->kpi, t->op == ">=" ? "\u2265" : "\u2264", t->threshold, t->unit);
    out += "<g class=\"kpi-line\">" +
           svg_line(g.left, g.left + g.pw(), y, y, kFail, " stroke-width=\"2\" stroke-dasharray=\"6 4\"") +
           svg_text(g.left + 6, y - 6, "kpi-label",
                    " text-anchor=\"start\" paint-order=\"stroke\" stroke=\"#fff\" stroke-width=\"4\" "
                    "stroke-linejoin=\"round\"",
                    esc(label), "</g>\n");
  }
  // Legend, top left.
  double lx = g.left + 4;
  for (std::size_t k = 0; k < series.size(); ++k) {
    out += legend_entry(
        lx, fmt::format("<rect x=\"{:.1f}\" y=\"8\" width=\"10\" height=\"10\" fill=\"{}\"/>", lx, k == 0 ? kTx : kRx),
        14, series[k]);
  }
  return out + "\n</svg>\n</figure>\n";
}

// Counter events (dips, docs/counters.md) are shaded over the interval they cover, in the node's
// colour, with the diagnosis as their tooltip.
std::string line_chart(const std::string& title, const std::vector<Series>& series,
                       const std::vector<CounterEvent>& events = {}) {
  Geometry g;
  double xmax = 0, ymax = 0;
  for (const auto& s : series) {
    for (const auto& p : s.points) {
      xmax = std::max(xmax, p.t_s);
      ymax = std::max(ymax, p.mb_per_s);
    }
  }
  if (xmax <= 0) xmax = 1;
  ymax = axis_top(ymax);
  std::string out = chart_open(g, "timeseries", title, ymax, "MB/s");
  const double xs = nice_step(xmax, 6);
  for (double v = 0; v <= xmax * 1.0001; v += xs)
    out += svg_text(g.left + g.pw() * v / xmax, g.top + g.ph() + 16, "tick", kMiddle, kHtml.num(v));
  out += svg_text(g.left + g.pw() / 2, g.top + g.ph() + 36, "axis", kMiddle, "seconds into the measured window", "\n");
  for (const auto& ev : events) {
    const double x0 = g.left + g.pw() * std::clamp(ev.t0_s / xmax, 0.0, 1.0);
    const double x1 = g.left + g.pw() * std::clamp(ev.t1_s / xmax, 0.0, 1.0);
    out += svg_rect("counter-event", x0, g.top, std::max(1.0, x1 - x0), g.ph(), "#d62728", " fill-opacity=\"0.12\"",
                    esc(ev.node) + " " + esc(ev.text));
  }
  std::size_t ci = 0;
  double lx = g.left + 4;
  for (const auto& s : series) {
    const bool agg = s.name == "aggregate";
    const char* color = agg ? kInk : kSeriesColors[ci++ % std::size(kSeriesColors)];
    std::string pts;
    for (const auto& p : s.points) {
      pts += fmt::format("{:.1f},{:.1f} ", g.left + g.pw() * p.t_s / xmax, g.top + g.ph() * (1 - p.mb_per_s / ymax));
    }
    out += fmt::format(
        "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" "
        "points=\"{}\"><title>{}</title></polyline>\n",
        color, agg ? 2.5 : 1.5, pts, esc(s.name));
    if (lx < g.w - 80) out += legend_entry(lx, svg_line(lx, lx + 14, 13, 13, color, " stroke-width=\"3\""), 18, s.name);
  }
  return out + "\n</svg>\n</figure>\n";
}

std::string histogram_chart(const std::string& title, const ResultLatency& l) {
  Geometry g;
  g.bottom = 64;
  std::uint64_t cmax = 0;
  for (const auto& b : l.buckets) cmax = std::max(cmax, b.count);
  const double ymax = cmax > 0 ? axis_top(static_cast<double>(cmax)) : 1;
  std::string out = chart_open(g, "histogram", title, ymax, "samples");
  const auto n = l.buckets.size();
  const double slot = g.pw() / static_cast<double>(std::max<std::size_t>(n, 1));
  const std::size_t label_every = std::max<std::size_t>(1, n / 8);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& b = l.buckets[i];
    const double bh = g.ph() * static_cast<double>(b.count) / ymax;
    const double x = g.left + slot * static_cast<double>(i);
    out += svg_rect("hbar", x + 0.5, g.top + g.ph() - bh, std::max(slot - 1, 0.5), bh, "#7c3aed", "",
                    fmt::format("{} - {}: {} samples", kHtml.us(b.lo_us), kHtml.us(b.hi_us), b.count));
    if (i % label_every == 0) {
      out += svg_text(x + slot / 2, g.top + g.ph() + 16, "tick", kMiddle, kHtml.us(b.lo_us));
    }
  }
  // Percentile markers at the bucket holding each percentile: the last non-empty bucket that
  // starts at or below it (only non-empty buckets are drawn, so gaps between them are skipped).
  for (const auto& [name, v] : {std::pair<const char*, double>{"p50", l.p50_us}, {"p99", l.p99_us}}) {
    std::size_t i = n - 1;  // the caller draws no histogram without buckets
    while (i > 0 && v < l.buckets[i].lo_us) --i;
    const double x = g.left + slot * (static_cast<double>(i) + 0.5);
    out += "<g class=\"pct\">" + svg_line(x, x, g.top, g.top + g.ph(), kInk, " stroke-dasharray=\"3 3\"") +
           svg_text(x, g.top - 4, "tick", kMiddle, fmt::format("{} {}", name, kHtml.us(v)), "</g>\n");
  }
  return out + svg_text(g.left + g.pw() / 2, g.top + g.ph() + 40, "axis", kMiddle, "latency (bucket lower edge)",
                        "\n</svg>\n</figure>\n");
}

// Perceptually even, colour-blind safe (viridis, 5 stops): t in [0, 1].
std::string viridis(double t, bool* dark) {
  static constexpr double stops[][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  double c[3];
  for (int k = 0; k < 3; ++k) c[k] = stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f;
  if (dark) *dark = (0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]) < 140;
  return fmt::format("#{:02x}{:02x}{:02x}", static_cast<int>(c[0]), static_cast<int>(c[1]), static_cast<int>(c[2]));
}

// An n x n RGB image (3 bytes a pixel, row by row) as PNG, base64: 8 bits a channel, filter 0.
std::string png_base64(std::size_t n, const std::string& rgb) {
  std::string raw;
  for (std::size_t y = 0; y < n; ++y) raw.append(1, '\0').append(rgb, 3 * n * y, 3 * n);
  uLongf len = compressBound(raw.size());
  std::string packed(len, '\0');
  compress2(reinterpret_cast<Bytef*>(packed.data()), &len, reinterpret_cast<const Bytef*>(raw.data()), raw.size(),
            Z_BEST_SPEED);
  packed.resize(len);
  const auto be32 = [](std::size_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  std::string out = "\x89PNG\r\n\x1a\n";
  for (const auto& [type, data] :
       {std::pair<std::string, std::string>{"IHDR", be32(n) + be32(n) + std::string("\x08\x02\0\0\0", 5)},
        {"IDAT", packed},
        {"IEND", ""}}) {
    const std::string body = type + data;
    out += be32(data.size()) + body +
           be32(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
  }
  std::string b64(4 * ((out.size() + 2) / 3) + 1, '\0');
  b64.resize(static_cast<std::size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                                      reinterpret_cast<const unsigned char*>(out.data()),
                                                      static_cast<int>(out.size()))));
  return b64;
}

std::string heatmap(const PairMatrix& m, const std::vector<KpiCheck>& kpis) {
  const auto n = m.nodes.size();
  // Up to kSvgCells hosts every pair is an SVG cell with its figure on hover; past that (4096 cells
  // and more, a few pixels each) one pixel a pair in an inline PNG: 1024 hosts are a million pairs,
  // which as SVG elements no browser opens in seconds.
  constexpr std::size_t kSvgCells = 64;
  const bool raster = n > kSvgCells;
  const double cell = raster ? std::max(560.0 / static_cast<double>(n), 1.0)
                             : std::clamp(560.0 / static_cast<double>(std::max<std::size_t>(n, 1)), 18.0, 64.0);
  const std::size_t label_every = raster ? (n + 31) / 32 : 1;
  std::size_t longest = 4;
  for (const auto& s : m.nodes) longest = std::max(longest, s.size());
  const double left = 30 + 7.0 * static_cast<double>(longest);
  const double top = 36 + 7.0 * static_cast<double>(longest);
  const double legend_w = 90;
  const double w = left + cell * static_cast<double>(n) + legend_w + 20;
  const double h = std::max(top + cell * static_cast<double>(n) + 20, top + 220);
  // Pair checks of this test that failed: their cells get a red frame (a red pixel in the PNG).
  std::unordered_set<std::string> failed;
  for (const auto& k : kpis) {
    if (k.scope == "pair" && !k.pass && k.test == m.test) failed.insert(k.subject);
  }
  const std::string title =
      fmt::format("All-pairs throughput of '{}' (MB/s): row = client (sender), column = server", m.test);
  std::string out =
      figure_open(w, h, "heatmap", title, " class=\"wide\"", fmt::format(" style=\"max-width:{:.0f}px\"", w));
  out += "<defs><linearGradient id=\"hm-scale-" + esc(m.test) + "\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int i = 0; i <= 4; ++i) {
    out += fmt::format("<stop offset=\"{}%\" stop-color=\"{}\"/>", i * 25, viridis(i / 4.0, nullptr));
  }
  out += "</linearGradient></defs>\n";
  const double mid = cell * static_cast<double>(n) / 2;
  out += svg_text(left + mid, 14, "axis", kMiddle, "server (receives)", "\n") +
         svg_text(12, top + mid, "axis", rotated(-90, 12, top + mid), "client (sends)", "\n");
  for (std::size_t j = 0; j < n; j += label_every) {
    const double x = left + cell * (static_cast<double>(j) + 0.5);
    out += svg_text(x, top - 6, "tick", rotated(-45, x, top - 6, ""), esc(m.nodes[j]), "\n");
    out += svg_text(left - 6, top + cell * (static_cast<double>(j) + 0.5) + 4, "tick", kEnd, esc(m.nodes[j]), "\n");
  }
  const double span = m.max - m.min;
  std::string rgb(raster ? 3 * n * n : 0, '\0');
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const double x = left + cell * static_cast<double>(j);
      const double y = top + cell * static_cast<double>(i);
      const auto& v = m.mb_per_s[i][j];
      bool dark = false;
      const bool bad = v && failed.contains(m.nodes[i] + "->" + m.nodes[j]);
      const std::string color = !v              ? (i == j ? "#f3f4f6" : "#e5e7eb")
                                : bad && raster ? kFail
                                                : viridis(span > 0 ? (*v - m.min) / span : 0.5, &dark);
      if (raster) {
        for (std::size_t k = 0; k < 3; ++k)
          rgb[3 * (i * n + j) + k] = static_cast<char>(std::stoi(color.substr(1 + 2 * k, 2), nullptr, 16));
        continue;
      }
      const std::string hover = esc(m.nodes[i]) + " -&gt; " + esc(m.nodes[j]) + ": ";
      if (!v) {
        out += svg_rect("heat-empty", x, y, cell, cell, color, " stroke=\"#fff\"",
                        hover + (i == j ? "same host" : "not measured"));
        continue;
      }
      out += svg_rect("heat-cell", x, y, cell, cell, color,
                      fmt::format(" stroke=\"{}\" stroke-width=\"{}\"", bad ? kFail : "#fff", bad ? 3 : 1),
                      fmt::format("{}{:.1f} MB/s{}", hover, *v, bad ? " (KPI failed)" : ""));
      if (cell >= 34) {
        out += svg_text(x + cell / 2, y + cell / 2 + 4, "cell",
                        fmt::format("{} style=\"fill:{}\"", kMiddle, dark ? "#fff" : kInk), fmt::format("{:.0f}", *v),
                        "\n");
      }
    }
  }
  if (raster) {
    out += fmt::format(
        "<image class=\"heat-raster\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,{}\"/>\n",
        left, top, cell * static_cast<double>(n), cell * static_cast<double>(n), png_base64(n, rgb));
  }
  // Legend: the colour scale from the lowest to the highest measured pair.
  const double lx = left + cell * static_cast<double>(n) + 24;
  const double lh = 160;
  out += fmt::format(
      "<g class=\"legend\"><text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\">MB/s</text>"
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"16\" height=\"{:.1f}\" fill=\"url(#hm-scale-{})\" stroke=\"{}\"/>",
      lx, top - 8, lx, top, lh, esc(m.test), kGrid);
  for (int i = 0; i <= 4; ++i)
    out += svg_text(lx + 22, top + lh * (1 - i / 4.0) + 4, "tick", "", fmt::format("{:.0f}", m.min + span * i / 4.0));
  out += "</g>\n</svg>\n";
  return out +
         fmt::format(
             "<p class=\"muted\">{} pairs measured; lowest {:.0f} MB/s, highest {:.0f} MB/s ({:.0f}% of the highest). "
             "Darker cells are slower; {} marks a pair whose KPI check failed.{}</p>\n</figure>\n",
             m.cells, m.min, m.max, m.max > 0 ? 100.0 * m.min / m.max : 0.0, raster ? "a red pixel" : "a red frame",
             raster
                 ? fmt::format(" One pixel a pair ({} hosts); every pair's figure is in the JSON and CSV reports.", n)
                 : "");
}

// The first MB/s check of `scope` that applies to this step (its own, else its test's): a line across its chart.
const KpiCheck* step_threshold(const PlanReport& r, const StepView& s, const std::string& scope) {
  for (const bool own : {true, false}) {
    for (const auto& k : r.kpis) {
      if (k.scope != scope || k.unit.find("MB/s") == std::string::npos) continue;
      if (own ? k.step != s.id : (k.step || k.test != s.test)) continue;
      return &k;
    }
  }
  return nullptr;
}

// A table of the report's: a column of numbers is right-aligned, its header as its cells.
std::string html_table(std::string_view attrs, const PlanTable& t) {
  std::string out = fmt::format("<table {}><thead><tr>", attrs);
  const auto num = [&t](std::size_t i) { return t.heads[i].starts_with('>') ? " class=\"num\"" : ""; };
  for (std::size_t i = 0; i < t.heads.size(); ++i) {
    out += fmt::format("<th{}>{}</th>", num(i), std::string_view(t.heads[i]).substr(*num(i) ? 1 : 0));
  }
  out += "</tr></thead><tbody>\n";
  for (const auto& [failed, cells] : t.rows) {
    out += failed ? "<tr class=\"failed\">" : "<tr>";
    for (std::size_t i = 0; i < cells.size(); ++i) out += fmt::format("<td{}>{}</td>", num(i), cells[i]);
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

constexpr const char* kStyle = R"CSS(
:root { --ink:#1f2937; --muted:#6b7280; --line:#e5e7eb; --bg:#f8fafc; --ok:#15803d; --bad:#b91c1c; --warn:#b45309; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
header.top { display:flex; justify-content:space-between; align-items:flex-start; gap:24px;
  border-bottom: 1px solid var(--line); padding-bottom: 16px; margin-bottom: 8px; }
h1 { font-size: 22px; margin: 0 0 4px; font-weight: 650; }
h2 { font-size: 17px; margin: 28px 0 10px; font-weight: 650; }
h3 { font-size: 15px; margin: 0 0 6px; font-weight: 650; }
.muted { color: var(--muted); font-size: 12.5px; }
.verdict { text-align:center; min-width: 200px; border-radius: 10px; padding: 12px 18px; color:#fff; }
.verdict .word { font-size: 28px; font-weight: 800; letter-spacing: .04em; }
.verdict.ok { background: var(--ok); } .verdict.bad { background: var(--bad); } .verdict.warn { background: var(--warn); }
.cards { display:flex; gap:12px; flex-wrap:wrap; margin: 14px 0 4px; }
.card { background:#fff; border:1px solid var(--line); border-radius:8px; padding:8px 14px; min-width:120px; }
.card b { display:block; font-size:20px; }
table { border-collapse: collapse; width: 100%; background:#fff; border:1px solid var(--line); border-radius:6px; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align:left; vertical-align: top; }
th { background:#f1f5f9; font-weight:600; font-size:12.5px; color:#374151; }
td.num, th.num { text-align:right; font-variant-numeric: tabular-nums; }
tr.failed td { background:#fef2f2; }
.pill { display:inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight:600; }
.pill.ok { background:#dcfce7; color:var(--ok); } .pill.bad { background:#fee2e2; color:var(--bad); }
.pill.warn { background:#fef3c7; color:var(--warn); }
.notes { background:#fffbeb; border:1px solid #fde68a; border-radius:6px; padding:8px 14px; margin:12px 0; }
.notes li { margin: 2px 0; }
section.step { background:#fff; border:1px solid var(--line); border-radius:8px; padding:14px 16px; margin: 14px 0; }
.charts { display:grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 12px; margin-top: 10px; }
figure { margin:0; } figure.wide { margin: 8px 0 0; }
figcaption { font-size: 12.5px; font-weight:600; color:#374151; margin-bottom: 2px; }
svg.chart { width:100%; height:auto; display:block; background:#fff; }
svg text { font-family: inherit; }
svg .tick { font-size: 11px; fill: #4b5563; } svg .axis { font-size: 11px; fill: var(--muted); }
svg .cell { font-size: 11px; font-weight: 600; } svg .kpi-label { font-size: 11px; font-weight: 600; fill:#dc2626; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
@media print {
  body { background:#fff; font-size: 11px; } main { max-width:none; padding: 0; }
  section.step, figure, table { break-inside: avoid; }
  .verdict, .pill, tr.failed td, svg { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  .charts { grid-template-columns: 1fr 1fr; }
}
)CSS";

// A box of plain-language lines: the report's notes, the isolation, a step's findings.
std::string notes_html(const std::vector<std::string>& lines) {
  std::string out = "<div class=\"notes\"><ul>";
  for (const auto& l : lines) out += "<li>" + esc(l) + "</li>";
  return out + "</ul></div>\n";
}

// The page's head and the header: title, provenance, the counts and the verdict.
std::string head_html(const PlanReport& r) {
  // No script, no connection of any kind: the Content-Security-Policy says so to the browser too.
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src "
      "data:\">\n";
  const std::string title = "fabperf report: " + (r.kind == "plan" && !r.plan_name.empty() ? r.plan_name : r.source);
  out += "<title>" + esc(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<main>\n";
  out += "<header class=\"top\">\n<div>\n<h1>" + esc(title) + "</h1>\n<div class=\"muted\">";
  out += r.kind == "plan" ? "plan " + esc(r.plan_file.empty() ? r.plan_name : r.plan_file) + " &middot; "
                          : std::string("single run &middot; ");
  out += "started " + esc(r.started_at) + " &middot; " +
         (r.finished ? "finished " + esc(r.finished_at) : std::string("<b>did not finish</b>"));
  out += " &middot; fabperf " + esc(r.fabperf_version) + " &middot; <span class=\"mono\">" + esc(r.source) +
         "</span></div>\n";
  out += "<div class=\"cards\">";
  out += fmt::format("<div class=\"card\"><b>{}/{}</b><span class=\"muted\">steps done</span></div>", r.steps_done,
                     std::max(r.steps_total, static_cast<int>(r.steps.size())));
  out += fmt::format("<div class=\"card\"><b>{}</b><span class=\"muted\">steps failed</span></div>", r.steps_failed);
  out += fmt::format("<div class=\"card\"><b>{}</b><span class=\"muted\">KPI checks passed</span></div>", r.kpi_passed);
  out += fmt::format("<div class=\"card\"><b{}>{}</b><span class=\"muted\">KPI checks failed</span></div>",
                     r.kpi_failed ? " style=\"color:#b91c1c\"" : "", r.kpi_failed);
  out += "</div>\n</div>\n";
  out += "<div class=\"verdict " + status_class(r.verdict) + "\" id=\"verdict\"><div class=\"word\">" + esc(r.verdict) +
         "</div><div>" + esc(r.verdict_reason) + "</div></div>\n</header>\n";
  if (!r.notes.empty()) out += notes_html(r.notes);
  if (!r.isolation.empty()) out += "<h2>Isolation</h2>\n" + notes_html(r.isolation);
  return out;
}

// The KPI groups, then each failed check.
std::string kpi_html(const PlanReport& r) {
  std::string out = "<h2>KPI verdict</h2>\n";
  if (r.kpi_groups.empty()) return out + "<p class=\"muted\">No KPI was checked in these results.</p>\n";
  out += html_table("class=\"verdict-table\"", kpi_group_table(r, kHtml));
  if (!r.kpi_failed) return out;
  return out + "<h2>Failed checks</h2>\n" + html_table("class=\"failed-checks\"", failed_check_table(r, kHtml));
}

// A measured step's charts: per node, per link, over time, and the latency histograms.
std::string step_charts_html(const PlanReport& r, const StepView& s) {
  std::string out = "<div class=\"charts\">\n";
  std::vector<BarGroup> nodes, links;
  for (const auto& n : s.nodes) {
    nodes.push_back({n.name, {n.tx_mb_per_s, n.rx_mb_per_s}, subject_failed(r, s, "node", n.name)});
    for (const auto& l : n.links) {
      const std::string name = n.name + "/" + l.name;
      links.push_back({name, {l.tx_mb_per_s, l.rx_mb_per_s}, subject_failed(r, s, "link", name)});
    }
  }
  out += bar_chart("Per-node throughput", {"tx", "rx"}, nodes, step_threshold(r, s, "node"), "MB/s");
  if (!links.empty()) {
    out += bar_chart("Per-link throughput (interface counters)", {"tx", "rx"}, links, step_threshold(r, s, "link"),
                     "MB/s");
  }
  if (!s.series.empty()) {
    out +=
        line_chart(s.counter_events.empty() ? "Throughput over time"
                                            : "Throughput over time (shaded: intervals the counter diagnosis flagged)",
                   s.series, s.counter_events);
  }
  if (!s.counter_events.empty()) {
    out += "<p>Counters (docs/counters.md):</p><ul class=\"counter-events\">";
    for (const auto& ev : s.counter_events) out += "<li>" + esc(ev.node) + " " + esc(ev.text) + "</li>";
    out += "</ul>\n";
  }
  for (const auto& [what, l] : {std::pair{"Request", &s.latency}, {"Ping under load", &s.delay}}) {
    if (*l && !(*l)->buckets.empty()) {
      out += histogram_chart(fmt::format("{} latency: {} samples, p50 {}, p99 {}, max {}", what, (*l)->count,
                                         kHtml.us((*l)->p50_us), kHtml.us((*l)->p99_us), kHtml.us((*l)->max_us)),
                             **l);
    }
  }
  return out + "</div>\n";
}

// One step's section: what ran, its charts, its nodes and its findings.
std::string step_html(const PlanReport& r, const StepView& s) {
  std::string out = fmt::format("<section class=\"step\" id=\"step-{}\">\n<h3>Step {}: {} {}</h3>\n", s.index, s.index,
                                esc(s.id), kHtml.status(s.status));
  out += "<div class=\"muted\">" + esc(s.pattern) + (s.op.empty() ? "" : " &middot; " + esc(s.op)) +
         " &middot; started " + esc(s.started_at) +
         (s.summary.empty() ? "" : " &middot; <span class=\"mono\">" + esc(s.summary) + "</span>") + "</div>\n";
  if (!s.error.empty()) out += "<p style=\"color:#b91c1c\"><b>error:</b> " + esc(s.error) + "</p>\n";
  if (!s.measured) return out + "<p class=\"muted\">Nothing was measured in this step.</p>\n</section>\n";
  out += step_charts_html(r, s);
  out += html_table("class=\"nodes\" style=\"margin-top:10px\"", node_table(r, s, kHtml));
  if (!s.findings.empty()) out += notes_html(s.findings);
  return out + "</section>\n";
}

}  // namespace

std::string render_plan_html(const PlanReport& r) {
  std::string out =
      head_html(r) + kpi_html(r) + "<h2>Steps</h2>\n" + html_table("class=\"steps\"", step_table(r, kHtml));
  if (!r.matrices.empty()) {
    out += "<h2>All-pairs matrix</h2>\n";
    for (const auto& m : r.matrices) out += heatmap(m, r.kpis);
  }
  out += "<h2>Step details</h2>\n";
  for (const auto& s : r.steps) out += s.listed ? step_html(r, s) : "";
  out += "<footer>Written by <span class=\"mono\">fabperf report</span> from <span class=\"mono\">" + esc(r.source) +
         "</span>. MB = 10<sup>6</sup> bytes. Self-contained: no scripts, fonts or styles are loaded from "
         "anywhere.</footer>\n";
  return out + "</main>\n</body>\n</html>\n";
}

}  // namespace fabperf
