// A stand-in for the coordinator's HTTP API (dashboard/API.md) with a
// simulated job, for working on the page without a real job and for the
// layout check at 64 ranks (dashboard.e2e.mjs --mock). Serves dashboard/web/
// from disk and vendor/ (uPlot, Chart.js) from dashboard/node_modules, as
// dashboard/assets/ embeds them.
//
//   node tests/dashboard/e2e/mock_coordinator.mjs [--ranks N] [--port P] [--fail-at STEP] [--fit] [--gpt]
//
// --gpt: the job is a GPT on text: rank 0's eval records carry a sample
// (eval_sample), as /api/job's eval points do.
//
// Rank 1 (rank 0 of one) fails at step STEP, or when POST /mock/fail asks
// (the browser test, once it has checked the running job: at 1,000 ranks
// the simulation's pace depends on the machine's load). POST /mock/restart
// restarts the job as --max-restarts would: the next attempt resumes from
// the last multiple of 50 steps (its checkpoint), as /api/job then says.
// POST /mock/shrink drops rank 1 (the survivors go on, one rank fewer) and
// POST /mock/grow?host=H heals a newcomer on host H back in, as
// --on-failure heal does: each adds a line to /api/job's membership (as
// does a restart), and each change takes 1.25 points off its goodput.
// Prints "listening on http://127.0.0.1:PORT/" once it serves.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..', '..', 'dashboard');
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const N = Number(opt('--ranks', 4));
const PORT = Number(opt('--port', 0));
const FAIL_AT = Number(opt('--fail-at', 0));
const FIT = args.includes('--fit');
const GPT = args.includes('--gpt');
// What the mock's GPT "writes" at the evaluation of `step`: lines that
// name the step, with a character of more than one byte.
const mockSample = (step) => `The lamp at step ${step} — is lit.\nThe sea is calm.`;
// The GPT's epochs are shorter: the browser test waits for two of its samples.
const TOTAL = 3000, STEPS_PER_EPOCH = GPT ? 100 : 400;
// A step every 50 ms up to 64 ranks; past that, as many records a second as
// 64 ranks send (a larger job's steps take longer, and one process
// simulating 1,000 ranks at 20 steps/s would measure itself, not the page).
const STEP_MS = 50 * Math.max(1, N / 64);
const BUCKETS = [262144, 1048576, 1048576, 65536];

let seq = 0, step = 0;
const start = Date.now();
const tail = [];
const evals = [];
const clients = new Set();
let state = 'running', failure = null, failedRank = -1, failedAt = 0;
const restarts = [];
// The workers of the current attempt (rank order) and the job's membership
// lines (API.md): the first, "start", before any step.
let members = Array.from({ length: N }, (_, r) => ({ rank: r, host: `host-${Math.floor(r / 8)}`, pid: 40000 + r }));
let nextPid = 40000 + N;
const membership = [];
const origin = BigInt(Date.now()) * 1000000n;

