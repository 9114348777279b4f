import type { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { problemShard } from '../../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { describeCount, FIND_COUNT_BOUND, findProblemJobs } from '../../../shared/ops/find-jobs.ts';
import type { OpsTarget } from '../../../shared/ops/target.ts';

type Input = QueryCommand['input'];

/**
 * A doc client answering Query from `entries` as DynamoDB does for the problems index, including its
 * refusal of an ExclusiveStartKey outside the key condition (the emulator does not check that).
 */
function fakeTarget(entries: Record<string, unknown>[], fail?: (input: Input) => Error | undefined) {
  const sent: Input[] = [];
  const doc = {
    async send(command: QueryCommand) {
      const input = command.input;
      sent.push(input);
      const failure = fail?.(input);
      if (failure) throw failure;
      const shard = input.ExpressionAttributeValues?.[':shard'];
      const since = input.ExpressionAttributeValues?.[':since'] as number | undefined;
      const start = input.ExclusiveStartKey as { problemAt: number; dedupKey: string } | undefined;
      if (start && since !== undefined && start.problemAt < since) {
        throw Object.assign(
          new Error('The provided starting key is outside query boundaries based on provided conditions'),
          { name: 'ValidationException' },
        );
      }
      const rows = entries
        .filter((e) => e.problemShard === shard && (since === undefined || (e.problemAt as number) >= since))
        .sort((a, b) => (b.problemAt as number) - (a.problemAt as number));
      const from = start ? rows.findIndex((r) => r.dedupKey === start.dedupKey) + 1 : 0;
      const page = rows.slice(from, from + (input.Limit ?? 1000));
      const last = page.at(-1);
      return {
        Items: page,
        Count: page.length,
        ScannedCount: page.length,
        ...(from + page.length < rows.length && last
          ? { LastEvaluatedKey: { dedupKey: last.dedupKey, problemShard: shard, problemAt: last.problemAt } }
          : {}),
      };
    },
  };
  const target = {
    clients: { doc },
    names: { jobsTable: 'jobs', leasesTable: 'leases', queueUrl: 'q', dlqUrl: 'd' },
  } as unknown as OpsTarget;
  return { target, sent };
}

const now = 1_700_000_000_000;
const entry = (i: number, extra: Record<string, unknown> = {}) => ({
  dedupKey: `k-${i}`,
  problemShard: problemShard(`k-${i}`),
  problemAt: now - i * 1000,
  status: JobStatus.Dead,
  attempts: 1,
  leaseUntil: 0,
  deadReason: i % 2 === 0 ? 'max-attempts' : 'permanent-error',
  ...extra,
});

describe('Function: findProblemJobs', () => {
  it('filters by dead reason exactly', async () => {
    const { target } = fakeTarget(Array.from({ length: 10 }, (_, i) => entry(i)));
    const page = await findProblemJobs(target, { reason: 'permanent-error' }, {}, now);
    expect(page.jobs.map((j) => j.dedupKey)).toEqual(['k-1', 'k-3', 'k-5', 'k-7', 'k-9']);
    expect(page.count).toEqual({ n: 5, atLeast: false });
  });

  it('counts a first page that holds every match from that page alone: one listing, no second', async () => {
    const { target, sent } = fakeTarget(Array.from({ length: 10 }, (_, i) => entry(i)));
    const page = await findProblemJobs(target, {}, { pageSize: 20 }, now);
    expect(page.count).toEqual({ n: 10, atLeast: false });
    expect(sent.length).toBe(16);
    expect(page.queries).toBe(16);
  });

  it('pages with the cursor and counts every match from the first page on, exactly under the bound', async () => {
    const { target } = fakeTarget(Array.from({ length: 30 }, (_, i) => entry(i)));
    const first = await findProblemJobs(target, {}, { pageSize: 20 }, now);
    expect(first.jobs.length).toBe(20);
    expect(first.count).toEqual({ n: 30, atLeast: false });
    const second = await findProblemJobs(target, {}, { pageSize: 20, cursor: first.next ?? '' }, now);
    expect(second.jobs.map((j) => j.dedupKey)).toEqual(Array.from({ length: 10 }, (_, i) => `k-${20 + i}`));
    expect(second.count).toEqual({ n: 30, atLeast: false });
    expect(describeCount(second.count)).toBe('30 jobs');
  });

  it('says "at least" the bound when more jobs match than the count reads', async () => {
    const { target } = fakeTarget(Array.from({ length: FIND_COUNT_BOUND + 40 }, (_, i) => entry(i)));
    const page = await findProblemJobs(target, {}, {}, now);
    expect(page.count).toEqual({ n: FIND_COUNT_BOUND, atLeast: true });
    expect(describeCount(page.count)).toBe(`at least ${FIND_COUNT_BOUND} jobs`);
  });
  it('reads at most one query per shard for the page and one for its count, however few of the index match', async () => {
    // 4,000 dead jobs of which only the oldest has the reason searched for: a rare filter over a large
    // index. Each listing is one query per shard (the docs' cost); the rest is reached by the cursor.
    const entries = Array.from({ length: 4000 }, (_, i) => entry(i, { deadReason: 'max-attempts' }));
    entries.push(entry(4000, { deadReason: 'permanent-error' }));
    const { target } = fakeTarget(entries);
    let page = await findProblemJobs(target, { reason: 'permanent-error' }, {}, now);
    const queries = [page.queries];
    for (let i = 0; page.jobs.length === 0 && page.next && i < 200; i++) {
      page = await findProblemJobs(target, { reason: 'permanent-error' }, { cursor: page.next }, now);
      queries.push(page.queries);
    }
    expect(Math.max(...queries)).toBeLessThanOrEqual(32);
    expect(page.jobs.map((j) => j.dedupKey)).toEqual(['k-4000']);
  });
  it('pages a sparse filter by cursor to every match, newest first, none twice, each page bounded', async () => {
    const entries = Array.from({ length: 3000 }, (_, i) =>
      entry(i, { deadReason: i % 97 === 5 ? 'permanent-error' : 'max-attempts' }),
    );
    const { target } = fakeTarget(entries);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 500; i++) {
      const page = await findProblemJobs(
        target,
        { reason: 'permanent-error' },
        cursor ? { cursor } : {},
        now,
      );
      expect(page.queries).toBeLessThanOrEqual(32);
      seen.push(...page.jobs.map((j) => j.dedupKey));
      if (!page.next) break;
      cursor = page.next;
    }
    const expected = entries.filter((e) => e.deadReason === 'permanent-error').map((e) => e.dedupKey);
    expect(seen).toEqual(expected);
  });
});
