/**
 * Redrive's pure decisions: whose letter it is (the job the item names now, or an older one), what to do
 * with a letter given its job item, and what a later letter of a job this very redrive sent back is.
 * The I/O (browse, reset, send, delete) is in dlq-redrive.ts.
 */
import type { JobItem } from '../core/contract/job-item.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { leaseOver } from '../core/decisions/lease-arithmetic.ts';
import { PAYLOAD_MISMATCH } from '../core/decisions/payload-hash.ts';
import { type DeadLetter, SQS_REDRIVE_REASON } from './dlq-letters.ts';

/**
 * How long a job lease must have been over, by the operator's clock, before redrive resets an
 * IN_PROGRESS job. The lease was written by the workers' clocks; a laptop clock running ahead would
 * otherwise see a live lease as over and reset a running job (its worker then loses the job to the
 * fence, and the redrive sends a second copy). A redrive of a job whose worker died waits this long.
 */
export const REDRIVE_CLOCK_MARGIN_MS = 15 * 60_000;

/**
 * Why a letter was left in the DLQ (`RedriveItem.skip`, docs/cli.md lists them):
 * - `other-type`: the key belongs to a job of another type (a dedup-key collision);
 * - `completed`, `cancelled`: the job finished; the letter is stale;
 * - `running`: the job runs now; `lease-recent`: its lease ended less than the clock margin ago;
 * - `newer-job`: a fresh send reset the key after this letter's death (the type's `deadKeyTtl`): the item
 *   is another job now;
 * - `older-letter`: the item's latest claim was by another message (the job died again under it, or that
 *   message finished the dead-lettering): this letter is not the job's newest death;
 * - `other-message`: a never-claimed letter (attempts 0) whose key holds a job waiting on, or dead under,
 *   another message: its body would be dropped, or run over that job;
 * - `hopeless`: the body can only be refused again (without `--include-invalid`);
 * - `payload-mismatch`: the letter's payload is not the job's under its key: sent back it would only be
 *   dead-lettered again (send it under a key of its own, or set the type's `onPayloadMismatch`);
 * - `changed`: the item changed between the read and the reset.
 */
export type RedriveSkip =
  | 'other-type'
  | 'completed'
  | 'cancelled'
  | 'running'
  | 'lease-recent'
  | 'newer-job'
  | 'older-letter'
  | 'other-message'
  | 'hopeless'
  | 'payload-mismatch'
  | 'changed';

/** What redrive does with a dead letter, given its job item. */
export type RedrivePlan =
  | { readonly action: 'reset-and-send'; readonly why?: string }
  | { readonly action: 'send'; readonly why: string }
  | { readonly action: 'skip'; readonly skip: RedriveSkip; readonly why: string };

/** What a letter tells of the job it is a letter of. */
export interface LetterFacts {
  readonly type?: string;
  readonly reason?: string;
  /** Claims that ran it; 0: its message was refused before any claim. */
  readonly attempts?: number;
  /** The jobs-queue message it was made from. */
  readonly messageId?: string;
  /**
   * Whether `messageId` is leaseq's record of it (`originalMessageId`). A letter the queue's own redrive
   * moved has none; its DLQ message id (which SQS keeps from the jobs queue) is then only a hint: a match
   * says it is the item's, a mismatch says nothing.
   */
  readonly recorded?: boolean;
  /** When it was dead-lettered, epoch ms (leaseq's `deadAt`, else when SQS received it). */
  readonly diedAt?: number;
}

/** Pure: what a decoded letter tells {@link planRedrive}. */
export function letterFacts(letter: DeadLetter): LetterFacts {
  const recorded = letter.originalMessageId !== undefined;
  const messageId =
    letter.originalMessageId ?? (letter.reason === SQS_REDRIVE_REASON ? letter.messageId : undefined);
  const diedAt = Date.parse(letter.deadAt ?? '');
  return {
    ...(letter.type === undefined ? {} : { type: letter.type }),
    reason: letter.reason,
    ...(letter.attempts === undefined ? {} : { attempts: letter.attempts }),
    ...(messageId ? { messageId } : {}),
    recorded,
    ...(Number.isFinite(diedAt) ? { diedAt } : {}),
  };
}

/**
 * Pure: whose letter this is. `own`: the item's latest claim was the letter's message. `newer-job`: a
 * fresh send reset the key after the letter's death (a `reset` event later than it). `other`: leaseq
 * recorded the letter's message and it is not the one the item names. `unknown`: nothing tells.
 *
 * The item's `messageId` is the message of its latest claim; the dead marking is fenced, so the letter of
 * the item's death names that message, and a dead key's reset (a claim) names the fresh send's. A
 * redrive's reset changes it not: the message it sends names it once it claims.
 */
