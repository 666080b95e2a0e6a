// The Membership panel: who left and who joined the job over time, from
// /api/job's `membership` (one line per attempt that trained, oldest first;
// API.md). A row per change after the first line, in words, with the world
// size after it and how long the job took to its next step; above them a
// summary: failures survived, heals, goodput. Hidden for a job that never
// changed (a single line). Every server string reaches the page as text.

import { duration, el, percent } from './format.js';

// "rank 1 (vm, pid 4102)": a worker by its rank and its process.
const worker = (m) => `rank ${m.rank} (${m.host}, pid ${m.pid})`;
// "vm pid 4190 joined as rank 2"; several: "…, vm pid 4191 as rank 3".
const joinedAs = (js) => js.map((m, i) => `${m.host} pid ${m.pid}${i ? '' : ' joined'} as rank ${m.rank}`).join(', ');
const leftWords = (ls) => `${ls.map(worker).join(', ')} left`;

// Seconds to read: "0.74 s", "12.3 s", "2 min 05 s".
export function seconds(s) {
  if (!Number.isFinite(s)) return '–';
  if (s < 10) return `${s.toFixed(2)} s`;
  return s < 60 ? `${s.toFixed(1)} s` : duration(s);
}

// What the line `m` changed since the line before, `prev`, in words;
// `restarts` is /api/job's, which names the rank whose failure restarted it.
export function describeChange(m, prev, restarts = []) {
  const left = m.left ?? [], joined = m.joined ?? [];
  const n = m.world_size;
  if (m.how === 'shrink') {
    const rest = n === 1 ? 'the survivor went on alone' : `the ${n} survivors went on`;
    return `${left.length ? leftWords(left) : 'a rank left'}: ${rest}${joined.length ? `; ${joinedAs(joined)}` : ''}`;
  }
  if (m.how === 'grow') {
    return `${left.length ? `${leftWords(left)}; ` : ''}${joined.length ? joinedAs(joined) : 'a worker joined'}: healed from the live ranks`;
  }
  if (m.how === 'restart') {
    const from = m.from_step > 0 ? `the checkpoint of step ${m.from_step}` : 'the start (no checkpoint yet)';
    // Every process started again has a new pid: then `left` is everyone,
    // and the restart's verdict says who failed.
    const everyone = prev && left.length >= (prev.world_size ?? Infinity);
    const why = restarts.find((r) => r.attempt === m.attempt && r.rank >= 0);
    const who = left.length && !everyone ? `${leftWords(left)}; ` : why ? `rank ${why.rank} (${why.host}) failed; ` : '';
    return `${who}restarted from ${from}`;
  }
  return `formed with ${n} rank${n === 1 ? '' : 's'}`;
}

// The summary line: changes, failures survived (lines whose `left` is not
// empty), heals (grow lines) and goodput.
export function membershipSummary(job) {
  const lines = job.membership ?? [];
  const changes = lines.slice(1);
  const failures = changes.filter((m) => m.left?.length).length;
  const heals = changes.filter((m) => m.how === 'grow').length;
  const plural = (k, word) => `${k} ${word}${k === 1 ? '' : 's'}`;
  return `${plural(changes.length, 'membership change')}: ${plural(failures, 'failure')} survived, `
    + `${plural(heals, 'heal')}; goodput ${percent(job.goodput)} (the share of wall time spent on steps that count).`;
}

export class MembershipView {
  constructor(panel) {
    this.panel = panel;
    this.summary = panel.querySelector('.membership-summary');
    this.tbody = panel.querySelector('tbody');
    this.rows = -1;  // the lines drawn: a line never changes once written
  }

  // Draws `job`'s membership; the panel shows only once it has changed.
  update(job) {
    const lines = job?.membership ?? [];
    this.panel.hidden = lines.length < 2;
    this.panel.dataset.changes = String(Math.max(0, lines.length - 1));
    if (lines.length < 2) return;
    this.summary.textContent = membershipSummary(job);
    if (lines.length === this.rows) return;
    this.rows = lines.length;
    this.tbody.replaceChildren(...lines.slice(1).map((m, i) => {
      const prev = lines[i];
      return el('tr', { 'data-how': m.how, 'data-step': String(m.from_step) },
        el('td', { class: 'num', text: String(m.from_step) }),
        el('td', { class: 'num', text: String(m.attempt) }),
        el('td', {}, el('span', { class: 'how', 'data-how': m.how, text: m.how })),
        el('td', { class: 'msg', text: describeChange(m, prev, job.restarts) }),
        el('td', { class: 'num', text: `${prev.world_size} → ${m.world_size}` }),
        el('td', { class: 'num', text: `${seconds(m.to_first_step_s)} to the next step` }));
    }));
  }
}
