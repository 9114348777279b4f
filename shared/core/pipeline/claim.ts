// E1-E3, the claim: one conditional write that takes the job (new, retried, or taken over from a lease
// that ran out), bounded by the lease it asks for; and the attempt that a successful claim starts.
import { trace } from '@opentelemetry/api';
import { StoreConflictError, StoreUnavailableError } from '../../errors.ts';
import type { ClaimResult } from '../contract/job-store.ts';
import { leaseSafetyMs } from '../decisions/lease-timing.ts';
import { PayloadMismatch } from '../decisions/payload-hash.ts';
import { JobRenewer } from '../leases/renewer.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import type { AnyJobDefinition } from '../model/job-definition.ts';
import { MetricName } from '../observe/metric-names.ts';
import { inSpan } from '../observe/spans.ts';
import { noteStoreUnavailable } from '../observe/store-throttle.ts';
import { type Attempt, byType, type Job } from './attempt.ts';
import type { Settings } from './settings.ts';

/**
 * The claim (E1-E3), bounded by the lease it asks for: an answer that would come after the lease ended
 * is abandoned. Whatever breaks it, the job is never run unguarded: the message goes back with a backoff
 * and the result is undefined. `onlyIfMessageId`: only the existing item that names that message (E13).
 */
export async function claim(
  s: Settings,
  job: Job,
  leaseMs: number,
  now: number,
  onlyIfMessageId?: string,
): Promise<ClaimResult | undefined> {
  const { envelope, message, log } = job;
  const { originId, life } = message.identity;
  const bound = boundedSignal(leaseMs - leaseSafetyMs(leaseMs), 'the claim would outlast its lease');
  try {
    return await inSpan(
      'leaseq.claim',
      {},
      () =>
        s.store.claim(
          {
            dedupKey: envelope.dedupKey,
            owner: s.worker,
            messageId: message.record.messageId,
            ...(originId === message.record.messageId ? {} : { originId }),
            ...(life === undefined ? {} : { life }),
            type: envelope.type,
            createdAt: envelope.createdAt,
            leaseMs,
            now,
            ...(onlyIfMessageId === undefined ? {} : { onlyIfMessageId }),
            ...payloadHashOf(s, job),
          },
          { signal: bound.signal },
        ),
      { errorText: s.errorText },
    );
  } catch (error) {
    const delay = s.backoffSeconds(message.receives);
    if (error instanceof StoreConflictError) {
      // The item changed under the claim in a way it cannot act on (it went): judged again when back.
      log.info('claim not settled; giving the message back', {
        delaySeconds: delay,
        error: s.errorText(error),
      });
    } else if (error instanceof StoreUnavailableError) {
      noteStoreUnavailable(s.metrics, log, error);
      log.warn('store unavailable: job not run; giving the message back', {
        delaySeconds: delay,
        error: s.errorText(error),
      });
    } else {
      log.error('claim failed (not an outage: check permissions and table names); giving the message back', {
        delaySeconds: delay,
        error: s.errorText(error),
      });
    }
    s.metrics.count(MetricName.HandBack);
    await message.giveBack(delay, 'store unavailable');
    return undefined;
  } finally {
    bound.clear();
  }
}

/** The claim's payload hash fields: the message's hash, and whether a finished job of another renews. */
function payloadHashOf(s: Settings, job: Job): { payloadHash?: string; newLifeOnMismatch?: true } {
  if (job.payloadHash === undefined) return {};
  const newJob = s.registry.get(job.envelope.type)?.onPayloadMismatch === PayloadMismatch.NewJob;
  return { payloadHash: job.payloadHash, ...(newJob ? { newLifeOnMismatch: true as const } : {}) };
}

/**
 * The attempt a successful claim starts: its keys on every log line and on the span, a takeover
 * counted and logged (whose lease it took), and the renewer its heartbeat will drive.
 */
export function startAttempt(
  s: Settings,
  job: Job,
  definition: AnyJobDefinition,
  claimed: Extract<ClaimResult, { claimed: true }>,
  timing: { readonly leaseMs: number; readonly claimedAt: number; readonly deadline: number | undefined },
): Attempt {
  const { lease } = claimed;
  const { log } = job;
  log.setKeys({ attempt: lease.attempts, token: lease.token });
  trace.getActiveSpan()?.setAttributes({ 'leaseq.attempt': lease.attempts, 'leaseq.token': lease.token });
  if (claimed.newLifeOf !== undefined) {
    s.metrics.count(MetricName.PayloadMismatch, 1, byType(job.envelope));
    log.info(
      'a message with another payload under a finished job: running it as a new job (onPayloadMismatch new-job)',
      {
        ...claimed.newLifeOf,
      },
    );
  }
  if (claimed.wasDeadAt !== undefined) {
    log.info('a fresh send of a dead-lettered key after its deadKeyTtl: running it as a new job', {
      deadAt: claimed.wasDeadAt,
    });
  }
  if (claimed.kind === 'takeover') {
    s.metrics.count(MetricName.LeaseExpired);
    log.warn('took over a job whose lease expired; resuming from its checkpoint', {
      previousOwner: claimed.previous?.owner,
      checkpoint: lease.checkpoint?.step,
    });
  }
  const renewer = new JobRenewer({
    store: s.store,
    queue: s.queue,
    lease,
    receiptHandle: job.message.record.receiptHandle,
    receivedAt: job.message.receivedAt,
    leaseMs: s.leaseMs,
    ...(timing.deadline === undefined ? {} : { deadline: timing.deadline }),
    log,
    now: s.now,
  });
  return {
    message: job.message,
    envelope: job.envelope,
    payload: job.payload,
    log,
    ...(job.slots ? { slots: job.slots } : {}),
    definition,
    lease,
    renewer,
    leaseMs: timing.leaseMs,
    claimedAt: timing.claimedAt,
    deadline: timing.deadline,
  };
}
