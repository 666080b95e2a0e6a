// The dashboard's entry point: keeps a Store fed from the /api/stream
// WebSocket (falling back to polling /api/job, /api/ranks and /api/metrics
// while it is down), polls the timeline and stragglers, and redraws the
// views at most four times a second.

import { getJSON, Stream } from './api.js';
import { AccuracyChart, BusbwChart, LossChart, OverlapChart, PhaseChart } from './charts.js';
import { CollectivesView } from './collectives.js';
import { ms, PHASE_LABEL } from './format.js';
import { MembershipView } from './membership.js';
import { renderSamples } from './samples.js';
import { Store } from './store.js';
import { RANKS_PER_PAGE, ranksSummary, renderHeader, renderRanks, renderStragglers } from './tables.js';
import { legend, stragglerSentence, Timeline } from './timeline.js';

const $ = (id) => document.getElementById(id);
const store = new Store();
const views = {
  loss: new LossChart($('chart-loss')),
  acc: new AccuracyChart($('chart-acc'), $('acc-empty')),
  phases: new PhaseChart($('chart-phases'), $('phases-note')),
  overlap: new OverlapChart($('chart-overlap')),
  busbw: new BusbwChart($('chart-busbw'), $('busbw-fit')),
};
const membership = new MembershipView($('membership-panel'));
const timelineView = new Timeline($('timeline'));
legend($('tl-legend'));

// The Collectives view shows the latest traced step (refreshed after each
// playback), or the step and bucket chosen in it.
let collChoice = { step: null, bucket: null };
const collectives = new CollectivesView($('collectives'), {
  onChoose: (step, bucket) => { collChoice = { step, bucket }; pollCollectives(); },
});

let timeline = null;
let stragglers = null;
const minLateMs = () => stragglers?.min_late_ms ?? 0;
let drawn = -1;
let timelineDrawn;  // undefined: not drawn yet (null: no complete step)
const finished = () => store.job && (store.job.state === 'succeeded' || store.job.state === 'failed');

function setConn(state, text) {
  const c = $('conn');
  c.dataset.conn = state;
  c.textContent = text;
}

// ---- data in ---------------------------------------------------------------
function onFrame(f) {
  if (f.type === 'metrics') store.addRecords(f.records || []);
  else if (f.type === 'job') store.setJob(f.job, f.ranks);
}

const stream = new Stream('api/stream', {
  onFrame,
  onState: (s) => {
    if (s === 'live') setConn('live', 'live');
    else setConn(finished() ? 'down' : 'polling', finished() ? 'disconnected (job ended)' : 'reconnecting… (polling)');
  },
});

// The history older than the stream's tail: pages of /api/metrics.
async function backfill() {
  let since = 0;
  for (let page = 0; page < 50; page++) {
    const r = await getJSON(`api/metrics?since=${since}&max=10000`);
    if (!r || !r.records?.length) return;
    store.addRecords(r.records);
    if (r.next <= since || r.records.length < 10000) return;
    since = r.next;
  }
}

// While the stream is down: the same data by polling.
async function pollFallback() {
  if (stream.open) return;
  const [job, ranks, metrics] = await Promise.all([
    getJSON('api/job'), getJSON('api/ranks'), getJSON(`api/metrics?since=${store.maxSeq}&max=10000`),
  ]);
  store.setJob(job, Array.isArray(ranks) ? ranks : ranks?.ranks);
  if (metrics?.records) store.addRecords(metrics.records);
  if (!stream.open) setConn(finished() ? 'down' : 'polling', finished() ? 'job ended (polling)' : 'reconnecting… (polling)');
}

async function pollTimeline() {
  if (!store.job || store.job.state === 'forming') return;  // 404 until a step is complete
  const [tl, st] = await Promise.all([getJSON('api/timeline'), getJSON('api/stragglers?steps=50')]);
  timeline = tl;
  stragglers = st;
  store.version++;
}

