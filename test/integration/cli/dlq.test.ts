import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { PurgeReport } from '../../../shared/ops/dlq.ts';
import type { DeadLetter, DeadLetterSummary } from '../../../shared/ops/dlq-letters.ts';
import type { RedriveReport } from '../../../shared/ops/dlq-redrive.ts';
import type { InspectReport } from '../../../shared/ops/inspect.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  queueCounts,
  sendJob,
  sendRaw,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { leaseq, leaseqJson } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;
let store: DynamoDbJobStore;

beforeAll(async () => {
  env = await coreEnv('clidlq');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
});
afterAll(() => env?.close());

/** Polls with `worker` until the jobs queue is empty. */
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

describe('Command: leaseq dlq', () => {
  it('lists, shows, dry-runs, redrives (processed once), refuses an unconfirmed purge, purges', async () => {
    // Prepare: a poison job (permanent error) and a flaky one that fails once, under a worker that allows
    // one attempt: both end in the DLQ with their reasons.
    const account = uniqueName('acct');
    const poison = uniqueName('poison');
    const flaky = uniqueName('flaky');
    await sendJob(env, {
      dedupKey: poison,
      type: 'ledger.credit',
      payload: { account, amount: 100, simulate: { permanent: true } },
    });
    await sendJob(env, {
      dedupKey: flaky,
      type: 'ledger.credit',
      payload: { account, amount: 5, simulate: { failTimes: 1 } },
    });
    const registry = ledgerJobs;
    await drain(makeWorker(env, registry, { worker: 'w-strict', maxAttempts: 1 }));
    expect((await queueCounts(env, env.dlqUrl)).visible).toBe(2);

    // dlq list: both, with reasons, no bodies
    const listed = await leaseqJson<DeadLetterSummary[]>(['dlq', 'list', '--letters', '--prefix', prefix]);
    const byKey = new Map(listed.map((l) => [l.dedupKey, l]));
    expect(listed).toHaveLength(2);
    expect(byKey.get(poison)).toMatchObject({
      type: 'ledger.credit',
      reason: 'permanent-error',
      errorClass: 'PermanentJobError',
      attempts: 1,
      worker: 'w-strict',
    });
    expect(byKey.get(flaky)).toMatchObject({ reason: 'max-attempts', errorClass: 'TransientJobError' });
    expect(JSON.stringify(listed)).not.toContain(account);
    // Listing released the messages at once: they are visible again, not held for the browse visibility.
    expect(await queueCounts(env, env.dlqUrl)).toMatchObject({ visible: 2, inFlight: 0 });
    const table = await leaseq(['dlq', 'list', '--letters', '--prefix', prefix]);
    expect(table.stdout).toMatch(
      new RegExp(
        `${poison}\\s+ledger\\.credit\\s+permanent-error\\s+1\\s+w-strict\\s+.*\\s+PermanentJobError: simulated permanent failure`,
      ),
    );

    // dlq show: full body and attributes, by message id
    const poisonId = byKey.get(poison)?.messageId ?? '';
    const shown = await leaseqJson<DeadLetter>(['dlq', 'show', poisonId, '--prefix', prefix]);
    expect(JSON.parse(shown.body)).toMatchObject({ dedupKey: poison, payload: { account, amount: 100 } });
    expect(shown.attributes).toMatchObject({ reason: 'permanent-error', dedupKey: poison });
    const missing = await leaseq(['dlq', 'show', 'no-such-id', '--prefix', prefix]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(
      /^leaseq: target: .*\nleaseq: no message no-such-id in the DLQ \(see `leaseq dlq list`\)\n$/,
    );

    // redrive --dry-run: lists both, changes nothing
    const dry = await leaseqJson<RedriveReport>(['dlq', 'redrive', '--dry-run', '--prefix', prefix]);
    expect(dry).toMatchObject({ dryRun: true, matched: 2, redriven: 2, skipped: 0, failed: 0 });
    // A standard DLQ reports its depth next to what the browse saw too (issue 23).
    expect(dry).toMatchObject({ seen: 2, dlqDepth: 2 });
    expect(dry).not.toHaveProperty('unseen');
    // A redrive that stops at its --limit saw fewer on purpose: no shortfall note (review of issue 23).
    const limited = await leaseqJson<RedriveReport>([
      'dlq',
      'redrive',
      '--dry-run',
      '--limit',
      '1',
      '--prefix',
      prefix,
    ]);
    expect(limited).toMatchObject({ matched: 1, redriven: 1 });
    expect(limited).not.toHaveProperty('unseen');
    expect(dry.items.every((i) => i.outcome === 'would-redrive' && i.reset)).toBe(true);
    expect(await queueCounts(env, env.dlqUrl)).toMatchObject({ visible: 2, inFlight: 0 });
    expect(await queueCounts(env)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect((await store.get(flaky))?.status).toBe(JobStatus.Dead);
    expect((await store.get(poison))?.status).toBe(JobStatus.Dead);

    // redrive --reason max-attempts: only the flaky job goes back, its item reset to run again
    const redriven = await leaseqJson<RedriveReport>([
      'dlq',
      'redrive',
      '--reason',
      'max-attempts',
      '--rate',
      '20/s',
      '--prefix',
      prefix,
      '--yes',
    ]);
    expect(redriven).toMatchObject({ dryRun: false, matched: 1, redriven: 1, notMatched: 1, failed: 0 });
    expect(redriven.items[0]).toMatchObject({ dedupKey: flaky, outcome: 'redriven', reset: true });
    expect(await store.get(flaky)).toMatchObject({ status: JobStatus.RetryWait, attempts: 0 });
    expect((await store.get(poison))?.status).toBe(JobStatus.Dead);
    expect((await queueCounts(env)).visible).toBe(1);
    expect((await queueCounts(env, env.dlqUrl)).visible).toBe(1);

    // A worker that allows retries processes it: effect applied exactly once.
    await drain(makeWorker(env, registry, { worker: 'w-retry', maxAttempts: 3 }));
    expect((await getBalance(env, account))?.balance).toBe(5);
    const inspected = await leaseqJson<InspectReport>(['inspect', flaky, '--prefix', prefix]);
    expect(inspected.job).toMatchObject({ status: JobStatus.Completed, owner: 'w-retry', attempts: 2 });

    // A second redrive of the same filter finds nothing; the poison letter stays.
    const again = await leaseqJson<RedriveReport>([
      'dlq',
      'redrive',
      '--reason',
      'max-*',
      '--prefix',
      prefix,
      '--yes',
    ]);
    expect(again).toMatchObject({ matched: 0, redriven: 0, notMatched: 1 });

    // purge without --yes and without a terminal: refused, nothing deleted
    const refused = await leaseq(['dlq', 'purge', '--prefix', prefix]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      /^leaseq: target: .*\nleaseq: refusing to purge \S+ without confirmation: not a terminal, pass --yes\n$/,
    );
    expect((await queueCounts(env, env.dlqUrl)).visible).toBe(1);

    // purge --yes empties it
    const purged = await leaseqJson<PurgeReport>(['dlq', 'purge', '--yes', '--prefix', prefix]);
    expect(purged).toEqual({ deleted: 1, remaining: 0 });
    expect(await queueCounts(env, env.dlqUrl)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(await leaseqJson<DeadLetterSummary[]>(['dlq', 'list', '--letters', '--prefix', prefix])).toEqual(
      [],
    );
  });

  it('skips a dead letter whose job completed since, and a redriven poison job dead-letters again', async () => {
    // Prepare: a poison job in the DLQ
    const poison = uniqueName('poison');
    await sendJob(env, {
      dedupKey: poison,
      type: 'ledger.credit',
      payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
    });
    const registry = ledgerJobs;
    const worker = makeWorker(env, registry, { worker: 'w-p' });
    await drain(worker);

    // Act: redrive it; the worker dead-letters it again
    const first = await leaseqJson<RedriveReport>([
      'dlq',
      'redrive',
      '--dedup-key',
      poison,
      '--prefix',
      prefix,
      '--yes',
    ]);
    expect(first).toMatchObject({ redriven: 1 });
    await drain(worker);
    const listed = await leaseqJson<DeadLetterSummary[]>(['dlq', 'list', '--letters', '--prefix', prefix]);
    expect(listed.map((l) => [l.dedupKey, l.reason])).toEqual([[poison, 'permanent-error']]);
    expect(listed[0]?.originalMessageId).toBe(first.items[0]?.newMessageId);

    // A dead letter whose job item says COMPLETED is stale: redrive leaves it alone.
    await env.clients.doc.send(
      new UpdateCommand({
        TableName: env.jobsTable,
        Key: { dedupKey: poison },
        UpdateExpression: 'SET #s = :c',
        ExpressionAttributeNames: { '#s': 'status' },
        ExpressionAttributeValues: { ':c': JobStatus.Completed },
      }),
    );
    const stale = await leaseqJson<RedriveReport>(['dlq', 'redrive', '--prefix', prefix, '--yes']);
    expect(stale).toMatchObject({ matched: 1, redriven: 0, skipped: 1 });
    expect(stale.items[0]?.detail).toMatch(/already completed/);
    expect((await queueCounts(env)).visible).toBe(0);
    expect((await queueCounts(env, env.dlqUrl)).visible).toBe(1);
  });

  it('skips letters whose body can only be refused again unless asked, and refuses a reason no letter has', async () => {
    // Prepare: an empty DLQ, then a body that is not JSON and a poison job dead-lettered.
    expect((await leaseq(['dlq', 'purge', '--yes', '--prefix', prefix])).code).toBe(0);
    await sendRaw(env, '{not json');
    const poison = uniqueName('poison');
    await sendJob(env, {
      dedupKey: poison,
      type: 'ledger.credit',
      payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
    });
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-hopeless' }));

    // Act + Assess: the dry run and the redrive leave the non-JSON letter alone and say why.
    const dry = await leaseqJson<RedriveReport>(['dlq', 'redrive', '--dry-run', '--prefix', prefix]);
    expect(dry).toMatchObject({ matched: 2, redriven: 1, skipped: 1 });
    const hopeless = dry.items.find((i) => i.reason === 'invalid-not-json');
    expect(hopeless).toMatchObject({ outcome: 'skipped' });
    expect(hopeless?.detail).toMatch(
      /the same body would only be refused again \(--include-invalid sends it\)/,
    );
    const forced = await leaseqJson<RedriveReport>([
      'dlq',
      'redrive',
      '--dry-run',
      '--include-invalid',
      '--prefix',
      prefix,
    ]);
    expect(forced).toMatchObject({ matched: 2, redriven: 2, skipped: 0 });

    // A reason no dead letter can have is an error naming the known ones, not a silent empty match.
    const bogus = await leaseq(['dlq', 'redrive', '--reason', 'bogus', '--prefix', prefix]);
    expect(bogus.code).toBe(1);
    expect(bogus.stderr).toMatch(
      /^leaseq: no dead letter has reason "bogus"; expected one of permanent-error, max-attempts, max-conflicts, invalid-not-json.*\n$/,
    );
    expect(
      (await leaseq(['dlq', 'redrive', '--reason', 'invalid-*', '--dry-run', '--prefix', prefix])).code,
    ).toBe(0);
  });
});
