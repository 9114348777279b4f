import type { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { problemShard } from '../../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { OpsError } from '../../../shared/ops/ops-errors.ts';
import { listProblemJobs } from '../../../shared/ops/problem-jobs.ts';
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
const entries = Array.from({ length: 40 }, (_, i) => ({
  dedupKey: `k-${i}`,
  problemShard: problemShard(`k-${i}`),
  problemAt: now - i * 60_000,
  status: JobStatus.Dead,
  attempts: 1,
  leaseUntil: 0,
}));

describe('Function: listProblemJobs', () => {
  it('continues a cursor under a --since its position is older than: those shards are done, not refused', async () => {
    const { target, sent } = fakeTarget(entries);
    const first = await listProblemJobs(target, { limit: 30 }, now);
    expect(first.next).toEqual(expect.any(String));

    // The next page, now only for the last 10 minutes: every position is older than that.
    const recent = await listProblemJobs(target, { cursor: first.next ?? '', since: now - 10 * 60_000 }, now);

    expect(recent.jobs).toEqual([]);
    expect(recent.next).toBeUndefined();
    for (const input of sent) {
      const since = input.ExpressionAttributeValues?.[':since'] as number | undefined;
      const start = input.ExclusiveStartKey as { problemAt: number } | undefined;
      if (since !== undefined && start) expect(start.problemAt).toBeGreaterThanOrEqual(since);
    }
  });

  it('says which shard could not be read when one query fails mid-listing (a throttle), and nothing else', async () => {
    const throttle = Object.assign(new Error('Rate of requests exceeds the allowed throughput.'), {
      name: 'ThrottlingException',
    });
    const { target } = fakeTarget(entries, (input) =>
      input.ExpressionAttributeValues?.[':shard'] === 'p07' ? throttle : undefined,
    );

    const error = await listProblemJobs(target, {}, now).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(OpsError);
    expect((error as Error).message).toMatch(
      /^could not read shard p07 of the problems index \(ThrottlingException: Rate of requests exceeds the allowed throughput\.\); nothing was changed, run the listing again$/,
    );
    expect((error as Error).cause).toBe(throttle);
  });

  it('says how to add the problems index to a jobs table made outside the stack (existingStateTables)', async () => {
    const missing = Object.assign(new Error('The table does not have the specified index: problems'), {
      name: 'ValidationException',
    });
    const { target } = fakeTarget(entries, () => missing);

    const error = await listProblemJobs(target, {}, now).catch((e: unknown) => e);

    // Deploying the stack again adds nothing to a table the stack only imports.
    expect((error as Error).message).toBe(
      'the jobs table jobs has no `problems` index: deploy the stack again or run `leaseq local provision` ' +
        'for a table leaseq made; add it with addProblemsIndex(table) from leaseq/cdk to a table of yours ' +
        '(existingStateTables)',
    );
  });
});
