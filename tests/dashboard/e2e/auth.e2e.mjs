// The dashboard's token in a real browser (docs/security.md): a job under
// mutual TLS whose dashboard has --http-token, served over HTTPS with the
// control plane's certificate. Headless Debian chromium, driven by
// playwright-core, trusts exactly that certificate (its public key pinned
// with --ignore-certificate-errors-spki-list, not every certificate).
// Run by dashboard_e2e.sh --auth (which checks the prerequisites):
//
//   node auth.e2e.mjs --microddp BIN --screenshot OUT.png [--chromium /usr/bin/chromium]
//
// Checks: a browser without the token gets 401 and none of the job (the
// page, the API, the stream); one that opened the login URL the coordinator
// printed gets the working page (both ranks listed, the loss chart growing
// over the stream) and an HttpOnly, Secure, SameSite=Strict cookie it
// cannot read from script. Every wait is bounded; the job's processes are
// killed on every exit path.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Harness } from './e2e_lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const BIN = resolve(opt('--microddp', ''));
const SHOT = resolve(opt('--screenshot', 'dashboard-auth.png'));
const CHROMIUM = opt('--chromium', '/usr/bin/chromium');
const modules = opt('--node-modules', join(here, '..', '..', '..', 'dashboard', 'node_modules'));
const { chromium } = await import(pathToFileURL(resolve(modules, 'playwright-core', 'index.mjs')).href);

const TOKEN = 'e2e-dashboard-token-0123456789';
const work = mkdtempSync(join(tmpdir(), 'mddp-e2e-auth-'));
const h = new Harness('e2e-auth', work);
const fail = (msg) => h.fail(msg);
const sh = (cmd) => execFileSync('bash', ['-c', cmd], { encoding: 'utf8' }).trim();

async function startJob() {
  execFileSync(BIN, ['certs', join(work, 'lab'), '--hosts', '127.0.0.1']);
  const lab = (f) => join(work, 'lab', f);
  writeFileSync(join(work, 'token'), 'job-token-e2e', { mode: 0o600 });
  const tls = ['--tls-ca', lab('ca.pem'), '--tls-cert', lab('127.0.0.1.pem'), '--tls-key', lab('127.0.0.1.key')];
  h.start(BIN, ['coordinator', '--world-size', '2', '--port', '0', '--address-file', join(work, 'address'),
    '--http-port', '0', '--http-url-file', join(work, 'url'), '--http-token', TOKEN,
    '--token-file', join(work, 'token'), ...tls, '--tls-client-auth',
    '--dataset', 'synthetic', '--synthetic-size', '8192', '--width', '64', '--batch', '64',
    '--steps', '1000000', '--no-eval', '--log-every', '1000000', '--heartbeat-ms', '200']);
  const address = await h.waitFor('the coordinator to listen', async () => {
    try { return readFileSync(join(work, 'address'), 'utf8').trim(); } catch { return ''; }
  }, 60000);
  for (let i = 0; i < 2; ++i)
    h.start(BIN, ['worker', '--coordinator', address, '--token-file', join(work, 'token'), ...tls]).on('exit',
      (code, sig) => h.log(`worker exited (${code ?? sig})`));
  const login = readFileSync(join(work, 'url'), 'utf8').trim();
  // The certificate's public key, as Chromium's pin list wants it: base64 SHA-256 of the SPKI.
  const spki = sh(`openssl x509 -in '${lab('127.0.0.1.pem')}' -pubkey -noout | openssl pkey -pubin -outform der` +
    ' | openssl dgst -sha256 -binary | base64');
  return { login, spki };
}

async function main() {
  const { login, spki } = await startJob();
  const base = login.slice(0, login.indexOf('login?'));
  if (!/^https:\/\/127\.0\.0\.1:\d+\/$/.test(base)) fail(`the login URL is not HTTPS on 127.0.0.1: ${login}`);
  h.log(`login URL ${base}login?token=…`);
  const browser = h.browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-quic', '--disable-component-update', '--disable-sync', `--ignore-certificate-errors-spki-list=${spki}`],
  });
  mkdirSync(dirname(SHOT), { recursive: true });

  // A browser without the token: 401 everywhere, nothing of the job.
  const stranger = await (await browser.newContext()).newPage();
  const refused = await stranger.goto(base, { waitUntil: 'load' });
  if (refused.status() !== 401) fail(`the page without the token answered ${refused.status()}, want 401`);
  const text = await stranger.locator('body').innerText();
  if (!text.includes('needs its token')) fail(`the refusal does not say what to do: "${text}"`);
  await stranger.screenshot({ path: SHOT.replace(/\.png$/, '-refused.png') });
  const probe = await stranger.evaluate(async () => {
    const api = await Promise.all(['/api/job', '/api/ranks', '/metrics', '/app.js'].map(async (p) => {
      const r = await fetch(p); return { p, status: r.status, body: await r.text() };
    }));
    const stream = await new Promise((done) => {
      const ws = new WebSocket(`wss://${location.host}/api/stream`);
      ws.onopen = () => done('opened');
      ws.onerror = () => done('refused');
      setTimeout(() => done('no answer'), 10000);
    });
    return { api, stream };
  });
  for (const { p, status, body } of probe.api)
    if (status !== 401 || body.includes('"job_id"') || body.includes('microddp_')) fail(`${p} without the token: ${status} ${body.slice(0, 80)}`);
  if (probe.stream !== 'refused') fail(`the stream without the token: ${probe.stream}`);
  h.log('without the token: page, API, /metrics, assets and the stream refused (401)');

  // The login URL: a cookie, then the working page.
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`script error: ${e.message}`));
  page.on('response', (r) => {
    const path = new URL(r.url()).pathname;
    if (r.status() >= 400 && !(r.status() === 404 && path.endsWith('/api/timeline'))) problems.push(`HTTP ${r.status()} for ${r.url()}`);
  });
  const res = await page.goto(login, { waitUntil: 'load' });
  if (res.status() !== 200 || page.url() !== base) fail(`after login: ${res.status()} at ${page.url()}, want 200 at ${base}`);
  const cookies = await context.cookies();
  const c = cookies.find((k) => k.name.startsWith('microddp_'));
  if (!c || !c.httpOnly || !c.secure || c.sameSite !== 'Strict' || c.value !== TOKEN)
    fail(`the login cookie is not HttpOnly, Secure, SameSite=Strict: ${JSON.stringify(cookies)}`);
  if ((await page.evaluate(() => document.cookie)) !== '') fail('a script can read the login cookie');
  await h.waitFor('the rank table to list 2 ranks', async () => (await page.locator('#ranks tbody tr[data-rank]').count()) === 2, 90000);
  const points = () => page.locator('#chart-loss').evaluate((e) => Number(e.dataset.points));
  const first = await h.waitFor('the loss chart to have points', async () => { const n = await points(); return n > 0 ? n : 0; }, 60000);
  const second = await h.waitFor(`the loss chart to grow beyond ${first} points`, async () => { const n = await points(); return n > first ? n : 0; });
  h.log(`with the token: both ranks listed, loss chart ${first} then ${second} points (over wss://)`);
  await page.screenshot({ path: SHOT, fullPage: true });
  if (problems.length) fail(`the page reported problems:\n  ${problems.join('\n  ')}`);
}

await h.run(main);
