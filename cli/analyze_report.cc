// The report is one HTML file: the dashboard's uPlot (dashboard/assets.h)
// inlined, the numbers as one JSON block, and a small script below that
// draws the tables and plots from it. Nothing is fetched when it opens.
#include "cli/analyze_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/common/check.h"
#include "dashboard/assets.h"

namespace mddp::cli {
namespace {

// A long run has more steps than a plot has pixels: average windows of steps.
constexpr std::size_t kMaxSeriesPoints = 4000;

std::string_view asset(std::string_view path) {
  const dashboard::Asset* a = dashboard::find_asset(path);
  MDDP_CHECK(a != nullptr, "asset ", path, " is not compiled in (dashboard/assets)");
  return a->body;
}

nlohmann::json series_json(const perf::Analysis& a) {
  const std::size_t n = a.series.size(), window = n / kMaxSeriesPoints + 1;
  nlohmann::json s = {{"window", window}};
  for (const char* k : {"step", "data", "forward", "backward", "exposed_comm", "optimizer",
                        "step_ms", "total_comm", "overlap"})
    s[k] = nlohmann::json::array();
  for (std::size_t i = 0; i < n; i += window) {
    perf::StepPoint m{a.series[i].step};
    const std::size_t end = std::min(n, i + window);
    for (std::size_t k = i; k < end; ++k) {
      const auto& p = a.series[k];
      m.data_ms += p.data_ms, m.forward_ms += p.forward_ms, m.backward_ms += p.backward_ms;
      m.exposed_comm_ms += p.exposed_comm_ms, m.optimizer_ms += p.optimizer_ms,
          m.step_ms += p.step_ms;
      m.total_comm_ms += p.total_comm_ms;
    }
    const double w = static_cast<double>(end - i);
    s["step"].push_back(m.step);
    s["data"].push_back(m.data_ms / w);
    s["forward"].push_back(m.forward_ms / w);
    s["backward"].push_back(m.backward_ms / w);
    s["exposed_comm"].push_back(m.exposed_comm_ms / w);
    s["optimizer"].push_back(m.optimizer_ms / w);
    s["step_ms"].push_back(m.step_ms / w);
    s["total_comm"].push_back(m.total_comm_ms / w);
    s["overlap"].push_back(100 * perf::overlap_fraction(m.exposed_comm_ms, m.total_comm_ms));
  }
  return s;
}

// The fit's busbw over sizes around the measured ones (x 1/4 .. x 4), so the
// plot shows where the measured points sit on the predicted curve.
nlohmann::json curve_json(const perf::Analysis& a) {
  nlohmann::json c = {{"bytes", nlohmann::json::array()}, {"busbw", nlohmann::json::array()}};
  if (a.buckets.empty() || a.fits.empty()) return c;
  const double lo = static_cast<double>(a.buckets.back().bytes) / 4,
               hi = static_cast<double>(a.buckets.front().bytes) * 4;
  for (double b = std::max(lo, 4.0); b <= hi; b *= 1.2) {
    const auto p = perf::predict(a, static_cast<std::size_t>(b));
    c["bytes"].push_back(std::round(b));
    c["busbw"].push_back(p ? nlohmann::json(p->busbw_gbps) : nlohmann::json(nullptr));
  }
  return c;
}

// Inside <script>, "</script" or "<!--" would end or confuse the block; in
// JSON '<' only occurs inside strings, where \u003c means the same.
std::string script_safe(const nlohmann::json& j) {
  std::string out;
  for (char ch : j.dump(-1, ' ', true)) {
    if (ch == '<')
      out += "\\u003c";
    else
      out += ch;
  }
  return out;
}

// The page's script: tables and uPlot charts from the JSON block.
constexpr std::string_view kScript = R"JS(
const R = JSON.parse(document.getElementById('data').textContent);
const A = R.analysis;
const css = (v) => getComputedStyle(document.documentElement).getPropertyValue(v).trim();
const f3 = (v) => (v == null ? '–' : Number(v).toFixed(3));
const pct = (v) => (v == null ? '–' : (100 * v).toFixed(1) + ' %');
const bytes = (b) => (b >= 1048576 ? (b / 1048576).toFixed(2) + ' MiB' : b >= 1024 ? (b / 1024).toFixed(1) + ' KiB' : b + ' B');
const el = (tag, text) => { const e = document.createElement(tag); if (text != null) e.textContent = text; return e; };
const table = (id, head, rows) => {
  const t = document.getElementById(id), tr = el('tr');
  head.forEach((h) => tr.append(el('th', h)));
  t.append(tr);
  rows.forEach((r) => { const row = el('tr'); r.forEach((c) => row.append(el('td', c))); t.append(row); });
};
const PHASES = ['data', 'forward', 'backward', 'exposed_comm', 'optimizer'];
const LABEL = { data: 'data', forward: 'forward', backward: 'backward', exposed_comm: 'exposed comm',
  optimizer: 'optimizer', step: 'step', total_comm: 'total comm (progress thread)' };
const COLOR = { data: '--data', forward: '--forward', backward: '--backward', exposed_comm: '--exposed',
  optimizer: '--optimizer', total_comm: '--comm', step: '--fg' };

const c = A.config;
document.getElementById('head').textContent =
  `${A.run_dir}: ${c.world_size} ranks, ddp ${c.ddp || '?'}, transport ${c.transport || '?'}, algorithm ${c.algorithm}, ` +
  `${A.steps_used} complete steps analysed (${A.warmup_skipped} warm-up skipped) [${c.source}]`;
document.getElementById('verdict').textContent = A.verdict.kind;
if (A.verdict.by_shares && A.verdict.by_shares !== A.verdict.kind)
  document.getElementById('by-shares').textContent = `(by the step's shares alone: ${A.verdict.by_shares}, measured under CPU sharing)`;
if (A.oversubscribed) {
  const box = document.getElementById('oversubscribed');
  box.hidden = false;
  box.append(el('strong', 'Oversubscribed. '), 'A host runs more compute threads than it has CPUs, so its ranks take turns '
    + 'on them: the exposed comm, all-reduce and straggler figures below are inflated by that CPU sharing. '
    + A.hosts.filter((h) => h.oversubscribed).map((h) => h.summary).join('; ') + '.');
}
if (A.hosts.some((h) => h.cpus != null))
  table('hosts', ['host', 'ranks', 'compute threads', 'CPUs', 'oversubscribed'],
    A.hosts.map((h) => [h.host, h.ranks.join(', '), String(h.threads), h.cpus == null ? '–' : String(h.cpus), h.oversubscribed ? 'yes' : 'no']));
else document.getElementById('hosts-section').hidden = true;
for (const [id, list] of [['evidence', A.verdict.evidence], ['advice', A.verdict.advice], ['notes', A.notes]])
  list.forEach((s) => document.getElementById(id).append(el('li', s)));

table('phases', ['phase', 'mean ms', 'median', 'p95', 'share', 'min rank mean', 'max rank mean', 'slowest'],
  Object.keys(LABEL).map((k) => { const p = A.phases_ms[k];
    return [LABEL[k], f3(p.mean), f3(p.median), f3(p.p95), pct(p.share), f3(Math.min(...p.rank_mean)),
      f3(Math.max(...p.rank_mean)), 'rank ' + p.slowest_rank]; }));
const cm = A.communication;
document.getElementById('comm').textContent =
  `exposed ${f3(cm.exposed_ms_per_step)} ms/step (${pct(cm.exposed_share)} of the step), total ${f3(cm.total_ms_per_step)} ms/step ` +
  `(${pct(cm.total_share)}), overlap ${pct(cm.overlap)}, ${bytes(Math.round(cm.bytes_per_step))} all-reduced per step` +
  (cm.predicted_ms_per_step != null ? `; the fit predicts ${f3(cm.predicted_ms_per_step)} ms/step of all-reduce` : '');
table('allreduces', ['size', 'per step', 'algorithm', 'median ms', 'p95 ms', 'busbw GB/s', 'predicted ms', 'predicted busbw', 'measured / predicted'],
  A.allreduces.map((b) => [bytes(b.bytes), b.per_step.toFixed(2), b.algorithm, f3(b.measured_ms.median), f3(b.measured_ms.p95),
    f3(b.busbw_gbps), f3(b.predicted_ms), f3(b.predicted_busbw_gbps),
    b.predicted_ms ? (b.measured_ms.median / b.predicted_ms).toFixed(2) : '–']));

const W = () => Math.max(320, document.querySelector('main').clientWidth - 20);
const axes = (x, y) => [{ label: x, stroke: css('--muted') }, { label: y, size: 60, stroke: css('--muted') }];
const line = (k) => ({ label: LABEL[k], stroke: css(COLOR[k]), width: 1.5, value: (u, v) => f3(v) });
const plot = (id, opts, data) => new uPlot({ width: W(), height: 260, ...opts }, data, document.getElementById(id));

const S = R.series;
const perStep = ['data', 'forward', 'backward', 'exposed_comm', 'optimizer', 'total_comm'];
plot('p-phases', { scales: { x: { time: false } }, axes: axes(S.window > 1 ? `step (mean of ${S.window})` : 'step', 'ms (mean over ranks)'),
  series: [{ label: 'step' }, ...perStep.map(line), { ...line('step'), label: 'step', width: 2 }] },
  [S.step, ...perStep.map((k) => S[k]), S.step_ms]);

// Stacked bars per rank, drawn as cumulative sums tallest first (uPlot draws
// bars from zero); the legend shows each phase's own value.
const ranks = [...Array(c.world_size).keys()];
const own = PHASES.map((k) => A.phases_ms[k].rank_mean);
const cum = PHASES.map((_, i) => ranks.map((r) => own.slice(0, i + 1).reduce((s, v) => s + v[r], 0)));
const stackOrder = [...PHASES.keys()].reverse();
plot('p-ranks', { scales: { x: { time: false, range: [-0.5, c.world_size - 0.5] } },
  axes: [{ label: 'rank', stroke: css('--muted'), splits: () => ranks, values: (u, s) => s.map((r) => 'rank ' + r) },
    { label: 'ms per step (mean)', size: 60, stroke: css('--muted') }],
  series: [{ label: 'rank' }, ...stackOrder.map((i) => ({ label: LABEL[PHASES[i]], fill: css(COLOR[PHASES[i]]),
    stroke: css(COLOR[PHASES[i]]), width: 0, paths: uPlot.paths.bars({ size: [0.7, 80], align: 0 }), points: { show: false },
    value: (u, v, s, idx) => (idx == null ? '–' : f3(own[i][idx])) }))], cursor: { points: { show: false } } },
  [ranks, ...stackOrder.map((i) => cum[i])]);

plot('p-overlap', { scales: { x: { time: false }, pct: { range: [0, 100] } },
  axes: [{ label: 'step', stroke: css('--muted') }, { scale: 'pct', label: 'overlap %', size: 60, stroke: css('--muted') }],
  series: [{ label: 'step' }, { label: 'overlap %', scale: 'pct', stroke: css('--overlap'), width: 1.5, value: (u, v) => f3(v) }] },
  [S.step, S.overlap]);

if (A.allreduces.length) {
  const xs = [...new Set([...A.allreduces.map((b) => b.bytes), ...R.curve.bytes])].sort((a, b) => a - b);
  const at = (key) => new Map(A.allreduces.map((b) => [b.bytes, key(b)]));
  const med = at((b) => b.busbw_gbps), p95 = at((b) => (b.measured_ms.p95 > 0 ? b.busbw_gbps * b.measured_ms.median / b.measured_ms.p95 : null));
  const fit = new Map(R.curve.bytes.map((b, i) => [b, R.curve.busbw[i]]));
  const pts = (label, color, size) => ({ label, stroke: css(color), fill: css(color), paths: () => null,
    points: { show: true, size, fill: css(color) }, value: (u, v) => f3(v) });
  plot('p-busbw', { scales: { x: { time: false, distr: 3, log: 2 }, y: { range: (u, lo, hi) => [0, Math.max(hi * 1.15, 0.01)] } },
    axes: [{ label: 'all-reduce size', stroke: css('--muted'), values: (u, s) => s.map((v) => bytes(v)) },
      { label: 'busbw GB/s', size: 60, stroke: css('--muted') }],
    series: [{ label: 'bytes', value: (u, v) => (v == null ? '–' : bytes(v)) }, pts('measured (median time)', '--comm', 10),
      pts('measured (p95 time)', '--exposed', 6),
      { label: 'fit prediction', stroke: css('--fit'), width: 1.5, dash: [5, 4], spanGaps: true, points: { show: false }, value: (u, v) => f3(v) }] },
    [xs, xs.map((x) => med.get(x) ?? null), xs.map((x) => p95.get(x) ?? null), xs.map((x) => fit.get(x) ?? null)]);
} else document.getElementById('p-busbw').textContent = 'Nothing was all-reduced.';

if (c.world_size > 1) {
  const late = ranks.map((r) => A.stragglers.ranks.find((s) => s.rank === r)?.late_steps ?? 0);
  plot('p-stragglers', { scales: { x: { time: false, range: [-0.5, c.world_size - 0.5] }, y: { range: (u, lo, hi) => [0, Math.max(hi, 1)] } },
    axes: [{ label: 'rank', stroke: css('--muted'), splits: () => ranks, values: (u, s) => s.map((r) => 'rank ' + r) },
      { label: 'steps late', size: 60, stroke: css('--muted') }],
    series: [{ label: 'rank' }, { label: 'steps late', fill: css('--exposed'), stroke: css('--exposed'), width: 0,
      paths: uPlot.paths.bars({ size: [0.6, 80], align: 0 }), points: { show: false } }] }, [ranks, late]);
  const w = A.stragglers.worst;
  document.getElementById('straggler-note').textContent = w ? `Worst: rank ${w.rank}, mostly ${w.phase}.` : 'No rank was late.';
}
)JS";

constexpr std::string_view kStyle = R"CSS(
:root { --fg: #1f2328; --muted: #57606a; --data: #8c8c8c; --forward: #0072b2; --backward: #009e73; --exposed: #d55e00;
  --optimizer: #cc79a7; --comm: #e69f00; --overlap: #56b4e9; --fit: #57606a; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.3rem; } h2 { font-size: 1.1rem; margin-top: 1.6rem; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
td, th { padding: .15rem .6rem; text-align: right; border-bottom: 1px solid #d0d7de; }
td:first-child, th:first-child { text-align: left; }
#verdict { font-weight: bold; font-size: 1.2rem; }
.warn { background: #fff1e5; border-left: 4px solid var(--exposed); padding: .5rem .8rem; }
.muted { color: var(--muted); }
)CSS";

}  // namespace

std::string analysis_report_html(const perf::Analysis& a) {
  const nlohmann::json data = {
      {"analysis", perf::to_json(a)}, {"series", series_json(a)}, {"curve", curve_json(a)}};
  std::string h;
  h += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>microddp "
       "analyze</title>\n<style>";
  h += asset("vendor/uPlot.min.css");
  h += kStyle;
  h += "</style>\n<script>";
  h += asset("vendor/uPlot.iife.min.js");
  h += "</script>\n</head><body><main>\n<h1>microddp analyze</h1><p id=\"head\" "
       "class=\"muted\"></p>\n"
       "<p id=\"oversubscribed\" class=\"warn\" hidden></p>\n"
       "<h2>Verdict: <span id=\"verdict\"></span></h2><p id=\"by-shares\" class=\"muted\"></p>"
       "<h3>Evidence</h3><ul id=\"evidence\"></ul>"
       "<h3>Advice</h3><ul id=\"advice\"></ul><ul id=\"notes\" class=\"muted\"></ul>\n"
       "<section id=\"hosts-section\"><h2>Hosts (compute threads vs CPUs)</h2><table "
       "id=\"hosts\"></table></section>\n"
       "<h2>Phases (ms per step, over every rank and step)</h2><table id=\"phases\"></table>\n"
       "<h2>Communication</h2><p id=\"comm\"></p>\n"
       "<p class=\"muted\">An all-reduce's time is its shortest span across ranks (the rank that "
       "joined last waited "
       "least); busbw = bytes / time &times; 2(n&minus;1)/n.</p><table id=\"allreduces\"></table>\n"
       "<h2>Phases over the steps</h2><div id=\"p-phases\"></div>\n"
       "<h2>Per-rank phase breakdown</h2><div id=\"p-ranks\"></div>\n"
       "<h2>Overlap over the steps</h2><div id=\"p-overlap\"></div>\n"
       "<h2>Bus bandwidth vs all-reduce size, with the alpha-beta fit</h2><div "
       "id=\"p-busbw\"></div>\n"
       "<h2>Stragglers</h2><p id=\"straggler-note\" class=\"muted\"></p><div "
       "id=\"p-stragglers\"></div>\n"
       "</main>\n<script type=\"application/json\" id=\"data\">";
  h += script_safe(data);
  h += "</script>\n<script>";
  h += kScript;
  h += "</script>\n</body></html>\n";
  return h;
}

void write_analysis_report(const perf::Analysis& a, const std::string& path) {
  const std::string html = analysis_report_html(a);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !out.write(html.data(), static_cast<std::streamsize>(html.size())) || !out.flush())
    throw Error(str("cannot write the report to ", path, " (pass --report PATH or --no-report)"));
}

}  // namespace mddp::cli
