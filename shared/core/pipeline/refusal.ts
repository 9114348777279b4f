// What a refused claim (E1-E3) or a refused fast commit (E12) does with its message, as decided by
// decisions/claim-decision.ts: dead-letter a message whose dedupKey belongs to a job of another type,
// drop a copy of a finished, running, dead or cancelled job (or a redrive's message of another life of
// the key), hide our own message while its lease runs, or hand a contended one back.
import { DEDUP_KEY_COLLISION, DedupKeyCollisionError } from '../../errors.ts';
import type { JobItem } from '../contract/job-item.ts';
import { JobStatus } from '../contract/statuses.ts';
import { collides, decideRefusal } from '../decisions/claim-decision.ts';
import { deadKeyExpired } from '../decisions/history-events.ts';
import { visibilityForLease } from '../decisions/lease-timing.ts';
import { sentForAnotherLife } from '../decisions/message-identity.ts';
import { MetricName } from '../observe/metric-names.ts';
import { byType, cacheType, type Job } from './attempt.ts';
import { letterRefusedJob } from './dead-letterer.ts';
import { noteDroppedCopy } from './history.ts';
import { resendAtReceives } from './limit-bounce.ts';
import type { RecordAction } from './outcome.ts';
import { actOnMismatch, mismatchOf } from './payload-mismatch.ts';
import type { Settings } from './settings.ts';

/** Longest batch: Lambda's (and the local runner's) timeout maximum, 15 min. */
const MAX_BATCH_SECONDS = 900;

/**
 * Before a rate-limited job takes its limits: a copy of a job that is already over (COMPLETED, CANCELLED,
 * or DEAD and not past its `deadKeyUntil` for this message), or a redrive's message of another life of
 * the key, is dropped as its claim's refusal would drop it, so it spends no rate permit (never given
 * back) and takes no slot.
 * One strongly consistent read (a redrive's reset must not read as DEAD); undefined: go on, the claim
 * decides as before (no item, a running or waiting job, another type's item, or a read that failed).
 */
export async function dropFinishedCopy(s: Settings, job: Job): Promise<RecordAction | undefined> {
  let item: JobItem | undefined;
  try {
    item = await s.store.get(job.envelope.dedupKey, { consistent: true });
  } catch (error) {
    job.log.info('could not read the job item before its limits; the claim decides', {
      error: s.errorText(error),
    });
    return undefined;
  }
  if (item === undefined || collides(item, job.envelope.type)) return undefined;
  // A new job of its key (onPayloadMismatch 'new-job') goes on to its claim, which renews the key.
  if (mismatchOf(s, job, item)?.kind === 'new-life') return undefined;
  const over =
    item.status === JobStatus.Completed ||
    item.status === JobStatus.Cancelled ||
    (item.status === JobStatus.Dead && !deadKeyExpired(item, s.now(), job.message.identity)) ||
    sentForAnotherLife(item, job.message.identity);
  return over ? actOnRefusal(s, job, item) : undefined;
}

