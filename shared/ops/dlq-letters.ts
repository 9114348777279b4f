/**
 * What a dead letter is to the operator: the reasons it can carry, how a received DLQ message decodes
 * (leaseq's reason attributes, else what the body and SQS tell), and the filter that picks letters.
 * Pure, so `list`, `show` and `redrive` read letters the same way.
 */
import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import { readDeadLetterAttributes } from '../core/adapters/sqs-job-queue.ts';
import { isEnvelopeDedupKey, isEnvelopeType } from '../core/contract/envelope.ts';
import { BODY_PROBLEMS, DEDUP_KEY_COLLISION, ENVELOPE_PROBLEMS, STORE_PROBLEMS } from '../errors.ts';
import { InvalidFilterError } from './ops-errors.ts';

/**
 * `reason` of a message the queue's own redrive policy moved (it carries no leaseq attributes): the
 * safety net fired after `maxReceiveCount` receives, not leaseq's attempt counter.
 */
export const SQS_REDRIVE_REASON = 'sqs-max-receives';

/** Every `reason` a dead letter can carry: leaseq's own, and the queue's safety net. */
export const DEAD_LETTER_REASONS: readonly string[] = [
  'permanent-error',
  'max-attempts',
  'max-conflicts',
  ...ENVELOPE_PROBLEMS.map((p) => `invalid-${p}`),
  ...STORE_PROBLEMS.map((p) => `store-${p}`),
  DEDUP_KEY_COLLISION,
  SQS_REDRIVE_REASON,
];

/**
 * Reasons whose body a redrive could only dead-letter again (skipped unless asked for). A collision
 * collides again while the other job's item lives (15 days, longer than the DLQ keeps the letter).
 */
export const HOPELESS_REASONS: readonly string[] = [
  ...BODY_PROBLEMS.map((p) => `invalid-${p}`),
  DEDUP_KEY_COLLISION,
];

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

/** A hint field of a dead letter that was there but is left out: it does not match the envelope's pattern. */
export type UnreadableField = 'dedupKey' | 'type';

/** A dead letter without its body: what `leaseq dlq list` shows. */
export interface DeadLetterSummary {
  /** The DLQ message id. */
  readonly messageId: string;
  /**
   * From leaseq's attributes, else read back from the body; only when it matches the envelope's pattern
   * (otherwise it is left out and named in `unreadable`).
   */
  readonly dedupKey?: string;
  /** Like `dedupKey`: only a type matching the envelope's pattern. */
  readonly type?: string;
  /**
   * The hint fields the letter carried (in its attributes or its body) that are not a valid dedup key or
   * type: a bad body's text, left out so nobody prints or matches on it. Absent when there is none.
   */
  readonly unreadable?: readonly UnreadableField[];
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
  const rawDedupKey = attributes.dedupKey ?? hint.dedupKey;
  const rawType = attributes.type ?? hint.type;
  // A bad body (or a hand-made letter) can carry any text here: keep only what an envelope could carry.
  const dedupKey = rawDedupKey !== undefined && isEnvelopeDedupKey(rawDedupKey) ? rawDedupKey : undefined;
  const type = rawType !== undefined && isEnvelopeType(rawType) ? rawType : undefined;
  const unreadable: UnreadableField[] = [
    ...(rawDedupKey && !dedupKey ? (['dedupKey'] as const) : []),
    ...(rawType && !type ? (['type'] as const) : []),
  ];
  const attempts = attributes.attempts === undefined ? Number.NaN : Number(attributes.attempts);
  const sent = Number(system.SentTimestamp);
  const deadAt = attributes.deadAt ?? (Number.isFinite(sent) ? new Date(sent).toISOString() : undefined);
  const receives = Number(system.ApproximateReceiveCount);
  return {
    messageId: message.MessageId ?? '',
    ...(dedupKey ? { dedupKey } : {}),
    ...(type ? { type } : {}),
    ...(unreadable.length > 0 ? { unreadable } : {}),
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
    // Only an envelope's (or a broken envelope's) fields: a plain body's own `type` is the producer's, not a
    // job type (docs/envelope.md, "Plain bodies"), and `dedupKey` is the field only envelopes carry.
    if (typeof record.dedupKey !== 'string') return {};
    return {
      ...(typeof record.dedupKey === 'string' ? { dedupKey: record.dedupKey } : {}),
      ...(typeof record.type === 'string' ? { type: record.type } : {}),
    };
  } catch {
    return {};
  }
}

/** Which dead letters a redrive takes. Every given field must match. */
export interface DeadLetterFilter {
  /** Exact job type. */
  readonly type?: string;
  /** Exact reason, or a prefix ending in `*` (`invalid-*`). */
  readonly reason?: string;
  /** Exact dedup key. */
  readonly dedupKey?: string;
  /** Only these letters, by DLQ message id (what the inspector's selection names). */
  readonly messageIds?: readonly string[];
  /** Case-insensitive substring of the letter's error (`class: message`). */
  readonly errorContains?: string;
  /** Only letters dead at or after this (epoch ms; leaseq's `deadAt`, else when the DLQ received it). */
  readonly since?: number;
}

/** Pure: whether a dead letter passes the filter. */
export function matchesFilter(letter: DeadLetterSummary, filter: DeadLetterFilter): boolean {
  if (filter.type !== undefined && letter.type !== filter.type) return false;
  if (filter.dedupKey !== undefined && letter.dedupKey !== filter.dedupKey) return false;
  if (filter.messageIds !== undefined && !filter.messageIds.includes(letter.messageId)) return false;
  if (filter.reason !== undefined) {
    const wanted = filter.reason;
    const ok = wanted.endsWith('*')
      ? letter.reason.startsWith(wanted.slice(0, -1))
      : letter.reason === wanted;
    if (!ok) return false;
  }
  if (filter.errorContains !== undefined) {
    const text = `${letter.errorClass ?? ''}: ${letter.errorMessage ?? ''}`.toLowerCase();
    if (!text.includes(filter.errorContains.toLowerCase())) return false;
  }
  if (filter.since !== undefined) {
    // A letter whose time is unknown is not known to be in the window: left alone.
    const deadAt = Date.parse(letter.deadAt ?? '');
    if (!(deadAt >= filter.since)) return false;
  }
  return true;
}
