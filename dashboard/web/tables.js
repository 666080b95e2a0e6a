// The job header, the failure banner, the rank table and the straggler table.

import { duration, el, fixed, ms, num, percent, PHASE_LABEL, rate, where } from './format.js';

// "2 restarts", "1 shrink, 1 heal": how the attempts after the first formed.
function attemptChanges(restarts) {
  const count = (n, what) => (n ? [`${n} ${what}${n === 1 ? '' : 's'}`] : []);
  const heals = restarts.filter((r) => r.grow).length;
  const shrinks = restarts.filter((r) => r.shrink).length;
  return [...count(restarts.length - heals - shrinks, 'restart'), ...count(shrinks, 'shrink'),
    ...count(heals, 'heal')].join(', ');
}

export function renderHeader(job, ranks) {
  document.getElementById('job-id').textContent = job.job_id ? `· ${job.job_id}` : '';
  const badge = document.getElementById('job-state');
  badge.textContent = job.state;
  badge.dataset.state = job.state;
  const total = job.total_steps > 0 ? job.total_steps : null;
  const values = {
    // An elastic job that formed with fewer ranks than it was started with says so.
    world_size: job.max_world_size > job.world_size ? `${job.world_size} of ${job.max_world_size}` : String(job.world_size ?? '–'),
    attempt: job.restarts?.length ? `${job.attempt} (${attemptChanges(job.restarts)})` : String(job.attempt ?? 0),
    backend: job.backend ?? '–',
    transport: job.transport ?? '–',
    algorithm: job.algorithm ?? '–',
    ddp: job.ddp ?? '–',
    compress: job.compression_ratio > 0 ? `${job.compress ?? '–'} (${fixed(job.compression_ratio, 1)}×)` : job.compress ?? '–',
    precision: job.precision ?? '–',
    model: job.model ?? '–',
    global_batch: String(job.global_batch ?? '–'),
    step: total ? `${job.step} / ${total}` : String(job.step ?? '–'),
    samples_per_s: rate(job.samples_per_s),
    eta_s: job.state === 'succeeded' ? 'done' : duration(job.eta_s),
    elapsed_s: duration(job.elapsed_s),
    // 0 until the first step's record: nothing measured yet.
    goodput: job.goodput > 0 ? percent(job.goodput) : '–',
    loss: num(job.loss, 4),
  };
  for (const dd of document.querySelectorAll('#job-facts dd')) dd.textContent = values[dd.dataset.k] ?? '–';
  const bar = document.getElementById('job-progress');
  bar.value = total ? Math.min(1, job.step / total) : 0;
  document.title = `${job.state === 'failed' ? '✗ ' : ''}microddp · ${job.state}${total ? ` ${Math.round((100 * job.step) / total)} %` : ''}`;
  renderFailure(job, ranks);
}

function renderFailure(job, ranks) {
  const box = document.getElementById('failure');
  const failedRanks = (ranks || []).filter((k) => k.state === 'failed');
  const failed = job.state === 'failed' || failedRanks.length > 0;
  box.hidden = !failed;
  if (!failed) return;
  const rank = job.failed_rank >= 0 ? job.failed_rank : failedRanks[0]?.rank ?? -1;
  const info = (ranks || []).find((k) => k.rank === rank);
  const where = info ? ` on ${info.host}${info.pid ? ` (pid ${info.pid})` : ''}` : '';
  document.getElementById('failure-title').textContent = rank >= 0
    ? `Rank ${rank} failed${where}` : 'Job failed';
  const lines = [];
  if (job.failure) lines.push(job.failure);
  const echoes = (m) => job.failure && (m.includes(job.failure) || job.failure.includes(m));
  for (const k of failedRanks) {
    if (k.message && !echoes(k.message) && !lines.some((l) => l.includes(k.message))) lines.push(`rank ${k.rank}: ${k.message}`);
  }
  const others = failedRanks.filter((k) => k.rank !== rank).map((k) => k.rank);
  if (others.length && rank >= 0) lines.push(`Then stopped: rank${others.length > 1 ? 's' : ''} ${others.join(', ')}.`);
  document.getElementById('failure-text').textContent = lines.join('\n') || 'No message from the coordinator.';
}

// "threads / CPUs" of a rank: its compute threads and the CPUs its process
// may use, as the worker reported them (– until it has); flagged when its
// host runs more compute threads than it has CPUs (API.md, oversubscribed).
function coresCell(k) {
  const text = `${k.threads ?? '–'} / ${k.cpus ?? '–'}`;
  if (!k.oversubscribed) return el('td', { class: 'num cores', text });
  return el('td', { class: 'num cores over', 'data-over': 'true', text: `${text} ⚠`,
    title: `host ${k.host} runs more compute threads than it has CPUs: its ranks take turns on them, `
      + 'which inflates exposed comm and stragglers' });
}

// The rank's own loss; from the first step it was NaN or infinite on, that
// step instead (API.md, nonfinite_since): which rank went first, which the
// job's loss, a mean over ranks, cannot say.
function lossCell(k) {
  if (k.nonfinite_since) {
    return el('td', { class: 'num nonfinite', 'data-nonfinite': String(k.nonfinite_since),
      text: `NaN since ${k.nonfinite_since}` });
  }
  return el('td', { class: 'num', text: num(k.loss, 4) });
}

