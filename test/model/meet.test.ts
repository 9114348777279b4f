import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { JobQueue } from '../../shared/core/contract/job-queue.ts';
import type { JobStore } from '../../shared/core/contract/job-store.ts';
import type { InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';
import { type RunOptions, runScenario } from './harness.ts';
import { meetArb } from './meet-scenario.ts';
import type { MeetKind } from './scenario.ts';

/*
 * Issue 31's checks (meet.ts) catch what they are for, whatever the code's fixes: each test breaks the
 * code under test on purpose, the way its defect did, and sees its check fire. (While a kind is open,
 * interleaving.test.ts's focused schedules show the check failing on the code as it stands.)
 */

/** The checks (`kind/check`) found by the first schedules of `kind` that have any, under `options`. */
async function found(kind: MeetKind, runs: number, seed: number, options: RunOptions): Promise<string[]> {
  for (const scenario of fc.sample(meetArb(kind), { numRuns: runs, seed })) {
    const report = await runScenario(scenario, options);
    const checks = report.violations
      .map((v) => /^\[([a-z-]+\/[a-z-]+)\]/.exec(v)?.[1])
      .filter((c): c is string => c?.startsWith(`${kind}/`) === true);
    if (checks.length > 0) return [...new Set(checks)].sort();
  }
  return [];
}

describe('Issue 31 checks catch what they are for', () => {
  it('hot-row: a release that takes the attempt of every conflict (no give-back) is caught', async () => {
    const charging = (store: JobStore): JobStore =>
      new Proxy(store, {
        get(target, name) {
          if (name === 'release') {
            const release: JobStore['release'] = (lease, retryAt, error, options) =>
              target.release(
                lease,
                retryAt,
                error,
                error.errorClass === 'OptimisticConflictError'
                  ? ({ ...options, refundAttempt: false, conflict: false } as typeof options)
                  : options,
              );
            return release;
          }
          const value: unknown = Reflect.get(target, name, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      }) as JobStore;
    const checks = await found('hot-row', 60, 7, { wrapStore: charging });
    expect(checks.length).toBeGreaterThan(0);
    expect(checks.every((c) => c === 'hot-row/attempt-used' || c === 'hot-row/dead')).toBe(true);
  });

  it('fifo-limit: bounces that only hide the message, for 2 s at most (no re-send), are caught', async () => {
    // What the defect did: every bounce of a waiting head is one more receive, so a slot held for minutes
    // adds up to the queue's maxReceiveCount.
    const hiding = (queue: InMemoryQueue): JobQueue => ({
      changeVisibility: (handle, seconds) => queue.changeVisibility(handle, Math.min(seconds, 2)),
      delete: (handle) => queue.delete(handle),
      sendToDeadLetter: (body, reason, groupId) => queue.sendToDeadLetter(body, reason, groupId),
    });
    expect(await found('fifo-limit', 20, 7, { wrapQueue: hiding })).toEqual(['fifo-limit/queue-redrive']);
  });
});
