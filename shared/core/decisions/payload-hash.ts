// "The same payload" (docs/protocol.md, "A duplicate with another payload"): the hash a message's checked
// payload gets, stored on the job item by its first claim, and what a refused claim does when the item's
// hash is another one. Pure.
import { hash } from 'node:crypto';
import type { JobItem } from '../contract/job-item.ts';
import { JobStatus } from '../contract/statuses.ts';
import { deadKeyExpired } from './history-events.ts';
import { type MessageRef, sentForAnotherLife } from './message-identity.ts';

/**
 * What a job type does with a message whose dedup key names a job of another payload
 * (`JobDefinition.onPayloadMismatch`): `dead-letter` it (reason `payload-mismatch`, never run), take it
 * as a `copy` (no hash is computed or stored), or run it as a `new-job` once the job under the key ended.
 */
export const PayloadMismatch = {
  DeadLetter: 'dead-letter',
  Copy: 'copy',
  NewJob: 'new-job',
} as const;
export type PayloadMismatch = (typeof PayloadMismatch)[keyof typeof PayloadMismatch];

/** The dead letter's reason of a message refused for its payload. */
export const PAYLOAD_MISMATCH = 'payload-mismatch';

/** Bytes of SHA-256 kept: 128 bits, 22 characters of base64url (a collision is out of reach). */
export const PAYLOAD_HASH_BYTES = 16;

/**
 * JSON with every object's keys sorted (code unit order), as `JSON.stringify` writes values otherwise:
 * `toJSON` honoured, `undefined` and functions left out of objects and `null` in arrays, a number that is
 * not finite `null`. A bigint is written as its digits (JSON.stringify would throw).
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  write(value, out);
  return out.join('');
}

function write(value: unknown, out: string[]): boolean {
  let v = value;
  if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
    v = (v as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof v) {
    case 'string':
      out.push(JSON.stringify(v));
      return true;
    case 'number':
      out.push(Number.isFinite(v) ? String(v) : 'null');
      return true;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return true;
    case 'bigint':
      out.push(v.toString());
      return true;
    case 'object': {
      if (v === null) {
        out.push('null');
        return true;
      }
      if (Array.isArray(v)) {
        out.push('[');
        v.forEach((element, i) => {
          if (i > 0) out.push(',');
          if (!write(element, out)) out.push('null');
        });
        out.push(']');
        return true;
      }
      const record = v as Record<string, unknown>;
      out.push('{');
      let first = true;
      for (const key of Object.keys(record).sort()) {
        const member = record[key];
        if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
        out.push(first ? '' : ',', JSON.stringify(key), ':');
        first = false;
        write(member, out);
      }
      out.push('}');
      return true;
    }
    default:
      // undefined, a function, a symbol: nothing (JSON leaves them out).
      return false;
  }
}

/**
 * The payload hash of a checked payload: SHA-256 of the canonical JSON of `payload` (or of what `select`
 * takes from it: the type's `payloadHash` option), its first {@link PAYLOAD_HASH_BYTES} bytes in base64url.
 */
export function payloadHash(payload: unknown, select?: (payload: never) => unknown): string {
  const defining = select === undefined ? payload : select(payload as never);
  // The one-shot digest: no Hash object per message (measurably less garbage on the happy path).
  return hash('sha256', canonicalJson(defining), 'buffer')
    .subarray(0, PAYLOAD_HASH_BYTES)
    .toString('base64url');
}

/** The two hashes of a mismatch: the job item's (`job`) and the refused message's (`message`). */
export interface PayloadHashes {
  readonly job: string;
  readonly message: string;
}

/** What a refused claim does about a message whose payload hash differs from its job item's. */
export type MismatchDecision =
  /** Dead-letter the message (`payload-mismatch`); the job is untouched but for a history event. */
  | { readonly kind: 'letter'; readonly hashes: PayloadHashes }
  /** The job under the key ended (COMPLETED or DEAD): claim the key as a new job (`new-job`). */
  | { readonly kind: 'new-life'; readonly hashes: PayloadHashes }
  /** The job under the key is unfinished (`new-job`): keep the message hidden this long, decide again. */
  | { readonly kind: 'wait'; readonly hideForMs: number; readonly hashes: PayloadHashes };

/**
 * Pure: whether `message` (its payload hash `messageHash`, undefined when its type compares none) is a
 * message of another payload than the job item `item` of its type, and what `policy` makes of it.
 * Undefined: not a mismatch, the refusal is decided as before (claim-decision.ts): the same hash, an
 * item with no hash (written before hashes, or by a `copy` type: the upgrade path reports nothing), a
 * cancelled key (a cancel stops whatever comes under it), and a dead key this message may reset as a
 * fresh send (past `deadKeyUntil`: a new life, whatever its payload). A job that is unfinished with its
 * lease over waits `minWaitMs` (its own message is due to claim it).
 */
export function decideMismatch(
  item: Pick<
    JobItem,
    'status' | 'payloadHash' | 'leaseUntil' | 'deadKeyUntil' | 'messageId' | 'originId' | 'life'
  >,
  messageHash: string | undefined,
  policy: PayloadMismatch | undefined,
  now: number,
  message?: MessageRef & { readonly minWaitMs?: number },
): MismatchDecision | undefined {
  if (messageHash === undefined || item.payloadHash === undefined || item.payloadHash === messageHash) {
    return undefined;
  }
  if (policy === PayloadMismatch.Copy || item.status === JobStatus.Cancelled) return undefined;
  if (deadKeyExpired(item, now, message)) return undefined;
  // A redrive's message of another life of the key is that life's copy (dropped by the life rules), and
  // one of this life is its letter's job: never a new job of the key.
  if (message && sentForAnotherLife(item, message)) return undefined;
  const hashes = { job: item.payloadHash, message: messageHash };
  if (policy !== PayloadMismatch.NewJob || message?.life !== undefined) return { kind: 'letter', hashes };
  if (item.status === JobStatus.Completed || item.status === JobStatus.Dead)
    return { kind: 'new-life', hashes };
  const live = item.leaseUntil - now;
  return { kind: 'wait', hideForMs: live > 0 ? live : (message?.minWaitMs ?? 1000), hashes };
}