export function letterOwner(item: JobItem, letter: LetterFacts): 'own' | 'newer-job' | 'other' | 'unknown' {
  if (letter.messageId !== undefined && letter.messageId === item.messageId) return 'own';
  // A new life started by a message of another payload (onPayloadMismatch 'new-job') is a reset too.
  const reset = item.history?.findLast((e) => e.e === 'reset' || (e.e === 'mismatch' && e.newJob));
  // A reset comes at least the type's deadKeyTtl after the death it reset: clocks apart by less than that
  // still order them.
  if (reset && letter.diedAt !== undefined && letter.diedAt < reset.at) return 'newer-job';
  return letter.recorded && letter.messageId !== undefined ? 'other' : 'unknown';
}

/**
 * Pure: the redrive decision for a letter, given its job item.
 * - none (never claimed, e.g. a bad body, or TTL removed it): send as is.
 * - a job of another type under the key: skip. COMPLETED or CANCELLED: skip (the letter is stale).
 * - not the item's job ({@link letterOwner}): skip, `newer-job` or `older-letter` (a never-claimed
 *   letter: `other-message`, unless the item waits on it, below).
 * - a letter of a message never claimed (`attempts` 0: a refused payload or envelope): the item under
 *   its key waits on it when it is the item's message, when it is DEAD of this very refusal, or when a
 *   redrive reset it and nothing claimed it since the redrive (this letter is the redrive's message):
 *   planned as a claimed letter below. A DEAD item past its `deadKeyUntil` takes it as a fresh send: send
 *   as is. Otherwise the job is another message's: skip.
 * - DEAD: reset it (attempts 0, RETRY_WAIT) so the claim accepts the job again, then send.
 * - RETRY_WAIT (an earlier redrive reset it, or the worker could not mark it DEAD), IN_PROGRESS whose
 *   lease was over {@link REDRIVE_CLOCK_MARGIN_MS} before `now` (its worker died, or its dead marking
 *   failed): reset, then send.
 * - IN_PROGRESS with a live lease, or one over less than the margin ago: skip; a copy may be running now.
 */
export function planRedrive(item: JobItem | undefined, now: number, letter: LetterFacts = {}): RedrivePlan {
  if (!item) return { action: 'send', why: 'no job item (never claimed, or expired by TTL)' };
  // The key belongs to a job of another type (a dedup-key-collision letter): resetting that job's item
  // would touch a job this letter is not, and the body would only collide again.
  if (letter.type !== undefined && item.type !== undefined && item.type !== letter.type) {
    return {
      action: 'skip',
      skip: 'other-type',
      why: `the dedupKey belongs to a job of type ${item.type}; send this ${letter.type} job under a key of its own`,
    };
  }
  // A message refused for another payload than its key's job: its body would meet the same job again.
  // Past a dead key's deadKeyUntil it runs as a fresh send (below), whatever its payload.
  const freshSend =
    item.status === JobStatus.Dead && item.deadKeyUntil !== undefined && item.deadKeyUntil < now;
  if (letter.reason === PAYLOAD_MISMATCH && !freshSend) {
    return {
      action: 'skip',
      skip: 'payload-mismatch',
      why: `its payload differs from the job's under its key (${item.status}); sent back it would be dead-lettered again: send it under a dedupKey of its own, or set the type's onPayloadMismatch to 'new-job'`,
    };
  }
  if (item.status === JobStatus.Completed) {
    return {
      action: 'skip',
      skip: 'completed',
      why: 'job already completed; this dead letter is stale (purge it)',
    };
  }
  if (item.status === JobStatus.Cancelled) {
    return {
      action: 'skip',
      skip: 'cancelled',
      why: 'job was cancelled; this dead letter is stale (purge it)',
    };
  }
  const owner = letterOwner(item, letter);
  if (owner === 'newer-job') {
    return {
      action: 'skip',
      skip: 'newer-job',
      why: "the key was reset by a fresh send after this letter's death (the type's deadKeyTtl): its job item is a newer job; this letter stays (purge it)",
    };
  }
  if (letter.attempts === 0 && owner !== 'own' && !waitsOnRefused(item, letter)) {
    if (item.status === JobStatus.Dead && item.deadKeyUntil !== undefined && item.deadKeyUntil < now) {
      return {
        action: 'send',
        why: "never claimed (attempts 0), and the dead key's deadKeyTtl has passed: it runs as a fresh send",
      };
    }
    return {
      action: 'skip',
      skip: 'other-message',
      why: `never claimed (attempts 0), and the job under its key is ${item.status} under another message: this body would be dropped, or run over that job; it stays`,
    };
  }
  if (owner === 'other' && letter.attempts !== 0) {
    return {
      action: 'skip',
      skip: 'older-letter',
      why: `not the job's newest death: its item was claimed since by another message (${item.messageId}), whose letter or run is the job's now; this letter stays (purge it)`,
    };
  }
  switch (item.status) {
    case JobStatus.Dead:
      return { action: 'reset-and-send' };
    case JobStatus.RetryWait:
      return { action: 'reset-and-send', why: 'job item was waiting for a retry; attempts start again' };
    case JobStatus.InProgress:
      if (!leaseOver(item.leaseUntil, now)) {
        return {
          action: 'skip',
          skip: 'running',
          why: `job is running now (lease held by ${item.owner ?? 'unknown'})`,
        };
      }
      return leaseOver(item.leaseUntil, now - REDRIVE_CLOCK_MARGIN_MS)
        ? { action: 'reset-and-send', why: 'job lease expired (its worker died, or its dead marking failed)' }
        : {
            action: 'skip',
            skip: 'lease-recent',
            why: `job lease (held by ${item.owner ?? 'unknown'}) ended less than ${REDRIVE_CLOCK_MARGIN_MS / 60_000} minutes ago by this clock; a clock ahead of the workers' would see a live lease so, so run redrive again later`,
          };
  }
  return { action: 'skip', skip: 'changed', why: `job item has an unknown status ${String(item.status)}` };
}

