// What the page knows about the job: the latest job and rank objects, and the
// metrics records folded into per-step aggregates (loss, overlap) and a short
// per-rank window of recent steps (phase bars, bus bandwidth). Records can
// arrive twice (the stream resends its tail on reconnect, the backfill
// overlaps it); a (kind, rank, step) seen before is ignored.

export const RECENT_STEPS = 50;  // the window of the per-rank means
const MAX_STEPS = 100000;        // steps kept for the curves

export class Store {
  constructor() {
    this.job = null;
    this.ranks = [];
    this.steps = new Map();   // step -> {lossSum, overlapSum, exposedSum, n, ranks: Set}
    this.stepKeys = [];       // steps, ascending (re-sorted when one arrives out of order)
    this.sorted = true;
    this.evals = new Map();   // step -> {lossSum, accSum, n, ranks: Set, sample}
    this.recent = new Map();  // rank -> [{step, data_ms, ..., buckets: [{index, bytes, ms}]}], ascending
    this.maxSeq = 0;
    this.version = 0;         // bumped by every change; the views redraw when it moves
  }

  setJob(job, ranks) {
    if (job) {
      this.job = job;
      for (const e of job.eval || []) this.addEval(e.step, -1, e.loss, e.accuracy, e.sample);
    }
    if (ranks) this.ranks = ranks;
    this.version++;
  }

  // The last step `rank` sent metrics for (0: none yet).
  lastStep(rank) {
    const win = this.recent.get(rank);
    return win?.length ? win[win.length - 1].step : 0;
  }

  addRecords(records) {
    for (const r of records) this.add(r);
    if (records.length) this.version++;
  }

  add(r) {
    if (Number.isFinite(r.seq)) this.maxSeq = Math.max(this.maxSeq, r.seq);
    if (r.kind === 'eval') {
      this.addEval(r.step, r.rank, r.eval_loss, r.eval_accuracy, r.eval_sample);
      return;
    }
    let s = this.steps.get(r.step);
    if (!s) {
      s = { lossSum: 0, overlapSum: 0, exposedSum: 0, n: 0, ranks: new Set() };
      this.steps.set(r.step, s);
      if (this.stepKeys.length && r.step < this.stepKeys[this.stepKeys.length - 1]) this.sorted = false;
      this.stepKeys.push(r.step);
      if (this.stepKeys.length > MAX_STEPS) this.prune();
    }
    if (s.ranks.has(r.rank)) return;
    s.ranks.add(r.rank);
    s.lossSum += r.loss;
    s.overlapSum += r.overlap ?? 0;
    s.exposedSum += r.exposed_comm_ms ?? 0;
    s.n++;

    let win = this.recent.get(r.rank);
    if (!win) this.recent.set(r.rank, (win = []));
    if (win.length && win[win.length - 1].step >= r.step) {
      if (win.some((w) => w.step === r.step)) return;
    }
    win.push({
      step: r.step,
      data_ms: r.data_ms ?? 0, forward_ms: r.forward_ms ?? 0, backward_ms: r.backward_ms ?? 0,
      exposed_comm_ms: r.exposed_comm_ms ?? 0, optimizer_ms: r.optimizer_ms ?? 0,
      step_ms: r.step_ms ?? 0, total_comm_ms: r.total_comm_ms ?? 0,
      buckets: (r.buckets || []).map((b) => ({
        index: b.index, bytes: b.bytes, ms: b.ms ?? (b.end_ns - b.start_ns) / 1e6,
      })),
    });
    win.sort((a, b) => a.step - b.step);
    if (win.length > RECENT_STEPS) win.splice(0, win.length - RECENT_STEPS);
  }

