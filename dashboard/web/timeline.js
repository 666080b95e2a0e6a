// The timeline of one step (/api/timeline): Chart.js floating bars
// (window.Chart, vendor/chart.umd.min.js; each bar is a [start, end] range
// on the aligned clock). One row per rank with two lanes, the two stacks
// of a grouped bar chart: 'compute' on top holds the phases, 'comm' below
// holds each bucket's all-reduce and, lighter, the wait between the bucket
// becoming ready and its all-reduce starting. Up to MAX_ROWS ranks are
// drawn, past about ten rows the area scrolls; a larger job is summarised:
// the MAX_ROWS ranks that finished the step last (where a slow step's
// cause is), the straggler always among them, in rank order. The
// container's data-ranks and data-bucket-spans count what the chart was
// given, data-total-ranks the ranks of the step.

import { bytes, cssVar, el, fixed, ms, num, PHASE_LABEL, PHASES, where } from './format.js';

const ROW_PX = 40;          // one rank: two lanes
const AXIS_PX = 30;         // each x axis
const SCROLL_PAST = 10;     // ranks shown before the area scrolls
const MAX_ROWS = 64;        // ranks drawn at most (a canvas of 1,000 rows helps nobody)
const WAIT_ALPHA = 0.3;     // the wait lane: the all-reduce colour, lighter

const colorVar = (phase) => `--${phase === 'exposed_comm' ? 'exposed' : phase}`;

export function legend(ul) {
  const items = [...PHASES.map((p) => [PHASE_LABEL[p], `var(${colorVar(p)})`]), ['bucket all-reduce', 'var(--comm)']];
  ul.replaceChildren(...items.map(([label, color]) => el('li', { style: `--c: ${color}`, text: label })));
  ul.append(el('li', { class: 'legend-wait', text: 'bucket ready, waiting for its all-reduce' }));
}

const rowOf = (r) => `rank ${r.rank}`;
const endOf = (r) => Math.max(r.end_ms ?? 0, ...(r.buckets || []).map((b) => b.end_ms));

// The ranks to draw: all of them, or the MAX_ROWS that finished last
// (the straggler always kept), in rank order.
function rowsToDraw(ranks, stragglerRank) {
  if (ranks.length <= MAX_ROWS) return ranks;
  const latest = [...ranks].sort((a, b) => endOf(b) - endOf(a) || a.rank - b.rank).slice(0, MAX_ROWS);
  if (stragglerRank != null && !latest.some((r) => r.rank === stragglerRank)) {
    const s = ranks.find((r) => r.rank === stragglerRank);
    if (s) latest[latest.length - 1] = s;
  }
  return latest.sort((a, b) => a.rank - b.rank);
}
const span = (x0, x1, r, more) => ({ x: [x0, x1], y: rowOf(r), rank: r.rank, ...more });

// The datasets: one per phase, then the all-reduces and the waits (an
// earlier dataset is drawn on top, so a wait overlapping the previous
// bucket's all-reduce stays behind it). y is the rank's category label
// ("rank 3"): Chart.js would take a number as the data index, not the row.
function datasets(tl, pal) {
  const phases = PHASES.map((p) => ({
    label: PHASE_LABEL[p], kind: 'phase', stack: 'compute', data: [], backgroundColor: pal[p],
  }));
  const wait = {
    label: 'waiting for its all-reduce', kind: 'wait', stack: 'comm', data: [],
    backgroundColor: pal.wait, borderColor: pal.comm, borderWidth: 1,
  };
  const bucket = {
    label: 'bucket all-reduce', kind: 'bucket', stack: 'comm', data: [],
    backgroundColor: pal.comm, borderColor: pal.edge, borderWidth: 1,
  };
  for (const r of tl.ranks) {
    for (const p of r.phases || []) {
      const i = PHASES.indexOf(p.name);
      if (i >= 0 && p.end_ms > p.start_ms) phases[i].data.push(span(p.start_ms, p.end_ms, r, { name: p.name }));
    }
    for (const b of r.buckets || []) {
      if (b.start_ms > b.ready_ms) wait.data.push(span(b.ready_ms, b.start_ms, r, { bucket: b }));
      bucket.data.push(span(b.start_ms, Math.max(b.start_ms, b.end_ms), r, { bucket: b }));
    }
  }
  return [...phases, bucket, wait];
}

