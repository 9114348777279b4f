import { BatchWriteCommand, PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { problemShard } from '../../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { ProblemJobsResult } from '../../../shared/ops/problem-jobs.ts';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';
import { untilIndexed } from '../../support/problems-index.ts';
import { leaseq, leaseqJson } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;
const now = Date.now();
const MIN = 60_000;

// Problem jobs as the history branch's writers leave them (problem keys set), written directly.
const problems = [
  {
    dedupKey: 'dead-1',
    status: JobStatus.Dead,
    type: 'mail.send',
    lastErrorClass: 'HttpError',
    lastError: 'downstream answered 503',
    problemAt: now - 30 * MIN,
    leaseUntil: now - 30 * MIN,
    deadAt: now - 30 * MIN,
  },
  {
    dedupKey: 'retry-1',
    status: JobStatus.RetryWait,
    type: 'report.build',
    lastErrorClass: 'TimeoutError',
    lastError: 'query took too long',
    problemAt: now - 2 * 60 * MIN,
    leaseUntil: now - 2 * 60 * MIN + 30_000,
  },
  {
    dedupKey: 'retried-ok',
    status: JobStatus.Completed,
    type: 'mail.send',
    lastErrorClass: 'HttpError',
    lastError: 'downstream answered 502',
    problemAt: now - 10_000,
    leaseUntil: now - 5_000,
    completedAt: now - 5_000,
  },
  {
    dedupKey: 'stuck-1',
    status: JobStatus.InProgress,
    type: 'report.build',
    owner: 'w-gone',
    problemAt: now - MIN,
    leaseUntil: now - 30_000,
    claimedAt: now - MIN,
  },
];

beforeAll(async () => {
  env = await coreEnv('clijobs');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  for (const p of problems) {
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: {
          ...p,
          token: 2,
          attempts: 2,
          version: 3,
          messageId: `m-${p.dedupKey}`,
          createdAt: new Date(now - 3 * 60 * MIN).toISOString(),
          updatedAt: p.problemAt,
          problemShard: problemShard(p.dedupKey),
        },
      }),
    );
  }
  // 100 jobs that completed first time, each with a 6 KB result: no problem keys, so not in the index.
  const plain = Array.from({ length: 100 }, (_, i) => ({
    dedupKey: `plain-${i}`,
    status: JobStatus.Completed,
    type: 'mail.send',
    token: 1,
    attempts: 1,
    version: 2,
    leaseUntil: now,
    messageId: `m-plain-${i}`,
    result: 'r'.repeat(6 * 1024),
  }));
  for (let i = 0; i < plain.length; i += 25) {
    await env.clients.doc.send(
      new BatchWriteCommand({
        RequestItems: { [env.jobsTable]: plain.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) },
      }),
    );
  } // The index is eventually consistent: the listings below read it.
  await untilIndexed(
    env.clients.doc,
    env.jobsTable,
    problems.map((p) => p.dedupKey),
  );
});
afterAll(() => env?.close());

const keys = (r: ProblemJobsResult) => r.jobs.map((j) => j.dedupKey);

