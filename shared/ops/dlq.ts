import { randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  type Message,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import { readDeadLetterAttributes } from '../core/adapters/sqs-job-queue.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { BODY_PROBLEMS, ENVELOPE_PROBLEMS } from '../errors.ts';
import { Pacer } from '../producer/pacer.ts';
import { DeadLetterNotFoundError, InvalidFilterError } from './ops-errors.ts';
import { queueStats, totalDepth } from './queue-stats.ts';
import { isFifoQueue, type OpsTarget } from './target.ts';

/**
 * `reason` of a message the queue's own redrive policy moved (it carries no leaseq attributes): the
 * safety net fired after `maxReceiveCount` receives, not leaseq's attempt counter.
 */
export const SQS_REDRIVE_REASON = 'sqs-max-receives';

/** Every `reason` a dead letter can carry: leaseq's own, and the queue's safety net. */
export const DEAD_LETTER_REASONS: readonly string[] = [
  'permanent-error',
  'max-attempts',
  ...ENVELOPE_PROBLEMS.map((p) => `invalid-${p}`),
  SQS_REDRIVE_REASON,
];

/** Reasons whose body a redrive could only dead-letter again (skipped unless asked for). */
export const HOPELESS_REASONS: readonly string[] = BODY_PROBLEMS.map((p) => `invalid-${p}`);

/**
 * Checks a `--reason` filter: an exact known reason, or a prefix ending in `*` that matches one.
 * @throws InvalidFilterError naming the known reasons.
 */
export function assertKnownReason(reason: string): void {
  const known = reason.endsWith('*')
    ? DEAD_LETTER_REASONS.some((r) => r.startsWith(reason.slice(0, -1)))
    : DEAD_LETTER_REASONS.includes(reason);
  if (!known) {
    throw new InvalidFilterError(
      `no dead letter has reason ${JSON.stringify(reason)}; expected one of ${DEAD_LETTER_REASONS.join(', ')} (or a prefix ending in *)`,
    );
  }
}

/** A dead letter without its body: what `leaseq dlq list` shows. */
export interface DeadLetterSummary {
  /** The DLQ message id. */
  readonly messageId: string;
  readonly dedupKey?: string;
  readonly type?: string;
  readonly reason: string;
  readonly errorClass?: string;
  readonly errorMessage?: string;
  readonly attempts?: number;
  readonly worker?: string;
  /** ISO 8601, when leaseq dead-lettered it (or when SQS received it into the DLQ). */
  readonly deadAt?: string;
  /** Id of the jobs-queue message that was dead-lettered. */
  readonly originalMessageId?: string;
  /** How often the DLQ message was received (browsing counts too). */
  readonly receiveCount?: number;
}

/** A dead letter with its body and every attribute: what `leaseq dlq show` prints. */
export interface DeadLetter extends DeadLetterSummary {
  readonly body: string;
  /** leaseq's reason attributes, without the `leaseq.` prefix. */
  readonly attributes: Readonly<Record<string, string>>;
  /** SQS system attributes (SentTimestamp, ApproximateReceiveCount, MessageGroupId, ...). */
  readonly systemAttributes: Readonly<Record<string, string>>;
}

/** Decodes a received DLQ message. Reads the body only when the attributes lack the dedup key or type. */
export function toDeadLetter(message: Message): DeadLetter {
  const attributes = readDeadLetterAttributes(
    message.MessageAttributes as Record<string, MessageAttributeValue> | undefined,
  );
  const system: Record<string, string> = { ...(message.Attributes ?? {}) };
  const body = message.Body ?? '';
  const hint = attributes.dedupKey && attributes.type ? {} : bodyHint(body);
  const dedupKey = attributes.dedupKey ?? hint.dedupKey;
  const type = attributes.type ?? hint.type;
  const attempts = attributes.attempts === undefined ? Number.NaN : Number(attributes.attempts);
  const sent = Number(system.SentTimestamp);
  const deadAt = attributes.deadAt ?? (Number.isFinite(sent) ? new Date(sent).toISOString() : undefined);
  const receives = Number(system.ApproximateReceiveCount);
  return {
    messageId: message.MessageId ?? '',
    ...(dedupKey ? { dedupKey } : {}),
    ...(type ? { type } : {}),
    reason: attributes.reason ?? SQS_REDRIVE_REASON,
    ...(attributes.errorClass ? { errorClass: attributes.errorClass } : {}),
    ...(attributes.errorMessage ? { errorMessage: attributes.errorMessage } : {}),
    ...(Number.isFinite(attempts) ? { attempts } : {}),
    ...(attributes.worker ? { worker: attributes.worker } : {}),
    ...(deadAt ? { deadAt } : {}),
    ...(attributes.originalMessageId ? { originalMessageId: attributes.originalMessageId } : {}),
    ...(Number.isFinite(receives) ? { receiveCount: receives } : {}),
    body,
    attributes,
    systemAttributes: system,
  };
}

/** Drops the body and raw attributes. */
export function summarise(letter: DeadLetter): DeadLetterSummary {
  const { body: _body, attributes: _attributes, systemAttributes: _system, ...summary } = letter;
  return summary;
}

function bodyHint(body: string): { dedupKey?: string; type?: string } {
  try {
    const raw: unknown = JSON.parse(body);
    if (typeof raw !== 'object' || raw === null) return {};
    const record = raw as Record<string, unknown>;
    return {
      ...(typeof record.dedupKey === 'string' ? { dedupKey: record.dedupKey } : {}),
      ...(typeof record.type === 'string' ? { type: record.type } : {}),
    };
  } catch {
    return {};
  }
}

/** What a visitor did with a browsed message: `deleted` ones are not released; `stop` ends the browse. */
interface Visit {
  readonly deleted?: boolean;
  readonly stop?: boolean;
}
const KEEP: Visit = {};

interface BrowseOptions {
  readonly limit?: number;
  /** How long browsed messages stay hidden while the browse runs. */
  readonly visibilitySeconds: number;
}

/**
 * Walks the DLQ: receives pages (each received message stays hidden so the next page shows others),
 * hands each new message to `visit`, and finally makes every kept message visible again at once
 * (ChangeMessageVisibility 0). Ends when a 1 s long poll brings nothing new, at `limit`, or when
 * `visit` says stop.
 *
 * The trade-off: SQS has no "peek". While a browse runs, the messages it holds are invisible to other
 * readers of the DLQ and their receive count grows by one; nothing consumes the DLQ automatically, so
 * this costs nothing but that count. A browse that is killed leaves them hidden for `visibilitySeconds`.
 */
async function browse(
  sqs: SQSClient,
  queueUrl: string,
  options: BrowseOptions,
  visit: (message: Message) => Promise<Visit>,
): Promise<void> {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const seen = new Set<string>();
  const held = new Map<string, string>();
  try {
    let stop = false;
    let stalePages = 0;
    while (!stop && seen.size < limit) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: Math.min(10, limit - seen.size),
          WaitTimeSeconds: 1,
          VisibilityTimeout: options.visibilitySeconds,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      let fresh = 0;
      for (const message of out.Messages ?? []) {
        const id = message.MessageId ?? '';
        const handle = message.ReceiptHandle ?? '';
        if (seen.has(id)) {
          // Its visibility lapsed during a long browse; keep the newest receipt handle to release it.
          if (held.has(id)) held.set(id, handle);
          continue;
        }
        seen.add(id);
        fresh += 1;
        if (stop) {
          held.set(id, handle);
          continue;
        }
        const decision = await visit(message);
        if (!decision.deleted) held.set(id, handle);
        if (decision.stop) stop = true;
      }
      // An empty page means the queue has nothing more to show. A page of letters seen before (their
      // browse visibility lapsed on a long run) does not: look a few pages further before giving up.
      if ((out.Messages ?? []).length === 0) break;
      stalePages = fresh === 0 ? stalePages + 1 : 0;
      if (stalePages >= 3) break;
    }
  } finally {
    await release(sqs, queueUrl, [...held.values()]);
  }
}

