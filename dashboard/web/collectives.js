// The Collectives view (/api/collectives): one traced step's bucket
// all-reduce, step by step, on a ring of the ranks. Left, each transfer in
// its measured time on the aligned clock (every rank's own start and end of
// the step, from the Communicator's trace); right, the same steps timed by
// the alpha-beta model, one after another. Both play on one time axis,
// slowed down so an all-reduce takes about PLAY_MS, so the difference in
// speed shows. "Export SVG" saves the steps as a strip of small rings, with
// the measured and predicted time of each, for the docs. The container's
// data-steps, data-ranks and data-frame say what it draws.

import { bytes, el, ms } from './format.js';

const NS = 'http://www.w3.org/2000/svg';
const PLAY_MS = 4000;    // one all-reduce plays in about this long ...
const HOLD_MS = 800;     // ... then holds before it starts again
const SIZE = 300;        // each ring's drawing, px
const LABELS_UP_TO = 16; // ranks and block numbers are written up to this many ranks

function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// Where rank r sits on a ring of n in a box of `size`.
function place(r, n, size) {
  const a = -Math.PI / 2 + (2 * Math.PI * r) / n;
  const R = size * 0.38;
  return [size / 2 + R * Math.cos(a), size / 2 + R * Math.sin(a)];
}

// An arrow from rank a to rank b, shortened by the nodes' radius; `progress`
// in [0, 1] places the moving dot (null: none); `label` sits at its middle.
function arrow(a, b, n, size, nodeR, label, progress, marker) {
  const [x1, y1] = place(a, n, size), [x2, y2] = place(b, n, size);
  const len = Math.hypot(x2 - x1, y2 - y1) || 1;
  const ux = (x2 - x1) / len, uy = (y2 - y1) / len;
  const sx = x1 + ux * nodeR, sy = y1 + uy * nodeR, ex = x2 - ux * (nodeR + 2), ey = y2 - uy * (nodeR + 2);
  const g = svg('g', { class: 'transfer' });
  g.append(svg('line', { x1: sx, y1: sy, x2: ex, y2: ey, class: 'arrow', 'marker-end': `url(#${marker})` }));
  if (progress !== null) {
    g.append(svg('circle', { cx: sx + (ex - sx) * progress, cy: sy + (ey - sy) * progress, r: Math.max(2, nodeR / 3),
      class: 'dot' }));
  }
  if (label && n <= LABELS_UP_TO) g.append(svg('text', { x: (sx + ex) / 2 - uy * 9, y: (sy + ey) / 2 + ux * 9 + 4, class: 'block' }, label));
  return g;
}

// The step's slowest link beside the median one: each link's bytes over the
// time its receiver waited on them (perf::LinkRate, Note [Link rate]).
function slowestLink(links) {
  const rated = (links ?? []).filter((l) => l.gbps !== null);
  if (rated.length < 2) return '';
  const median = [...rated].sort((a, b) => a.gbps - b.gbps)[Math.floor(rated.length / 2)].gbps;
  const s = rated[0];
  return ` Slowest link: rank ${s.from} → rank ${s.to}, ${s.gbps.toFixed(3)} GB/s (the median link ${median.toFixed(3)} GB/s).`;
}

// A ring's static parts: the nodes and their numbers.
function ringNodes(n, size, nodeR) {
  const g = svg('g', { class: 'nodes' });
  for (let r = 0; r < n; r++) {
    const [x, y] = place(r, n, size);
    g.append(svg('circle', { cx: x, cy: y, r: nodeR, class: 'node' }));
    if (n <= LABELS_UP_TO) g.append(svg('text', { x, y: y + 4, class: 'rank' }, String(r)));
  }
  return g;
}

function arrowHead(id) {
  const defs = svg('defs');
  const m = svg('marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6,
    orient: 'auto-start-reverse' });
  m.append(svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'head' }));
  defs.append(m);
  return defs;
}

