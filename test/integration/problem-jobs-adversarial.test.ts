import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeProblemJobs } from '../../cli/commands/jobs.ts';
import { problemShard } from '../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { listProblemJobs, ProblemJobsFilterError } from '../../shared/ops/problem-jobs.ts';
import type { OpsTarget } from '../../shared/ops/target.ts';
import { type CoreEnv, coreEnv } from '../support/core-fixture.ts';
import { untilIndexed } from '../support/problems-index.ts';

let env: CoreEnv;
let target: OpsTarget;
const now = Date.now();

async function put(dedupKey: string, problemAt: number, extra: Record<string, unknown> = {}) {
  await env.clients.doc.send(
    new PutCommand({
      TableName: env.jobsTable,
      Item: {
        dedupKey,
        status: JobStatus.Dead,
        type: 't',
        token: 1,
        attempts: 1,
        version: 1,
        leaseUntil: problemAt,
        problemAt,
        problemShard: problemShard(dedupKey),
        ...extra,
      },
    }),
  );
}
const cursorOf = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
/** A key of shard `shard`, and one of another shard. */
const keyOf = (shard: string, not = false) => {
  for (let i = 0; ; i++) if ((problemShard(`k-${i}`) === shard) !== not) return `k-${i}`;
};

beforeAll(async () => {
  env = await coreEnv('probjobs');
  target = {
    clients: env.clients,
    names: {
      queueUrl: env.queueUrl,
      dlqUrl: env.dlqUrl,
      jobsTable: env.jobsTable,
      leasesTable: env.leasesTable,
    },
  };
  for (let i = 0; i < 20; i++) await put(`k-${i}`, now - 1000 * i);
  await untilIndexed(
    env.clients.doc,
    env.jobsTable,
    Array.from({ length: 20 }, (_, i) => `k-${i}`),
  );
});
afterAll(() => env?.close());

describe('listProblemJobs against hand-edited and foreign cursors', () => {
  it.each([
    ['an empty dedup key (DynamoDB refuses an empty key value)', { p00: ['', now] }],
    ['a dedup key longer than a key may be', { p00: ['x'.repeat(3000), now] }],
    [
      'a dedup key of another shard (a cursor of another listing, or edited)',
      { p00: [keyOf('p00', true), now] },
    ],
    ['a time DynamoDB cannot hold', { p00: [keyOf('p00'), 1e200] }],
    ['a fractional time', { p00: [keyOf('p00'), 1.5] }],
  ])('refuses a cursor with %s before reading anything', async (_what, positions) => {
    const error = await listProblemJobs(target, { cursor: cursorOf(positions) }, now).catch(
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(ProblemJobsFilterError);
    expect((error as Error).message).toBe('cursor is not one a listing returned');
  });

  it('refuses a since DynamoDB cannot hold with a clear error, not the marshaller’s', async () => {
    const error = await listProblemJobs(target, { since: 1e200 }, now).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ProblemJobsFilterError);
  });
});

describe('listProblemJobs with index entries of the wrong shape', () => {
  it('lists an entry whose projected fields are missing or of the wrong type, and prints it', async () => {
    await put('odd-1', now + 5_000, {
      lastError: 42,
      lastErrorClass: { x: 1 },
      type: 7,
      createdAt: 9,
      owner: [],
    });
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: { dedupKey: 'odd-2', problemAt: now + 4_000, problemShard: problemShard('odd-2') },
      }),
    );

    await untilIndexed(env.clients.doc, env.jobsTable, ['odd-1', 'odd-2']);
    const listed = await listProblemJobs(target, { limit: 3 }, now);

    expect(listed.jobs.map((j) => j.dedupKey)).toEqual(['odd-1', 'odd-2', 'k-0']);
    expect(listed.jobs[0]).not.toHaveProperty('lastError');
    expect(listed.jobs[0]).not.toHaveProperty('type');
    expect(() => describeProblemJobs(listed, now)).not.toThrow();
    expect(describeProblemJobs(listed, now)).toMatch(/^odd-2\s/m);
  });
});
