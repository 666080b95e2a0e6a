// The Membership panel and the goodput in a real browser, against
// mock_coordinator.mjs: a job of 4 ranks that never changed shows no panel
// and its goodput in the header; after a shrink (rank 1 dies, the 3
// survivors go on) and a grow (a newcomer heals from the live ranks, its
// host named `<i>vm-new</i>` so that markup from the server shows as text)
// the panel has one row per change, in words, with the world size after it
// and the pause, under a summary: 1 failure survived, 1 heal, the goodput.
// Run by dashboard_e2e.sh --mock MODULES OUT.png --membership:
//
//   node membership.e2e.mjs --screenshot OUT.png [--chromium /usr/bin/chromium]
//
// Every wait is bounded; the mock is killed on every exit path.

import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Harness } from './e2e_lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const SHOT = resolve(opt('--screenshot', 'dashboard-membership.png'));
const CHROMIUM = opt('--chromium', '/usr/bin/chromium');
const modules = opt('--node-modules', join(here, '..', '..', '..', 'dashboard', 'node_modules'));
const { chromium } = await import(pathToFileURL(resolve(modules, 'playwright-core', 'index.mjs')).href);

const RANKS = 4;
const HOST = '<i>vm-new</i>';  // the newcomer's host: shown as text, never as markup
const h = new Harness('e2e-membership', mkdtempSync(join(tmpdir(), 'mddp-e2e-membership-')));
const fail = (msg) => h.fail(msg);
// The waits assert that the page gets there, not how fast (a loaded 2-core machine).
const WAIT_MS = 45000;

async function main() {
  h.start(process.execPath, [join(here, 'mock_coordinator.mjs'), '--ranks', String(RANKS)]);
  const base = (await h.waitFor('the mock coordinator', async () => h.output.match(/listening on (http:\/\/\S+)/), 10000))[1];
  const post = async (path) => {
    const res = await fetch(new URL(path, base), { method: 'POST' });
    if (!res.ok) fail(`POST ${path}: HTTP ${res.status}`);
  };
  h.browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-quic', '--disable-component-update', '--disable-sync'],
  });
  const page = await (await h.browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`script error: ${e.message}`));
  page.on('response', (r) => {
    const path = new URL(r.url()).pathname;
    const notYet = r.status() === 404 && (path.endsWith('/api/timeline') || path.endsWith('/api/collectives'));
    if (r.status() >= 400 && !notYet) problems.push(`HTTP ${r.status()} for ${r.url()}`);
  });
  await page.goto(base, { waitUntil: 'load' });

  // A job that never changed: its goodput in the header, no panel.
  const goodput = () => page.locator('[data-k="goodput"]').innerText();
  await h.waitFor('the header to show the goodput 99.8 %', async () => (await goodput()) === '99.8 %', WAIT_MS);
  if (await page.locator('#membership-panel').isVisible()) fail('the Membership panel shows for a job that never changed');
  h.log('before any change: goodput 99.8 % in the header, no Membership panel');

  // The rows as the page shows them.
  const rows = () => page.locator('#membership tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    how: tr.dataset.how, cells: [...tr.cells].map((td) => td.textContent),
  })));
  const untilRows = (n) => h.waitFor(`the Membership panel to show ${n} change${n > 1 ? 's' : ''}`, async () => {
    if (!(await page.locator('#membership-panel').isVisible())) return null;
    const r = await rows();
    return r.length === n ? r : null;
  }, WAIT_MS);
  const expectRow = (row, want) => {
    const got = row.cells.slice(2);
    if (row.how !== want[0] || JSON.stringify(got) !== JSON.stringify(want))
      fail(`a ${want[0]} row reads ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  };

  // Rank 1 dies; the 3 survivors go on.
  await post('mock/shrink');
  const [shrunk] = await untilRows(1);
  expectRow(shrunk, ['shrink', 'rank 1 (host-0, pid 40001) left: the 3 survivors went on', '4 → 3', '0.06 s to the next step']);
  h.log(`shrink: ${shrunk.cells.join(' | ')}`);

  // A newcomer joins and heals from the live ranks.
  await post(`mock/grow?host=${encodeURIComponent(HOST)}`);
  const both = await untilRows(2);
  expectRow(both[1], ['grow', `${HOST} pid 40004 joined as rank 3: healed from the live ranks`, '3 → 4', '0.74 s to the next step']);
  h.log(`grow: ${both[1].cells.join(' | ')}`);
  if (await page.locator('#membership-panel i').count()) fail('the newcomer\'s host name became markup in the Membership panel');

  // The rows' steps and attempts are the server's.
  const job = await (await fetch(new URL('api/job', base))).json();
  const lines = job.membership.slice(1);
  for (const [i, row] of both.entries()) {
    if (row.cells[0] !== String(lines[i].from_step) || row.cells[1] !== String(lines[i].attempt))
      fail(`row ${i} is at step ${row.cells[0]}, attempt ${row.cells[1]}; /api/job says ${lines[i].from_step}, ${lines[i].attempt}`);
  }

  // The summary and the header: 1 failure survived, 1 heal, goodput 97.3 %.
  const summary = await h.waitFor('the summary to count the changes and give the goodput', async () => {
    const s = await page.locator('#membership-panel .membership-summary').innerText();
    return s.startsWith('2 membership changes: 1 failure survived, 1 heal; goodput 97.3 %') ? s : null;
  }, WAIT_MS);
  h.log(`summary: ${summary}`);
  await h.waitFor('the header to show the goodput 97.3 %', async () => (await goodput()) === '97.3 %', WAIT_MS);
  await h.waitFor('the header to say how the attempts formed: 2 (1 shrink, 1 heal)', async () =>
    (await page.locator('[data-k="attempt"]').innerText()).trim() === '2 (1 shrink, 1 heal)', WAIT_MS);

  mkdirSync(dirname(SHOT), { recursive: true });
  await page.waitForTimeout(300);  // let the last redraw land
  await page.screenshot({ path: SHOT, fullPage: true });
  await page.locator('#membership-panel').screenshot({ path: SHOT.replace(/\.png$/, '-panel.png') });
  h.log(`screenshot: ${SHOT} (and -panel)`);
  if (problems.length) fail(`the page reported problems:\n  ${problems.join('\n  ')}`);
}

await h.run(main);
