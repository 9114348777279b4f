import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { JobContext } from '../../../../shared/core/model/job-context.ts';
import type { JobLog } from '../../../../shared/core/observe/job-log.ts';
import { runAndCommit } from '../../../../shared/core/pipeline/job-run.ts';
import type { Settings } from '../../../../shared/core/pipeline/settings.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';

// A job's own promise, left behind when its signal aborts, must never reject unhandled: in a Node worker
// an unhandled rejection ends the process, and every job in it with it.

describe('Function: runAndCommit', () => {
  const unhandled: unknown[] = [];
  const onRejection = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', onRejection);
  });
  afterEach(() => {
    process.removeListener('unhandledRejection', onRejection);
  });

  /** Lets Node report any rejection nobody handled (it does so after the microtasks drain). */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

  // Only the conflict loop reads the settings, the log and the context; these runs never get there.
  const settings = {} as Settings;
  const log = {} as JobLog;
  const context = {} as JobContext;

  async function runWith(signal: AbortSignal, run: () => Promise<undefined>): Promise<unknown> {
    const definition = defineJob({ type: 'test.late', payload: z.object({}), run });
    return runAndCommit(
      settings,
      { definition, payload: {}, context, signal, log, what: 'completion' },
      async () => 'committed',
      () => false,
    ).then(
      () => 'resolved',
      (error: unknown) => error,
    );
  }

  it('handles the rejection of a run that starts with its signal already aborted (past its deadline)', async () => {
    const controller = new AbortController();
    controller.abort(new Error('deadline passed'));
    const outcome = await runWith(controller.signal, async () => {
      await settle();
      throw new Error('the job failed after its deadline');
    });
    await settle();
    expect((outcome as Error).message).toBe('deadline passed');
    expect(unhandled).toEqual([]);
  });

  it('handles the rejection of a run whose signal aborts in its first synchronous section', async () => {
    const controller = new AbortController();
    const outcome = await runWith(controller.signal, async () => {
      controller.abort(new Error('deadline passed'));
      await Promise.resolve();
      throw new Error('the job failed after its deadline');
    });
    await settle();
    expect((outcome as Error).message).toBe('deadline passed');
    expect(unhandled).toEqual([]);
  });
});
