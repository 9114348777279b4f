/**
 * Redrive: sends dead letters back to the jobs queue so their jobs run again. Each letter goes through
 * named steps (filter, leave alone, plan from the job item, reset, send back, delete), so the order
 * that makes a crash harmless (see {@link redrive}) reads top to bottom.
 */
import { randomUUID } from 'node:crypto';
import { DeleteMessageCommand, type Message, SendMessageCommand } from '@aws-sdk/client-sqs';
import { groupIdForKey } from '../aws/message-group.ts';
import { isFifoQueue } from '../aws/queue-url.ts';
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import { resentInPlaceOf } from '../core/pipeline/record-message.ts';
import { Pacer } from '../producer/pacer.ts';
import { type BrowseResult, browse, KEEP, shortfall, type Visit } from './dlq-browse.ts';
import {
  type DeadLetter,
  type DeadLetterFilter,
  HOPELESS_REASONS,
  matchesFilter,
  toDeadLetter,
} from './dlq-letters.ts';
import { editedBody } from './dlq-redrive-edit.ts';
import {
  type EarlierSend,
  isOtherMessage,
  judgeRepeat,
  type LetterFacts,
  letterFacts,
  planRedrive,
  REDRIVE_CLOCK_MARGIN_MS,
  type RedriveSkip,
} from './dlq-redrive-plan.ts';
import { PayloadRefusedError } from './ops-errors.ts';
import type { OpsTarget } from './target.ts';

export { editedBody } from './dlq-redrive-edit.ts';
export {
  type EarlierSend,
  judgeRepeat,
  type LetterFacts,
  letterFacts,
  letterOwner,
  planRedrive,
  REDRIVE_CLOCK_MARGIN_MS,
  type RedrivePlan,
  type RedriveSkip,
} from './dlq-redrive-plan.ts';

/** The longest visibility SQS accepts (12 h); a receive asking for more is refused. */
export const SQS_MAX_VISIBILITY_SECONDS = 43_200;

/**
 * How long redrive holds the letters it browses: a page of 10 must finish (at the rate limit) before
 * the page's messages show up again. Capped at {@link SQS_MAX_VISIBILITY_SECONDS}: below ~0.83 letters/h
 * the uncapped value is refused, and a page that outlasts the cap only shows up again, seen before.
 */
export function redriveVisibilitySeconds(ratePerSecond: number | undefined): number {
  const wanted = 60 + Math.ceil(10 / (ratePerSecond ?? Number.POSITIVE_INFINITY));
  return Math.min(wanted, SQS_MAX_VISIBILITY_SECONDS);
}

export interface RedriveOptions {
  readonly filter?: DeadLetterFilter;
  /** Only list what would happen; change nothing. @default false */
  readonly dryRun?: boolean;
  /** Messages sent back per second at most. @default undefined (no limit) */
  readonly ratePerSecond?: number;
  /** Redrive at most this many. @default undefined (all that match) */
  readonly limit?: number;
  /** Called after each matching message. */
  readonly onProgress?: (item: RedriveItem) => void;
  /**
   * Also send letters whose body can only be refused again (not JSON, not an envelope, too large).
   * @default false
   */
  readonly includeHopeless?: boolean;
  /** @default Date.now */
  readonly now?: () => number;
  /** Who redrives, for the job's `redrive` history event (user@host, or the caller's identity). @default 'unknown' */
  readonly by?: string;
  /**
   * Edit and retry: send this payload instead of the letter's, in the letter's envelope (its id, dedup key,
   * type, createdAt and trace kept). Only with `filter.dedupKey` (one job). `check` (the job type's
   * schema) runs before anything changes: a problem it names (`payload.<field>: <why>`) throws
   * PayloadRefusedError.
   */
  readonly payload?: {
    readonly value: unknown;
    readonly check?: (type: string, payload: unknown) => string | undefined;
  };
  /** Largest body the jobs queue's workers take. @default DEFAULT_MAX_BODY_BYTES */
  readonly maxBodyBytes?: number;
}

export interface RedriveItem {
  readonly messageId: string;
  readonly dedupKey?: string;
  readonly type?: string;
  readonly reason: string;
  /**
   * `would-redrive` only in a dry run; `dead-again`: a new letter of a job this very redrive sent back
   * (it failed again while the redrive ran), left in the DLQ; `duplicate`: a second letter of the death
   * this redrive sent back (an interrupted dead-lettering sends two), left in the DLQ.
   */
  readonly outcome: 'redriven' | 'would-redrive' | 'skipped' | 'dead-again' | 'duplicate' | 'failed';
  /** Why a `skipped` letter stayed (docs/cli.md, "leaseq dlq redrive"); `detail` says it in words. */
  readonly skip?: RedriveSkip;
  /** Whether the DEAD job item was (or would be) reset. */
  readonly reset: boolean;
  /** Why it was skipped or failed, or a note on how it was sent. */
  readonly detail?: string;
  /** Id of the new message in the jobs queue. */
  readonly newMessageId?: string;
}