/**
 * A never-claimed letter the item waits on though it names another message: the item is DEAD of this
 * very refusal (the worker ends a job whose awaited message is refused), or a redrive reset it, nothing
 * claimed it since (attempts 0), and the letter came after that redrive (it is the redrive's message).
 */
function waitsOnRefused(item: JobItem, letter: LetterFacts): boolean {
  if (item.status === JobStatus.Dead) return letter.reason !== undefined && item.deadReason === letter.reason;
  if (item.status !== JobStatus.RetryWait || item.attempts !== 0) return false;
  const redriven = item.history?.findLast((e) => e.e === 'redrive');
  return redriven !== undefined && letter.diedAt !== undefined && letter.diedAt >= redriven.at;
}

/** What this run did for one job: the version its reset left on the item, and when. */
export interface EarlierSend {
  /** The item's version after this run's reset (the version read, in a dry run); absent: sent without a reset. */
  readonly versionAfter?: number;
  /** When this run reset and sent the job, by the operator's clock. */
  readonly at: number;
  /** The jobs-queue message the sent letter was made from, when leaseq recorded it. */
  readonly letterMessageId?: string;
}

/**
 * Pure: whether a later letter of a job this redrive sent back is another message's letter, to be planned
 * on its own (it is then not the item's job: {@link planRedrive} skips it), rather than judged by
 * {@link judgeRepeat}.
 */
export function isOtherMessage(letter: LetterFacts, earlier: EarlierSend): boolean {
  return (
    letter.recorded === true &&
    letter.messageId !== undefined &&
    earlier.letterMessageId !== undefined &&
    letter.messageId !== earlier.letterMessageId
  );
}

/**
 * Pure: what a later letter of a job this redrive already sent back is. Both kinds stay in the DLQ;
 * the verdict only tells the operator which happened.
 * - `dead-again`: the letter's message is one this redrive sent: the job ran again and died again.
 * - `duplicate`: a second letter of the death already sent back (docs/protocol.md: an interrupted
 *   dead-lettering is finished by a takeover that sends a second letter). Proven when the item is as
 *   the reset left it (any new death needs a claim, which moves the version), or when SQS received the
 *   letter more than {@link REDRIVE_CLOCK_MARGIN_MS} before the reset by the operator's clock.
 * - otherwise `dead-again`: the job was claimed since the reset and the letter is recent.
 */
export function judgeRepeat(
  letter: Pick<DeadLetter, 'originalMessageId' | 'systemAttributes'>,
  sentIds: ReadonlySet<string>,
  earlier: EarlierSend | undefined,
  item: JobItem | undefined,
): 'dead-again' | 'duplicate' {
  if (letter.originalMessageId && sentIds.has(letter.originalMessageId)) return 'dead-again';
  if (earlier?.versionAfter === undefined) return 'dead-again';
  if (item?.version === earlier.versionAfter) return 'duplicate';
  const received = Number(letter.systemAttributes.SentTimestamp);
  return received < earlier.at - REDRIVE_CLOCK_MARGIN_MS ? 'duplicate' : 'dead-again';
}