/** Makes received messages visible again now. Failures only delay them until their visibility ends. */
async function release(sqs: SQSClient, queueUrl: string, handles: readonly string[]): Promise<void> {
  for (let i = 0; i < handles.length; i += 10) {
    const page = handles.slice(i, i + 10);
    try {
      await sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: page.map((handle, j) => ({ Id: String(j), ReceiptHandle: handle, VisibilityTimeout: 0 })),
        }),
      );
    } catch {
      // They reappear when the browse visibility ends; nothing is lost.
    }
  }
}

const BROWSE_VISIBILITY_SECONDS = 30;

/** Lists dead letters (without bodies), oldest first. See {@link browse} for what listing costs. */
export async function listDeadLetters(
  sqs: SQSClient,
  dlqUrl: string,
  options: { readonly limit?: number } = {},
): Promise<DeadLetterSummary[]> {
  const letters: DeadLetterSummary[] = [];
  await browse(
    sqs,
    dlqUrl,
    { visibilitySeconds: BROWSE_VISIBILITY_SECONDS, ...(options.limit ? { limit: options.limit } : {}) },
    async (message) => {
      letters.push(summarise(toDeadLetter(message)));
      return KEEP;
    },
  );
  return letters.sort((a, b) => (a.deadAt ?? '').localeCompare(b.deadAt ?? ''));
}

/**
 * Finds one dead letter by its DLQ message id, or else by dedup key, with its body and attributes.
 * @throws DeadLetterNotFoundError when no message matches.
 */