/** Acts on a refusal whose returned item is `existing`, and names the outcome. */
export async function actOnRefusal(s: Settings, job: Job, existing: JobItem): Promise<RecordAction> {
  const { envelope, message, log } = job;
  if (collides(existing, envelope.type)) {
    // Not a copy: another job holds the key. Dropping it would lose it silently; running it would run
    // on the other job's item. Its letter is all that happens; the other job is not touched.
    const error = new DedupKeyCollisionError(envelope.type, existing.type);
    return (await letterRefusedJob(s, job, DEDUP_KEY_COLLISION, error)).action;
  }
  // Not a copy either: a message of another payload (payload-mismatch.ts).
  const mismatch = mismatchOf(s, job, existing);
  if (mismatch) return actOnMismatch(s, job, existing, mismatch);
  const decision = decideRefusal(existing, message.identity, s.now());
  const refusal = { status: existing.status, owner: existing.owner, token: existing.token };
  switch (decision.kind) {
    case 'duplicate-completed':
      s.cache?.add(envelope.dedupKey, cacheType(job));
      s.metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
      log.info('duplicate of a completed job: deleting this copy', refusal);
      return 'duplicate';
    case 'duplicate-racing': {
      // The job is unfinished and another message guards it. This copy is deleted when its batch ends
      // (by the event source); until then it must not show again, or it could become the job's guard
      // and then be deleted by that late delete, stranding the job. So hide it past any batch (and a
      // slow delete) first; never shorter than a receive gave it. If that fails, keep it: it comes back
      // and is judged again.
      const hide = MAX_BATCH_SECONDS + visibilityForLease(s.leaseMs);
      if (!(await message.hide(hide))) {
        log.info('another message holds this job; could not hide this copy, keeping it', refusal);
        return 'contended';
      }
      // Hidden, it is safe to delete now rather than hold it in flight until the batch ends (the
      // batch's own delete then finds it gone). If this delete fails, the hide still covers the batch.
      await message.delete();
      s.metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
      log.info('another message holds this job: deleted this copy', refusal);
      return 'duplicate';
    }
    case 'other-life': {
      // Sent for a job that died again before it came, and the key is a newer job's now: running it would
      // run the old job's body on the new one. It can never claim: deleted as the batch ends, counted.
      s.metrics.count(MetricName.OtherLifeDropped, 1, byType(envelope));
      log.warn(
        "a redrive's message of an earlier life of this key (a fresh send reset it since): deleting it",
        {
          ...refusal,
          life: decision.life,
          itemLife: existing.life ?? 0,
        },
      );
      // A waiting job's history tells it too; a running one's holder is left alone.
      if (existing.status === JobStatus.RetryWait) {
        await noteDroppedCopy(s.store, existing, message.record.messageId, s.now(), log, decision.life);
      }
      return 'other-life-copy';
    }
    case 'dead-copy':
      s.metrics.count(MetricName.DeadCopyDropped, 1, byType(envelope));
      log.warn(
        existing.deadKeyUntil === undefined
          ? 'copy of a dead-lettered job: deleting it (redrive from the DLQ to run it again)'
          : 'copy of a dead-lettered job: deleting it (redrive from the DLQ to run it again; a send after deadKeyUntil runs)',
        {
          ...refusal,
          ...(existing.deadKeyUntil === undefined ? {} : { deadKeyUntil: existing.deadKeyUntil }),
        },
      );
      // Counted on the item too, so `leaseq inspect` tells how many copies came after the job died.
      await noteDroppedCopy(
        s.store,
        existing,
        message.record.messageId,
        s.now(),
        log,
        sentForAnotherLife(existing, message.identity) ? message.identity.life : undefined,
      );
      return 'dead-copy';
    case 'cancelled-copy':
      // Before the job ever ran (a tombstone) or after its cancel: never run. Deleted as the batch ends
      // (outcome.ts); a failed delete leaves a copy that comes back and is dropped again.
      s.metrics.count(MetricName.CancelledCopyDropped, 1, byType(envelope));
      log.info('copy of a cancelled job: deleting it', refusal);
      return 'cancelled-copy';
    case 'own-message-early': {
      s.metrics.count(MetricName.OwnMessageEarly);
      const seconds = Math.ceil(decision.hideForMs / 1000) + 1;
      log.info('own message back while its lease runs: hiding it until the lease ends', {
        ...refusal,
        hideSeconds: seconds,
      });
      s.metrics.count(MetricName.HandBack);
      // Each time back is a receive and no attempt (a job past its 12 hours of visibility comes back once
      // a lease): near the redrive count a standard queue's copy is re-sent, or SQS would move a running
      // job's message to the DLQ. A FIFO one is kept at its group's head (a re-send would let the group
      // run on while the job does).
      const resend = !message.fifo && message.receives >= resendAtReceives(false, s.maxReceiveCount);
      if (resend && (await message.resend(seconds))) return 'own-message-early';
      await message.giveBack(seconds, 'own message early');
      return 'own-message-early';
    }
    case 'contended':
      s.metrics.count(MetricName.HandBack);
      await message.giveBack(1, 'claim refused by a lease that just ended');
      return 'contended';
  }
}
