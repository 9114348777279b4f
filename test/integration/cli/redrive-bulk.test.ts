// Redrive by filter against the emulator: --error-match and --since pick letters by their error and their
// time of death, the confirmation is preceded by a preview of the dead jobs the filter finds in the
// problems index, each reset job's `redrive` event names the actor, and a stopped redrive says so and
// leaves the letters it did not reach in the DLQ.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { type RedriveReport, redrive } from '../../../shared/ops/dlq-redrive.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { untilIndexed } from '../../support/problems-index.ts';
import { leaseq } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;
let store: DynamoDbJobStore;

beforeAll(async () => {
  env = await coreEnv('redrivebulk');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
});
afterAll(() => env?.close());

/** Sends `count` poison jobs and runs them until each is DEAD with its letter in the DLQ. */
async function deadJobs(label: string, count: number): Promise<string[]> {
  const keys = Array.from({ length: count }, () => uniqueName(label));
  for (const key of keys) {
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
    });
  }
  const worker = makeWorker(env, ledgerJobs, { worker: 'w-poison' });
  const drained = await eventually(
    async () => {
      await worker.poll();
      const q = await queueCounts(env);
      return q.visible + q.inFlight + q.delayed === 0;
    },
    30_000,
    100,
  );
  expect(drained).toBe(true);
  await untilIndexed(env.clients.doc, env.jobsTable, keys, { status: JobStatus.Dead });
  return keys;
}

const target = () => ({
  clients: env.clients,
  names: {
    queueUrl: env.queueUrl,
    dlqUrl: env.dlqUrl,
    jobsTable: env.jobsTable,
    leasesTable: env.leasesTable,
  },
});

describe('leaseq dlq redrive by filter (against the emulator)', () => {
  it('picks letters by error text and time, previews the count, and names the actor in each redrive event', async () => {
    // Prepare
    const keys = await deadJobs('poison', 3);
    const base = ['dlq', 'redrive', '--prefix', prefix, '--type', 'ledger.credit'];

    // Act
    const none = await leaseq([...base, '--error-match', 'no such failure', '--yes', '--json']);
    const refused = await leaseq([...base, '--error-match', 'SIMULATED permanent', '--since', '1h']);
    const dry = await leaseq([
      ...base,
      '--error-match',
      'SIMULATED permanent',
      '--since',
      '1h',
      '--dry-run',
      '--json',
    ]);
    const run = await leaseq([
      ...base,
      '--error-match',
      'SIMULATED permanent',
      '--since',
      '1h',
      '--actor',
      'dave',
      '--rate',
      '50',
      '--yes',
      '--json',
    ]);

    // Assess
    expect(none.code).toBe(0);
    expect(JSON.parse(none.stdout)).toMatchObject({ matched: 0, redriven: 0, notMatched: 3 });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(2); // the target line, then the refusal
    expect(JSON.parse(dry.stdout)).toMatchObject({ matched: 3 });
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('3 dead jobs match in the problems index');
    for (const key of keys) expect(run.stderr).toContain(key);
    expect(JSON.parse(run.stdout)).toMatchObject({ matched: 3, redriven: 3 });
    for (const key of keys) {
      const item = await store.get(key);
      expect(item?.history?.findLast((e) => e.e === 'redrive')).toMatchObject({ by: 'dave' });
    }
  });

  it('a stopped redrive says it was interrupted and leaves the letters it did not reach', async () => {
    // Prepare: queues and tables of its own (the letters above went back to the jobs queue).
    env.close();
    env = await coreEnv('redrivestop');
    store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    const keys = await deadJobs('stopped', 2);
    const stop = new AbortController();

    // Act: stopped once the first letter is done (Ctrl-C in the CLI aborts the same signal).
    const report: RedriveReport = await redrive(target(), {
      by: 'erin',
      signal: stop.signal,
      onProgress: () => stop.abort(),
    });

    // Assess
    expect(report).toMatchObject({ interrupted: true, redriven: 1 });
    expect(report.unseen).toBeUndefined();
    expect(report.items).toHaveLength(1);
    const statuses = await Promise.all(keys.map(async (k) => (await store.get(k))?.status));
    expect(statuses.sort()).toEqual([JobStatus.Dead, JobStatus.RetryWait]);
  });

  it('refuses bad arguments in one line with a non-zero exit', async () => {
    const cases: [string[], string][] = [
      [
        ['dlq', 'redrive', '--error-match', '', '--prefix', prefix],
        'leaseq: --error-match is empty: give the text the error contains',
      ],
      [
        ['dlq', 'redrive', '--since', '-1h', '--prefix', prefix],
        "leaseq: option '--since <duration>' argument '-1h' is invalid. expected a positive duration such as 90s, 10m or 1h",
      ],
      [
        ['dlq', 'redrive', '--actor', 'a\u0007b', '--prefix', prefix],
        'leaseq: --actor must be 1-100 printable characters (3 given)',
      ],
    ];
    for (const [args, line] of cases) {
      const run = await leaseq(args);
      expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 1, stderr: `${line}\n` });
    }
  });
});
