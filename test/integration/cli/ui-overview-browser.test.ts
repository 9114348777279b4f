/**
 * The overview in a real browser (Debian's chromium, playwright-core): its figures are `leaseq status
 * --json`'s on the same target, its lists follow its tiles on every refresh (before, the tiles were live
 * and the lists were the page load's: "7 live leases" above "No job holds a lease"), its chart has a time
 * axis and units; and a throttled store is said to throttle while the last figures stay, greyed.
 * Screenshots: docs/ui-overview-live.png, docs/ui-overview-throttled.png.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningUi, startUi } from '../../../cli/ui/server.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';
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

function chromiumPath(): string {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
}

let env: CoreEnv;
let prefix: string;
let browser: Browser;
let ui: ChildProcess | undefined;
const cliEnv = () => ({ ...process.env, AWS_ENDPOINT_URL: testEndpoint(), LEASEQ_PREFIX: '' });

beforeAll(async () => {
  env = await coreEnv('cliuiov');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
});
afterAll(async () => {
  await browser?.close();
  if (ui && ui.exitCode === null) {
    const exited = new Promise((resolve) => ui?.once('exit', resolve));
    ui.kill('SIGTERM');
    await exited;
  }
  env?.close();
});

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

/** `leaseq ui` on the test's prefix: its printed link. */
async function startCliUi(): Promise<string> {
  const child = spawn(process.execPath, [BIN, 'ui', '--prefix', prefix, '--port', '0'], {
    env: cliEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  ui = child;
  return new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk) => {
      out += chunk;
      const line = out.split('\n')[0];
      if (out.includes('\n') && line) resolve(line.trim());
    });
    child.once('exit', (code) => reject(new Error(`leaseq ui exited ${code}`)));
  });
}

