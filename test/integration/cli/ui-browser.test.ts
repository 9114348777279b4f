/**
 * `leaseq ui` in a real browser (Debian's chromium driven by playwright-core) against the emulator, after
 * a run with a retry, a dead letter and a stuck lease: the pages, the token, the redrive, the bound
 * address, keyboard reach and labels; the session that a server on another local port cannot get, and
 * the link that leaves the address bar and is spent in the history. Screenshots go to docs/
 * (ui-overview.png, ui-job.png).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { startTracingFromEnv, type WorkerTracing } from '../../../shared/worker/tracing.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';

const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));
const DOCS = fileURLToPath(new URL('../../../docs/', import.meta.url));

/** The browser: CHROMIUM_PATH, else `chromium` on PATH (.ci/run installs Debian's). */
function chromiumPath(): string {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  try {
    return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('no chromium: install it (apt-get install -y chromium) or set CHROMIUM_PATH');
  }
}

let env: CoreEnv;
let prefix: string;
let ui: ChildProcess;
let url: string;
let origin: string;
let stderr = '';
let browser: Browser;
let tracing: WorkerTracing | undefined;

/** Node's SQLite (Node 22), to read Chromium's History file; its types are newer than @types/node here. */
interface SqliteModule {
  DatabaseSync: new (
    path: string,
    options: { readOnly: boolean },
  ) => { prepare(sql: string): { all(): unknown[] }; close(): void };
}
const sqlite = async () => (await import('node:sqlite' as string)) as SqliteModule;

/** The newest link `leaseq ui` printed: the first, or the one it gave after the last was used. */
function latestLink(): string {
  const next = [...stderr.matchAll(/for another browser: (\S+)/g)].at(-1)?.[1];
  return next ?? url;
}

/**
 * A request to the inspector as any local process can send it: to 127.0.0.1 with the Host it chooses
 * (Node's resolver does not know `*.localhost`; a thief's request names the inspector's host itself).
 */
