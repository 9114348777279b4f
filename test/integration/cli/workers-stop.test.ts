import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import type { JobItem } from '../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { type CoreEnv, coreEnv, eventually, leaseStore, sendJob } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import {
  killMarked,
  markedPids,
  recordPids,
  startWorkers,
  survivors,
  type WorkersRun,
} from './workers-process.ts';

let env: CoreEnv;
let prefix: string;
let store: DynamoDbJobStore;
let run: WorkersRun | undefined;

// A job that holds a named lease while it works, as a job guarding an account does. Under .leaseq/ so it
// resolves zod and leaseq as project code does.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const holdDir = join(ROOT, '.leaseq', 'tmp', uniqueName('wstop'));
const holdModule = join(holdDir, 'jobs.ts');

beforeAll(async () => {
  env = await coreEnv('wstop');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
  mkdirSync(holdDir, { recursive: true });
  writeFileSync(
    holdModule,
    `import { z } from 'zod';
import { defineJob, defineJobs } from ${JSON.stringify(join(ROOT, 'shared', 'index.ts'))};

export default defineJobs([
  defineJob({
    type: 'stop.hold',
    payload: z.object({ resource: z.string(), sleepMs: z.number().int() }),
    async run(ctx, p) {
      await ctx.withLease(p.resource, () => new Promise((resolve) => setTimeout(resolve, p.sleepMs)));
      return { result: { held: p.resource } };
    },
  }),
]);
`,
  );
});
afterEach(() => {
  if (run) {
    run.child.kill('SIGKILL');
    killMarked(run.mark);
  }
  run = undefined;
});
afterAll(() => {
  rmSync(holdDir, { recursive: true, force: true });
  env?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sends a ledger job that works `sleepMs` (a test hook); returns its dedup key. */
async function sendSlowJob(sleepMs: number): Promise<string> {
  const key = uniqueName('stop');
  await sendJob(env, {
    dedupKey: key,
    type: 'ledger.credit',
    payload: { account: uniqueName('a'), amount: 1, simulate: { sleepMs } },
  });
  return key;
}

/** Waits for the workers to poll and the job to be claimed; the item then. */
async function claimed(r: WorkersRun, key: string): Promise<JobItem | undefined> {
  await r.waitFor('workers running', 120_000);
  let item: JobItem | undefined;
  await eventually(
    async () => {
      item = await store.get(key);
      return item?.status === JobStatus.InProgress;
    },
    30_000,
    100,
  );
  return item;
}

describe('Command: leaseq workers, stopped during start', () => {
  // Points of the start: at once; as soon as the pool has forked its workers; while they load their
  // modules; once they all poll.
  it.each([
    ['at once', async () => {}],
    [
      'when the first worker process exists',
      async (r: WorkersRun) => {
        for (const started = Date.now(); Date.now() - started < 20_000; await sleep(20)) {
          if (markedPids(r.mark).length > 1) return;
        }
      },
    ],
    [
      'while the workers load',
      async (r: WorkersRun) => {
        for (const started = Date.now(); Date.now() - started < 20_000; await sleep(20)) {
          if (markedPids(r.mark).length > 1) break;
        }
        await sleep(700);
      },
    ],
    ['once every worker polls', (r: WorkersRun) => r.waitFor('workers running', 120_000)],
  ] as const)(
    'SIGTERM %s leaves no process it started running',
    async (_when, until) => {
      // Prepare
      run = startWorkers(['--prefix', prefix, '--count', '3']);
      const pids = recordPids(run.mark);

      // Act
      await until(run);
      run.child.kill('SIGTERM');
      await run.exited;
      const seen = pids.stop();

      // Assess: the command and every worker it forked have stopped when it returns.
      expect(await survivors(run.mark, seen)).toEqual([]);
    },
    180_000,
  );
});

describe('Command: leaseq workers, stopped while a job runs', () => {
  it('lets a job longer than 15 s finish within --timeout: it completes, frees its named lease, nothing is killed', async () => {
    // Prepare: one worker, a job holding a named lease for 18 s under a 40 s invocation timeout.
    const leases = leaseStore(env);
    const resource = uniqueName('stop-res');
    const key = uniqueName('stop');
    await sendJob(env, { dedupKey: key, type: 'stop.hold', payload: { resource, sleepMs: 18_000 } });
    run = startWorkers([
      '--prefix',
      prefix,
      '--job-module',
      holdModule,
      '--count',
      '1',
      '--timeout',
      '40',
      '--json',
    ]);
    const pids = recordPids(run.mark);
    expect((await claimed(run, key))?.attempts).toBe(1);
    expect(await eventually(async () => (await leases.get(resource))?.owner !== undefined, 10_000, 100)).toBe(
      true,
    );

    // Act: stop the command while the job runs and holds the lease.
    run.child.kill('SIGTERM');
    const exit = await run.exited;

    // Assess: the job completed in its first attempt (no attempt lost) and released its named lease; the
    // worker exited on its own (code 0, not SIGKILL); no process is left.
    const item = await store.get(key);
    expect(item?.status).toBe(JobStatus.Completed);
    expect(item?.attempts).toBe(1);
    expect((await leases.get(resource))?.owner).toBeUndefined();
    expect(exit.code).toBe(0);
    expect(JSON.parse(run.stdout())).toEqual([expect.objectContaining({ succeeded: 1, exit: '0' })]);
    expect(await survivors(run.mark, pids.stop())).toEqual([]);
  }, 240_000);

  it('kills at once on a second SIGTERM: the command and its workers are gone within seconds', async () => {
    // Prepare
    const key = await sendSlowJob(30_000);
    run = startWorkers(['--prefix', prefix, '--count', '1', '--timeout', '60', '--test-hooks']);
    const pids = recordPids(run.mark);
    expect((await claimed(run, key))?.attempts).toBe(1);

    // Act
    run.child.kill('SIGTERM');
    await run.waitFor('draining');
    const secondAt = Date.now();
    run.child.kill('SIGTERM');
    await run.exited;

    // Assess
    expect(Date.now() - secondAt).toBeLessThan(5000);
    expect(await survivors(run.mark, pids.stop())).toEqual([]);
  }, 240_000);
});
