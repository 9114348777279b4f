// Concurrency limits (docs/jobs.md, "Concurrency limits"; docs/protocol.md, "Limits"): before the fast
// path and the claim, a job takes one slot of each limit of its type, a named lease on the leases table
// (`slot:<type or name>:<* or k:key>#<i>`), heartbeated like ctx.withLease's and fenced into the job's
// writes that carry effects. No free slot: the message is bounced (limit-bounce.ts), no attempt used.
// The processor releases the slots after the attempt's commit or release, in a finally.

import { errorClass } from '../../error-text.ts';
import { LeaseBusyError } from '../../errors.ts';
import { type LeaseItem, type LeaseStore, SLOT_ITEM_PREFIX } from '../contract/lease-store.ts';
import { type HeldLease, holdLease } from '../leases/named-lease.ts';
import type { AnyJobDefinition, ConcurrencyLimit } from '../model/job-definition.ts';
import { concurrencyLimits } from '../model/registry.ts';
import type { Job } from './attempt.ts';
import type { Settings } from './settings.ts';

/** Longest key value a limit's `key` function may return (it becomes part of a lease key). */
export const LIMIT_KEY_MAX = 200;

/** Free slots tried after a busy first one and a read of the scope, before the job is bounced. */
const FREE_SLOT_TRIES = 3;

/** A limit's `key` function threw or returned no usable key: the message is dead-lettered `invalid-limit-key`. */
export class InvalidLimitKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidLimitKeyError';
  }
}

/**
 * The scope of `limit` for `payload`: `slot:<name or type>:*` for a type-wide limit,
 * `slot:<name or type>:k:<key>` for a keyed one. Slot i is `<scope>#<i>`.
 * @throws InvalidLimitKeyError when the key function throws or returns anything but a non-empty string of
 * at most LIMIT_KEY_MAX characters (the text names the limit and the problem, never the payload).
 */
export function slotScope(type: string, limit: ConcurrencyLimit, payload: unknown): string {
  const owner = limit.name ?? type;
  if (limit.key === undefined) return `${SLOT_ITEM_PREFIX}${owner}:*`;
  return `${SLOT_ITEM_PREFIX}${owner}:k:${limitKeyValue(`concurrency limit ${owner}`, limit.key, payload)}`;
}

/**
 * The value of a limit's key function (`what` names the limit), shared by concurrency and rate limits.
 * @throws InvalidLimitKeyError when it throws or returns anything but a non-empty string of at most
 * LIMIT_KEY_MAX characters (the text names the limit and the problem, never the payload).
 */
export function limitKeyValue(what: string, key: (payload: never) => unknown, payload: unknown): string {
  let value: unknown;
  try {
    value = key(payload as never);
  } catch (error) {
    throw new InvalidLimitKeyError(`the key of ${what} threw ${errorClass(error)}`);
  }
  if (typeof value !== 'string' || value.length === 0 || value.length > LIMIT_KEY_MAX) {
    const got =
      typeof value === 'string'
        ? `a string of ${value.length} characters`
        : value === null
          ? 'null'
          : typeof value;
    throw new InvalidLimitKeyError(
      `the key of ${what} must return a string of 1-${LIMIT_KEY_MAX} characters, returned ${got}`,
    );
  }
  return value;
}

/** The lease key of slot `i` of `scope`. */
export function slotKey(scope: string, i: number): string {
  return `${scope}#${i}`;
}

/**
 * The order in which to try the free slots a read found: `free` (slot numbers) rotated by `random`, so
 * jobs that read the same busy scope spread over its free slots rather than all racing for the first.
 */
export function freeSlotOrder(
  limit: number,
  items: readonly LeaseItem[],
  scope: string,
  now: number,
  skip: number,
  random: () => number,
): number[] {
  const busy = new Set(
    items.filter((item) => item.owner !== undefined && item.leaseUntil >= now).map((item) => item.leaseKey),
  );
  const free: number[] = [];
  for (let i = 0; i < limit; i++) if (i !== skip && !busy.has(slotKey(scope, i))) free.push(i);
  const start = Math.floor(random() * free.length);
  return [...free.slice(start), ...free.slice(0, start)];
}

/**
 * How long a job that found its limit full waits before its next try: 1 s after its first receive,
 * doubling per receive up to 16 s (limit-bounce.ts re-sends the message by then, which starts again at
 * 1 s). A slot usually frees within a job's run, so the first tries come soon; a long backlog of one key
 * hides itself longer and longer, so the queue's visible messages are not all that key's and other keys'
 * jobs are received (and run) among them.
 */
export function concurrencyWaitMs(receives: number): number {
  return 1000 * 2 ** (Math.max(1, Math.min(receives, 5)) - 1);
}

/** What taking a job's slots came to. */
export type SlotsTaken =
  | { readonly held: readonly HeldLease[]; readonly stopRenewing?: () => void }
  | { readonly busy: string }
  | { readonly invalid: InvalidLimitKeyError }
  /** The leases table did not answer, or refused (a permission, a table name): the record is given back. */
  | { readonly unavailable: unknown };

/** Nothing held: a type without concurrency limits. */
const NONE: SlotsTaken = { held: [] };

/**
 * Takes one slot of every concurrency limit of `definition` for `job`, or none: on a busy limit (or an
 * outage) the slots already taken are released before it returns. Never waits for a slot.
 */