function tooltipLines(ctx) {
  const d = ctx.raw;
  const [x0, x1] = d.x;
  if (ctx.dataset.kind === 'phase') {
    return `${PHASE_LABEL[d.name] ?? d.name}: ${ms(x1 - x0)} (${fixed(x0, 2)}–${fixed(x1, 2)} ms)`;
  }
  const b = d.bucket;
  if (ctx.dataset.kind === 'wait') {
    return `bucket ${b.index} waited ${ms(x1 - x0)} for its all-reduce (ready ${fixed(x0, 2)} ms, started ${fixed(x1, 2)} ms)`;
  }
  return [
    `bucket ${b.index}: ${bytes(b.bytes)}`,
    `ready ${fixed(b.ready_ms, 2)} ms`,
    `${(b.op ?? 'all_reduce').replace('_', '-')} ${fixed(b.start_ms, 2)}–${fixed(b.end_ms, 2)} ms (${ms(x1 - x0)})`,
    ...(Number.isFinite(b.busbw_gbps) ? [`busbw ${num(b.busbw_gbps, 3)} GB/s`] : []),
  ];
}

// The per-rank timeline in `container` (a scrolling box): update(tl, ranks)
// with each /api/timeline answer, rebuild() after a colour scheme change.
export class Timeline {
  constructor(container) {
    this.container = container;
    this.chart = null;
    this.last = null;
    this.view = { straggler: -1, hosts: [] };  // per row, read by the scriptable options
  }

  rebuild() {
    if (this.chart) this.chart.destroy();
    this.chart = null;
    if (this.last) this.update(...this.last);
  }

  update(tl, ranksInfo) {
    this.last = [tl, ranksInfo];
    const c = this.container;
    if (!tl || !tl.ranks?.length) {
      if (this.chart) this.chart.destroy();
      this.chart = null;
      c.replaceChildren(el('p', { class: 'empty', text: 'No complete step yet.' }));
      c.dataset.ranks = '0';
      c.dataset.totalRanks = '0';
      c.dataset.bucketSpans = '0';
      this.note(null);
      return;
    }
    const stragglerRank = tl.straggler?.rank;
    const total = tl.ranks.length;
    tl = { ...tl, ranks: rowsToDraw(tl.ranks, stragglerRank) };
    const max = Math.max(...tl.ranks.map(endOf), 1e-3);
    const hostOf = new Map((ranksInfo || []).map((k) => [k.rank, k.host]));
    this.view = {
      straggler: tl.ranks.findIndex((r) => r.rank === stragglerRank),  // its row, or -1
      hosts: tl.ranks.map((r) => hostOf.get(r.rank)),
    };
    const labels = tl.ranks.map(rowOf);
    const scroll = tl.ranks.length > SCROLL_PAST;
    if (!this.chart) this.build();
    const chart = this.chart;
    chart.data = { labels, datasets: datasets(tl, this.palette) };
    for (const id of ['x', 'x2']) chart.options.scales[id].max = max;
    chart.options.scales.x2.display = scroll;  // a second axis at the bottom of a long list
    this.box.style.height = `${tl.ranks.length * ROW_PX + AXIS_PX * (scroll ? 2 : 1)}px`;
    chart.resize();
    chart.update('none');

    const buckets = chart.data.datasets.find((d) => d.kind === 'bucket').data.length;
    c.dataset.ranks = String(labels.length);
    c.dataset.bucketSpans = String(buckets);
    c.dataset.totalRanks = String(total);
    c.setAttribute('aria-label', `timeline of step ${tl.step}: ${tl.ranks.length} of ${total} ranks over ${ms(max)}, `
      + `${buckets} bucket all-reduces${stragglerRank != null ? `, straggler rank ${stragglerRank}` : ''}`);
    const marked = stragglerRank != null ? ` (the straggler, rank ${stragglerRank}, is marked ⚑)` : '';
    if (total > tl.ranks.length) {
      this.note(`${total} ranks: the ${tl.ranks.length} that finished step ${tl.step} last are drawn, `
        + `in rank order${marked}; the stragglers table and the Chrome trace cover every rank.`);
    } else {
      this.note(scroll ? `${tl.ranks.length} ranks: scroll the timeline for the others${marked}.` : null);
    }
  }

