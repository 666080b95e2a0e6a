// The dashboard in a real browser against a real job: headless Debian
// chromium driven by playwright-core, a `microddp run --nproc 2` job serving
// the page. Run by dashboard_e2e.sh (which checks the prerequisites):
//
//   node dashboard.e2e.mjs --microddp BIN --screenshot OUT.png [--chromium /usr/bin/chromium]
//   node dashboard.e2e.mjs --mock [--ranks N] [--gpt] --screenshot OUT.png   (the page at N ranks, default 64,
//     simulated; --gpt: a GPT on text, whose samples the page shows)
//   node dashboard.e2e.mjs --attach URL --ranks N --screenshot OUT.png [--spki HASH]
//     (a job someone else runs, e.g. the compose lab: the page and its rank
//     table, loss chart and timeline only; no straggler, nothing killed.
//     URL may be the login URL the coordinator printed (.../login?token=T):
//     the API is asked with the token, the browser logs in first. HTTPS:
//     node trusts the CA in NODE_EXTRA_CA_CERTS, Chromium the certificate
//     whose public key --spki pins: base64 SHA-256 of its SPKI)
//
// Checks, in order: the page loads without script errors or requests
// outside the coordinator; the rank table lists both ranks (past 100 ranks,
// pages of 100 under a summary of every rank's state); the loss chart
// gains points while the job runs; the timeline (a Chart.js chart) draws a
// bucket all-reduce and a backward phase in every rank's row (past 64
// ranks, in the 64 rows it summarises the step with); the page's load time
// is logged and written to OUT-load.json; the
// Collectives view animates a ring of 2(n-1) steps and exports it as SVG;
// after `kill -9` of rank 1's worker the page names rank 1 as failed. Every
// wait is bounded; the job's processes are killed on every exit path.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const MOCK = args.includes('--mock');
const GPT = MOCK && args.includes('--gpt');  // the mock's job is a GPT on text: samples at each evaluation
const ATTACH = opt('--attach', '');
const SPKI = opt('--spki', '');
// An attached job's dashboard token, from the login URL it printed.
const TOKEN = ATTACH ? new URL(ATTACH).searchParams.get('token') ?? '' : '';
const RANKS = Number(opt('--ranks', MOCK ? 64 : 2));
const BIN = opt('--microddp', '') && resolve(opt('--microddp', ''));
const SHOT = resolve(opt('--screenshot', 'dashboard.png'));
const CHROMIUM = opt('--chromium', '/usr/bin/chromium');
const RANKS_PER_PAGE = 100;  // dashboard/web/tables.js
const TIMELINE_ROWS = 64;    // dashboard/web/timeline.js, MAX_ROWS

const modules = opt('--node-modules', join(here, '..', '..', '..', 'dashboard', 'node_modules'));
const { chromium } = await import(pathToFileURL(resolve(modules, 'playwright-core', 'index.mjs')).href);

const work = mkdtempSync(join(tmpdir(), 'mddp-e2e-'));
const children = [];
let output = '';
let browser = null;

// The page's α-β prediction (charts.js, predictedBusbw) against the cost
// model of core/perf/cost_model.h, by hand: 1 MB on 4 ranks, α = 1 µs,
// β = 1 GB/s; busbw = S/t · 2(n-1)/n.
async function checkPredictedBusbw(page) {
  const seconds = { ring: 6 * (1e-6 + 0.25e-3), tree: 4 * (1e-6 + 1e-3), naive: 6 * (1e-6 + 1e-3),
    doubling: 2 * (1e-6 + 1e-3), direct: 2e-6 + 1.5e-3 };
  const got = await page.evaluate(async (algorithms) => {
    const { predictedBusbw } = await import('./charts.js');
    return algorithms.map((a) => predictedBusbw({ alpha_s: 1e-6, beta_Bps: 1e9 }, a, 1e6, 4));
  }, Object.keys(seconds));
  Object.entries(seconds).forEach(([algorithm, t], i) => {
    const want = (1e6 / t) * 1.5 / 1e9;
    if (!(Math.abs(got[i] - want) < 1e-9 * want)) fail(`predictedBusbw(${algorithm}) = ${got[i]}, want ${want}`);
  });
}