export interface RedriveReport {
  readonly dryRun: boolean;
  readonly matched: number;
  readonly redriven: number;
  readonly skipped: number;
  /** Of the redriven jobs, those that were dead-lettered again before the redrive ended. */
  readonly deadAgain: number;
  /** Second letters of deaths this redrive sent back (left in the DLQ). */
  readonly duplicates: number;
  readonly failed: number;
  /** Dead letters seen that the filter left alone. */
  readonly notMatched: number;
  /** Letters the browse received (any filter), next to `dlqDepth`. */
  readonly seen: number;
  /** Letters the DLQ held when the redrive began (visible + in flight; SQS's approximate count). */
  readonly dlqDepth: number;
  /** Set when `seen` is below `dlqDepth`: how many were not seen, and why. */
  readonly unseen?: string;
  readonly items: readonly RedriveItem[];
}

/**
 * Sends matching dead letters back to the jobs queue so they run again. For each: read the job item;
 * reset it unless it completed or runs (`resetForRedrive`: attempts 0, RETRY_WAIT); send the original
 * body to the jobs queue;
 * then delete the dead letter. The order makes a crash harmless: a reset item with its letter still in
 * the DLQ is sent by the next redrive; a letter sent but not deleted is a duplicate the workers drop by
 * dedup key. A job that dead-letters again during the same redrive is not sent a second time.
 */
export async function redrive(target: OpsTarget, options: RedriveOptions = {}): Promise<RedriveReport> {
  const run = startRun(target, options);
  const visibilitySeconds = redriveVisibilitySeconds(options.ratePerSecond);
  const browsed = await browse(
    target.clients.sqs,
    target.names.dlqUrl,
    { visibilitySeconds },
    async (message) => {
      const visit = await redriveLetter(run, message);
      // Letters named by id: the browse ends once each was seen.
      return run.wanted?.size === 0 ? { ...visit, stop: true } : visit;
    },
  );
  return reportOf(run, browsed);
}

/** One redrive while it walks the DLQ: its settings, and what it has done so far. */
interface RedriveRun {
  readonly target: OpsTarget;
  readonly options: RedriveOptions;
  readonly store: DynamoDbJobStore;
  readonly pacer: Pacer;
  readonly now: () => number;
  readonly filter: DeadLetterFilter;
  readonly limit: number;
  readonly fifo: boolean;
  /** The letters `filter.messageIds` names that the browse has not reached yet. */
  readonly wanted?: Set<string>;
  /**
   * Ids of the jobs-queue messages this redrive sent, and the jobs it sent (by dedup key): a later
   * letter of one of them is not sent a second time (see {@link judgeRepeat}).
   */
  readonly sentIds: Set<string>;
  readonly sentJobs: Map<string, EarlierSend>;
  readonly items: RedriveItem[];
  /** Dead letters seen that the filter left alone. */
  notMatched: number;
  /** Letters sent back (or, in a dry run, that would be), counted against `limit`. */
  taken: number;
}

function startRun(target: OpsTarget, options: RedriveOptions): RedriveRun {
  const { clients, names } = target;
  return {
    target,
    options,
    store: new DynamoDbJobStore({ client: clients.doc, tableName: names.jobsTable }),
    pacer: new Pacer({ perSecond: options.dryRun ? undefined : options.ratePerSecond }),
    now: options.now ?? Date.now,
    filter: options.filter ?? {},
    limit: options.limit ?? Number.POSITIVE_INFINITY,
    fifo: isFifoQueue(names.queueUrl),
    ...(options.filter?.messageIds ? { wanted: new Set(options.filter.messageIds) } : {}),
    sentIds: new Set<string>(),
    sentJobs: new Map<string, EarlierSend>(),
    items: [],
    notMatched: 0,
    taken: 0,
  };
}

function record(run: RedriveRun, item: RedriveItem): void {
  run.items.push(item);
  run.options.onProgress?.(item);
}

/** The fields of a {@link RedriveItem} that name its letter. */
type LetterFields = Pick<RedriveItem, 'messageId' | 'dedupKey' | 'type' | 'reason'>;

function letterFields(letter: DeadLetter): LetterFields {
  return {
    messageId: letter.messageId,
    ...(letter.dedupKey ? { dedupKey: letter.dedupKey } : {}),
    ...(letter.type ? { type: letter.type } : {}),
    reason: letter.reason,
  };
}