function stepRecords(s) {
  const out = [];
  const t0 = Number(origin % 1000000000000n) + s * 12e6;
  for (let r = 0; r < N; r++) {
    const slow = r === N - 1 ? 1.4 : 1 + 0.05 * Math.sin(r + s);
    const data = 0.3, fwd = 2.0 * slow, bwd = 4.1 * slow, opt = 0.8;
    let t = t0 + data * 1e6 + fwd * 1e6;
    const buckets = BUCKETS.map((bytes, i) => {
      const ready = t + (bwd * 1e6 * (i + 1)) / BUCKETS.length;
      const st = Math.max(ready, t0 + (data + 2.0 * 1.4 + (4.1 * 1.4 * (i + 1)) / BUCKETS.length) * 1e6);
      return { index: i, bytes, ready_ns: ready, launch_ns: ready, start_ns: st, end_ns: st + bytes / 2.2 };
    });
    const lastEnd = buckets[buckets.length - 1].end_ns;
    const bwdEnd = t + bwd * 1e6;
    const exposed = Math.max(0, (lastEnd - bwdEnd) / 1e6) * 0.3;
    const total = buckets.reduce((a, b) => a + (b.end_ns - b.start_ns) / 1e6, 0);
    out.push({
      kind: 'step', seq: ++seq, rank: r, step: s, loss: 2.3 * Math.exp(-s / 700) + 0.25 + 0.05 * Math.random(),
      data_ms: data, forward_ms: fwd, backward_ms: bwd, exposed_comm_ms: exposed, total_comm_ms: total,
      optimizer_ms: opt, step_ms: data + fwd + bwd + exposed + opt, overlap: Math.max(0, Math.min(1, 1 - exposed / total)),
      comm_bytes: BUCKETS.reduce((a, b) => a + b, 0), start_ns: t0, clock_offset_ns: 0,
      time_unix_ns: Date.now() * 1e6, received_unix_ns: Date.now() * 1e6, buckets,
    });
  }
  return out;
}

function job() {
  const el = (Date.now() - start) / 1000;
  const sps = state === 'running' ? (64 * 1000) / STEP_MS : 0;
  return {
    job_id: 'mock', state, world_size: members.length, max_world_size: N, attempt: restarts.length, restarts,
    membership, goodput: 0.998 - 0.0125 * (membership.length - 1), backend: 'cpu', transport: 'shm', algorithm: 'ring', ddp: 'bucketed',
    compress: 'none', model: GPT ? 'gpt' : 'mlp', global_batch: 64, step, total_steps: TOTAL, samples_per_s: sps,
    eta_s: state === 'running' ? ((TOTAL - step) * STEP_MS) / 1000 : null, elapsed_s: el,
    loss: tail.length ? tail[tail.length - 1].loss : 0, eval: evals, failure, failed_rank: failedRank,
    ...(FIT ? { fit: { transport: 'shm', algorithm: 'ring', world_size: N, alpha_s: 4e-6, beta_Bps: 3.1e9, r2: 0.998 } } : {}),
  };
}

function ranks() {
  return Array.from({ length: N }, (_, r) => ({
    // 8 ranks a host with 8 CPUs each, but the last host has 4: oversubscribed.
    rank: r, host: `host-${Math.floor(r / 8)}`, device: 'cpu', pid: 40000 + r, threads: 1,
    cpus: Math.floor(r / 8) === Math.floor((N - 1) / 8) && N > 8 ? 4 : 8,
    oversubscribed: Math.floor(r / 8) === Math.floor((N - 1) / 8) && N > 8,
    state: r === failedRank ? 'failed' : state === 'succeeded' ? 'done' : state === 'failed' ? 'running' : 'running',
    phase: ['forward', 'backward', 'optimizer'][(step + r) % 3], step: step - (r % 2),
    heartbeat_age_ms: r === failedRank ? 4200 : 40 + ((r * 37) % 200), clock_offset_ms: 0,
    loss: 2 / (step + 1), nonfinite_since: null,
    message: r === failedRank ? 'killed by signal 9 (SIGKILL) during step ' + failedAt : '',
  }));
}

function timeline() {
  const recs = tail.filter((r) => r.step === step && r.kind === 'step');
  if (!recs.length) return null;
  const o = Math.min(...recs.map((r) => r.start_ns));
  const m = (ns) => (ns - o) / 1e6;
  return {
    step, origin_unix_ns: Number(origin),
    ranks: recs.map((r) => {
      let t = m(r.start_ns);
      const ph = [['data', r.data_ms], ['forward', r.forward_ms], ['backward', r.backward_ms], ['exposed_comm', r.exposed_comm_ms], ['optimizer', r.optimizer_ms]]
        .map(([name, d]) => { const p = { name, start_ms: t, end_ms: t + d }; t += d; return p; });
      return {
        rank: r.rank, start_ms: m(r.start_ns), end_ms: t, phases: ph,
        buckets: r.buckets.map((b) => ({ index: b.index, bytes: b.bytes, ready_ms: m(b.ready_ns), launch_ms: m(b.launch_ns),
          start_ms: m(b.start_ns), end_ms: m(b.end_ns), busbw_gbps: b.bytes / ((b.end_ns - b.start_ns) / 1e9) * (2 * (N - 1) / N) / 1e9 })),
      };
    }),
    straggler: N > 1 ? { rank: N - 1, phase: 'backward', late_ms: 2.1, excess_ms: { data: 0, forward: 0.8, backward: 1.6, start: 0 } } : null,
  };
}