function raw(
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string }> {
  const target = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: Number(target.port),
        path,
        method: options.method ?? 'GET',
        headers: { host: target.host, ...options.headers },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

async function drain(worker: ReturnType<typeof makeWorker>): Promise<void> {
  const done = await eventually(
    async () => {
      await worker.poll();
      const q = await queueCounts(env);
      return q.visible + q.inFlight + q.delayed === 0;
    },
    30_000,
    100,
  );
  expect(done).toBe(true);
}

beforeAll(async () => {
  env = await coreEnv('cliui');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  ui = spawn(process.execPath, [BIN, 'ui', '--prefix', prefix, '--port', '0'], {
    env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint(), LEASEQ_PREFIX: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  ui.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    ui.stdout?.on('data', (chunk) => {
      out += chunk;
      const line = out.split('\n')[0];
      if (out.includes('\n') && line) resolve(line.trim());
    });
    ui.once('exit', (code) => reject(new Error(`leaseq ui exited ${code}: ${stderr}`)));
  });
  origin = new URL(url).origin;
  // This process's workers export their spans to the inspector, as a worker given the printed
  // variables would (the endpoint and the trace token header).
  const printed = await new Promise<RegExpExecArray>((resolve, reject) => {
    const started = Date.now();
    const look = () => {
      const found = /OTEL_EXPORTER_OTLP_ENDPOINT=(\S+)(?: OTEL_EXPORTER_OTLP_HEADERS=(\S+))?/.exec(stderr);
      if (found) resolve(found);
      else if (Date.now() - started > 10_000) reject(new Error(`no traces line: ${stderr}`));
      else setTimeout(look, 20);
    };
    look();
  });
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = printed[1];
  if (printed[2]) process.env.OTEL_EXPORTER_OTLP_HEADERS = printed[2];
  process.env.OTEL_SERVICE_NAME = 'ui-test-worker';
  tracing = startTracingFromEnv();
  browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
});

afterAll(async () => {
  await browser?.close();
  await tracing?.shutdown();
  if (ui && ui.exitCode === null) {
    const exited = new Promise((resolve) => ui.once('exit', resolve));
    ui.kill('SIGTERM');
    await exited;
  }
  env?.close();
});

describe('leaseq ui in a browser', () => {
  it('shows a retried job, a dead letter and a stuck lease; redrives with the token after a confirmation', async () => {
    const started = Date.now();
    // Prepare: a job dead-lettered after one failure (a worker allowing one attempt), a job retried once
    // and completed, and a claim whose lease ended an hour ago (its worker "died").
    const account = uniqueName('acct');
    const deadKey = uniqueName('dead');
    const retriedKey = uniqueName('retried');
    const stuckKey = uniqueName('stuck');
    await sendJob(env, {
      dedupKey: deadKey,
      type: 'ledger.credit',
      payload: { account, amount: 5, simulate: { failTimes: 1 } },
    });
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-strict', maxAttempts: 1 }));
    await sendJob(env, {
      dedupKey: retriedKey,
      type: 'ledger.credit',
      payload: { account, amount: 3, simulate: { failTimes: 1 } },
    });
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-retry', maxAttempts: 3 }));
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    const past = Date.now() - 3_600_000;
    const claim = await store.claim({
      dedupKey: stuckKey,
      owner: 'w-gone',
      messageId: uniqueName('m'),
      type: 'ledger.credit',
      createdAt: new Date(past).toISOString(),
      leaseMs: 1000,
      now: past,
    });
    expect(claim.claimed).toBe(true);
    await tracing?.flush();

    const page: Page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    // The printed URL: its token becomes the cookie and leaves the address bar.
    expect(url).toMatch(/^http:\/\/leaseq-[0-9a-f]{24}\.localhost:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    await page.goto(url);
    expect(new URL(page.url()).search).toBe('');
    await expect(page.locator('h1').textContent()).resolves.toBe('Overview');
    // The stuck lease, named with its reason.
    const stuckRow = page.locator('tr', { hasText: stuckKey });
    await expect(stuckRow.textContent()).resolves.toContain('lease-expired');
    await expect(page.locator('#c-dlq').textContent()).resolves.toBe('1');
    // Let the live chart take a few samples before the screenshot.
    // (Browser-side code as strings: this project's TypeScript has no DOM types.)
    await page.waitForFunction("document.querySelectorAll('#chart polyline').length > 0", undefined, {
      timeout: 15_000,
    });
    await page.waitForTimeout(4500);
    await page.screenshot({ path: `${DOCS}ui-overview.png`, fullPage: true });

    // Problem jobs: the page reads the problems index and filters by status; the retried job is found
    // there, as a person would, and opened by its link.
    await page.getByRole('link', { name: 'Problem jobs' }).click();
    await page.selectOption('#f-status', JobStatus.Completed);
    await page.getByRole('button', { name: 'Filter' }).click();
    expect(new URL(page.url()).searchParams.get('status')).toBe(JobStatus.Completed);
    await expect(page.locator('main').textContent()).resolves.toContain('Read from the problems index');
    const retriedRow = page.locator('tr', { hasText: retriedKey });
    await expect(retriedRow.textContent()).resolves.toContain('retried');
    await retriedRow.getByRole('link', { name: retriedKey }).click();
    expect(new URL(page.url()).pathname).toBe(`/jobs/${encodeURIComponent(retriedKey)}`);
    await expect(page.locator('h1').textContent()).resolves.toBe(`Job ${retriedKey}`);
    // Its timeline: sent, attempt 1 failed (with its error class, named once), then completed on attempt 2.
    const entries = await page.locator('ol.timeline li').allTextContents();
    const failedAt = entries.findIndex((e) => e.includes('attempt 1 failed'));
    const completedAt = entries.findIndex((e) => e.includes('completed on attempt 2'));
    expect(entries[0]).toContain('sent');
    expect(failedAt, entries.join('\n')).toBeGreaterThan(0);
    expect(entries[failedAt]).toMatch(/by w-retry.*TransientJobError: simulated transient failure/);
    expect(entries[failedAt]).not.toContain('TransientJobError: TransientJobError');
    expect(completedAt).toBeGreaterThan(failedAt);
    await expect(page.locator('tr', { hasText: 'last error' }).textContent()).resolves.not.toContain(
      'TransientJobError: TransientJobError',
    );
    // Its spans, exported by the workers above, drawn under the timeline; no payload on the page.
    await expect(page.locator('#waterfall g.span').count()).resolves.toBeGreaterThanOrEqual(2);
    await expect(page.locator('#waterfall').textContent()).resolves.toContain('leaseq.process ledger.credit');
    expect(await page.content()).not.toContain(account);
    await page.screenshot({ path: `${DOCS}ui-job.png`, fullPage: true });

    // The dead job's page names its error class once (the worker stores `Name: message`).
    await page.goto(`${origin}/jobs/${encodeURIComponent(deadKey)}`);
    const lastError = (await page.locator('tr', { hasText: 'last error' }).textContent()) ?? '';
    expect(lastError).toMatch(/TransientJobError: simulated transient failure/);
    expect(lastError).not.toContain('TransientJobError: TransientJobError');

    // Dead letters: every form control has a label; the keyboard reaches the redrive button.
    await page.goto(`${origin}/dlq`);
    await expect(page.locator('tr', { hasText: deadKey }).textContent()).resolves.toContain('max-attempts');
    const unlabelled = await page.evaluate<
      string[]
    >(`[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
      .filter((el) => el.labels.length === 0 && !el.getAttribute('aria-label'))
      .map((el) => el.outerHTML)`);
    expect(unlabelled).toEqual([]);
    let reached = false;
    for (let i = 0; i < 30 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate<boolean>("document.activeElement?.textContent === 'Redrive selected…'");
    }
    expect(reached).toBe(true);
    // Select the letter with the keyboard, redrive, confirm.
    await page.getByLabel(`select the letter of ${deadKey}`).check();
    await page.getByRole('button', { name: 'Redrive selected…' }).click();
    await expect(page.locator('h1').textContent()).resolves.toBe('Redrive 1 letter?');
    await page.locator('#confirm').focus();
    await page.keyboard.press('Enter');
    await page.waitForSelector('#outcome');
    await expect(page.locator('#outcome').textContent()).resolves.toBe('1 letter: 1 redriven, 0 not.');
    // The job runs again and completes.
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-after', maxAttempts: 3 }));
    await page.goto(`${origin}/jobs/${encodeURIComponent(deadKey)}`);
    await expect(page.locator('tr', { hasText: 'status' }).first().textContent()).resolves.toContain(
      'COMPLETED',
    );

    // The same action without the session (no cookie) is refused, and does nothing.
    const refused = await raw('/dlq/purge', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'confirmed=yes',
    });
    expect(refused.status).toBe(403);
    expect((await raw('/')).status).toBe(403);
    await page.close();
    process.stderr.write(`ui browser test: ${Date.now() - started} ms\n`);
  });

  it('a server on another local port that the browser visits gets no usable session: replaying what it got is refused', async () => {
    // Cookies are not scoped by port: a cookie of 127.0.0.1:<inspector> goes to 127.0.0.1:<any port>. The
    // session cookie belongs to the inspector's own random host name, which another port's server is not.
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(latestLink());
    await expect(page.locator('h1').textContent()).resolves.toBe('Overview');
    const got: string[] = [];
    const thief = createServer((req, res) => {
      got.push(req.headers.cookie ?? '');
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<title>elsewhere</title><p>another local server</p>');
    });
    await new Promise<void>((resolve) => thief.listen(0, '127.0.0.1', resolve));
    try {
      const port = (thief.address() as { port: number }).port;
      // The loopback's names, and a name under .localhost that is not this start's.
      for (const host of ['127.0.0.1', 'localhost', 'leaseq-f00dfeedf00dfeedf00dfeed.localhost'])
        await page.goto(`http://${host}:${port}/`);
      expect(got.length).toBeGreaterThanOrEqual(3);
      for (const cookie of got) {
        // What a thief does with what it got: the inspector's pages and an action, naming its host.
        const headers = { cookie, 'content-type': 'application/x-www-form-urlencoded' };
        expect((await raw('/dlq', { headers })).status, cookie).toBe(403);
        const cancel = await raw('/dlq/purge', { method: 'POST', headers, body: 'confirmed=yes' });
        expect(cancel.status, cookie).toBe(403);
      }
      // The browser itself still has its session on the inspector's own name.
      await page.goto(`${origin}/dlq`);
      await expect(page.locator('h1').textContent()).resolves.toBe('Dead letters');
    } finally {
      await context.close();
      await new Promise((resolve) => thief.close(resolve));
    }
  });

  it("a server on [::1] at the inspector's port gets neither the link nor the cookie: the inspector holds both loopbacks", async () => {
    // Chromium resolves *.localhost to ::1 before 127.0.0.1 and connects to the first that answers: a
    // server another user binds on [::1]:<port> would receive the printed link (its token, the host name)
    // and every request after. The inspector's own listener on [::1] leaves no room for it.
    const port = Number(new URL(origin).port);
    const got: string[] = [];
    const thief = createServer((req, res) => {
      got.push(`${req.headers.host}${req.url} cookie=${req.headers.cookie ?? ''}`);
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<title>elsewhere</title><h1>not the inspector</h1>');
    });
    const bound = await new Promise<string>((resolve) => {
      thief.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      thief.listen(port, '::1', () => resolve('listening'));
    });
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(latestLink());
      expect(got).toEqual([]);
      expect(bound).toBe('EADDRINUSE');
      await expect(page.locator('h1').textContent()).resolves.toBe('Overview');
    } finally {
      await context.close();
      if (bound === 'listening') await new Promise((resolve) => thief.close(resolve));
    }
  });

  it("the link leaves the address bar and the session history, and the browser's history keeps only a spent one", async () => {
    // Chromium's History database keeps every URL opened, the one a redirect left too: the link must open
    // nothing once traded. (A persistent profile: only it writes the History file.)
    const profile = mkdtempSync(join(tmpdir(), 'leaseq-ui-profile-'));
    try {
      const context = await chromium.launchPersistentContext(profile, {
        executablePath: chromiumPath(),
        args: ['--no-sandbox'],
      });
      const page = context.pages()[0] ?? (await context.newPage());
      const link = latestLink();
      await page.goto(link);
      await expect(page.locator('h1').textContent()).resolves.toBe('Overview');
      expect(page.url()).toBe(`${origin}/`);
      const entries = await page.evaluate<string>('String(history.length) + " " + location.href');
      expect(entries).not.toContain('token');
      await page.goBack();
      expect(page.url()).not.toContain('token=');
      await context.close();
      const db = new (await sqlite()).DatabaseSync(join(profile, 'Default', 'History'), { readOnly: true });
      const kept = (db.prepare('SELECT url FROM urls').all() as { url: string }[]).map((r) => r.url);
      db.close();
      const withToken = kept.filter((u) => u.includes('token='));
      expect(withToken).toContain(link);
      // Anyone who reads the history (a synced device, someone at the screen) gets a spent link.
      for (const u of withToken) {
        const replay = await raw(`${new URL(u).pathname}${new URL(u).search}`);
        expect(replay.status, u).toBe(403);
      }
    } finally {
      rmSync(profile, { recursive: true, force: true });
    }
  });

  it("listens on 127.0.0.1 only: the machine's other addresses refuse the port", async () => {
    expect(stderr).toMatch(/listening on 127\.0\.0\.1:\d+/);
    const port = Number(new URL(origin).port);
    const others = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a && !a.internal && a.family === 'IPv4')
      .map((a) => a?.address as string);
    for (const address of others) {
      const outcome = await new Promise<string>((resolve) => {
        const socket = connect({ host: address, port, timeout: 3000 });
        socket.once('connect', () => {
          socket.destroy();
          resolve('connected');
        });
        socket.once('timeout', () => {
          socket.destroy();
          resolve('timeout');
        });
        socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      });
      expect(outcome, address).not.toBe('connected');
    }
  });
});
