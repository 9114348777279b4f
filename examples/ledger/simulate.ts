import * as z from 'zod';
import type { JobContext } from '../../shared/core/model/job-context.ts';
import { PermanentJobError, TransientJobError } from '../../shared/errors.ts';

/**
 * Opt-in failure injection carried in a job's payload, for demos and tests. Real producers never set it,
 * and a worker runs it only when its deployment opted in to test hooks (`LEASEQ_TEST_HOOKS=1`, set by the
 * local demo and tests; off in the deployed stack unless `testHooks: true`): otherwise a payload carrying
 * it is dead-lettered, so nobody who can send to the queue can kill or stall a worker.
 * - `failTimes`: the first N attempts throw a transient error (retried with backoff).
 * - `sleepMs`: the job works this long, e.g. past its lease (the heartbeat must keep it).
 * - `crashAfterStep`: on the first attempt, the worker process dies right after this step's checkpoint.
 * - `permanent`: the job throws a permanent error (dead-lettered at once).
 */
export const simulateSchema = z
  .object({
    failTimes: z.number().int().min(0).max(100).optional(),
    sleepMs: z
      .number()
      .int()
      .min(0)
      .max(15 * 60_000)
      .optional(),
    crashAfterStep: z.string().min(1).max(64).optional(),
    permanent: z.boolean().optional(),
  })
  .strict();
export type Simulate = z.infer<typeof simulateSchema>;

/** Applies the failures that happen before the job's work; refuses them unless test hooks are on. */
export async function beforeWork(ctx: JobContext, simulate: Simulate | undefined): Promise<void> {
  if (!simulate) return;
  if (!ctx.testHooksEnabled) {
    throw new PermanentJobError(
      'payload.simulate is a test hook and this deployment does not run test hooks (LEASEQ_TEST_HOOKS is off)',
    );
  }
  if (simulate.permanent) throw new PermanentJobError('simulated permanent failure');
  if (simulate.failTimes !== undefined && ctx.attempt <= simulate.failTimes) {
    throw new TransientJobError(
      `simulated transient failure (attempt ${ctx.attempt} of ${simulate.failTimes} failing)`,
    );
  }
  if (simulate.sleepMs) await sleepUnlessAborted(simulate.sleepMs, ctx.signal);
}

/** Kills its own process (SIGKILL) after `step` on the first attempt, when asked to. */
export function afterStep(ctx: JobContext, simulate: Simulate | undefined, step: string): void {
  if (simulate?.crashAfterStep === step && ctx.attempt === 1 && ctx.testHooksEnabled) {
    process.kill(process.pid, 'SIGKILL');
  }
}

function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