export async function takeSlots(s: Settings, job: Job, definition: AnyJobDefinition): Promise<SlotsTaken> {
  const limits = concurrencyLimits(definition);
  if (limits.length === 0) return NONE;
  const store = s.leases;
  if (!store) throw new Error(`unreachable: ${definition.type} has concurrency limits but no leases store`);
  const scopes: { scope: string; limit: number }[] = [];
  try {
    for (const limit of limits) {
      scopes.push({ scope: slotScope(definition.type, limit, job.payload), limit: limit.limit });
    }
  } catch (error) {
    if (error instanceof InvalidLimitKeyError) return { invalid: error };
    throw error;
  }
  // One record's own owner: two copies of a job on one worker must not pass for each other's acquire.
  const owner = `${s.worker}/${job.envelope.dedupKey}/${job.message.record.messageId}`;
  const held: HeldLease[] = [];
  // Aborted for a run left behind (releaseSlotsAfterRuns): its slots stop renewing and expire.
  const renewing = new AbortController();
  // A failed release leaves the slot to expire after one slot lease: worth a line, never a failure.
  const onReleaseError = (error: unknown) =>
    job.log.warn('could not release a concurrency slot; it expires instead', { error: s.errorText(error) });
  try {
    for (const { scope, limit } of scopes) {
      const slot = await takeSlot(s, store, owner, scope, limit, renewing.signal, onReleaseError);
      if (slot === undefined) {
        await releaseSlots(held);
        return { busy: scope };
      }
      held.push(slot);
    }
  } catch (error) {
    await releaseSlots(held);
    // Not only outages: a refusal (AccessDenied, a missing table) thrown out of the processor would fail
    // the whole batch; given back, as the claim does, it is logged and retried.
    return { unavailable: error };
  }
  return { held, stopRenewing: () => renewing.abort() };
}

/**
 * One slot of `scope`: a random one first (an uncontended job pays one conditional write); busy, a read
 * of the scope's slots (one BatchGetItem) and up to FREE_SLOT_TRIES of those it shows free. Undefined
 * when none was taken.
 */
async function takeSlot(
  s: Settings,
  store: LeaseStore,
  owner: string,
  scope: string,
  limit: number,
  signal: AbortSignal,
  onReleaseError: (error: unknown) => void,
): Promise<HeldLease | undefined> {
  const first = Math.floor(s.random() * limit);
  const attempt = (i: number) => trySlot(s, store, owner, slotKey(scope, i), signal, onReleaseError);
  const taken = await attempt(first);
  if (taken || limit === 1) return taken;
  // Without a batch read every other slot counts as free, and the tries are the read.
  const items = store.getMany
    ? await store.getMany(Array.from({ length: limit }, (_, i) => slotKey(scope, i)))
    : [];
  const order = freeSlotOrder(limit, items, scope, s.now(), first, s.random);
  for (const i of order.slice(0, FREE_SLOT_TRIES)) {
    const slot = await attempt(i);
    if (slot) return slot;
  }
  return undefined;
}

/** One acquire of one slot, no waiting: held (and heartbeated), or undefined when busy. */
async function trySlot(
  s: Settings,
  store: LeaseStore,
  owner: string,
  key: string,
  signal: AbortSignal,
  onReleaseError: (error: unknown) => void,
): Promise<HeldLease | undefined> {
  try {
    return await holdLease(key, {
      store,
      owner,
      leaseMs: s.leaseMs,
      waitMs: 0,
      now: s.now,
      signal,
      onReleaseError,
    });
  } catch (error) {
    if (error instanceof LeaseBusyError) return undefined;
    throw error;
  }
}

/**
 * Gives the slots up (after the attempt's commit or release). Never throws: a failed release is logged
 * (holdLease's onReleaseError) and leaves the slot to expire after one slot lease (the job's lease length).
 */
export async function releaseSlots(held: readonly HeldLease[]): Promise<void> {
  if (held.length === 0) return;
  await Promise.all(held.map((slot) => slot.release()));
}

/**
 * Gives the slots up once the job's runs have ended. The pipeline leaves a run behind when it stops
 * waiting for it (the deadline, a lost job lease, the fast path's budget): that run goes on until it
 * heeds its signal, and freeing its slot now would let another job of the scope run beside it. So its
 * slots stop renewing and are released when it ends, or expire one slot lease later if it never does.
 */
export async function releaseSlotsAfterRuns(
  taken: { readonly held: readonly HeldLease[]; readonly stopRenewing?: () => void },
  runs: ReadonlySet<Promise<unknown>>,
): Promise<void> {
  if (runs.size === 0) return releaseSlots(taken.held);
  taken.stopRenewing?.();
  void Promise.allSettled([...runs]).then(() => releaseSlots(taken.held));
}

/**
 * `definition` with its `run` noting each run in `runs` until it ends, so the slots of a run left behind
 * outlive the attempt only as long as the run itself (see {@link releaseSlotsAfterRuns}).
 */
export function trackingRuns(definition: AnyJobDefinition, runs: Set<Promise<unknown>>): AnyJobDefinition {
  return {
    ...definition,
    run(ctx, payload) {
      const result = definition.run(ctx, payload);
      const ended: Promise<unknown> = Promise.resolve(result).then(
        () => runs.delete(ended),
        () => runs.delete(ended),
      );
      runs.add(ended);
      return result;
    },
  };
}