  // The "scroll for the others" line under the timeline, or none.
  note(text) {
    const next = this.container.nextElementSibling;
    const more = next?.classList.contains('tl-more') ? next : null;
    if (text && more) more.textContent = text;
    else if (text) this.container.after(el('p', { class: 'tl-more', text }));
    else if (more) more.remove();
  }

  build() {
    const color = window.Chart.helpers.color;
    const pal = Object.fromEntries(PHASES.map((p) => [p, cssVar(colorVar(p))]));
    pal.comm = cssVar('--comm');
    pal.wait = color(pal.comm).alpha(WAIT_ALPHA).rgbString();
    pal.edge = 'rgba(0, 0, 0, 0.35)';
    this.palette = pal;
    const text = cssVar('--text'), muted = cssVar('--muted'), grid = cssVar('--grid'), bad = cssVar('--bad');
    const family = getComputedStyle(document.body).fontFamily;
    const xAxis = (position) => ({
      type: 'linear', position, min: 0, grid: { color: grid, drawTicks: false }, border: { color: grid },
      ticks: { color: muted, font: { family, size: 11 }, callback: (v) => `${num(v, 3)} ms`, maxRotation: 0, includeBounds: false },
    });
    const canvas = el('canvas');
    this.box = el('div', { class: 'tl-box' }, canvas);
    this.container.replaceChildren(this.box);
    this.chart = new window.Chart(canvas, {
      type: 'bar',
      data: { labels: [], datasets: [] },
      options: {
        indexAxis: 'y',
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        datasets: {
          bar: {
            grouped: true,            // the two stacks side by side: two lanes a rank
            categoryPercentage: 0.86,
            barPercentage: 0.9,
            minBarLength: 2,          // a 10 µs all-reduce still shows
            borderSkipped: false,
          },
        },
        scales: {
          x: { ...xAxis('top'), stacked: false },
          x2: { ...xAxis('bottom'), grid: { display: false }, border: { color: grid } },
          y: {
            type: 'category',
            grid: { color: grid, drawTicks: false }, border: { color: grid },
            ticks: {
              autoSkip: false,
              callback: (v, i) => [`${this.chart.data.labels[i]}${i === this.view.straggler ? ' ⚑' : ''}`, this.view.hosts[i] ?? ''],
              color: (ctx) => (ctx.index === this.view.straggler ? bad : text),
              font: (ctx) => ({ family, size: 12, weight: ctx.index === this.view.straggler ? 'bold' : 'normal' }),
            },
          },
        },
        plugins: {
          legend: { display: false },   // the page's legend above the chart
          tooltip: {
            callbacks: {
              title: (items) => {
                const row = items[0]?.parsed.y;  // the category index
                if (row === undefined) return '';
                const host = this.view.hosts[row];
                return `${items[0].raw.y}${host ? ` (${host})` : ''}${row === this.view.straggler ? ', the straggler' : ''}`;
              },
              label: tooltipLines,
            },
          },
        },
      },
    });
  }
}

// "Step 412: rank 1 arrived 2.4 ms after the median rank (in forward)."
export function stragglerSentence(s, step) {
  if (!s) return null;
  const excess = Object.entries(s.excess_ms || {}).filter(([, v]) => v >= 0.01)
    .sort((a, b) => b[1] - a[1]).map(([k, v]) => `${PHASE_LABEL[k] ?? k} +${ms(v)}`).join(', ');
  return { rank: s.rank, text: `arrived ${ms(s.late_ms)} after the median rank at step ${step}, ${where(s.phase)}${excess ? ` (${excess})` : ''}.` };
}