/** Decides what to do with one browsed letter and does it; a dry run stops at the decision. */
async function redriveLetter(run: RedriveRun, message: Message): Promise<Visit> {
  const letter = toDeadLetter(message);
  if (!matchesFilter(letter, run.filter)) {
    run.notMatched += 1;
    return KEEP;
  }
  run.wanted?.delete(letter.messageId);
  const fields = letterFields(letter);
  const facts = letterFacts(letter);
  const stays = await leftInDlq(run, letter, facts);
  if (stays) {
    record(run, { ...fields, ...stays, reset: false });
    return KEEP;
  }
  const item = letter.dedupKey ? await run.store.get(letter.dedupKey) : undefined;
  const plan = planRedrive(item, run.now(), facts);
  if (plan.action === 'skip') {
    record(run, { ...fields, outcome: 'skipped', skip: plan.skip, reset: false, detail: plan.why });
    return KEEP;
  }
  const reset = plan.action === 'reset-and-send';
  const note = plan.why ? { detail: plan.why } : {};
  const letterMessageId = facts.recorded ? { letterMessageId: facts.messageId } : {};
  let body = letter.body;
  if (run.options.payload) {
    // The schema's refusal ends the redrive before anything changed: the operator fixes the file.
    const problem = run.options.payload.check?.(letter.type ?? '', run.options.payload.value);
    if (problem) throw new PayloadRefusedError(letter.type ?? '(no type)', problem);
    try {
      body = editedBody(letter.body, run.options.payload.value, run.options.maxBodyBytes);
    } catch (error) {
      record(run, { ...fields, outcome: 'failed', reset: false, detail: messageOf(error) });
      return KEEP;
    }
  }
  if (run.options.dryRun) {
    record(run, { ...fields, outcome: 'would-redrive', reset, ...note });
    // Nothing is written: a later letter of this job finds the item as it is now.
    if (reset && letter.dedupKey && item)
      run.sentJobs.set(letter.dedupKey, { versionAfter: item.version, at: run.now(), ...letterMessageId });
    run.taken += 1;
    return { stop: run.taken >= run.limit };
  }
  const now = run.now();
  const by = {
    by: run.options.by ?? 'unknown',
    letter: letter.messageId,
    ...(run.options.payload ? { edited: true } : {}),
  };
  // The store checks the lease again, with the same margin, and that the item is still the version the
  // plan read: a worker may have claimed it since (a fresh send resetting a dead key makes it another job).
  if (
    reset &&
    letter.dedupKey &&
    !(await run.store.resetForRedrive(letter.dedupKey, now, now - REDRIVE_CLOCK_MARGIN_MS, by, item?.version))
  ) {
    record(run, {
      ...fields,
      outcome: 'skipped',
      skip: 'changed',
      reset: false,
      detail: 'job item changed while redriving (completed, or claimed by a live worker); run redrive again',
    });
    return KEEP;
  }
  // The reset moves the version by one; if the item moved between the read and the reset, this
  // guess is off and a later letter is judged by its age alone (it stays in the DLQ either way).
  const earlier: EarlierSend =
    reset && item
      ? { versionAfter: item.version + 1, at: now, ...letterMessageId }
      : { at: now, ...letterMessageId };
  return sendBack(
    run,
    message,
    { ...letter, body },
    { reset, note, earlier, ...(reset && item ? { item } : {}) },
  );
}

/**
 * Letters left in the DLQ before their job is planned: a later letter of a job this very redrive sent
 * back (sending it again would only repeat the failure, or send a second copy of one death), and,
 * unless asked for, a body the workers can only refuse again. A later letter of another message than
 * the one sent is planned on its own: it is not the item's job (an older death), and the plan says so.
 */
async function leftInDlq(
  run: RedriveRun,
  letter: DeadLetter,
  facts: LetterFacts,
): Promise<
  | {
      readonly outcome: 'dead-again' | 'duplicate' | 'skipped';
      readonly skip?: RedriveSkip;
      readonly detail: string;
    }
  | undefined