describe('leaseq ui overview in a browser', () => {
  it('agrees with leaseq status --json on the same target, and its lease list follows its tiles on each refresh', async () => {
    // Prepare: a dead job, two completed (one after a retry), a claim whose worker died an hour ago.
    await sendJob(env, {
      dedupKey: uniqueName('dead'),
      type: 'ledger.credit',
      payload: { account: 'a', amount: 1, simulate: { failTimes: 1 } },
    });
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-strict', maxAttempts: 1 }));
    await sendJob(env, {
      dedupKey: uniqueName('ok'),
      type: 'ledger.credit',
      payload: { account: 'a', amount: 2 },
    });
    await sendJob(env, {
      dedupKey: uniqueName('retried'),
      type: 'ledger.credit',
      payload: { account: 'a', amount: 3, simulate: { failTimes: 1 } },
    });
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-retry', maxAttempts: 3 }));
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    const claim = (dedupKey: string, now: number, leaseMs: number) =>
      store.claim({
        dedupKey,
        owner: 'w-busy',
        messageId: uniqueName('m'),
        type: 'ledger.credit',
        createdAt: new Date(now).toISOString(),
        leaseMs,
        now,
      });
    const past = Date.now() - 3_600_000;
    await claim(uniqueName('stuck'), past, 1000);

    const page = await browser.newPage({ viewport: { width: 1200, height: 1000 } });
    await page.goto(await startCliUi());
    await expect(page.locator('h1').textContent()).resolves.toBe('Overview');
    await expect(page.locator('#c-live').textContent()).resolves.toBe('0');

    // Three jobs start running while the page is open: the next refreshes list them under the tile.
    const live = [uniqueName('live'), uniqueName('live'), uniqueName('live')];
    for (const key of live) await claim(key, Date.now(), 600_000);
    await expect.poll(() => page.locator('#c-live').textContent(), { timeout: 10_000 }).toBe('3');
    const rows = async () => (await page.locator('#o-leases tbody tr').allTextContents()).join('\n');
    const listed = await rows();
    for (const key of live) expect(listed, listed).toContain(key);
    await expect(page.locator('#o-leases tbody tr', { hasText: 'live' }).count()).resolves.toBe(3);
    await expect(page.locator('#o-leases tbody tr', { hasText: 'lease-expired' }).count()).resolves.toBe(1);

    // The same figures as leaseq status --json, read after the page's.
    await page.waitForTimeout(2500);
    const tile = async (id: string) => (await page.locator(`#${id}`).textContent()) ?? '';
    const shown = {
      visible: await tile('c-visible'),
      inFlight: await tile('c-inflight'),
      delayed: await tile('c-delayed'),
      dlq: await tile('c-dlq'),
      live: await tile('c-live'),
      stuck: await tile('c-stuck'),
      retryWait: await tile('c-retry'),
      dead: await tile('c-dead'),
      statuses: (await page.locator('#o-statuses').textContent()) ?? '',
      workers: await page.locator('#o-workers tbody td:nth-child(1)').allTextContents(),
      completed: await page.locator('#o-workers tbody td:nth-child(2)').allTextContents(),
    };
    const status = JSON.parse(
      execFileSync(process.execPath, [BIN, 'status', '--json', '--prefix', prefix], {
        env: cliEnv(),
        encoding: 'utf8',
      }),
    );
    expect(shown).toMatchObject({
      visible: String(status.queue.visible),
      inFlight: String(status.queue.inFlight),
      delayed: String(status.queue.delayed),
      dlq: String(status.dlq.depth),
      live: String(status.jobs.live),
      stuck: String(status.jobs.stuck),
      retryWait: String(status.jobs.byStatus[JobStatus.RetryWait]),
      dead: String(status.jobs.byStatus[JobStatus.Dead]),
    });
    expect(status.jobs).toMatchObject({ live: 3, stuck: 1 });
    for (const s of Object.values(JobStatus))
      expect(shown.statuses).toContain(`${s}: ${status.jobs.byStatus[s]}`);
    expect(shown.statuses).toContain(`(${status.jobs.total} job items)`);
    expect(shown.workers.map((w, i) => `${w} ${shown.completed[i]}`)).toEqual(
      status.jobs.completedByWorker.map(
        (w: { worker: string; completed: number }) => `${w.worker} ${w.completed}`,
      ),
    );

    // The chart: a time axis in UTC with clock labels, and units on both value axes.
    const chart = await page.locator('#chart').textContent();
    expect(chart).toContain('time (UTC)');
    expect(chart).toMatch(/\d\d:\d\d:\d\d/);
    expect(chart).toContain('messages');
    expect(chart).toContain('jobs/s');
    await expect(page.locator('#chart-note').textContent()).resolves.toMatch(
      /^Figures of \d\d:\d\d:\d\d UTC, read in \d+ ms with 20 requests/,
    );
    await page.screenshot({ path: `${DOCS}ui-overview-live.png`, fullPage: true });
    await page.close();
  }, 120_000);

  it('says the store throttles and keeps the last figures, greyed with their time; back when it answers', async () => {
    // The emulator's SQS, an in-memory DynamoDB whose faults the test sets.
    const db = new InMemoryDynamoDb({
      tables: leaseqTables({ jobs: env.jobsTable, leases: env.leasesTable }),
    });
    const now = Date.now();
    db.seed(env.jobsTable, {
      dedupKey: 'running-1',
      status: JobStatus.InProgress,
      leaseUntil: now + 600_000,
      token: 1,
      attempts: 1,
      owner: 'w-1',
      claimedAt: now,
      updatedAt: now,
    });
    db.seed(env.jobsTable, {
      dedupKey: 'done-1',
      status: JobStatus.Completed,
      leaseUntil: now,
      token: 1,
      attempts: 1,
      owner: 'w-1',
    });
    let running: RunningUi | undefined;
    try {
      running = await startUi(
        {
          target: {
            clients: { ...env.clients, doc: db },
            names: {
              queueUrl: env.queueUrl,
              dlqUrl: env.dlqUrl,
              jobsTable: env.jobsTable,
              leasesTable: env.leasesTable,
            },
          } as never,
          targetLine: 'in-memory DynamoDB, emulator SQS',
          token: 'overview-throttle-token',
          traceToken: 'trace',
          readOnly: false,
          spans: new SpanBuffer(10),
          timeoutMs: 1000,
        },
        0,
      );
      const page = await browser.newPage({ viewport: { width: 1200, height: 1000 } });
      await page.goto(running.url);
      await expect(page.locator('#c-live').textContent()).resolves.toBe('1');
      await page.waitForTimeout(4500);
      db.faults.failNext('*', 'throttle', { times: 100_000 });
      await expect
        .poll(() => page.locator('#chart-note').textContent(), { timeout: 10_000 })
        .toContain('DynamoDB throttling');
      await expect(page.locator('#c-live').textContent()).resolves.toBe('1');
      await expect(page.locator('#c-live').getAttribute('class')).resolves.toContain('stale');
      await expect(page.locator('#c-live').getAttribute('data-as-of')).resolves.toMatch(/^\d\d:\d\d:\d\d$/);
      await expect(page.locator('#o-leases').textContent()).resolves.toContain('running-1');
      // SQS still answers: its tiles stay fresh.
      await expect(page.locator('#c-visible').getAttribute('class')).resolves.not.toContain('stale');
      await page.waitForTimeout(4500);
      await page.screenshot({ path: `${DOCS}ui-overview-throttled.png`, fullPage: true });
      db.faults.clear();
      await expect
        .poll(() => page.locator('#c-live').getAttribute('class'), { timeout: 10_000 })
        .not.toContain('stale');
      await expect(page.locator('#chart-note').textContent()).resolves.toMatch(/^Figures of/);
      // A page opened while the store throttles: its banners go once a refresh reads everything again.
      db.faults.failNext('*', 'throttle', { times: 100_000 });
      await page.waitForTimeout(1100); // past the 1 s in which a finished read is answered again
      await page.reload();
      await expect(page.locator('main > div.banner').count()).resolves.toBeGreaterThan(0);
      db.faults.clear();
      await expect
        .poll(() => page.locator('#chart-note').textContent(), { timeout: 10_000 })
        .toMatch(/^Figures of/);
      await expect(page.locator('main > div.banner').count()).resolves.toBe(0);
      await page.close();
    } finally {
      await running?.close();
    }
  }, 60_000);
});
