// Cancel by filter against the emulator: ten jobs waiting for a retry are found in the problems index, the
// preview's count is theirs, the action cancels each with the actor in its history, and a job that
// completed between the preview and the action is refused and reported. From the CLI as a script runs it.
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { bulkCancel, previewBulkCancel } from '../../../shared/ops/bulk-cancel.ts';
import { toSqsRecord } from '../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  getBalance,
  makeWorker,
  receiveAll,
  sendJob,
  sleep,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { untilIndexed } from '../../support/problems-index.ts';
import { testRegistry } from '../../support/test-jobs.ts';
import { waitingJobs } from '../../support/waiting-jobs.ts';
import { leaseq } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('clibulk');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

const target = () => ({
  clients: env.clients,
  names: {
    queueUrl: env.queueUrl,
    dlqUrl: env.dlqUrl,
    jobsTable: env.jobsTable,
    leasesTable: env.leasesTable,
  },
});

/** Runs `key`'s retry to completion: its message comes back after the 1 s backoff. */
async function completeRetry(key: string): Promise<void> {
  const worker = makeWorker(env, testRegistry(env).registry);
  for (let i = 0; i < 20; i++) {
    const mine = (await receiveAll(env, env.queueUrl, 2, 1)).find((m) => m.Body?.includes(`"${key}"`));
    if (mine) {
      await worker.processor.process(toSqsRecord(mine, env.queueArn, env.region));
      if ((await worker.store.get(key))?.status === JobStatus.Completed) return;
    }
    await sleep(300);
  }
  throw new Error(`${key} did not complete`);
}