function stragglers() {
  return {
    steps: 50,
    min_late_ms: 0.5,
    ranks: N === 1 ? [] : Array.from({ length: N }, (_, r) => ({ rank: r, late_steps: r === N - 1 ? 47 : r === 0 ? 3 : 0, late_ms_total: r === N - 1 ? 98.7 : 2.1, by_phase: r === N - 1 ? { backward: 40, forward: 7 } : { data: 3 } })),
    worst: N > 1 ? { rank: N - 1, phase: 'backward' } : null,
  };
}

// /api/collectives: the ring schedule of a traced step's buckets (every
// 10th step), each step taking an equal share of the bucket's span. As the
// coordinator, no step is traced past 64 ranks: the 404 says why.
const TRACE_MAX_RANKS = 64;
function collectives(q) {
  if (N > TRACE_MAX_RANKS) return { status: 404, error: `a job of ${N} ranks traces no all-reduce steps: only jobs of up to ${TRACE_MAX_RANKS} ranks do (a step's transfers grow with the square of the ranks)` };
  const traced = [...new Set(tail.filter((r) => r.kind === 'step' && r.step % 10 === 0).map((r) => r.step))].slice(-30);
  const s = q.has('step') ? Number(q.get('step')) : traced[traced.length - 1];
  const recs = tail.filter((r) => r.kind === 'step' && r.step === s);
  if (!recs.length) return null;
  const o = Math.min(...recs.map((r) => r.start_ns));
  const m = (ns) => (ns - o) / 1e6;
  const fit = FIT ? { transport: 'shm', algorithm: 'ring', world_size: N, alpha_s: 4e-6, beta_Bps: 3.1e9, r2: 0.998 } : null;
  const steps = N > 1 ? 2 * (N - 1) : 0;
  const mod = (a) => ((a % N) + N) % N;
  const view = (b) => {
    const start = Math.min(...recs.map((r) => m(r.buckets[b].start_ns))), end = Math.max(...recs.map((r) => m(r.buckets[b].end_ns)));
    const block = BUCKETS[b] / N, pred = fit ? fit.alpha_s * 1e3 + (block / fit.beta_Bps) * 1e3 : null;
    return { bucket: b, bytes: BUCKETS[b], algorithm: 'ring', start_ms: start, end_ms: end,
      predicted_ms: fit ? steps * pred : null, steps, pred };
  };
  const buckets = N > 1 ? BUCKETS.map((_, b) => view(b)) : [];
  const pick = q.has('bucket') ? Number(q.get('bucket')) : 1;
  const v = buckets[pick];
  const collective = v && {
    ...v, pred: undefined,
    steps: Array.from({ length: steps }, (_, k) => {
      const rs = k < N - 1, i = rs ? k : k - (N - 1), dt = (v.end_ms - v.start_ms) / steps;
      return { phase: rs ? 'reduce-scatter' : 'all-gather', index: i, predicted_ms: v.pred,
        transfers: Array.from({ length: N }, (_, r) => ({ rank: r, to: mod(r + 1), send_block: rs ? mod(r - i - 1) : mod(r - i),
          from: mod(r - 1), recv_block: rs ? mod(r - i - 2) : mod(r - i - 1), send_bytes: v.bytes / N, recv_bytes: v.bytes / N,
          start_ms: v.start_ms + k * dt + 0.01 * (r % 3), end_ms: v.start_ms + (k + 1) * dt })) };
    }) };
  return { step: s, world_size: N, origin_unix_ns: Number(origin), fit, traced_steps: traced,
    buckets: buckets.map(({ pred, ...b }) => b), collective: collective ?? null };
}

