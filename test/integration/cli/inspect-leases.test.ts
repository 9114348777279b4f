import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbRateStore } from '../../../shared/core/adapters/dynamodb-rate-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { jobLeaseOwner } from '../../../shared/core/leases/named-lease.ts';
import type { InspectReport } from '../../../shared/ops/inspect.ts';
import type { LeasesReport } from '../../../shared/ops/leases.ts';
import type { StatusReport } from '../../../shared/ops/status.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  leaseStore,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { leaseq, leaseqJson } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('cliinsp');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

describe('Command: leaseq inspect', () => {
  it('shows a completed job: status, last owner, attempts, token, result, timestamps', async () => {
    // Prepare: one credit, processed by an in-process worker running the example jobs.
    const account = uniqueName('acct');
    const dedupKey = uniqueName('credit');
    await sendJob(env, { dedupKey, type: 'ledger.credit', payload: { account, amount: 7 } });
    const worker = makeWorker(env, ledgerJobs, {
      worker: 'w-inspect',
    });
    expect(
      await eventually(async () => {
        await worker.poll();
        const q = await queueCounts(env);
        return q.visible + q.inFlight === 0;
      }),
    ).toBe(true);
    expect((await getBalance(env, account))?.balance).toBe(7);

    // Act
    const report = await leaseqJson<InspectReport>(['inspect', dedupKey, '--prefix', prefix]);

    // Assess: the JSON is the stored item, read back consistently.
    expect(report.job).toMatchObject({
      dedupKey,
      status: JobStatus.Completed,
      owner: 'w-inspect',
      attempts: 1,
      type: 'ledger.credit',
      result: { credited: 7 },
    });
    expect(report.job.token).toEqual(expect.any(Number));
    expect(report.job.completedAt).toEqual(expect.any(Number));
    expect(report.lease).toBeUndefined();
    // The human view names the fields with humanised times, and no payload (the account) appears.
    const human = await leaseq(['inspect', dedupKey, '--prefix', prefix]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/status:\s+COMPLETED/);
    expect(human.stdout).toMatch(/owner:\s+w-inspect/);
    expect(human.stdout).toMatch(/completed:\s+\d{4}-\d\d-\d\dT.*Z \(\d.*ago\)/);
    expect(human.stdout).not.toContain(account);

    // status counts it for its worker
    const status = await leaseqJson<StatusReport>(['status', '--prefix', prefix]);
    expect(status.jobs.completedByWorker).toContainEqual({ worker: 'w-inspect', completed: 1 });
  });

  it('exits 1 with one line for an unknown dedup key', async () => {
    const run = await leaseq(['inspect', 'no-such-key', '--prefix', prefix, '--json']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    // The target line, then the error in one line.
    const [targetLine, error, ...rest] = run.stderr.split('\n');
    expect(targetLine).toMatch(/^leaseq: target: /);
    expect(error).toBe(
      `leaseq: no job item for dedup key "no-such-key" in ${env.jobsTable} (never claimed, or removed by TTL)`,
    );
    expect(rest).toEqual(['']);
  });
});

describe('Command: leaseq leases / status (live and stuck)', () => {
  it('tells live from stuck job leases and held from abandoned named leases', async () => {
    // Prepare: a live claim, a claim whose lease already ended (its worker "died"), a held named lease
    // and one whose holder let it end without releasing it.
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    const now = Date.now();
    const live = uniqueName('live');
    const dead = uniqueName('gone');
    const claim = (dedupKey: string, owner: string, leaseMs: number, at: number) =>
      store.claim({
        dedupKey,
        owner,
        messageId: uniqueName('m'),
        type: 'ledger.credit',
        createdAt: new Date(at).toISOString(),
        leaseMs,
        now: at,
      });
    expect((await claim(live, 'w-live', 120_000, now)).claimed).toBe(true);
    expect((await claim(dead, 'w-gone', 1000, now - 60_000)).claimed).toBe(true);
    const leases = leaseStore(env);
    const heldKey = uniqueName('account');
    const abandonedKey = uniqueName('account');
    // A job's named lease names the worker and the job (ctx.withLease).
    expect((await leases.tryAcquire(heldKey, jobLeaseOwner('w-live', live), 120_000, now)).acquired).toBe(
      true,
    );
    expect((await leases.tryAcquire(abandonedKey, 'w-gone', 1000, now - 60_000)).acquired).toBe(true);
    // A rate limit's permit item shares the leases table: it is no named lease, so none of these lists it.
    const rates = new DynamoDbRateStore({ client: env.clients.doc, tableName: env.leasesTable });
    expect(await rates.take(`rate:ledger.credit:k:${uniqueName('tenant')}`, 5, 60, now)).toEqual({
      granted: true,
    });

    // Act
    const all = await leaseqJson<LeasesReport>(['leases', '--prefix', prefix]);
    const stuck = await leaseqJson<LeasesReport>(['leases', '--stuck', '--prefix', prefix]);
    const status = await leaseqJson<StatusReport>(['status', '--prefix', prefix]);

    // Assess: all leases, expired first
    expect(all.jobLeases.map((l) => l.dedupKey)).toEqual([dead, live]);
    expect(all.jobLeases[0]).toMatchObject({ owner: 'w-gone', stuck: 'lease-expired' });
    expect(all.jobLeases[0]?.remainingMs).toBeLessThan(-50_000);
    expect(all.jobLeases[1]).toMatchObject({ owner: 'w-live', attempts: 1 });
    expect(all.jobLeases[1]?.stuck).toBeUndefined();
    expect(all.jobLeases[1]?.remainingMs).toBeGreaterThan(60_000);
    expect(all.namedLeases.map((l) => [l.leaseKey, l.state])).toEqual([
      [abandonedKey, 'abandoned'],
      [heldKey, 'held'],
    ]);
    // --stuck keeps only the expired job lease and the abandoned named lease
    expect(stuck.jobLeases.map((l) => l.dedupKey)).toEqual([dead]);
    expect(stuck.namedLeases.map((l) => l.leaseKey)).toEqual([abandonedKey]);
    // status counts the same
    expect(status.jobs.live).toBe(1);
    expect(status.jobs.stuck).toBe(1);
    expect(status.jobs.stuckByReason).toEqual({ 'lease-expired': 1, 'no-progress': 0, 'retry-overdue': 0 });
    expect(status.namedLeases).toEqual({ held: 1, abandoned: 1, free: 0 });
    expect(status.jobs.oldestUnfinishedAgeMs).toBeGreaterThanOrEqual(60_000);

    // A short --stuck-after makes the live lease with no progress stuck too.
    const strict = await leaseqJson<LeasesReport>([
      'leases',
      '--stuck',
      '--stuck-after',
      '1ms',
      '--prefix',
      prefix,
    ]);
    expect(strict.jobLeases.map((l) => [l.dedupKey, l.stuck])).toEqual([
      [dead, 'lease-expired'],
      [live, 'no-progress'],
    ]);

    // inspect of the live job shows its lease and the named lease it holds
    const inspect = await leaseqJson<InspectReport>(['inspect', live, '--prefix', prefix]);
    expect(inspect.lease?.remainingMs).toBeGreaterThan(60_000);
    expect(inspect.ownerLeases.map((l) => l.leaseKey)).toEqual([heldKey]);
    const listed = await leaseq(['leases', '--prefix', prefix]);
    expect(listed.stdout).not.toMatch(/rate:|undefined/);
    const human = await leaseq(['leases', '--stuck', '--prefix', prefix]);
    expect(human.stdout).toMatch(
      new RegExp(`${dead}\\s+ledger\\.credit\\s+w-gone\\s+\\d+\\s+1\\s+expired .* ago\\s+lease-expired`),
    );
  });
});