describe('cancel by filter (against the emulator)', () => {
  it('previews ten waiting jobs, cancels them naming the actor, and refuses one that completed in between', async () => {
    // Prepare
    const keys = await waitingJobs(env, 'bulk', 10);
    const since = Date.now() - 10 * 60_000;

    // Act: the preview, then a job completes, then the action on what the preview found.
    const preview = await previewBulkCancel(target(), { type: 'test.credit', since });
    const late = keys[3] ?? '';
    await completeRetry(late);
    const report = await bulkCancel(target(), preview, {
      by: 'alice@ops',
      reason: 'bad deploy',
      ratePerSecond: 50,
    });

    // Assess
    expect(preview.jobs.map((j) => j.dedupKey).sort()).toEqual([...keys].sort());
    expect(preview.more).toBe(false);
    expect(report).toMatchObject({ cancelled: 9, refused: 1, failed: 0, notReached: 0, interrupted: false });
    expect(report.items.find((i) => i.dedupKey === late)).toMatchObject({
      outcome: 'refused',
      status: 'COMPLETED',
      why: 'finished since the preview (COMPLETED)',
    });
    const store = makeWorker(env, testRegistry(env).registry).store;
    for (const key of keys.filter((k) => k !== late)) {
      const item = await store.get(key);
      expect(item?.status).toBe(JobStatus.Cancelled);
      expect(item?.history?.at(-1)).toMatchObject({ e: 'cancelled', by: 'alice@ops', reason: 'bad deploy' });
    }
    expect((await store.get(late))?.status).toBe(JobStatus.Completed);
  });

  it('a job running its retry when the cancel lands stops and commits nothing (the cancel semantics)', async () => {
    // Prepare: a job whose first attempt failed (so it is in the index), its retry running for 4 s.
    const key = uniqueName('running');
    const account = uniqueName('acct');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account, amount: 5, failTimes: 1, sleepMs: 4000 },
    });
    const worker = makeWorker(env, testRegistry(env).registry);
    const runOnce = async () => {
      for (let i = 0; i < 30; i++) {
        const mine = (await receiveAll(env, env.queueUrl, 30, 1)).find((m) => m.Body?.includes(`"${key}"`));
        if (mine) return worker.processor.process(toSqsRecord(mine, env.queueArn, env.region));
        await sleep(200);
      }
      throw new Error(`no message for ${key}`);
    };
    await runOnce();
    await untilIndexed(env.clients.doc, env.jobsTable, [key]);
    const retry = runOnce();
    for (let i = 0; i < 50 && (await worker.store.get(key))?.status !== JobStatus.InProgress; i++)
      await sleep(100);

    // Act
    const preview = await previewBulkCancel(target(), {
      errorContains: 'flaky failure 1',
      since: Date.now() - 60_000,
    });
    const mine = { jobs: preview.jobs.filter((j) => j.dedupKey === key) };
    const report = await bulkCancel(target(), mine, { by: 'gina', ratePerSecond: 50 });
    await retry;

    // Assess
    expect(report.items).toEqual([
      {
        dedupKey: key,
        type: 'test.credit',
        outcome: 'cancelled',
        status: 'IN_PROGRESS',
        why: 'it was running: it stops at its next heartbeat',
      },
    ]);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Cancelled);
    expect(await getBalance(env, account)).toBeUndefined();
  });

  it('refuses a job whose key holds another job since the preview (another createdAt), writing nothing', async () => {
    // Prepare: the preview sees the job; then its key holds a newer job (as a fresh send after a dead
    // key's deadKeyTtl makes one), told by the envelope's createdAt the item keeps.
    const [key = ''] = await waitingJobs(env, 'newer', 1);
    const preview = await previewBulkCancel(target(), {
      errorContains: 'flaky failure',
      since: Date.now() - 60_000,
    });
    const mine = { jobs: preview.jobs.filter((j) => j.dedupKey === key) };
    await env.clients.doc.send(
      new UpdateCommand({
        TableName: env.jobsTable,
        Key: { dedupKey: key },
        UpdateExpression: 'SET createdAt = :c',
        ExpressionAttributeValues: { ':c': new Date(Date.now() + 1000).toISOString() },
      }),
    );

    // Act
    const report = await bulkCancel(target(), mine, { by: 'ivan', ratePerSecond: 50 });

    // Assess
    expect(mine.jobs).toHaveLength(1);
    expect(report).toMatchObject({ cancelled: 0, refused: 1 });
    expect(report.items[0]?.why).toMatch(/^another job holds the key now/);
    expect((await makeWorker(env, testRegistry(env).registry).store.get(key))?.status).toBe(
      JobStatus.RetryWait,
    );
  });

  it('an interrupted action reports what it did and leaves the rest as they were', async () => {
    // Prepare
    const keys = await waitingJobs(env, 'stop', 4);
    const preview = await previewBulkCancel(target(), {
      errorContains: 'flaky failure',
      since: Date.now() - 60_000,
    });
    const mine = { jobs: preview.jobs.filter((j) => keys.includes(j.dedupKey)) };
    const stop = new AbortController();

    // Act: stopped after the second job (Ctrl-C in the CLI aborts the same signal).
    const report = await bulkCancel(target(), mine, {
      by: 'bob',
      ratePerSecond: 50,
      signal: stop.signal,
      onProgress: (_item, done) => {
        if (done === 2) stop.abort();
      },
    });

    // Assess
    expect(report).toMatchObject({ cancelled: 2, notReached: 2, interrupted: true });
    const store = makeWorker(env, testRegistry(env).registry).store;
    const statuses = await Promise.all(mine.jobs.map(async (j) => (await store.get(j.dedupKey))?.status));
    expect(statuses).toEqual([
      JobStatus.Cancelled,
      JobStatus.Cancelled,
      JobStatus.RetryWait,
      JobStatus.RetryWait,
    ]);
  });

  it('from the CLI: a dry run counts them, --yes --actor cancels them, leaseq inspect names the actor', async () => {
    // Prepare: a type of their own is not possible (one registry), so the window and the error pick them.
    const keys = await waitingJobs(env, 'cli', 10);
    const args = ['cancel', '--type', 'test.credit', '--since', '1h', '--prefix', prefix];

    // Act
    const dry = await leaseq([...args, '--dry-run', '--json']);
    const refused = await leaseq(args);
    const run = await leaseq([
      ...args,
      '--yes',
      '--actor',
      'carol',
      '--reason',
      'incident 42',
      '--rate',
      '20',
      '--json',
    ]);

    // Assess
    expect(dry.code).toBe(0);
    const dryJson = JSON.parse(dry.stdout) as { matched: number; jobs: { dedupKey: string }[] };
    const mine = dryJson.jobs.map((j) => j.dedupKey).filter((k) => keys.includes(k));
    expect(mine.sort()).toEqual([...keys].sort());
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n').slice(1)).toEqual([
      `leaseq: refusing to cancel ${dryJson.matched} jobs without confirmation: not a terminal, pass --yes`,
    ]);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as {
      by: string;
      cancelled: number;
      items: { dedupKey: string; outcome: string }[];
    };
    expect(report.by).toBe('carol');
    expect(report.items.filter((i) => keys.includes(i.dedupKey)).map((i) => i.outcome)).toEqual(
      Array(10).fill('cancelled'),
    );
    const inspected = await leaseq(['inspect', keys[0] ?? '', '--prefix', prefix]);
    expect(inspected.stdout).toMatch(/cancelled\s+-\s+cancelled by carol\s+incident 42/);
  });

  it('refuses bad arguments in one line with a non-zero exit, before touching anything', async () => {
    const cases: [string[], string][] = [
      [
        ['cancel', '--prefix', prefix],
        'leaseq: give a dedup key, or a filter: --type, --error-match or --since',
      ],
      [
        ['cancel', 'k1', '--type', 't', '--prefix', prefix],
        'leaseq: a dedup key cancels one job; --type is for a cancel by filter: drop the key or the flag',
      ],
      [
        ['cancel', '--rate', '5', '--prefix', prefix],
        'leaseq: give a dedup key, or a filter: --type, --error-match or --since (--rate alone selects nothing)',
      ],
      [
        ['cancel', '--type', 't', '--status', 'DEAD', '--prefix', prefix],
        'leaseq: a cancel changes only unfinished jobs: status DEAD is not one of IN_PROGRESS, RETRY_WAIT, stuck',
      ],
      [
        ['cancel', '--type', 't', '--rate', '0', '--prefix', prefix],
        "leaseq: option '--rate <rate>' argument '0' is invalid. expected a positive rate such as 50, 50/s, 600/min or 1000/h",
      ],
      [
        ['cancel', '--since', 'yesterday', '--prefix', prefix],
        "leaseq: option '--since <duration>' argument 'yesterday' is invalid. expected a positive duration such as 90s, 10m or 1h",
      ],
      [
        ['cancel', '--error-match', ' ', '--prefix', prefix],
        'leaseq: --error-match is empty: give the text the last error contains',
      ],
      [
        ['cancel', 'k1', '--actor', '', '--yes', '--prefix', prefix],
        'leaseq: --actor must be 1-100 printable characters (0 given)',
      ],
      [
        ['cancel', '--type', 't', '--limit', '0', '--prefix', prefix],
        "leaseq: option '--limit <n>' argument '0' is invalid. expected an integer from 1 to 10000",
      ],
    ];
    for (const [args, line] of cases) {
      // Act
      const run = await leaseq(args);

      // Assess
      expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 1, stderr: `${line}\n` });
    }
  });
});
