// The limits step (docs/protocol.md, "Limits"): after the payload check and the cache, before the fast
// path and the claim, so a job that finds its limit full writes nothing to its job item and uses no
// attempt. Slots first (limits.ts), then rate permits (rate-limit.ts): a slot is given back (the finally
// below) but a permit never is, so a job its concurrency limit bounces must not have spent one (else a
// tenant's backlog, bounced every few seconds, would use up its rate budget with no start).
import { StoreUnavailableError } from '../../errors.ts';
import type { AnyJobDefinition } from '../model/job-definition.ts';
import { rateLimits } from '../model/rate-limit.ts';
import { MetricName } from '../observe/metric-names.ts';
import { noteStoreUnavailable } from '../observe/store-throttle.ts';
import type { Job } from './attempt.ts';
import type { DeadLetterer } from './dead-letterer.ts';
import { bounceForLimit, fifoWaitMs } from './limit-bounce.ts';
import { concurrencyWaitMs, releaseSlotsAfterRuns, takeSlots, trackingRuns } from './limits.ts';
import type { RecordAction } from './outcome.ts';
import { takeRatePermits } from './rate-limit.ts';
import { dropFinishedCopy } from './refusal.ts';
import { refuseJob } from './refused-job.ts';
import type { Settings } from './settings.ts';

/** What runs the job once its limits let it: the fast path or the claim, then the run (processor.ts). */
export type RunWithin = (job: Job, definition: AnyJobDefinition) => Promise<RecordAction>;

/**
 * Runs `job` through `run` within the limits of its type, or settles the record without running it: a
 * finished job's copy dropped, a limit key that cannot be computed refused (E13), a full limit bounced,
 * a leases table that did not answer handed back. The slots are released after the run's commit or release.
 */
export async function withinLimits(
  s: Settings,
  job: Job,
  definition: AnyJobDefinition,
  deadLetterer: DeadLetterer,
  deadline: number | undefined,
  run: RunWithin,
): Promise<RecordAction> {
  const { message } = job;
  // A rate permit is never given back: a copy of a finished job must not spend one (refusal.ts). A slot
  // is, with the claim's refusal, so a type with only concurrency limits pays no read for it.
  if (rateLimits(definition).length > 0) {
    const dropped = await dropFinishedCopy(s, job);
    if (dropped !== undefined) return dropped;
  }
  const slots = await takeSlots(s, job, definition);
  if ('invalid' in slots) {
    const refusal = { reason: 'invalid-limit-key', error: slots.invalid };
    return refuseJob(s, job, definition, refusal, deadLetterer, deadline);
  }
  if ('unavailable' in slots) return limitUnavailable(s, job, slots.unavailable);
  if ('busy' in slots) {
    return bounceForLimit(s, job, {
      kind: 'concurrency',
      limitKey: slots.busy,
      delayMs: message.fifo ? fifoWaitMs(message.receives) : concurrencyWaitMs(message.receives),
    });
  }
  if (slots.held.length === 0) {
    const limited = await takeRatePermits(s, job, definition, deadline);
    return limited ?? run(job, definition);
  }
  const store = s.leases;
  const fenced = slots.held.map((held) => ({ held, fence: store?.fence(held.lease) ?? {} }));
  const runs = new Set<Promise<unknown>>();
  try {
    const limited = await takeRatePermits(s, job, definition, deadline);
    if (limited !== undefined) return limited;
    return await run({ ...job, slots: fenced }, trackingRuns(definition, runs));
  } finally {
    // After the commit or the release; a run left behind keeps its slots until it ends (or they expire).
    await releaseSlotsAfterRuns(slots, runs);
  }
}

/** The leases table did not answer (or refused) a slot's acquire: nothing was claimed, the message retries it. */
async function limitUnavailable(s: Settings, job: Job, error: unknown): Promise<'store-unavailable'> {
  const delay = s.backoffSeconds(job.message.receives);
  s.metrics.count(MetricName.HandBack);
  const fields = { delaySeconds: delay, error: s.errorText(error) };
  if (error instanceof StoreUnavailableError) {
    noteStoreUnavailable(s.metrics, job.log, error);
    job.log.warn(
      'the leases table did not answer a concurrency slot acquire; giving the message back',
      fields,
    );
  } else {
    job.log.error(
      'a concurrency slot acquire failed (not an outage: check permissions and the leases table); giving the message back',
      fields,
    );
  }
  await job.message.giveBack(delay, 'store unavailable');
  return 'store-unavailable';
}