function log(msg) { console.log(`[e2e ${new Date().toISOString().slice(11, 23)}] ${msg}`); }

function fail(msg) {
  const err = new Error(msg);
  err.expected = true;
  throw err;
}

// Polls fn() (async, truthy = done) every `every` ms for at most `ms` times
// SLACK. The waits assert that the page gets there, not how fast: the ms
// are what a quiet machine needs with room to spare, and SLACK (default 3,
// MDDP_E2E_SLACK) stretches them for a loaded one, where at 1,000 ranks the
// page falls behind the mock by tens of seconds.
const SLACK = Number(process.env.MDDP_E2E_SLACK || 3);
async function waitFor(what, fn, ms = 30000, every = 200) {
  ms *= SLACK;
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) { last = e; }
    if (Date.now() > deadline) fail(`timed out after ${ms / 1000} s waiting for ${what}${last ? ` (last error: ${last.message})` : ''}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

function start(cmd, argv, env = process.env) {
  const child = spawn(cmd, argv, { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env });
  children.push(child);
  for (const s of [child.stdout, child.stderr]) s.on('data', (d) => { output += d.toString(); });
  return child;
}

function cleanup() {
  for (const c of children) {
    try { process.kill(-c.pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  rmSync(work, { recursive: true, force: true });
}

async function api(base, path) {
  const res = await fetch(new URL(path, base), TOKEN ? { headers: { Authorization: `Bearer ${TOKEN}` } } : {});
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

// ---- the job --------------------------------------------------------------------
async function startJob() {
  if (ATTACH) return { base: ATTACH.replace(/login\?token=.*$/, ''), run: null };
  if (MOCK) {
    start(process.execPath, [join(here, 'mock_coordinator.mjs'), '--ranks', String(RANKS), '--fit', ...(GPT ? ['--gpt'] : [])]);
    const m = await waitFor('the mock coordinator', async () => output.match(/listening on (http:\/\/\S+)/), 10000);
    return { base: m[1], run: null };
  }
  // A small job on synthetic data that runs until rank 1 is killed (far
  // more steps than the test lasts), with quick failure detection; rank 1
  // sleeps 4 ms in forward of every step (--straggler), for the page to name;
  // --http-linger keeps the page served after the job fails, so the page
  // can show the failure (the process group is killed at the end anyway).
  const flags = ['run', '--nproc', '2', '--http-port', '0', '--http-linger', '60',
    '--dataset', 'synthetic', '--synthetic-size', '8192', '--width', '256', '--batch', '64',
    '--steps', '1000000', '--no-eval', '--log-every', '1000000', '--bucket-mb', '0.25', '--first-bucket-mb', '0.0625',
    '--straggler', '1:forward:4',
    '--heartbeat-ms', '200', '--heartbeat-timeout-ms', '3000', '--run-dir', join(work, 'run')];
  // Fits of the link (as `microddp bench allreduce --fit` writes them), so
  // the Collectives view has an α-β model to show beside the measured
  // all-reduce: on one host the buckets are in shared memory and `auto`
  // runs the direct all-reduce, whose fit is its own.
  const fitFile = join(work, 'fit.json');
  const fit = (transport, algorithm) => ({ transport, algorithm, world_size: 2, alpha_us: 10, beta_gbps: 3, r2: 0.99 });
  writeFileSync(fitFile, JSON.stringify({ fits: [fit('shm', 'ring'), fit('tcp', 'ring'), fit('shm', 'direct')] }));
  log(`starting ${BIN} ${flags.join(' ')} (MICRODDP_FIT_FILE=${fitFile})`);
  const run = start(BIN, flags, { ...process.env, MICRODDP_FIT_FILE: fitFile });
  run.on('exit', (code, sig) => log(`microddp run exited (${code ?? sig})`));
  const m = await waitFor('the dashboard URL on the output of `microddp run`',
    async () => output.match(/dashboard:?\s+(?:at\s+)?(https?:\/\/\S+)/i) || output.match(/(http:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):\d+\/?)/), 60000);
  return { base: m[1], run };
}

// ---- the page -------------------------------------------------------------------
async function main() {
  const { base } = await startJob();
  log(`dashboard at ${base}`);
  const origin = new URL(base).origin;
  // An attached job may have finished already (its page lingers).
  await waitFor(`the job to run with ${RANKS} ranks`, async () => {
    if (MOCK) return true;
    const job = await api(base, 'api/job');
    const state = ATTACH ? ['running', 'succeeded'].includes(job.state) : job.state === 'running';
    return state && job.step > 0 && (await api(base, 'api/ranks')).length === RANKS;  // [K...]
  }, 90000);

  // A fresh profile in the work directory (removed at exit).
  browser = await chromium.launchPersistentContext(join(work, 'profile'), {
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-quic', '--disable-component-update', '--disable-sync',
      ...(SPKI ? [`--ignore-certificate-errors-spki-list=${SPKI}`] : [])],
    viewport: { width: 1400, height: 1000 },
    acceptDownloads: true,
  });
  const context = browser;
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`script error: ${e.message}`));
  // Failed requests are judged from the responses (the console repeats them):
  // a 404 from /api/timeline or /api/collectives is the contract's "no
  // (traced) complete step yet".
  page.on('console', (m) => {
    if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  page.on('response', (r) => {
    const path = new URL(r.url()).pathname;
    const notYet = r.status() === 404 && (path.endsWith('/api/timeline') || path.endsWith('/api/collectives'));
    if (r.status() >= 400 && !notYet) problems.push(`HTTP ${r.status()} for ${r.url()}`);
  });
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin) && !u.startsWith('data:')) problems.push(`request outside the coordinator: ${u}`);
  });
  // The page's load time: navigation to the load event, then until the
  // rank table and the timeline are drawn (reported, no threshold: the
  // machine may be loaded).
  const t0 = Date.now();
  await page.goto(TOKEN ? ATTACH : base, { waitUntil: 'load' });  // the login sets a cookie, then shows the page
  const loaded = { load_event_ms: Date.now() - t0 };

  // Rank table: one row per rank, ranks 0 and 1 (64 in the mock); past
  // RANKS_PER_PAGE ranks, the first page of them, a summary of every rank's
  // state and a pager.
  const nranks = RANKS;
  const onPage = Math.min(nranks, RANKS_PER_PAGE);
  await waitFor(`the rank table to list ${onPage} ranks`, async () =>
    (await page.locator('#ranks tbody tr[data-rank]').count()) === onPage);
  loaded.rank_table_ms = Date.now() - t0;
  const ranksShown = await page.locator('#ranks tbody tr[data-rank]').evaluateAll((rows) => rows.map((r) => r.dataset.rank));
  if (ranksShown.some((r, i) => r !== String(i))) fail(`rank table shows ranks ${ranksShown.join(',')}`);
  log(`rank table: ranks ${ranksShown.slice(0, 4).join(', ')}${nranks > 4 ? ', …' : ''}`);
  const summary = await page.locator('#ranks-summary').textContent();
  if (!summary.startsWith(`${nranks} rank`)) fail(`the rank summary does not count ${nranks} ranks: "${summary}"`);
  await waitFor('the timeline to draw', async () =>
    Number(await page.locator('#timeline').getAttribute('data-ranks')) > 0, 60000);
  loaded.timeline_ms = Date.now() - t0;
  log(`page load at ${nranks} ranks: load event ${loaded.load_event_ms} ms, rank table ${loaded.rank_table_ms} ms, `
    + `timeline ${loaded.timeline_ms} ms`);
  mkdirSync(dirname(SHOT), { recursive: true });
  writeFileSync(SHOT.replace(/\.png$/, '-load.json'), `${JSON.stringify({ ranks: nranks, ...loaded })}\n`);
  if (nranks > RANKS_PER_PAGE) await checkPager(page, nranks);
  await checkPredictedBusbw(page);
  // Each rank's device and "threads / CPUs" as its worker reported them (in
  // a heartbeat after the join); the mock's last host is oversubscribed.
  const cells = await waitFor('the rank table to show rank 0\'s device and threads / CPUs', async () => {
    const c = await page.locator('#ranks tbody tr[data-rank="0"]').evaluate((row) => ({
      device: row.querySelector('td.device')?.textContent, cores: row.querySelector('td.cores')?.textContent }));
    return c.device === 'cpu' && /^1 \/ [1-9]\d*/.test(c.cores ?? '') ? c : null;
  });
  log(`rank table: rank 0 on ${cells.device}, threads / CPUs ${cells.cores}`);
  const over = MOCK && nranks > 8 ? nranks - 8 * Math.floor((nranks - 1) / 8) : 0;  // the mock's last host, past 8 ranks
  const overOnPage = Math.max(0, onPage - (nranks - over));  // the table's first page
  if (MOCK && (await page.locator('#ranks td.cores[data-over]').count()) !== overOnPage)
    fail(`the rank table does not flag the ${overOnPage} ranks of the mock's oversubscribed host on its first page`);

  // Loss chart: points now, more a little later (an attached job may be over).
  // At 1,000 ranks the mock steps every 0.78 s and the page folds 1,000
  // records a step: on a loaded 2-core machine a new point took over 20 s
  // (seen in CI's neighbourhood), so the wait is generous; it asserts
  // liveness, not speed.
  const points = () => page.locator('#chart-loss').evaluate((e) => Number(e.dataset.points));
  const first = await waitFor('the loss chart to have points', async () => { const n = await points(); return n > 0 ? n : 0; });
  if (!ATTACH) {
    const second = await waitFor(`the loss chart to grow beyond ${first} points`, async () => { const n = await points(); return n > first ? n : 0; }, 60000);
    log(`loss chart: ${first} points, then ${second}`);
  } else log(`loss chart: ${first} points`);
  const canvas = await page.locator('#chart-loss canvas').count();
  if (canvas < 1) fail('the loss chart has no canvas (uPlot did not draw)');

  // Generated text: a GPT's panel shows the newest evaluation's sample
  // first, exactly as /api/job has it (newlines and all); other models
  // have no samples and no panel.
  if (GPT) {
    // Two evaluations, so that the order shows.
    const shown = await waitFor('the Generated text panel to show two samples', () => page.evaluate(() => {
      const items = [...document.querySelectorAll('#samples-panel:not([hidden]) #samples li')];
      return items.length >= 2 ? items.map((li) => ({
        step: Number(li.querySelector('.sample-step').textContent.match(/^step (\d+)/)[1]),
        text: li.querySelector('pre').textContent,
      })) : null;
    }), 90000);
    const evals = new Map((await api(base, 'api/job')).eval.map((x) => [x.step, x.sample]));
    for (const [i, s] of shown.entries()) {
      if (evals.get(s.step) !== s.text) fail(`the sample of step ${s.step} reads ${JSON.stringify(s.text)}, /api/job has ${JSON.stringify(evals.get(s.step))}`);
      if (i > 0 && s.step >= shown[i - 1].step) fail(`the samples are not newest first: step ${s.step} after ${shown[i - 1].step}`);
    }
    log(`generated text: the samples of steps ${shown.map((s) => s.step).join(', ')}`);
  } else if (!ATTACH && await page.locator('#samples-panel').isVisible()) {
    fail('the Generated text panel is shown for a model that writes no text');
  }

  // Timeline: a Chart.js chart given a row per rank, that drew a backward
  // phase and at least one bucket all-reduce in every rank's row. Counted
  // from the bars Chart.js laid out (at least 1 px long, inside the chart
  // area, in the row their rank's label is at), so a chart that draws no
  // bucket spans, or draws them in the wrong rows, fails here.
  // Past TIMELINE_ROWS ranks it draws that many (the ranks that finished
  // the step last, the mock's straggler, its last rank, among them).
  const rows = Math.min(nranks, TIMELINE_ROWS);
  const spans = await waitFor('the timeline to draw bucket all-reduces in every row', async () => {
    const t = await page.locator('#timeline').evaluate((box) => {
      const canvas = box.querySelector('canvas');
      const chart = canvas && window.Chart?.getChart(canvas);
      if (!chart || !(canvas.clientHeight > 0)) return null;
      const area = chart.chartArea;
      const drawn = (pick) => {
        const i = chart.data.datasets.findIndex(pick);
        if (i < 0 || !chart.isDatasetVisible(i)) return { bars: 0, rows: 0 };
        const data = chart.data.datasets[i].data;
        const rowAt = (px) => Math.round(chart.scales.y.getValueForPixel(px));  // the category under a pixel
        const bars = chart.getDatasetMeta(i).data.map((b, j) => [b, data[j]]).filter(([b, d]) =>
          Math.abs(b.x - b.base) >= 1 && b.height >= 2 && b.y >= area.top && b.y <= area.bottom
          && Math.min(b.x, b.base) >= area.left - 1 && Math.max(b.x, b.base) <= area.right + 1
          && rowAt(b.y) === chart.data.labels.indexOf(d.y));
        return { bars: bars.length, rows: new Set(bars.map(([b]) => rowAt(b.y))).size };
      };
      return {
        labels: chart.data.labels.length, rowNames: chart.data.labels, total: Number(box.dataset.totalRanks),
        attrRanks: Number(box.dataset.ranks), attrBuckets: Number(box.dataset.bucketSpans),
        given: chart.data.datasets.find((d) => d.kind === 'bucket')?.data.length ?? 0,
        buckets: drawn((d) => d.kind === 'bucket'),
        backward: drawn((d) => d.kind === 'phase' && d.label === 'backward'),
      };
    });
    if (!t) return null;
    if (t.attrRanks !== t.labels || t.attrBuckets !== t.given) fail(`the timeline's data-ranks/data-bucket-spans (${t.attrRanks}/${t.attrBuckets}) disagree with its chart (${t.labels}/${t.given})`);
    return t.labels === rows && t.total === nranks && t.buckets.rows === rows && t.backward.rows === rows
      && t.backward.bars === rows && (!MOCK || nranks === 1 || t.rowNames.includes(`rank ${nranks - 1}`))
      ? { rows: t.labels, buckets: t.buckets.bars } : null;
  });
  log(`timeline: ${spans.rows} rank rows of ${nranks}, ${spans.buckets} bucket spans`);

  if (ATTACH) {  // someone else's job: nothing to name as late, nothing to kill
    await screenshots(page);
    if (problems.length) fail(`the page reported problems:\n  ${problems.join('\n  ')}`);
    return;
  }

  // Stragglers: the rank made late on purpose (the real job's --straggler
  // 1:forward:4; the mock's last rank, in backward) is named, with the phase
  // it lost the time in, although the all-reduce makes every rank finish the
  // step together.
  const late = MOCK ? { rank: nranks - 1, phase: 'backward' } : { rank: 1, phase: 'forward' };
  if (nranks === 1) {  // one rank waits for nobody: the panel must say so
    await waitFor('the stragglers panel to say there is none', async () =>
      (await page.locator('#straggler-worst').textContent())?.startsWith('No straggler'));
  } else {
    const named = await waitFor(`the stragglers panel to name rank ${late.rank} in ${late.phase}`, async () => {
      const s = await page.evaluate(() => ({
        worst: document.querySelector('#straggler-worst')?.textContent ?? '',
        rows: [...document.querySelectorAll('#stragglers tbody tr[data-rank]')].map((r) =>
          ({ rank: Number(r.dataset.rank), phase: r.lastElementChild?.textContent })),
      }));
      const top = s.rows[0];
      return s.worst.startsWith(`Rank ${late.rank} `) && s.worst.includes(`mostly in ${late.phase}`)
        && top?.rank === late.rank && top?.phase === late.phase ? s.worst : null;
    });
    log(`stragglers: ${named}`);
  }

  // Collectives: the latest traced step's largest bucket all-reduce on the
  // ring, animated: 2(n-1) steps for n ranks (a ring's reduce-scatter and
  // all-gather), frames advancing, arrows drawn, a table row per step, the
  // α-β model beside it (the job has a fit), and an SVG export with one
  // small ring per step.
  // Past 64 ranks no step is traced (its transfers grow with n²): the view
  // says so, in the coordinator's words.
  const ringSteps = nranks > 1 ? 2 * (nranks - 1) : 0;
  const caption = async () => (await page.locator('#coll-caption').textContent()) ?? '';
  if (nranks === 1) {
    await waitFor('the Collectives view to say a one-rank job all-reduces nothing', async () =>
      /carries no all-reduce steps/.test(await caption()));
  } else if (nranks > 64) {
    const why = await waitFor('the Collectives view to say why a large job traces no step', async () => {
      const c = await caption();
      return c.includes(`a job of ${nranks} ranks traces no all-reduce steps`) ? c : null;
    });
    log(`collectives: "${why}"`);
  } else {
    const coll = await waitFor(`the Collectives view to animate a ring of ${ringSteps} steps`, async () => {
      const c = await page.locator('#collectives').evaluate((b) => ({
        steps: Number(b.dataset.steps), ranks: Number(b.dataset.ranks), frame: Number(b.dataset.frame),
        rows: b.querySelectorAll('#coll-steps tbody tr').length, caption: b.querySelector('#coll-caption').textContent,
      }));
      return c.steps === ringSteps && c.ranks === nranks && c.rows === ringSteps ? c : null;
    }, 60000);
    const frame = await waitFor('the animation to advance', async () => {
      const f = Number(await page.locator('#collectives').getAttribute('data-frame'));
      return f > coll.frame + 5 ? f : null;
    }, 10000);
    const arrows = await waitFor('arrows on the measured ring', async () => {
      const n = await page.locator('#coll-measured .transfer').count();
      return n > 0 ? n : null;
    }, 10000, 20);
    if (!/the α-β model says/.test(coll.caption)) fail(`the Collectives view shows no α-β prediction: "${coll.caption}"`);
    if (!MOCK && !ATTACH && !/direct over 2 ranks.*the shm direct fit/.test(coll.caption)) {
      fail(`one host's job should show the direct all-reduce and its fit: "${coll.caption}"`);
    }
    if ((await page.locator('#coll-model .transfer').count()) === 0) {
      await waitFor('arrows on the model\'s ring', async () => (await page.locator('#coll-model .transfer').count()) > 0, 10000, 20);
    }
    log(`collectives: ${coll.steps} ring steps for ${coll.ranks} ranks, frame ${frame}, ${arrows} arrows in flight`);
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 10000 }), page.click('#coll-export')]);
    const svgText = readFileSync(await download.path(), 'utf8');
    const panels = (svgText.match(/<g class="step"/g) ?? []).length;
    if (!svgText.startsWith('<svg') || panels !== ringSteps) fail(`the exported SVG has ${panels} step panels, expected ${ringSteps}`);
    log(`collectives: export ${download.suggestedFilename()} with ${panels} panels`);
  }

  // A restart (the mock's, as --max-restarts makes one): the header counts
  // the attempt and the loss chart draws a marker where it resumed. (With
  // three browsers at once on a loaded 2-core machine the page once took
  // over 15 s to redraw: the waits assert that it happens, not how fast.)
  if (MOCK) {
    const res = await fetch(new URL('mock/restart', base), { method: 'POST' });
    if (!res.ok) fail(`POST /mock/restart: HTTP ${res.status}`);
    await waitFor('the header to show attempt 1', async () =>
      /^1 \(1 restart\)$/.test((await page.locator('[data-k="attempt"]').innerText()).trim()), 45000);
    await waitFor('a restart marker on the loss chart', async () =>
      (await page.locator('#chart-loss').getAttribute('data-restarts-drawn')) === '1', 45000);
    log('restart: attempt 1 in the header, one marker on the loss chart');
  }

  // Problems so far count; after the kill the job ends and the page's
  // reconnect attempts to a coordinator that may be gone are expected.
  const healthy = problems.slice();

  // Failure: kill -9 rank 1's worker (the mock fails rank 1 when asked, or
  // rank 0 of a one-rank job); the page must name that rank as failed.
  const victimRank = Math.min(1, nranks - 1);
  if (MOCK) {
    log(`mock: fail rank ${victimRank}`);
    const res = await fetch(new URL('mock/fail', base), { method: 'POST' });
    if (!res.ok) fail(`POST /mock/fail: HTTP ${res.status}`);
  } else {
    const ranks = await api(base, 'api/ranks');
    const victim = ranks.find((k) => k.rank === 1);
    if (!victim || !(victim.pid > 0)) fail(`/api/ranks gives no pid for rank 1: ${JSON.stringify(ranks)}`);
    log(`kill -9 rank 1 (pid ${victim.pid})`);
    process.kill(victim.pid, 'SIGKILL');
  }
  await waitFor('the failure banner', async () => page.locator('#failure').isVisible(), 60000);  // 22 s seen at 1,000 ranks on a loaded machine
  const banner = (await page.locator('#failure').innerText()).replace(/\s+/g, ' ');
  log(`failure banner: ${banner}`);
  if (!new RegExp(`rank ${victimRank}\\b`, 'i').test(banner)) fail(`the failure banner does not name rank ${victimRank}: "${banner}"`);
  await waitFor('the job state badge to say failed', async () =>
    (await page.locator('#job-state').getAttribute('data-state')) === 'failed', 30000);
  const row = page.locator(`#ranks tbody tr[data-rank="${victimRank}"]`);
  await waitFor(`the rank table to show rank ${victimRank} as failed`, async () =>
    (await row.getAttribute('data-state')) === 'failed', 15000);
  log(`rank table: rank ${victimRank} ${await row.locator('.state').innerText()}`);

  await screenshots(page);
  if (healthy.length) fail(`the page reported problems while the job ran:\n  ${healthy.join('\n  ')}`);
}

