// What a browser test of the dashboard needs around its checks: bounded
// waits, child processes that die with the test, and the run-to-PASS/FAIL
// wrapper. (auth.e2e.mjs and membership.e2e.mjs use it; dashboard.e2e.mjs
// still has its own copy.)
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';

export class Harness {
  constructor(tag, work) {
    this.tag = tag;
    this.work = work;  // removed at the end
    this.children = [];
    this.output = '';  // everything the children printed
    this.browser = null;  // closed at the end
  }

  log(msg) { console.log(`[${this.tag} ${new Date().toISOString().slice(11, 23)}] ${msg}`); }

  // A failure the test expected to be able to report: printed without a stack.
  fail(msg) { const e = new Error(msg); e.expected = true; throw e; }

  // Polls fn() (async, truthy = done) every `every` ms for at most `ms`.
  async waitFor(what, fn, ms = 30000, every = 200) {
    const deadline = Date.now() + ms;
    let last;
    for (;;) {
      try { const v = await fn(); if (v) return v; } catch (e) { last = e; }
      if (Date.now() > deadline) this.fail(`timed out after ${ms / 1000} s waiting for ${what}${last ? ` (last error: ${last.message})` : ''}`);
      await new Promise((r) => setTimeout(r, every));
    }
  }

  // CMD in its own process group, its output collected; killed at the end.
  start(cmd, argv) {
    const child = spawn(cmd, argv, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.children.push(child);
    for (const s of [child.stdout, child.stderr]) s.on('data', (d) => { this.output += d.toString(); });
    return child;
  }

  // Runs main(), prints PASS or FAIL (with the children's last output), cleans up, exits.
  async run(main) {
    let code = 0;
    try {
      await main();
      this.log('PASS');
    } catch (e) {
      code = 1;
      console.error(`FAIL: ${e.expected ? e.message : e.stack}`);
      console.error(`--- output of the job (last 3000 characters):\n${this.output.slice(-3000)}`);
    } finally {
      if (this.browser) await this.browser.close().catch(() => {});
      for (const c of this.children) { try { process.kill(-c.pid, 'SIGKILL'); } catch { /* gone */ } }
      rmSync(this.work, { recursive: true, force: true });
    }
    process.exit(code);
  }
}
