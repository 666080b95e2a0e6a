// The uPlot charts: loss, eval accuracy, per-rank phase bars, overlap and
// bus bandwidth. Each chart is a small class with update(data); the
// drawing is uPlot's (window.uPlot, loaded from vendor/ by index.html).

import { bytes, cssVar, fixed, ms, num, PHASE_LABEL } from './format.js';

const uPlot = window.uPlot;
const HEIGHT = 230;

function axisColors() {
  const text = cssVar('--muted');
  const grid = cssVar('--grid');
  return { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
}

// A uPlot in `container` sized to its width, rebuilt by rebuild() (a colour
// scheme change) and resized with the page.
class Chart {
  constructor(container, makeOpts, emptyData, emptyText = 'No steps yet.') {
    this.container = container;
    this.empty = document.createElement('p');
    this.empty.className = 'empty chart-empty';
    this.empty.textContent = emptyText;
    container.before(this.empty);
    this.makeOpts = makeOpts;
    this.data = emptyData;
    this.plot = null;
    this.build();
    new ResizeObserver(() => {
      if (this.plot) this.plot.setSize({ width: this.width(), height: HEIGHT });
    }).observe(container);
  }

  width() { return Math.max(200, this.container.clientWidth); }

  build() {
    if (this.plot) this.plot.destroy();
    const opts = this.makeOpts();
    opts.width = this.width();
    opts.height = HEIGHT;
    this.plot = new uPlot(opts, this.data, this.container);
  }

  setData(data, resetScales = true) {
    this.data = data;
    this.empty.hidden = data[0].length > 0;
    this.plot.setData(data, resetScales);
  }
}

const lineSeries = (label, colorVar, extra = {}) => ({
  label, stroke: cssVar(colorVar), width: 2, points: { show: false }, ...extra,
});

// A restart marker: a dashed vertical line at the step each later attempt
// resumed after (`from_step` of /api/job's restarts), labelled with the
// attempt, drawn over the loss curve by a uPlot draw hook.
function restartMarkers(chart) {
  return {
    hooks: {
      draw: [(u) => {
        const { ctx, bbox } = u;
        const px = uPlot.pxRatio;  // the canvas is in device pixels
        ctx.save();
        ctx.strokeStyle = cssVar('--warn');
        ctx.fillStyle = cssVar('--warn');
        ctx.lineWidth = 1.5 * px;
        ctx.setLineDash([4 * px, 3 * px]);
        ctx.font = `${11 * px}px sans-serif`;
        let drawn = 0;
        for (const r of chart.restarts) {
          // A resume from before the first plotted step (step 0: no
          // checkpoint yet) is marked at the left edge.
          const pos = u.valToPos(r.from_step, 'x', true);
          if (!Number.isFinite(pos)) continue;
          const x = Math.round(Math.min(Math.max(pos, bbox.left), bbox.left + bbox.width));
          drawn++;
          ctx.beginPath();
          ctx.moveTo(x, bbox.top);
          ctx.lineTo(x, bbox.top + bbox.height);
          ctx.stroke();
          // The label beside the line, on its left near the right edge.
          const label = `${r.grow ? 'heal' : r.shrink ? 'shrink' : 'restart'} ${r.attempt}`;
          const w = ctx.measureText(label).width;
          const lx = x + 4 * px + w > bbox.left + bbox.width ? x - 4 * px - w : x + 4 * px;
          ctx.fillText(label, lx, bbox.top + 12 * px);
        }
        ctx.restore();
        chart.container.dataset.restartsDrawn = String(drawn);  // for the browser test
      }],
    },
  };
}

export class LossChart {
  constructor(container) {
    this.container = container;
    this.restarts = [];  // [{attempt, from_step}] with a known from_step
    this.chart = new Chart(container, () => ({
      plugins: [restartMarkers(this)],
      scales: { x: { time: false } },
      // Tick labels in significant digits: uPlot's default (the locale's
      // format) stops at 3 decimals, so a loss near 1e-4 read 0, 0, 0.
      axes: [{ ...axisColors(), label: 'step' },
        { ...axisColors(), label: 'loss', size: 60, values: (u, splits) => splits.map((v) => num(v, 3)) }],
      series: [
        { label: 'step' },
        lineSeries('train loss', '--loss', { value: (u, v) => num(v, 4) }),
        lineSeries('eval loss', '--eval', {
          spanGaps: true, dash: [6, 4], points: { show: true, size: 7 }, value: (u, v) => num(v, 4),
        }),
      ],
      legend: { live: true },
    }), [[], [], []]);
  }

  update(curves, evals, restarts = []) {
    this.restarts = restarts.filter((r) => Number.isFinite(r.from_step));
    this.container.dataset.restarts = String(this.restarts.length);
    const byStep = new Map(evals.map((e) => [e.step, e.loss]));
    const uniq = [...new Set([...curves.xs, ...byStep.keys()])].sort((a, b) => a - b);
    const lossAt = new Map(curves.xs.map((x, i) => [x, curves.loss[i]]));
    const data = [uniq, uniq.map((x) => lossAt.get(x) ?? null), uniq.map((x) => byStep.get(x) ?? null)];
    this.chart.setData(data);
    this.container.dataset.points = String(curves.xs.length);
  }

  rebuild() { this.chart.build(); }
}

export class AccuracyChart {
  constructor(container, emptyNote) {
    this.container = container;
    this.emptyNote = emptyNote;
    this.chart = new Chart(container, () => ({
      scales: { x: { time: false }, y: { range: (u, lo, hi) => [Math.max(0, Math.floor(lo / 5) * 5 - 5), Math.min(100, Math.ceil(hi / 5) * 5 + 5)] } },
      axes: [{ ...axisColors(), label: 'step' }, { ...axisColors(), label: 'accuracy %', size: 60 }],
      series: [
        { label: 'step' },
        lineSeries('accuracy', '--acc', { points: { show: true, size: 8 }, value: (u, v) => (v == null ? '–' : `${fixed(v, 2)} %`) }),
      ],
    }), [[], []]);
    this.chart.empty.remove();  // emptyNote says why
  }

  update(evals) {
    const pts = evals.filter((e) => e.accuracy >= 0);
    const regression = evals.length > 0 && pts.length === 0;
    this.emptyNote.hidden = pts.length > 0;
    this.emptyNote.textContent = regression
      ? 'Regression task: no accuracy (see the eval loss).'
      : 'No evaluation yet: it runs at each epoch end.';
    this.container.hidden = pts.length === 0;
    if (pts.length) this.chart.setData([pts.map((e) => e.step), pts.map((e) => 100 * e.accuracy)]);
  }

  rebuild() { this.chart.build(); }
}

// Stacked bars, one per rank (or min / median / max of the step time when
// there are more than MANY ranks). uPlot draws bars from zero, so the stack
// is drawn as cumulative sums, tallest first; the legend shows each phase's
// own value.
const STACK = [
  ['optimizer_ms', '--optimizer'], ['exposed_comm_ms', '--exposed'], ['backward_ms', '--backward'],
  ['forward_ms', '--forward'], ['data_ms', '--data'],
];
const MANY = 16;

export class PhaseChart {
  constructor(container, note) {
    this.note = note;
    this.labels = [];
    this.raw = STACK.map(() => []);
    this.chart = new Chart(container, () => ({
      scales: { x: { time: false, range: (u) => [-0.5, Math.max(0.5, this.labels.length - 0.5)] } },
      axes: [
        {
          ...axisColors(), label: 'rank',
          splits: () => this.labels.map((_, i) => i).filter((i) => i % Math.ceil(this.labels.length / 16) === 0),
          values: (u, splits) => splits.map((i) => this.labels[i] ?? ''),
        },
        { ...axisColors(), label: 'ms per step', size: 60 },
      ],
      series: [
        { label: 'rank', value: (u, i) => (i == null ? '–' : this.labels[i] ?? '') },
        ...STACK.map(([key, color], si) => ({
          label: PHASE_LABEL[key.replace('_ms', '')],
          fill: cssVar(color), stroke: cssVar(color), width: 0,
          paths: uPlot.paths.bars({ size: [0.7, 80], align: 0 }),
          points: { show: false },
          value: (u, v, sidx, idx) => (idx == null ? '–' : ms(this.raw[si][idx])),
        })),
      ],
      legend: { live: true },
      cursor: { points: { show: false } },
    }), [[], ...STACK.map(() => [])]);
  }

  update(means) {
    let rows = means;
    if (means.length > MANY) {
      const byTime = [...means].sort((a, b) => a.step_ms - b.step_ms);
      const pick = [['min', byTime[0]], ['median', byTime[byTime.length >> 1]], ['max', byTime[byTime.length - 1]]];
      rows = pick.map(([name, m]) => ({ ...m, label: `${name} (r${m.rank})` }));
      this.note.textContent = `${means.length} ranks: the fastest, the median and the slowest rank by step time (mean over the last 50 steps).`;
    } else {
      rows = means.map((m) => ({ ...m, label: `r${m.rank}` }));
      this.note.textContent = 'Mean over the last 50 steps, stacked: what each rank spends a step on.';
    }
    this.labels = rows.map((r) => r.label);
    this.raw = STACK.map(([key]) => rows.map((r) => r[key]));
    // cumulative from the bottom of the stack (data) up; drawn tallest first
    const bottomUp = [...STACK].reverse().map(([key]) => key);
    const cum = {};
    for (const r of rows) {
      let acc = 0;
      for (const key of bottomUp) { acc += r[key]; (cum[key] ||= []).push(acc); }
    }
    this.chart.setData([rows.map((_, i) => i), ...STACK.map(([key]) => cum[key] || [])]);
  }

  rebuild() { this.chart.build(); }
}

export class OverlapChart {
  constructor(container) {
    this.chart = new Chart(container, () => ({
      scales: { x: { time: false }, pct: { range: [0, 100] }, ms: { range: (u, lo, hi) => [0, Math.max(hi * 1.1, 0.1)] } },
      axes: [
        { ...axisColors(), label: 'step' },
        { ...axisColors(), scale: 'pct', label: 'overlap %', size: 55 },
        { ...axisColors(), scale: 'ms', side: 1, label: 'exposed comm ms', size: 60, grid: { show: false } },
      ],
      series: [
        { label: 'step' },
        lineSeries('overlap', '--overlap', { scale: 'pct', value: (u, v) => (v == null ? '–' : `${fixed(v, 1)} %`) }),
        lineSeries('exposed comm', '--exposed', { scale: 'ms', width: 1.5, value: (u, v) => ms(v) }),
      ],
    }), [[], [], []]);
  }

  update(curves) {
    this.chart.setData([curves.xs, curves.overlap, curves.exposed]);
  }

  rebuild() { this.chart.build(); }
}

// The alpha-beta prediction of an all-reduce's busbw (GB/s), as
// core/perf/cost_model.h defines it.
export function predictedBusbw(fit, algorithm, bytesN, n) {
  const alpha = fit.alpha_s ?? fit.link?.alpha_s;
  const beta = fit.beta_Bps ?? fit.link?.beta_Bps;
  if (!(beta > 0) || !(n > 1)) return NaN;
  let t;
  if (algorithm === 'tree') t = 2 * Math.ceil(Math.log2(n)) * (alpha + bytesN / beta);
  else if (algorithm === 'naive') t = 2 * (n - 1) * (alpha + bytesN / beta);
  else if (algorithm === 'doubling') t = (Math.floor(Math.log2(n)) + (n & (n - 1) ? 2 : 0)) * (alpha + bytesN / beta);
  else if (algorithm === 'direct') t = 2 * alpha + (2 * (n - 1) * bytesN) / (n * beta);
  else t = 2 * (n - 1) * (alpha + bytesN / (n * beta));
  return (bytesN / t) * (2 * (n - 1) / n) / 1e9;
}

export class BusbwChart {
  constructor(container, note) {
    this.container = container;
    this.note = note;
    this.chart = new Chart(container, () => ({
      scales: { x: { time: false, distr: 3, log: 2, range: (u, lo, hi) => (lo > 0 && hi > 0
        ? [2 ** Math.floor(Math.log2(lo) - 0.5), 2 ** Math.ceil(Math.log2(hi) + 0.5)] : [1024, 1048576]) }, y: { range: (u, lo, hi) => [0, Math.max(hi * 1.15, 0.01)] } },
      axes: [
        { ...axisColors(), label: 'bucket size', space: 60, values: (u, splits) => splits.map((v) => (v == null ? '' : bytes(v))) },
        { ...axisColors(), label: 'busbw GB/s', size: 60 },
      ],
      series: [
        { label: 'bytes', value: (u, v) => (v == null ? '–' : bytes(v)) },
        { label: 'achieved', stroke: cssVar('--comm'), fill: cssVar('--comm'), width: 0, paths: () => null,
          points: { show: true, size: 10, fill: cssVar('--comm'), stroke: cssVar('--comm') }, value: (u, v) => (v == null ? '–' : `${num(v, 3)} GB/s`) },
        { label: 'fit', stroke: cssVar('--fit'), width: 1.5, dash: [5, 4], spanGaps: true, points: { show: false },
          value: (u, v) => (v == null ? '–' : `${num(v, 3)} GB/s`) },
      ],
    }), [[], [], []]);
    this.chart.empty.remove();  // the note below says why
  }

  update(points, job) {
    const n = job?.world_size ?? 0;
    const fit = job?.fit ?? null;
    const algorithm = fit?.algorithm ?? (job?.algorithm === 'auto' ? 'ring' : job?.algorithm);
    if (n <= 1) {
      this.container.hidden = true;
      this.note.textContent = n === 1 ? 'One rank: nothing is all-reduced.' : '';
      return;
    }
    this.container.hidden = points.length === 0;
    let xs = points.map((p) => p.bytes);
    const sweep = [];
    if (fit && xs.length) {
      const lo = Math.min(...xs) / 2, hi = Math.max(...xs) * 2;
      for (let b = lo; b <= hi; b *= 1.25) sweep.push(Math.round(b));
    }
    xs = [...new Set([...xs, ...sweep])].sort((a, b) => a - b);
    const at = new Map(points.map((p) => [p.bytes, p.gbps]));
    const predicted = xs.map((x) => (fit ? predictedBusbw(fit, algorithm, x, n) : null));
    if (points.length) this.chart.setData([xs, xs.map((x) => at.get(x) ?? null), predicted]);

    const rows = points.map((p) => {
      const pred = fit ? predictedBusbw(fit, algorithm, p.bytes, n) : NaN;
      const vs = Number.isFinite(pred) ? ` (fit ${num(pred, 3)}, ${fixed((100 * p.gbps) / pred, 0)} %)` : '';
      return `bucket ${p.indices.join(',')} · ${bytes(p.bytes)}: ${num(p.gbps, 3)} GB/s${vs}`;
    });
    this.note.replaceChildren();
    if (fit) {
      const alpha = fit.alpha_s ?? fit.link?.alpha_s;
      const beta = fit.beta_Bps ?? fit.link?.beta_Bps;
      this.note.append(`Fit (${fit.transport ?? job.transport}, ${algorithm}, ${n} ranks): α = ${num(alpha * 1e6, 3)} µs, `
        + `β = ${num(beta / 1e9, 3)} GB/s${Number.isFinite(fit.r2) ? `, R² = ${fixed(fit.r2, 3)}` : ''}.`);
    } else {
      const code = document.createElement('code');
      code.textContent = 'microddp bench allreduce --fit';
      this.note.append('No benchmark fit: run ', code, ' to compare with the cost model.');
    }
    if (rows.length) {
      const ul = document.createElement('ul');
      ul.className = 'busbw-list';
      for (const r of rows) { const li = document.createElement('li'); li.textContent = r; ul.append(li); }
      this.note.append(ul);
    } else {
      this.note.append(' No all-reduces measured yet.');
    }
  }

  rebuild() { this.chart.build(); }
}