// The rank table's pager: the next page lists the next RANKS_PER_PAGE
// ranks, the last page the rest, and back to the first.
async function checkPager(page, nranks) {
  const shown = () => page.locator('#ranks tbody tr[data-rank]').evaluateAll((rs) => rs.map((r) => Number(r.dataset.rank)));
  const pages = Math.ceil(nranks / RANKS_PER_PAGE);
  const expect = async (p) => {
    const first = p * RANKS_PER_PAGE;
    const want = Array.from({ length: Math.min(RANKS_PER_PAGE, nranks - first) }, (_, i) => first + i);
    await waitFor(`page ${p + 1} of the rank table to list ranks ${first}–${want[want.length - 1]}`, async () =>
      JSON.stringify(await shown()) === JSON.stringify(want), 10000);
  };
  await page.click('#ranks-next');
  await expect(1);
  for (let p = 2; p < pages; p++) await page.click('#ranks-next');
  await expect(pages - 1);
  if (!(await page.locator('#ranks-next').isDisabled())) fail('the rank table\'s "next" stays enabled on its last page');
  for (let p = pages - 1; p > 0; p--) await page.click('#ranks-prev');
  await expect(0);
  log(`rank table: ${pages} pages of ${RANKS_PER_PAGE}, "${await page.locator('#ranks-page').textContent()}"`);
}

async function screenshots(page) {
  await page.waitForTimeout(300);  // let the last redraw land
  mkdirSync(dirname(SHOT), { recursive: true });
  // The page, and its timeline panel alone (a canvas: look at it), in the
  // light scheme and then the dark one, next to it.
  const timelinePanel = page.locator('section:has(#timeline)');
  await page.screenshot({ path: SHOT, fullPage: true });
  await timelinePanel.screenshot({ path: SHOT.replace(/\.png$/, '-timeline.png') });
  await page.locator('section:has(#collectives)').screenshot({ path: SHOT.replace(/\.png$/, '-collectives.png') });
  log(`screenshot: ${SHOT} (and -timeline, -collectives, -dark, -timeline-dark)`);
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(400);
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-dark.png'), fullPage: true });
  await timelinePanel.screenshot({ path: SHOT.replace(/\.png$/, '-timeline-dark.png') });
}

let code = 0;
try {
  await main();
  log('PASS');
} catch (e) {
  code = 1;
  console.error(`FAIL: ${e.expected ? e.message : e.stack}`);
  console.error(`--- output of the job (last 3000 characters):\n${output.slice(-3000)}`);
} finally {
  if (browser) await browser.close().catch(() => {});
  cleanup();
}
process.exit(code);