> {
  const sent = letter.dedupKey ? run.sentJobs.get(letter.dedupKey) : undefined;
  const ownMessage = letter.originalMessageId !== undefined && run.sentIds.has(letter.originalMessageId);
  const earlier = sent && !ownMessage && isOtherMessage(facts, sent) ? undefined : sent;
  if (earlier || ownMessage) {
    // Only a second letter of a reset job needs the item (one read, for this rare letter only).
    const needsItem = !ownMessage && earlier?.versionAfter !== undefined && letter.dedupKey;
    const item = needsItem ? await run.store.get(letter.dedupKey ?? '') : undefined;
    return judgeRepeat(letter, run.sentIds, earlier, item) === 'duplicate'
      ? {
          outcome: 'duplicate',
          detail:
            'a second letter of the death this redrive sent back (an interrupted dead-lettering sends two); it stays: a later redrive skips it once the job completed, and purge removes it',
        }
      : {
          outcome: 'dead-again',
          detail: 'sent back by this redrive and dead-lettered again; this new letter stays',
        };
  }
  if (!run.options.includeHopeless && HOPELESS_REASONS.includes(letter.reason)) {
    return {
      outcome: 'skipped',
      skip: 'hopeless',
      detail: `${letter.reason}: the same body would only be refused again (--include-invalid sends it)`,
    };
  }
  return undefined;
}

/**
 * Sends the letter's body to the jobs queue, then deletes the letter. A failed send keeps the letter
 * for the next redrive and undoes the reset (`item`, as read before it): no message would bring a reset
 * job back, and a DEAD job stays listed as dead. A failed delete leaves a duplicate the workers drop by
 * dedup key.
 */
async function sendBack(
  run: RedriveRun,
  message: Message,
  letter: DeadLetter,
  how: {
    readonly reset: boolean;
    readonly note: { readonly detail?: string };
    readonly earlier: EarlierSend;
    readonly item?: JobItem;
  },
): Promise<Visit> {
  const { reset, note, earlier } = how;
  const { clients, names } = run.target;
  const fields = letterFields(letter);
  await run.pacer.take(1);
  let newMessageId: string;
  try {
    // The group its job was sent in (SQS took it); else the one the producer would give its key.
    const groupId = letter.systemAttributes.MessageGroupId ?? groupIdForKey(letter.dedupKey ?? 'leaseq');
    const out = await clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: names.queueUrl,
        MessageBody: letter.body,
        ...resentInPlaceOf(letter.originalMessageId),
        ...(run.fifo ? { MessageGroupId: groupId, MessageDeduplicationId: randomUUID() } : {}),
      }),
    );
    newMessageId = out.MessageId ?? '';
  } catch (error) {
    const undone = await undoReset(run, how);
    record(run, {
      ...fields,
      outcome: 'failed',
      reset: reset && !undone,
      detail: `send to the jobs queue failed: ${messageOf(error)}; ${
        undone || !reset
          ? 'the job is as it was, its letter stays'
          : 'the job was reset and waits for this letter, which stays: run redrive again'
      }`,
    });
    return KEEP;
  }
  run.sentIds.add(newMessageId);
  if (letter.dedupKey) run.sentJobs.set(letter.dedupKey, earlier);
  run.taken += 1;
  try {
    await clients.sqs.send(
      new DeleteMessageCommand({ QueueUrl: names.dlqUrl, ReceiptHandle: message.ReceiptHandle ?? '' }),
    );
  } catch (error) {
    const detail = `sent, but the dead letter stays in the DLQ (${messageOf(error)}); a second redrive would send a duplicate the workers drop`;
    record(run, { ...fields, outcome: 'redriven', reset, newMessageId, detail });
    return { stop: run.taken >= run.limit };
  }
  record(run, { ...fields, outcome: 'redriven', reset, newMessageId, ...note });
  return { deleted: true, stop: run.taken >= run.limit };
}

/** Puts the item back as it was before this run's reset (its send failed); false if it could not. */
async function undoReset(
  run: RedriveRun,
  how: { readonly reset: boolean; readonly earlier: EarlierSend; readonly item?: JobItem },
): Promise<boolean> {
  const { item, earlier } = how;
  if (!how.reset || !item || earlier.versionAfter === undefined) return false;
  try {
    return await run.store.undoRedrive(item, earlier.versionAfter, run.now());
  } catch {
    return false;
  }
}

function reportOf(run: RedriveRun, browsed: BrowseResult): RedriveReport {
  const { items, options } = run;
  // A redrive that stopped at its --limit saw fewer letters on purpose: no shortfall to explain.
  const unseen = run.taken >= run.limit ? undefined : shortfall(browsed);
  const count = (outcome: RedriveItem['outcome']) => items.filter((i) => i.outcome === outcome).length;
  return {
    dryRun: options.dryRun ?? false,
    matched: items.length,
    redriven: count(options.dryRun ? 'would-redrive' : 'redriven'),
    skipped: count('skipped'),
    deadAgain: count('dead-again'),
    duplicates: count('duplicate'),
    failed: count('failed'),
    notMatched: run.notMatched,
    seen: browsed.seen,
    dlqDepth: browsed.depth,
    ...(unseen ? { unseen } : {}),
    items,
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