// Past this many ranks the table shows one page of them at a time: a
// thousand rows rebuilt four times a second would make the page crawl.
export const RANKS_PER_PAGE = 100;
const NAMED_PER_STATE = 10;  // ranks named in the summary, per unusual state

// "1000 ranks: 997 running, 2 silent (ranks 17, 512), 1 failed (rank 3)":
// what one page of the table cannot show. Running and done ranks are
// counted; the others are named, so a failure on another page is seen.
export function ranksSummary(ranks) {
  if (!ranks?.length) return '';
  const byState = new Map();
  for (const k of ranks) {
    if (!byState.has(k.state)) byState.set(k.state, []);
    byState.get(k.state).push(k.rank);
  }
  const parts = [...byState].map(([state, rs]) => {
    if (state === 'running' || state === 'done') return `${rs.length} ${state}`;
    const named = rs.slice(0, NAMED_PER_STATE).join(', ') + (rs.length > NAMED_PER_STATE ? ', …' : '');
    return `${rs.length} ${state} (rank${rs.length > 1 ? 's' : ''} ${named})`;
  });
  return `${ranks.length} rank${ranks.length > 1 ? 's' : ''}: ${parts.join(', ')}`;
}

// Page `page` (from 0) of the rank table; returns the number of pages.
// lastStep(rank): the last step the rank sent metrics for. The heartbeat's
// step stops at the rank's last heartbeat, so a finished rank would read
// "done at step 2637 of 2811"; the larger of the two is shown. A finished
// rank sends no heartbeats: its age is left blank rather than growing.
export function renderRanks(tbody, ranks, lastStep, page = 0) {
  const all = ranks || [];
  const pages = Math.max(1, Math.ceil(all.length / RANKS_PER_PAGE));
  const first = Math.min(page, pages - 1) * RANKS_PER_PAGE;
  const rows = all.slice(first, first + RANKS_PER_PAGE).map((k) => {
    const age = k.state === 'done' ? NaN : k.heartbeat_age_ms;
    const stale = k.state === 'silent';
    const step = Math.max(k.step ?? 0, lastStep(k.rank));
    return el('tr', { 'data-rank': String(k.rank), 'data-state': k.state },
      el('td', { class: 'num', text: String(k.rank) }),
      el('td', { text: k.host ?? '' }),
      el('td', { class: 'device', text: k.device ?? '' }),
      coresCell(k),
      el('td', { class: 'num', text: k.pid ? String(k.pid) : '' }),
      el('td', {}, el('span', { class: 'state', 'data-state': k.state, text: k.state })),
      el('td', { text: PHASE_LABEL[k.phase] ?? k.phase ?? '' }),
      el('td', { class: 'num', text: step > 0 ? String(step) : '' }),
      lossCell(k),
      el('td', { class: `num${stale ? ' stale' : ''}`, text: Number.isFinite(age) ? ms(age) : '–' }),
      el('td', { class: 'msg', text: k.message ?? '' }));
  });
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: '11', class: 'empty', text: 'No ranks have joined yet.' })));
  tbody.replaceChildren(...rows);
  return pages;
}

export function renderStragglers(tbody, worstLine, st) {
  tbody.closest('.scroll').hidden = !st || !(st.steps > 0);
  if (!st || !(st.steps > 0)) {
    worstLine.textContent = 'No complete step yet.';
    tbody.replaceChildren();
    return;
  }
  const ranks = [...(st.ranks || [])].sort((a, b) => b.late_steps - a.late_steps || a.rank - b.rank);
  const top = (byPhase) => {
    const e = Object.entries(byPhase || {}).sort((a, b) => b[1] - a[1]);
    return e.length && e[0][1] > 0 ? PHASE_LABEL[e[0][0]] ?? e[0][0] : '–';
  };
  tbody.replaceChildren(...ranks.filter((r) => r.late_steps > 0).map((r) => el('tr', { 'data-rank': String(r.rank) },
    el('td', { class: 'num', text: String(r.rank) }),
    el('td', { class: 'num', text: `${r.late_steps} of ${st.steps}` }),
    el('td', { class: 'num', text: ms(r.late_ms_total) }),
    el('td', { text: top(r.by_phase) }))));
  worstLine.replaceChildren();
  if (st.worst && st.worst.rank >= 0) {
    const r = ranks.find((x) => x.rank === st.worst.rank);
    worstLine.append(el('strong', { text: `Rank ${st.worst.rank}` }),
      ` was the late rank in ${r ? `${r.late_steps} of ${st.steps}` : 'most of the last'} steps, `
      + `${where(st.worst.phase)}${r ? ` (${fixed(r.late_ms_total / Math.max(1, r.late_steps), 2)} ms late on average)` : ''}.`);
  } else {
    worstLine.textContent = `No straggler over the last ${st.steps ?? 0} steps.`;
  }
}