const blockLabel = (b) => (b >= 0 ? `b${b}` : '');
const stepName = (s) => `${s.phase} ${s.index}`;
// A step's measured length: from the first rank's start to the last rank's end.
const measured = (s) => Math.max(...s.transfers.map((t) => t.end_ms)) - Math.min(...s.transfers.map((t) => t.start_ms));

export class CollectivesView {
  constructor(box, { onChoose }) {
    this.box = box;
    this.onChoose = onChoose;  // (step|null, bucket|null) => the app fetches that
    this.data = null;
    this.frame = 0;
    this.playing = true;
    this.t0 = performance.now();
    box.replaceChildren(
      el('div', { class: 'coll-controls' },
        el('label', {}, 'step ', this.stepSel = el('select', { id: 'coll-step', 'aria-label': 'traced step' })),
        el('label', {}, 'bucket ', this.bucketSel = el('select', { id: 'coll-bucket', 'aria-label': 'bucket' })),
        this.playBtn = el('button', { id: 'coll-play', type: 'button' }, 'pause'),
        this.exportBtn = el('button', { id: 'coll-export', type: 'button' }, 'Export SVG')),
      el('div', { class: 'coll-rings' },
        el('figure', {}, this.measuredSvg = svg('svg', { id: 'coll-measured', viewBox: `0 0 ${SIZE} ${SIZE}`, role: 'img' }),
          el('figcaption', { text: 'measured' })),
        el('figure', {}, this.modelSvg = svg('svg', { id: 'coll-model', viewBox: `0 0 ${SIZE} ${SIZE}`, role: 'img' }),
          this.modelCaption = el('figcaption', { text: 'α-β model' }))),
      this.caption = el('p', { id: 'coll-caption', class: 'note' }),
      this.now = el('p', { id: 'coll-now', class: 'coll-now' }),
      el('div', { class: 'scroll small' }, this.table = el('table', { id: 'coll-steps', class: 'table' })));
    this.stepSel.addEventListener('change', () => this.onChoose(this.stepSel.value === 'latest' ? null : Number(this.stepSel.value), null));
    this.bucketSel.addEventListener('change', () => this.onChoose(this.chosenStep(), Number(this.bucketSel.value)));
    this.playBtn.addEventListener('click', () => {
      this.playing = !this.playing;
      this.playBtn.textContent = this.playing ? 'pause' : 'play';
      if (this.playing) this.t0 = performance.now() - (this.pausedAt ?? 0);
      else this.pausedAt = performance.now() - this.t0;
    });
    this.exportBtn.addEventListener('click', () => this.exportSvg());
    this.rings();
    const tick = () => {
      this.draw();
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }

  // Both rings' nodes, drawn once per layout (a frame redraws the arrows
  // only), each with an empty layer for the arrows.
  rings() {
    const T = this.timing;
    this.arrowLayers = [this.measuredSvg, this.modelSvg].map((svgEl, i) => {
      const layer = svg('g', { class: 'arrows' });
      svgEl.replaceChildren(arrowHead(i ? 'coll-head-model' : 'coll-head-measured'));
      if (T) svgEl.append(ringNodes(T.n, SIZE, T.nodeR), layer);
      return layer;
    });
  }

  chosenStep() { return this.stepSel.value === 'latest' ? null : Number(this.stepSel.value); }

  // A /api/collectives reply, or null and the server's reason there is none.
  update(data, why) {
    const c = data?.collective;
    const shown = JSON.stringify([data?.step, c?.bucket, c?.start_ms, why]);
    this.data = data;
    this.why = why;
    if (shown === this.shown) return;
    this.shown = shown;
    this.t0 = performance.now();
    this.box.dataset.steps = String(c?.steps.length ?? 0);
    this.box.dataset.ranks = String(data?.world_size ?? 0);
    this.box.dataset.step = String(data?.step ?? '');
    this.options(data);
    this.layout(data);
  }

  options(data) {
    const steps = [...(data?.traced_steps ?? [])].reverse();
    const keep = this.stepSel.value || 'latest';
    this.stepSel.replaceChildren(el('option', { value: 'latest' }, 'latest'),
      ...steps.map((s) => el('option', { value: String(s) }, String(s))));
    this.stepSel.value = [...this.stepSel.options].some((o) => o.value === keep) ? keep : 'latest';
    this.bucketSel.replaceChildren(...(data?.buckets ?? []).map((b) =>
      el('option', { value: String(b.bucket) }, `${b.bucket}: ${bytes(b.bytes)}, ${b.algorithm}`)));
    if (data?.collective) this.bucketSel.value = String(data.collective.bucket);
  }

  // The timing of both rings on one axis: measured relative to the bucket's
  // start, predicted as the model's steps one after another.
  layout(data) {
    const c = data?.collective;
    this.timing = null;
    this.shownCurrent = undefined;  // the table is rebuilt: mark its row again
    if (!c || !c.steps.length) {
      this.rings();
      this.caption.textContent = data ? `Step ${data.step} carries no all-reduce steps (only every 10th step is traced, and a one-rank job or NCCL has none).` : this.why ?? 'No traced step yet: every 10th step carries its all-reduces\' steps.';
      this.table.replaceChildren();
      return;
    }
    const n = data.world_size;
    let at = 0;
    const model = c.steps.map((s) => { const m = { start: at, end: at + (s.predicted_ms ?? 0) }; at = m.end; return m; });
    const span = c.end_ms - c.start_ms;
    const total = Math.max(span, data.fit ? at : 0, 1e-6);
    // Each step's measured window (relative to the all-reduce's start): a
    // frame looks at the transfers of the steps in flight only, not at all
    // 2(n-1) x n of them (a 1,000-rank ring has two million).
    const windows = c.steps.map((s) => ({
      start: Math.min(...s.transfers.map((x) => x.start_ms)) - c.start_ms,
      end: Math.max(...s.transfers.map((x) => x.end_ms)) - c.start_ms,
    }));
    this.timing = { n, c, model, windows, total, nodeR: Math.max(3, Math.min(16, (SIZE * 1.1) / n / 2)) };
    this.rings();
    const fit = data.fit;
    this.caption.textContent = `Step ${data.step}, bucket ${c.bucket} (${bytes(c.bytes)}, ${c.algorithm} over ${n} ranks): `
      + `${c.steps.length} steps, ${ms(span)} from the first rank's start to the last rank's end`
      + (fit ? `; the α-β model says ${ms(c.predicted_ms)} (α ${(fit.alpha_s * 1e6).toFixed(1)} µs, β ${(fit.beta_Bps / 1e9).toFixed(2)} GB/s, `
        + `the ${fit.transport} ${fit.algorithm} fit of microddp bench allreduce --fit).`
        : '. No α-β fit of this link: run microddp bench allreduce --fit for the model beside it.')
      + ` Played ${Math.round(PLAY_MS / total)}× slower than it ran.` + slowestLink(data.links);
    this.modelCaption.textContent = fit ? 'α-β model' : 'α-β model (no fit)';
    this.table.replaceChildren(
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'step'), el('th', { scope: 'col', class: 'num' }, 'measured'),
        el('th', { scope: 'col', class: 'num' }, 'model'), el('th', { scope: 'col' }, 'rank 0 sends'))),
      el('tbody', {}, ...c.steps.map((s, i) => {
        const t0 = s.transfers.find((t) => t.rank === 0);
        return el('tr', { 'data-step': String(i) }, el('td', { text: stepName(s) }), el('td', { class: 'num', text: ms(measured(s)) }),
          el('td', { class: 'num', text: fit ? ms(s.predicted_ms) : '–' }),
          el('td', { text: t0 && t0.to >= 0 ? `${t0.send_block >= 0 ? `block ${t0.send_block}` : 'all'} to rank ${t0.to}` : '–' }));
      })));
  }

  // One frame: the transfers active at the current time, on both rings.
  draw() {
    const T = this.timing;
    const elapsed = this.playing ? performance.now() - this.t0 : (this.pausedAt ?? 0);
    for (const [layer, isModel] of [[this.arrowLayers[0], false], [this.arrowLayers[1], true]]) {
      const head = `coll-head-${isModel ? 'model' : 'measured'}`;
      if (!T || (isModel && !this.data.fit)) continue;
      const t = ((elapsed % (PLAY_MS + HOLD_MS)) / PLAY_MS) * T.total;  // ms of the all-reduce
      const g = [];
      T.c.steps.forEach((s, i) => {
        const w = isModel ? T.model[i] : T.windows[i];
        if (t < w.start || t > w.end) return;
        for (const x of s.transfers) {
          if (x.to < 0) continue;
          const [a, b] = isModel ? [T.model[i].start, T.model[i].end] : [x.start_ms - T.c.start_ms, x.end_ms - T.c.start_ms];
          if (t < a || t > b) continue;
          g.push(arrow(x.rank, x.to, T.n, SIZE, T.nodeR, blockLabel(x.send_block), b > a ? (t - a) / (b - a) : 1, head));
        }
        if (!isModel && s.transfers.some((x) => t >= x.start_ms - T.c.start_ms && t <= x.end_ms - T.c.start_ms)) this.current = i;
      });
      layer.replaceChildren(...g);
    }
    if (T) {
      this.box.dataset.current = String(this.current ?? 0);
      if (this.current !== this.shownCurrent) {  // the table's row of the step now: only when it moves
        this.shownCurrent = this.current;
        this.now.textContent = `now: ${stepName(T.c.steps[this.current ?? 0])}`;
        for (const row of this.table.querySelectorAll('tbody tr')) row.classList.toggle('now', row.dataset.step === String(this.current ?? 0));
      }
    }
    this.box.dataset.frame = String(++this.frame);
  }

  // The steps as a strip of small rings (measured and predicted time under
  // each), as a standalone SVG file.
  exportSvg() {
    const T = this.timing;
    if (!T) return;
    const per = 8, cell = 180, head = 40;
    const nodeR = Math.max(3, Math.min(12, (cell * 1.1) / T.n / 2));
    const rows = Math.ceil(T.c.steps.length / per);
    const root = svg('svg', { xmlns: NS, width: per * cell, height: head + rows * (cell + 30),
      viewBox: `0 0 ${per * cell} ${head + rows * (cell + 30)}`, 'font-family': 'sans-serif' });
    root.append(svg('style', {}, '.node{fill:#fff;stroke:#1b1f24}.rank,.block{font-size:11px;text-anchor:middle}'
      + '.arrow{stroke:#e69f00;stroke-width:2}.head{fill:#e69f00}.dot{fill:#d55e00}.t{font-size:11px;text-anchor:middle}'));
    root.append(arrowHead('head'));
    root.append(svg('text', { x: 8, y: 24, 'font-size': 14 }, `microddp step ${this.data.step}, bucket ${T.c.bucket}: `
      + `${bytes(T.c.bytes)} ${T.c.algorithm} all-reduce over ${T.n} ranks`));
    T.c.steps.forEach((s, i) => {
      const g = svg('g', { class: 'step', transform: `translate(${(i % per) * cell},${head + Math.floor(i / per) * (cell + 30)})` });
      g.append(ringNodes(T.n, cell, nodeR));
      for (const x of s.transfers)
        if (x.to >= 0) g.append(arrow(x.rank, x.to, T.n, cell, nodeR, blockLabel(x.send_block), null, 'head'));
      g.append(svg('text', { x: cell / 2, y: cell + 8, class: 't' }, stepName(s)));
      g.append(svg('text', { x: cell / 2, y: cell + 22, class: 't' },
        `${ms(measured(s))} measured${this.data.fit ? `, ${ms(s.predicted_ms)} model` : ''}`));
      root.append(g);
    });
    const blob = new Blob([new XMLSerializer().serializeToString(root)], { type: 'image/svg+xml' });
    const a = el('a', { href: URL.createObjectURL(blob), download: `microddp-collectives-step-${this.data.step}-bucket-${T.c.bucket}.svg` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }
}
