// The timeline of one step (/api/timeline): a Gantt chart of positioned
// divs, one row per rank on the aligned clock. The top lane holds the
// compute phases, the bottom lane each bucket's all-reduce (solid) and the
// wait between the bucket becoming ready and its all-reduce starting
// (dashed). All ranks are drawn; the area scrolls past about ten rows.

import { bytes, el, fixed, ms, num, PHASE_LABEL, PHASES, where } from './format.js';

// About `count` round tick positions over [0, max].
function ticks(max, count = 8) {
  if (!(max > 0)) return [0];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw);
  const out = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(t);
  return out;
}

const pct = (v, max) => `${(100 * v) / max}%`;

export function legend(ul) {
  const items = [...PHASES.map((p) => [PHASE_LABEL[p], `var(--${p === 'exposed_comm' ? 'exposed' : p})`]),
    ['bucket all-reduce', 'var(--comm)']];
  ul.replaceChildren(...items.map(([label, color]) => el('li', { style: `--c: ${color}`, text: label })));
  ul.append(el('li', { class: 'legend-wait', text: 'bucket ready, waiting for its all-reduce' }));
}

export function renderTimeline(container, tl, ranksInfo) {
  if (!tl || !tl.ranks?.length) {
    container.replaceChildren(el('p', { class: 'empty', text: 'No complete step yet.' }));
    return;
  }
  const max = Math.max(...tl.ranks.map((r) => Math.max(r.end_ms ?? 0, ...(r.buckets || []).map((b) => b.end_ms))), 1e-3);
  const stragglerRank = tl.straggler?.rank;
  const hostOf = new Map((ranksInfo || []).map((k) => [k.rank, k.host]));

  const axis = el('div', { class: 'tl-axis', 'aria-hidden': 'true' });
  for (const t of ticks(max)) {
    axis.append(el('span', { class: 'tl-tick', style: `left: ${pct(t, max)}`, text: `${num(t, 3)} ms` }));
  }
  const rows = tl.ranks.map((r) => {
    const lanes = el('div', { class: 'tl-lanes' });
    for (const p of r.phases || []) {
      const w = p.end_ms - p.start_ms;
      if (!(w > 0)) continue;
      const title = `rank ${r.rank} ${PHASE_LABEL[p.name] ?? p.name}: ${ms(w)} (${fixed(p.start_ms, 2)}–${fixed(p.end_ms, 2)} ms)`;
      lanes.append(el('div', {
        class: 'tl-span tl-phase', 'data-phase': p.name, title,
        style: `left: ${pct(p.start_ms, max)}; width: ${pct(w, max)}`,
        text: w / max > 0.06 ? PHASE_LABEL[p.name] ?? p.name : '',
      }));
    }
    for (const b of r.buckets || []) {
      if (b.start_ms > b.ready_ms) {
        lanes.append(el('div', {
          class: 'tl-span tl-wait', title: `bucket ${b.index} waited ${ms(b.start_ms - b.ready_ms)} to start`,
          style: `left: ${pct(b.ready_ms, max)}; width: ${pct(b.start_ms - b.ready_ms, max)}`,
        }));
      }
      const w = Math.max(0, b.end_ms - b.start_ms);
      const bw = Number.isFinite(b.busbw_gbps) ? `, ${num(b.busbw_gbps, 3)} GB/s busbw` : '';
      lanes.append(el('div', {
        class: 'tl-span tl-bucket', 'data-bucket': String(b.index),
        title: `rank ${r.rank} bucket ${b.index}: ${bytes(b.bytes)}, ready ${fixed(b.ready_ms, 2)} ms, `
          + `all-reduce ${fixed(b.start_ms, 2)}–${fixed(b.end_ms, 2)} ms (${ms(w)}${bw})`,
        style: `left: ${pct(b.start_ms, max)}; width: ${pct(w, max)}`,
        text: w / max > 0.03 ? `b${b.index}` : '',
      }));
    }
    const host = hostOf.get(r.rank);
    const isStraggler = r.rank === stragglerRank;
    return el('div', { class: 'tl-row', 'data-rank': String(r.rank), 'data-straggler': String(isStraggler) },
      el('div', { class: 'tl-label' }, `rank ${r.rank}${isStraggler ? ' ⚑' : ''}`, el('small', { text: host ?? '' })),
      lanes);
  });
  container.replaceChildren(axis, ...rows);
  const more = container.nextElementSibling?.classList.contains('tl-more') ? container.nextElementSibling : null;
  if (tl.ranks.length > 10) {
    const text = `${tl.ranks.length} ranks: scroll the timeline for the others${stragglerRank != null ? ` (the straggler, rank ${stragglerRank}, is marked ⚑)` : ''}.`;
    if (more) more.textContent = text;
    else container.after(el('p', { class: 'tl-more', text }));
  } else if (more) more.remove();
  container.setAttribute('aria-label', `timeline of step ${tl.step}: ${tl.ranks.length} ranks over ${ms(max)}`);
}

// "Step 412: rank 1 arrived 2.4 ms after the median rank (in forward)."
export function stragglerSentence(s, step) {
  if (!s) return null;
  const excess = Object.entries(s.excess_ms || {}).filter(([, v]) => v >= 0.01)
    .sort((a, b) => b[1] - a[1]).map(([k, v]) => `${PHASE_LABEL[k] ?? k} +${ms(v)}`).join(', ');
  return { rank: s.rank, text: `arrived ${ms(s.late_ms)} after the median rank at step ${step}, ${where(s.phase)}${excess ? ` (${excess})` : ''}.` };
}
