/**
 * Cancel by filter in `leaseq ui`, in a real browser (chromium driven by playwright-core) against the
 * emulator: ten jobs waiting for a retry are found by type and time window, the preview shows their count
 * and rows, the confirmation cancels them in the background, the run page shows the result, and each
 * job's history names the inspector's actor. A confirmation without a preview it kept changes nothing.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';
import { untilIndexed } from '../../support/problems-index.ts';
import { waitingJobs } from '../../support/waiting-jobs.ts';

const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));

let env: CoreEnv;
let ui: ChildProcess;
let url: string;
let stderr = '';
let browser: Browser;

beforeAll(async () => {
  env = await coreEnv('uibulk');
  const prefix = env.jobsTable.replace(/-jobs$/, '');
  ui = spawn(process.execPath, [BIN, 'ui', '--prefix', prefix, '--port', '0', '--actor', 'frank'], {
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
  const path = process.env.CHROMIUM_PATH ?? execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  browser = await chromium.launch({ executablePath: path, args: ['--no-sandbox'] });
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

describe('leaseq ui: cancel by filter in a browser', () => {
  it('previews ten jobs by type and time window, cancels them after the confirmation, and names the actor', async () => {
    // Prepare
    const keys = await waitingJobs(env, 'uibulk', 10);
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(url);

    // Act: the filter, the preview, the confirmation.
    await page.getByRole('link', { name: 'Cancel by filter' }).click();
    await page.getByLabel('type').fill('test.credit');
    await page.getByLabel('last problem within').selectOption('1h');
    await page.locator('#preview').click();
    const count = await page.locator('#count').textContent();
    const listed = await page.locator('table tbody tr td:first-child').allTextContents();
    const previewId = await page.locator('input[name=preview]').getAttribute('value');
    await page.getByLabel('reason').fill('incident 7');
    await page.getByLabel('jobs per second').fill('20');
    await page.locator('#confirm').click();
    await page.locator('#outcome').waitFor({ timeout: 30_000 });
    const outcome = await page.locator('#outcome').textContent();

    // Assess
    expect(count).toBe('10 jobs match');
    expect(listed.sort()).toEqual([...keys].sort());
    expect(outcome).toBe('cancelled 10, refused 0, failed 0');
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    for (const key of keys) {
      const item = await store.get(key);
      expect(item?.status).toBe(JobStatus.Cancelled);
      expect(item?.history?.at(-1)).toMatchObject({ e: 'cancelled', by: 'frank', reason: 'incident 7' });
    }
    // The same preview cannot be confirmed twice: its id is spent.
    const again = await page.evaluate(async (id) => {
      const res = await fetch('/jobs/bulk-cancel', {
        method: 'POST',
        body: new URLSearchParams({ preview: id, confirmed: 'yes' }),
      });
      return { status: res.status, text: await res.text() };
    }, previewId ?? '');
    expect(again.status).toBe(409);
    expect(again.text).toContain('This preview was used already');
    await page.close();
  });

  it('previews three dead jobs by type, reason and time window, redrives their letters, and names the actor', async () => {
    // Prepare: three poison jobs dead-lettered.
    const keys = Array.from({ length: 3 }, () => uniqueName('poison'));
    for (const key of keys) {
      await sendJob(env, {
        dedupKey: key,
        type: 'ledger.credit',
        payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
      });
    }
    const worker = makeWorker(env, ledgerJobs, { worker: 'w-poison' });
    const drained = await eventually(async () => {
      await worker.poll();
      const q = await queueCounts(env);
      return q.visible + q.inFlight + q.delayed === 0;
    }, 30_000);
    expect(drained).toBe(true);
    await untilIndexed(env.clients.doc, env.jobsTable, keys, { status: JobStatus.Dead });
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(
      stderr
        .match(/for another browser: (\S+)/g)
        ?.at(-1)
        ?.split(' ')
        .at(-1) ?? url,
    );

    // Act
    await page.getByRole('link', { name: 'Redrive by filter' }).click();
    await page.locator('#r-type').fill('ledger.credit');
    await page.locator('#r-reason').selectOption('permanent-error');
    await page.getByLabel('dead within').selectOption('1h');
    await page.locator('#preview').click();
    const count = await page.locator('#count').textContent();
    await page.locator('#confirm').click();
    await page.locator('#outcome').waitFor({ timeout: 30_000 });
    const outcome = await page.locator('#outcome').textContent();

    // Assess
    expect(count).toBe('3 dead jobs match');
    expect(outcome).toBe('3 letters: 3 redriven, 0 skipped, 0 failed.');
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    for (const key of keys) {
      const item = await store.get(key);
      expect(item?.status).toBe(JobStatus.RetryWait);
      expect(item?.history?.findLast((e) => e.e === 'redrive')).toMatchObject({ by: 'frank' });
    }
    await page.close();
  });

  it('refuses a confirmation that names no preview it kept, and a cross-site one, changing nothing', async () => {
    // Prepare: the session of a browser that traded the link (the page's cookie).
    const page = await browser.newPage();
    await page.goto(
      stderr
        .match(/for another browser: (\S+)/g)
        ?.at(-1)
        ?.split(' ')
        .at(-1) ?? url,
    );
    const cookies = await page.context().cookies();
    const cookie = cookies.map((c) => `${c.name}=${c.value}`).join('; ');
    const target = new URL(page.url());
    const post = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port: Number(target.port),
            path: '/jobs/bulk-cancel',
            method: 'POST',
            headers: {
              host: target.host,
              cookie,
              'content-type': 'application/x-www-form-urlencoded',
              ...headers,
            },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end('preview=made-up&confirmed=yes');
      });

    // Act
    const unknown = await post({});
    const crossSite = await post({ origin: 'http://evil.example' });

    // Assess
    expect(unknown).toBe(409);
    expect(crossSite).toBe(403);
    await page.close();
  });
});