// ---- WebSocket (RFC 6455, server side, text frames only) --------------------
function wsFrame(text) {
  const p = Buffer.from(text);
  const head = p.length < 126 ? Buffer.from([0x81, p.length])
    : p.length < 65536 ? Buffer.from([0x81, 126, p.length >> 8, p.length & 255])
      : (() => { const h = Buffer.alloc(10); h[0] = 0x81; h[1] = 127; h.writeBigUInt64BE(BigInt(p.length), 2); return h; })();
  return Buffer.concat([head, p]);
}
function broadcast(obj) { const f = wsFrame(JSON.stringify(obj)); for (const c of clients) c.write(f); }

// ---- the simulated job --------------------------------------------------------
function fail() {
  state = 'failed'; failedRank = Math.min(1, N - 1); failedAt = step;
  failure = `rank ${failedRank} (host-0, pid ${40000 + failedRank}) left: killed by signal 9 (SIGKILL); the others stopped at step ${step}`;
  broadcast({ type: 'job', job: job(), ranks: ranks() });
}
// A membership line for the attempt that formed with `now` after `before`,
// trained from `fromStep`, its first step `toFirstS` after the attempt before ended.
function formed(how, now, fromStep, toFirstS) {
  const same = (a) => (b) => a.host === b.host && a.pid === b.pid;
  const before = membership.length ? members : [];
  const t = BigInt(Date.now()) * 1000000n;
  membership.push({
    attempt: restarts.length, from_step: fromStep, how, world_size: now.length, global_batch: 64,
    left: before.filter((m) => !now.some(same(m))), joined: now.filter((m) => !before.some(same(m))),
    since_unix_ns: Number(t - BigInt(Math.round(toFirstS * 1e9))), first_step_unix_ns: Number(t), to_first_step_s: toFirstS,
  });
  members = now;
}
formed('start', members, 0, 0.41);
// A shrink or a grow: the attempt after the verdict, without spending a restart's budget.
function change(how, now, message) {
  restarts.push({ attempt: restarts.length + 1, cause: how === 'grow' ? 'grow' : 'process died', rank: how === 'grow' ? -1 : 1,
    host: 'host-0', message, unix_ns: Date.now() * 1e6, from_step: step, steps_lost: 0,
    shrink: how === 'shrink', grow: how === 'grow' });
  formed(how, now, step, how === 'grow' ? 0.74 : 0.06);
  broadcast({ type: 'job', job: job(), ranks: ranks() });
}
function shrink() {
  const gone = members[Math.min(1, members.length - 1)];
  change('shrink', members.filter((m) => m !== gone).map((m, r) => ({ ...m, rank: r })),
    `killed by signal 9 (SIGKILL) during step ${step}`);
}
function grow(host) {
  const pid = nextPid++;
  change('grow', [...members, { rank: members.length, host, pid }], `host ${host} pid ${pid} joined`);
}
function restart() {
  const fromStep = step - (step % 50);
  restarts.push({
    attempt: restarts.length + 1, cause: 'signal', rank: Math.min(1, N - 1), host: 'host-0',
    message: `killed by signal 9 (SIGKILL) during step ${step}`, unix_ns: Date.now() * 1e6,
    from_step: fromStep, steps_lost: step - fromStep,
  });
  step = fromStep;
  formed('restart', members.map((m) => ({ ...m, pid: nextPid++ })), fromStep, 0.41);  // every process started again
  broadcast({ type: 'job', job: job(), ranks: ranks() });
}
const timer = setInterval(() => {
  if (state !== 'running') return;
  step++;
  const recs = stepRecords(step);
  if (step % STEPS_PER_EPOCH === 0) {
    const e = { step, loss: 2.3 * Math.exp(-step / 700) + 0.3, accuracy: 0.7 + 0.15 * (1 - Math.exp(-step / 800)) };
    if (GPT) e.sample = mockSample(step);
    evals.push(e);
    recs.push({
      kind: 'eval', seq: ++seq, rank: 0, step, eval_loss: e.loss, eval_accuracy: e.accuracy, ...(GPT ? { eval_sample: e.sample } : {}),
    });
  }
  tail.push(...recs);
  if (tail.length > 500 * N) tail.splice(0, tail.length - 500 * N);
  broadcast({ type: 'metrics', records: recs });
  if (FAIL_AT && step >= FAIL_AT) fail();
  if (step >= TOTAL) state = 'succeeded';
}, STEP_MS);
setInterval(() => broadcast({ type: 'job', job: job(), ranks: ranks() }), 1000);