async function pollCollectives() {
  if (!store.job || store.job.state === 'forming') return;  // 404 until a traced step is complete
  const q = new URLSearchParams();
  if (collChoice.step !== null) q.set('step', String(collChoice.step));
  if (collChoice.bucket !== null) q.set('bucket', String(collChoice.bucket));
  const res = await fetch(`api/collectives?${q}`, { cache: 'no-store' });
  if (res.status === 404) collectives.update(null, (await res.json()).error);  // none: the server says why
  else if (res.ok) collectives.update(await res.json());
}

function every(ms, fn) {
  const tick = async () => {
    try { await fn(); } catch (e) { /* the server is away: the next tick retries */ }
    setTimeout(tick, ms);
  };
  tick();
}

// ---- drawing ---------------------------------------------------------------
// The rank table, one page of RANKS_PER_PAGE at a time, under a summary of
// every rank's state.
let rankPage = 0;
function drawRanks() {
  const pages = renderRanks(document.querySelector('#ranks tbody'), store.ranks, (rank) => store.lastStep(rank), rankPage);
  rankPage = Math.min(rankPage, pages - 1);
  $('ranks-summary').textContent = ranksSummary(store.ranks);
  $('ranks-pager').hidden = pages < 2;
  const first = rankPage * RANKS_PER_PAGE;
  $('ranks-page').textContent = `ranks ${first}–${Math.min(first + RANKS_PER_PAGE, store.ranks.length) - 1}, page ${rankPage + 1} of ${pages}`;
  $('ranks-prev').disabled = rankPage === 0;
  $('ranks-next').disabled = rankPage >= pages - 1;
}
for (const [id, delta] of [['ranks-prev', -1], ['ranks-next', 1]]) {
  $(id).addEventListener('click', () => {
    rankPage = Math.max(0, rankPage + delta);
    drawRanks();
  });
}

function draw() {
  if (store.version === drawn) return;
  drawn = store.version;
  if (store.job) renderHeader(store.job, store.ranks);
  drawRanks();
  const curves = store.curves();
  const evals = store.evalPoints();
  views.loss.update(curves, evals, store.job?.restarts ?? []);
  views.acc.update(evals);
  membership.update(store.job);
  $('samples-panel').hidden = renderSamples($('samples'), evals) === 0;
  views.phases.update(store.phaseMeans());
  views.overlap.update(curves);
  views.busbw.update(store.busbw(store.job?.world_size ?? 0), store.job);

  if (timeline !== timelineDrawn) {
    timelineDrawn = timeline;
    $('tl-step').textContent = timeline ? String(timeline.step) : '–';
    // A step's late rank is named only when it was late by the server's
    // straggler threshold (min_late_ms); below it, who came last is noise.
    const late = timeline?.straggler?.late_ms >= minLateMs();
    const shown = timeline && !late ? { ...timeline, straggler: null } : timeline;
    timelineView.update(shown, store.ranks);
    const line = $('tl-straggler');
    const s = shown ? stragglerSentence(shown.straggler, shown.step) : null;
    line.replaceChildren();
    if (s) line.append(Object.assign(document.createElement('strong'), { textContent: `Rank ${s.rank}` }), ` ${s.text}`);
    else if (timeline) {
      line.textContent = store.job?.world_size > 1
        ? `No straggler in this step: every rank was ready within ${ms(minLateMs())} of the median.` : '';
    }
  }
  renderStragglers(document.querySelector('#stragglers tbody'), $('straggler-worst'), stragglers);
}

// ---- start -----------------------------------------------------------------
setConn('connecting', 'connecting…');
backfill().catch(() => {});
every(1000, pollFallback);
every(1000, pollTimeline);
every(5000, pollCollectives);
setInterval(draw, 250);
draw();

// A colour scheme change re-themes the charts (uPlot and the timeline take
// colours at build).
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
  for (const v of Object.values(views)) v.rebuild();
  timelineView.rebuild();
  drawn = -1;
  draw();
});

// For the browser test and the console.
window.mddp = { store, PHASE_LABEL };
