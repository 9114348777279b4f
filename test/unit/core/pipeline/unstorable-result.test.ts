import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { runJob } from '../../../../shared/testing/index.ts';

// A result (or step data) the DynamoDB document client cannot marshall (a class instance such as a Date,
// a map with its own `constructor` field, NaN, a number past Number.MAX_SAFE_INTEGER) is refused on every
// attempt alike: the job is dead-lettered at once with what was wrong, not re-run until max-attempts.

function returning(type: string, result: () => unknown) {
  return defineJob({
    type,
    payload: z.object({ id: z.string() }),
    async run() {
      return { result: result() };
    },
  });
}

describe('Logic: a result DynamoDB cannot store', () => {
  for (const [name, value] of [
    ['a Date', () => ({ at: new Date(0) })],
    ['a map with a constructor field', () => ({ vendor: { constructor: 'Acme' } })],
    ['NaN', () => ({ ratio: Number.NaN })],
  ] as const) {
    it(`dead-letters at the first attempt a job whose result holds ${name}`, async () => {
      const run = await runJob(returning('odd.result', value), { id: 'x' }, { maxAttempts: 5 });
      expect(run.status).toBe('dead-lettered');
      expect(run.attempts).toHaveLength(1);
      if (run.status !== 'dead-lettered') return;
      expect(run.error.name).toBe('StoreRefusedError');
      expect(run.error.message).toMatch(/^bad-value: /);
    });
  }
});