// vendor/NAME -> the npm package's dist/ that dashboard/assets/ embeds it from.
const VENDOR = {
  'uPlot.iife.min.js': 'uplot/dist', 'uPlot.min.css': 'uplot/dist', 'chart.umd.min.js': 'chart.js/dist',
};
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
const server = createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  const json = (o) => {
    if (o === null) o = { status: 404, error: 'not found' };
    res.writeHead(o.status ?? 200, { 'Content-Type': 'application/json' }).end(JSON.stringify(o.status ? { error: o.error } : o));
  };
  const p = url.pathname;
  if (p === '/mock/restart' && req.method === 'POST') {
    if (state === 'running') restart();
    return json({ state, attempt: restarts.length });
  }
  if (p === '/mock/shrink' && req.method === 'POST') {
    if (state === 'running' && members.length > 1) shrink();
    return json({ state, world_size: members.length });
  }
  if (p === '/mock/grow' && req.method === 'POST') {
    if (state === 'running') grow(url.searchParams.get('host') || 'host-0');
    return json({ state, world_size: members.length });
  }
  if (p === '/mock/fail' && req.method === 'POST') {
    if (state === 'running') fail();
    return json({ state });
  }
  if (p === '/api/job') return json(job());
  if (p === '/api/ranks') return json(ranks());
  if (p === '/api/timeline') return json(timeline());
  if (p === '/api/stragglers') return json(stragglers());
  if (p === '/api/collectives') return json(collectives(url.searchParams));
  if (p === '/api/metrics') {
    const since = Number(url.searchParams.get('since') || 0), max = Number(url.searchParams.get('max') || 2000);
    const recs = tail.filter((r) => r.seq > since).slice(0, max);
    return json({ next: recs.length ? recs[recs.length - 1].seq : since, records: recs });
  }
  let file = p === '/' ? 'index.html' : normalize(p.slice(1));
  if (file.includes('..')) { res.writeHead(400).end(); return; }
  if (file.startsWith('vendor/')) {
    const dist = VENDOR[file.slice(7)];
    if (!dist) { res.writeHead(404).end('not found'); return; }
    file = join(root, 'node_modules', dist, file.slice(7));
  } else file = join(root, 'web', file);
  try {
    const body = await readFile(file);
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] || 'application/octet-stream' }).end(body);
  } catch { res.writeHead(404).end('not found'); }
});
server.on('upgrade', (req, sock) => {
  const key = req.headers['sec-websocket-key'];
  const accept = createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  clients.add(sock);
  sock.on('close', () => clients.delete(sock));
  sock.on('error', () => clients.delete(sock));
  sock.on('data', () => {});
  sock.write(wsFrame(JSON.stringify({ type: 'job', job: job(), ranks: ranks() })));
  sock.write(wsFrame(JSON.stringify({ type: 'metrics', records: tail })));
});
server.listen(PORT, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}/`));
process.on('SIGTERM', () => { clearInterval(timer); process.exit(0); });