export async function findDeadLetter(sqs: SQSClient, dlqUrl: string, id: string): Promise<DeadLetter> {
  let byId: DeadLetter | undefined;
  let byKey: DeadLetter | undefined;
  await browse(sqs, dlqUrl, { visibilitySeconds: BROWSE_VISIBILITY_SECONDS }, async (message) => {
    const letter = toDeadLetter(message);
    if (letter.messageId === id) {
      byId = letter;
      return { stop: true };
    }
    if (!byKey && letter.dedupKey === id) byKey = letter;
    return KEEP;
  });
  const found = byId ?? byKey;
  if (!found) throw new DeadLetterNotFoundError(id);
  return found;
}

/** Which dead letters a redrive takes. Every given field must match. */
export interface DeadLetterFilter {
  /** Exact job type. */
  readonly type?: string;
  /** Exact reason, or a prefix ending in `*` (`invalid-*`). */
  readonly reason?: string;
  /** Exact dedup key. */
  readonly dedupKey?: string;
}

/** Pure: whether a dead letter passes the filter. */
export function matchesFilter(letter: DeadLetterSummary, filter: DeadLetterFilter): boolean {
  if (filter.type !== undefined && letter.type !== filter.type) return false;
  if (filter.dedupKey !== undefined && letter.dedupKey !== filter.dedupKey) return false;
  if (filter.reason !== undefined) {
    const wanted = filter.reason;
    const ok = wanted.endsWith('*')
      ? letter.reason.startsWith(wanted.slice(0, -1))
      : letter.reason === wanted;
    if (!ok) return false;
  }
  return true;
}

/** What redrive does with a dead letter, given its job item. */
export type RedrivePlan =
  | { readonly action: 'reset-and-send'; readonly why?: string }
  | { readonly action: 'send'; readonly why: string }
  | { readonly action: 'skip'; readonly why: string };

/**
 * Pure: the redrive decision for a job item.
 * - DEAD: reset it (attempts 0, RETRY_WAIT) so the claim accepts the job again, then send.
 * - none (never claimed, e.g. a bad body, or TTL removed it), RETRY_WAIT (an earlier redrive reset it,
 *   or the worker could not mark it DEAD), IN_PROGRESS with an expired lease: send as is.
 * - COMPLETED: skip; the job ran, the dead letter is stale (purge it).
 * - IN_PROGRESS with a live lease: skip; a copy is running right now.
 */
export function planRedrive(item: JobItem | undefined, now: number): RedrivePlan {
  if (!item) return { action: 'send', why: 'no job item (never claimed, or expired by TTL)' };
  switch (item.status) {
    case JobStatus.Dead:
      return { action: 'reset-and-send' };
    case JobStatus.RetryWait:
      return { action: 'reset-and-send', why: 'job item was waiting for a retry; attempts start again' };
    case JobStatus.Completed:
      return { action: 'skip', why: 'job already completed; this dead letter is stale (purge it)' };
    case JobStatus.InProgress:
      return item.leaseUntil > now
        ? { action: 'skip', why: `job is running now (lease held by ${item.owner ?? 'unknown'})` }
        : {
            action: 'reset-and-send',
            why: 'job lease expired (its worker died, or its dead marking failed)',
          };
  }
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
}

export interface RedriveItem {
  readonly messageId: string;
  readonly dedupKey?: string;
  readonly type?: string;
  readonly reason: string;
  /**
   * `would-redrive` only in a dry run; `dead-again`: a new letter of a job this very redrive sent back
   * (it failed again while the redrive ran), left in the DLQ.
   */
  readonly outcome: 'redriven' | 'would-redrive' | 'skipped' | 'dead-again' | 'failed';
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
  readonly failed: number;
  /** Dead letters seen that the filter left alone. */
  readonly notMatched: number;
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
  const { clients, names } = target;
  const store = new DynamoDbJobStore({ client: clients.doc, tableName: names.jobsTable });
  const pacer = new Pacer({ perSecond: options.dryRun ? undefined : options.ratePerSecond });
  const now = options.now ?? Date.now;
  const filter = options.filter ?? {};
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const fifo = isFifoQueue(names.queueUrl);
  const sentIds = new Set<string>();
  const sentKeys = new Set<string>();
  const items: RedriveItem[] = [];
  let notMatched = 0;
  let taken = 0;
  // A page of 10 must finish (at the rate limit) before the page's messages show up again.
  const visibilitySeconds = 60 + Math.ceil(10 / (options.ratePerSecond ?? Number.POSITIVE_INFINITY));

  const record = (item: RedriveItem): void => {
    items.push(item);
    options.onProgress?.(item);
  };