  // `sample`: rank 0's generated text (a GPT on text), on one report of the step.
  addEval(step, rank, loss, accuracy, sample) {
    let e = this.evals.get(step);
    if (!e) this.evals.set(step, (e = { lossSum: 0, accSum: 0, n: 0, ranks: new Set(), sample: '' }));
    if (sample) e.sample = sample;
    if (rank < 0) {  // the job's own summary wins over per-rank records
      e.lossSum = loss; e.accSum = accuracy; e.n = 1; e.ranks = new Set([-1]);
      return;
    }
    if (e.ranks.has(-1) || e.ranks.has(rank)) return;
    e.ranks.add(rank);
    e.lossSum += loss;
    e.accSum += accuracy;
    e.n++;
  }

  prune() {
    this.sortKeys();
    const drop = this.stepKeys.splice(0, this.stepKeys.length - MAX_STEPS);
    for (const k of drop) this.steps.delete(k);
  }

  sortKeys() {
    if (!this.sorted) {
      this.stepKeys.sort((a, b) => a - b);
      this.sorted = true;
    }
  }

  // Steps, mean loss over ranks, and the overlap % and exposed comm ms as
  // trailing means over SMOOTH steps (one step's are noisy: a context
  // switch shows as a spike).
  curves() {
    this.sortKeys();
    const xs = [], loss = [], overlap = [], exposed = [];
    const SMOOTH = 20;
    let ov = 0, ex = 0;
    const ovs = [], exs = [];
    for (const k of this.stepKeys) {
      const s = this.steps.get(k);
      xs.push(k);
      loss.push(s.lossSum / s.n);
      ovs.push((100 * s.overlapSum) / s.n);
      exs.push(s.exposedSum / s.n);
      ov += ovs[ovs.length - 1];
      ex += exs[exs.length - 1];
      if (ovs.length > SMOOTH) { ov -= ovs[ovs.length - 1 - SMOOTH]; ex -= exs[exs.length - 1 - SMOOTH]; }
      const n = Math.min(ovs.length, SMOOTH);
      overlap.push(ov / n);
      exposed.push(ex / n);
    }
    return { xs, loss, overlap, exposed };
  }

  // [{step, loss, accuracy, sample}] ascending.
  evalPoints() {
    return [...this.evals.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([step, e]) => ({ step, loss: e.lossSum / e.n, accuracy: e.accSum / e.n, sample: e.sample }));
  }

  // Per rank: mean of each phase over its recent window, and the step time.
  phaseMeans() {
    const out = [];
    for (const [rank, win] of [...this.recent.entries()].sort((a, b) => a[0] - b[0])) {
      if (!win.length) continue;
      const m = { rank, data_ms: 0, forward_ms: 0, backward_ms: 0, exposed_comm_ms: 0, optimizer_ms: 0, step_ms: 0 };
      for (const w of win) for (const k of Object.keys(m)) if (k !== 'rank') m[k] += w[k];
      for (const k of Object.keys(m)) if (k !== 'rank') m[k] /= win.length;
      out.push(m);
    }
    return out;
  }

  // Per bucket size: the median achieved busbw (GB/s) over the recent
  // windows of all ranks. busbw = bytes / t * 2(n-1)/n (nccl-tests).
  busbw(worldSize) {
    if (!(worldSize > 1)) return [];
    const bySize = new Map();
    for (const win of this.recent.values()) {
      for (const w of win) {
        for (const b of w.buckets) {
          if (!(b.ms > 0) || !(b.bytes > 0)) continue;
          const gbps = (b.bytes / (b.ms / 1e3)) * (2 * (worldSize - 1) / worldSize) / 1e9;
          if (!bySize.has(b.bytes)) bySize.set(b.bytes, { bytes: b.bytes, indices: new Set(), values: [] });
          const e = bySize.get(b.bytes);
          e.indices.add(b.index);
          e.values.push(gbps);
        }
      }
    }
    return [...bySize.values()]
      .sort((a, b) => a.bytes - b.bytes)
      .map((e) => ({ bytes: e.bytes, indices: [...e.indices].sort((a, b) => a - b), gbps: median(e.values), n: e.values.length }));
  }
}

export function median(values) {
  if (!values.length) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
