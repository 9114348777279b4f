/**
 * `leaseq ui`'s search, payload view and fix-and-redrive in a real browser (Debian's chromium driven by
 * playwright-core) against the emulator, with the ledger example's job module: a dead job is found by its
 * key and by filters, its payload shown on request (a POST), a payload its schema refuses changes
 * nothing, the corrected one is redriven after a confirmation with the diff, and the job completes with
 * it. The dead-letters page shows the error message and marks a letter whose job completed since. The
 * terminal never gets a payload. Screenshot: docs/ui-fix.png.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { hashOfPayload } from '../../../shared/core/pipeline/payload-mismatch.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';

const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));
const DOCS = fileURLToPath(new URL('../../../docs/', import.meta.url));
const JOB_MODULE = fileURLToPath(new URL('../../../examples/ledger/jobs.ts', import.meta.url));

function chromiumPath(): string {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  try {
    return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('no chromium: install it (apt-get install -y chromium) or set CHROMIUM_PATH');
  }
}

let env: CoreEnv;
let ui: ChildProcess;
let url: string;
let origin: string;
let stderr = '';
let browser: Browser;

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

/** The newest link `leaseq ui` printed: the first, or the one it gave after the last was used. */
function latestLink(): string {
  return [...stderr.matchAll(/for another browser: (\S+)/g)].at(-1)?.[1] ?? url;
}

/** Bytes of the page the browser holds now (its HTML as served: no script or style is loaded apart). */
const weight = async (page: Page) => Buffer.byteLength(await page.content(), 'utf8');