  await browse(clients.sqs, names.dlqUrl, { visibilitySeconds }, async (message) => {
    const letter = toDeadLetter(message);
    if (!matchesFilter(letter, filter)) {
      notMatched += 1;
      return KEEP;
    }
    const base = {
      messageId: letter.messageId,
      ...(letter.dedupKey ? { dedupKey: letter.dedupKey } : {}),
      ...(letter.type ? { type: letter.type } : {}),
      reason: letter.reason,
    };
    if (
      (letter.originalMessageId && sentIds.has(letter.originalMessageId)) ||
      (letter.dedupKey && sentKeys.has(letter.dedupKey))
    ) {
      record({
        ...base,
        outcome: 'dead-again',
        reset: false,
        detail: 'sent back by this redrive and dead-lettered again; this new letter stays',
      });
      return KEEP;
    }
    if (!options.includeHopeless && HOPELESS_REASONS.includes(letter.reason)) {
      record({
        ...base,
        outcome: 'skipped',
        reset: false,
        detail: `${letter.reason}: the same body would only be refused again (--include-invalid sends it)`,
      });
      return KEEP;
    }
    const item = letter.dedupKey ? await store.get(letter.dedupKey) : undefined;
    const plan = planRedrive(item, now());
    if (plan.action === 'skip') {
      record({ ...base, outcome: 'skipped', reset: false, detail: plan.why });
      return KEEP;
    }
    const reset = plan.action === 'reset-and-send';
    const note = plan.why ? { detail: plan.why } : {};
    if (options.dryRun) {
      record({ ...base, outcome: 'would-redrive', reset, ...note });
      taken += 1;
      return { stop: taken >= limit };
    }
    if (reset && letter.dedupKey && !(await store.resetForRedrive(letter.dedupKey, now()))) {
      record({
        ...base,
        outcome: 'skipped',
        reset: false,
        detail:
          'job item changed while redriving (completed, or claimed by a live worker); run redrive again',
      });
      return KEEP;
    }
    await pacer.take(1);
    let newMessageId: string;
    try {
      const groupId = letter.systemAttributes.MessageGroupId ?? letter.dedupKey ?? 'leaseq';
      const out = await clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: names.queueUrl,
          MessageBody: letter.body,
          ...(fifo ? { MessageGroupId: groupId, MessageDeduplicationId: randomUUID() } : {}),
        }),
      );
      newMessageId = out.MessageId ?? '';
    } catch (error) {
      record({
        ...base,
        outcome: 'failed',
        reset,
        detail: `send to the jobs queue failed: ${messageOf(error)}`,
      });
      return KEEP;
    }
    sentIds.add(newMessageId);
    if (letter.dedupKey) sentKeys.add(letter.dedupKey);
    taken += 1;
    try {
      await clients.sqs.send(
        new DeleteMessageCommand({ QueueUrl: names.dlqUrl, ReceiptHandle: message.ReceiptHandle ?? '' }),
      );
    } catch (error) {
      const detail = `sent, but the dead letter stays in the DLQ (${messageOf(error)}); a second redrive would send a duplicate the workers drop`;
      record({ ...base, outcome: 'redriven', reset, newMessageId, detail });
      return { stop: taken >= limit };
    }
    record({ ...base, outcome: 'redriven', reset, newMessageId, ...note });
    return { deleted: true, stop: taken >= limit };
  });

  const count = (outcome: RedriveItem['outcome']) => items.filter((i) => i.outcome === outcome).length;
  return {
    dryRun: options.dryRun ?? false,
    matched: items.length,
    redriven: count(options.dryRun ? 'would-redrive' : 'redriven'),
    skipped: count('skipped'),
    deadAgain: count('dead-again'),
    failed: count('failed'),
    notMatched,
    items,
  };
}

/** Result of {@link purgeDlq}. */
export interface PurgeReport {
  readonly deleted: number;
  /** What SQS still counts afterwards (messages another reader held hidden, or that arrived meanwhile). */
  readonly remaining: number;
}

/**
 * Deletes every message it can receive from the DLQ. It receives and deletes in pages instead of calling
 * PurgeQueue: that gives an exact count, takes effect at once (PurgeQueue may take 60 s) and is not
 * limited to once a minute. DLQs are small by nature; for a huge one PurgeQueue would be faster.
 */
export async function purgeDlq(sqs: SQSClient, dlqUrl: string): Promise<PurgeReport> {
  let deleted = 0;
  for (;;) {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: dlqUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 30,
      }),
    );
    const messages = out.Messages ?? [];
    if (messages.length === 0) break;
    const del = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: dlqUrl,
        Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? '' })),
      }),
    );
    deleted += del.Successful?.length ?? 0;
  }
  return { deleted, remaining: totalDepth(await queueStats(sqs, dlqUrl)) };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
