// A claimed job whose cancel a fenced write found (docs/protocol.md, edge C3): the JobCancelledError of
// its renewal, checkpoint, commit, release or dead-letter fence. Nothing more is written to the job item
// (every write would be refused), and the message goes: no retry, no dead letter.
import { MetricName } from '../observe/metric-names.ts';
import type { MetricsSink } from '../observe/metrics.ts';
import { byType, type Job } from './attempt.ts';

/** Stops a cancelled job: deletes its message now (not only at the batch's end), counts `JobCancelled`. */
export async function stopCancelled(
  job: Pick<Job, 'message' | 'envelope' | 'log'>,
  metrics: MetricsSink,
  why: string,
): Promise<'cancelled'> {
  metrics.count(MetricName.JobCancelled, 1, byType(job.envelope));
  job.log.warn('job cancelled: stopped, deleting its message (no retry, no dead letter)', { why });
  // A failed delete leaves a copy that comes back and is dropped by the claim (cancelled-copy).
  await job.message.delete();
  return 'cancelled';
}