beforeAll(async () => {
  env = await coreEnv('uifind');
  const prefix = env.jobsTable.replace(/-jobs$/, '');
  ui = spawn(process.execPath, [BIN, 'ui', '--prefix', prefix, '--port', '0', '--job-module', JOB_MODULE], {
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
  browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
});

afterAll(async () => {
  await browser?.close();
  if (ui && ui.exitCode === null) {
    const exited = new Promise((resolve) => ui.once('exit', resolve));
    ui.kill('SIGTERM');
    await exited;
  }
  env?.close();
});

describe('leaseq ui: find, see, fix', () => {
  it('finds a dead job by key, shows its payload on request, refuses a payload its schema refuses, redrives the corrected one after the diff, and the job completes', async () => {
    // Prepare: a credit that fails once, on a worker allowing one attempt: dead, its letter in the DLQ.
    const account = uniqueName('acct-secret');
    const deadKey = uniqueName('fixme');
    await sendJob(env, {
      dedupKey: deadKey,
      type: 'ledger.credit',
      payload: { account, amount: 5, simulate: { failTimes: 1 } },
    });
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-strict', maxAttempts: 1 }));
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    expect((await store.get(deadKey))?.status).toBe(JobStatus.Dead);

    const page: Page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(url);
    const weights: Record<string, number> = {};

    // Find by key, from the box of the page at hand: one read by key opens the job.
    await page.fill('#find-q', deadKey);
    await page.press('#find-q', 'Enter');
    await page.waitForURL(`${origin}/jobs/${encodeURIComponent(deadKey)}`);
    await expect(page.locator('h1').textContent()).resolves.toBe(`Job ${deadKey}`);
    // No payload by default.
    expect(await page.content()).not.toContain(account);
    weights.job = await weight(page);

    // A key no job has says so.
    await page.fill('#find-q', `${deadKey}-none`);
    await page.press('#find-q', 'Enter');
    await expect(page.locator('#find-none').textContent()).resolves.toContain('No job has the dedup key');

    // Filters list it from the problems index (read again until the index has it: it is eventually consistent).
    const listed = await eventually(
      async () => {
        await page.goto(
          `${origin}/find?q=${encodeURIComponent('type:ledger.credit status:DEAD reason:max-attempts simulated')}`,
        );
        return (
          (await page.locator('#find-results').count()) > 0 &&
          (await page.locator('#find-results').textContent())?.includes(deadKey) === true
        );
      },
      15_000,
      300,
    );
    expect(listed).toBe(true);
    await expect(page.locator('#find-count').textContent()).resolves.toMatch(/^1 job matches\./);
    weights.find = await weight(page);

    // The payload, on request: its letter's error, attributes and payload with its size.
    await page.locator('#find-results').getByRole('link', { name: deadKey }).click();
    await page.locator('#reveal').click();
    await expect(page.locator('h1').textContent()).resolves.toBe(`Job ${deadKey}: payload and result`);
    const payload = (await page.locator('pre[id^="payload-"]').textContent()) ?? '';
    expect(JSON.parse(payload)).toEqual({ account, amount: 5, simulate: { failTimes: 1 } });
    await expect(page.locator('section.letter h3', { hasText: 'Payload' }).textContent()).resolves.toMatch(
      /^Payload \(\d+ bytes\)$/,
    );
    await expect(page.locator('.letter-error').textContent()).resolves.toContain(
      'simulated transient failure',
    );
    weights.reveal = await weight(page);

    // A payload the schema refuses: said, nothing changed.
    await page.fill('#fix-payload', JSON.stringify({ account, amount: -1 }));
    await page.locator('#fix-check').click();
    await expect(page.locator('#fix-problem').textContent()).resolves.toContain('amount');
    expect((await store.get(deadKey))?.status).toBe(JobStatus.Dead);
    expect((await queueCounts(env, env.dlqUrl)).visible + (await queueCounts(env, env.dlqUrl)).inFlight).toBe(
      1,
    );

    // The corrected payload: the diff, then the redrive on confirmation.
    await page.fill('#fix-payload', JSON.stringify({ account, amount: 7 }, null, 2));
    await page.locator('#fix-check').click();
    await expect(page.locator('h1').textContent()).resolves.toBe(`Redrive job ${deadKey} with this payload?`);
    const diff = (await page.locator('#fix-diff').textContent()) ?? '';
    expect(diff).toContain('-   "amount": 5,');
    expect(diff).toContain('+   "amount": 7');
    expect(diff).toContain('-   "simulate": {');
    expect((await store.get(deadKey))?.status).toBe(JobStatus.Dead);
    weights.confirm = await weight(page);
    await page.screenshot({ path: `${DOCS}ui-fix.png`, fullPage: true });
    await page.locator('#confirm').click();
    await expect(page.locator('#outcome').textContent()).resolves.toBe(
      `Job ${deadKey} was redriven with the edited payload.`,
    );

    // The reset stores the edit's payload hash, so a copy of the old body that claims first cannot get
    // the edit dead-lettered as another payload (payload-mismatch).
    const credit = ledgerJobs.get('ledger.credit');
    expect((await store.get(deadKey))?.payloadHash).toBe(
      credit && hashOfPayload(credit, { account, amount: 7 }),
    );
    // It runs with the new payload and completes: the account holds 7.
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-after', maxAttempts: 3 }));
    expect((await store.get(deadKey))?.status).toBe(JobStatus.Completed);
    expect((await getBalance(env, account))?.balance).toBe(7);
    await page.goto(`${origin}/jobs/${encodeURIComponent(deadKey)}`);
    await expect(page.locator('tr', { hasText: 'status' }).first().textContent()).resolves.toContain(
      'COMPLETED',
    );

    // The terminal got counts, never the payload.
    expect(stderr).toContain('edited redrive from the inspector: 1 letter: 1 redriven');
    expect(stderr).not.toContain(account);
    process.stderr.write(`ui-find page weights (bytes): ${JSON.stringify(weights)}\n`);
    await page.close();
  });

  it('shows the dead letters with their error message and marks one whose job completed since', async () => {
    const account = uniqueName('acct');
    const key = uniqueName('stale');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account, amount: 1, simulate: { failTimes: 1 } },
    });
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-strict', maxAttempts: 1 }));
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    const dead = await store.get(key);
    expect(dead?.status).toBe(JobStatus.Dead);
    const page: Page = await browser.newPage();
    await page.goto(latestLink());
    await page.goto(`${origin}/dlq`);
    const row = page.locator('tr', { hasText: key });
    if ((await row.count()) === 0) throw new Error(await page.locator('main').innerHTML());
    await expect(row.textContent()).resolves.toContain('TransientJobError: simulated transient failure');
    await expect(row.textContent()).resolves.not.toContain('completed since');
    // Between the letter and its job: the letter's page links the job, its body comes on request.
    await row.getByRole('link', { name: 'letter' }).click();
    await expect(page.locator('tr', { hasText: 'error' }).first().textContent()).resolves.toContain(
      'simulated transient failure',
    );
    expect(await page.content()).not.toContain(account);
    await page.locator('#reveal-body').click();
    await expect(page.locator('#letter-payload').textContent()).resolves.toContain(account);
    await page.getByRole('link', { name: key }).click();
    await expect(page.locator('h1').textContent()).resolves.toBe(`Job ${key}`);
    // The job completes by another way (as a copy run elsewhere would leave it): its letter is stale now.
    await env.clients.doc.send(
      new PutCommand({ TableName: env.jobsTable, Item: { ...dead, status: JobStatus.Completed } }),
    );
    await page.goto(`${origin}/dlq`);
    await expect(page.locator('tr', { hasText: key }).textContent()).resolves.toContain(
      'job completed since',
    );
    await page.close();
  });
});
