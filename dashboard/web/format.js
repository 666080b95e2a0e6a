// Number and time formatting shared by the views.

export function num(v, digits = 3) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return Number(v).toPrecision(digits).replace(/\.?0+(e|$)/, '$1');
}

export function fixed(v, digits = 1) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return Number(v).toFixed(digits);
}

export function ms(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(2)} s`;
  if (Math.abs(v) >= 10) return `${v.toFixed(1)} ms`;
  return `${v.toFixed(2)} ms`;
}

// A share in [0, 1] as "97.3 %" (– when unknown).
export function percent(v, digits = 1) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return `${(100 * v).toFixed(digits)} %`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '–';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

export function bytes(b) {
  if (!Number.isFinite(b)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return `${b >= 100 || i === 0 ? b.toFixed(0) : b.toFixed(1)} ${units[i]}`;
}

export function rate(v) {
  if (!Number.isFinite(v)) return '–';
  return v >= 1e4 ? Math.round(v).toLocaleString('en-US') : v.toFixed(1);
}

export const PHASES = ['data', 'forward', 'backward', 'exposed_comm', 'optimizer'];
export const PHASE_LABEL = {
  data: 'data', forward: 'forward', backward: 'backward', exposed_comm: 'exposed comm',
  optimizer: 'optimiser', start: 'late start', total_comm: 'all-reduce',
};

// A CSS custom property of :root (the palette lives in style.css).
// "mostly in forward", "mostly by starting the step late"
export function where(phase) {
  return phase === 'start' ? 'mostly by starting the step late' : `mostly in ${PHASE_LABEL[phase] ?? phase}`;
}

export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// Creates an element with attributes and children (strings become text).
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'style') e.style.cssText = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}