describe('Command: leaseq jobs', () => {
  it('lists the problem jobs newest problem first, and no job that completed first time', async () => {
    const all = await leaseqJson<ProblemJobsResult>(['jobs', '--prefix', prefix]);

    expect(keys(all)).toEqual(['retried-ok', 'stuck-1', 'dead-1', 'retry-1']);
    expect(all.jobs[2]).toMatchObject({
      status: JobStatus.Dead,
      type: 'mail.send',
      attempts: 2,
      lastErrorClass: 'HttpError',
      lastError: 'downstream answered 503',
      problemAt: now - 30 * MIN,
    });
    expect(all.jobs[2]?.ageMs).toBeGreaterThanOrEqual(3 * 60 * MIN);
    expect(all.jobs[1]?.stuck).toBe('lease-expired');
    expect(all.next).toBeUndefined();
  });

  it('filters by status, stuck, type, error text and age', async () => {
    const by = async (...flags: string[]) =>
      keys(await leaseqJson<ProblemJobsResult>(['jobs', '--prefix', prefix, ...flags]));

    expect(await by('--status', 'DEAD')).toEqual(['dead-1']);
    expect(await by('--status', 'RETRY_WAIT,DEAD')).toEqual(['dead-1', 'retry-1']);
    expect(await by('--status', 'COMPLETED(retried)')).toEqual(['retried-ok']);
    // IN_PROGRESS with its lease expired, and RETRY_WAIT whose retry is overdue by more than 10 minutes.
    expect(await by('--status', 'stuck')).toEqual(['stuck-1', 'retry-1']);
    expect(await by('--type', 'report.build')).toEqual(['stuck-1', 'retry-1']);
    expect(await by('--error', '503')).toEqual(['dead-1']);
    expect(await by('--error', 'httperror')).toEqual(['retried-ok', 'dead-1']);
    expect(await by('--since', '1h')).toEqual(['retried-ok', 'stuck-1', 'dead-1']);
    expect(await by('--type', 'mail.send', '--since', '10m')).toEqual(['retried-ok']);
  });

  it('pages with a cursor, skipping and repeating nothing', async () => {
    const first = await leaseqJson<ProblemJobsResult>(['jobs', '--prefix', prefix, '--limit', '3']);
    expect(keys(first)).toEqual(['retried-ok', 'stuck-1', 'dead-1']);
    expect(first.next).toEqual(expect.any(String));

    const second = await leaseqJson<ProblemJobsResult>([
      'jobs',
      '--prefix',
      prefix,
      '--limit',
      '3',
      '--cursor',
      first.next ?? '',
    ]);
    expect(keys(second)).toEqual(['retry-1']);
    expect(second.next).toBeUndefined();
  });

  it('reads the index only: the problem jobs, not the 100 larger items of the table', async () => {
    const listed = await leaseqJson<ProblemJobsResult>(['jobs', '--prefix', prefix]);
    const scan = await env.clients.doc.send(
      new ScanCommand({ TableName: env.jobsTable, Select: 'COUNT', ReturnConsumedCapacity: 'INDEXES' }),
    );

    // One query per shard; the entries read are the problem jobs alone, where a scan reads every item.
    expect(listed.queries).toBe(16);
    expect(listed.itemsRead).toBe(problems.length);
    expect(scan.ScannedCount).toBe(problems.length + 100);
    // Each shard's entries fit in 4 KB: 0.5 RCU per query (eventually consistent), 8 for the listing.
    expect(listed.readUnits).toBe(16 * 0.5);
  });

  it('prints a table with the error column and what the listing read', async () => {
    const run = await leaseq(['jobs', '--prefix', prefix, '--status', 'DEAD']);

    expect(run.code).toBe(0);
    const [header, row] = run.stdout.split('\n');
    expect(header).toMatch(/^DEDUP KEY\s+STATUS\s+TYPE\s+ATTEMPTS\s+LAST ERROR\s+LAST PROBLEM\s+AGE$/);
    expect(row).toMatch(
      /^dead-1\s+DEAD\s+mail\.send\s+2\s+HttpError: downstream answered 503\s+3\dm \d\ds ago\s+3h \d\dm$/,
    );
    expect(run.stdout).toMatch(/read 4 problems-index entries, 8 RCU, in 16 queries over 16 shards/);
  });

  it.each([
    [['--status', 'FAILED'], /unknown FAILED; expected a comma-separated list of RETRY_WAIT, DEAD/],
    [['--limit', '0'], /--limit/],
    [['--since', 'soon'], /--since/],
    [['--cursor', 'not-a-cursor'], /cursor is not one a listing returned/],
  ])('refuses %j with one line and a non-zero exit', async (flags, message) => {
    const run = await leaseq(['jobs', '--prefix', prefix, ...flags]);

    expect(run.code, run.stderr).not.toBe(0);
    expect(run.stdout).toBe('');
    // One line of error (after the target note an action prints first), no stack.
    const lines = run.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.startsWith('leaseq: target:'));
    expect(lines, run.stderr).toHaveLength(1);
    expect(run.stderr).toMatch(message);
  });
});
