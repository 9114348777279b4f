// A job's history (contract/job-history.ts, docs/protocol.md "History"): how a writer that knows the
// list keeps it within HISTORY_MAX, and how a lease's write carries its pending events. Pure; both job
// stores use it, the DynamoDB adapter turns a HistoryWrite into expression clauses
// (protocol/history-writes.ts). The events themselves are built in history-events.ts.
import { StoreRefusedError } from '../../errors.ts';
import { HISTORY_MAX, type HistoryEvent, problemShard } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { JobLease } from '../contract/job-store.ts';

/** The events that put a job into the `problems` index (a step, a dropped copy or a reset do not). */
const PROBLEM_EVENTS: ReadonlySet<HistoryEvent['e']> = new Set([
  'failed',
  'takeover',
  'lease-lost',
  'dead',
  'redrive',
  'cancelled',
]);

/**
 * What a write does to the item's history: append `events`, or (when the list it knows would pass
 * HISTORY_MAX) replace it with `list`, the newest events, adding `dropped` to `historyDropped`. With
 * `problemAt`, it also sets the `problems` index keys (`problemShard`, `problemAt`). `keys`: the events
 * were left out (no room in the item), the index keys are still written: a job whose problem event did
 * not fit must still be found (a DEAD job missing from the index is missing from `dlq list`).
 */
export type HistoryWrite =
  | {
      readonly mode: 'append';
      readonly events: readonly HistoryEvent[];
      readonly problemShard?: string;
      readonly problemAt?: number;
    }
  | {
      readonly mode: 'replace';
      readonly list: readonly HistoryEvent[];
      readonly dropped: number;
      /**
       * How many events the list the writer knew holds: the replace applies only over a list that long
       * (another writer's append in between, a lost lease's event, would be written over otherwise).
       */
      readonly known: number;
      readonly problemShard?: string;
      readonly problemAt?: number;
    }
  | { readonly mode: 'keys'; readonly problemShard: string; readonly problemAt: number };

/**
 * The history write of `events` over the list `known` (the events the writer knows the item holds), or
 * undefined when there is nothing to write. A problem event among them sets the index keys of `dedupKey`.
 */
export function historyWrite(
  dedupKey: string,
  known: readonly HistoryEvent[] | undefined,
  events: readonly HistoryEvent[],
  now: number,
): HistoryWrite | undefined {
  if (events.length === 0) return undefined;
  const problem = events.some((e) => PROBLEM_EVENTS.has(e.e))
    ? { problemShard: problemShard(dedupKey), problemAt: now }
    : {};
  const old = known ?? [];
  if (old.length + events.length <= HISTORY_MAX) return { mode: 'append', events, ...problem };
  const all = [...old, ...events];
  return {
    mode: 'replace',
    list: all.slice(all.length - HISTORY_MAX),
    dropped: all.length - HISTORY_MAX,
    known: old.length,
    ...problem,
  };
}

/**
 * A replace refused because the item's list is not the one the writer knew (another writer appended to
 * it): `history` is the list as the refusal returned it. The write is sent again over it
 * ({@link sendFitting}); never thrown past it.
 */
export class HistoryMovedError extends Error {
  override readonly name = 'HistoryMovedError';
  readonly history: readonly HistoryEvent[];

  constructor(history: readonly HistoryEvent[]) {
    super('the job item history changed since this lease read it');
    this.history = history;
  }
}

/**
 * Throws {@link HistoryMovedError} when `write` replaces a list other than the one `item` holds (by
 * length: the only writers besides the lease append): the holder's check before its write applies.
 */
export function checkHistoryKnown(item: Pick<JobItem, 'history'>, write: HistoryWrite | undefined): void {
  if (write?.mode !== 'replace') return;
  if ((item.history?.length ?? 0) !== write.known) throw new HistoryMovedError(item.history ?? []);
}

/** The list after a history write applied over `known`, as the lease keeps knowing it. */
export function afterHistoryWrite(
  known: readonly HistoryEvent[] | undefined,
  write: HistoryWrite | undefined,
): HistoryEvent[] | undefined {
  if (write === undefined || write.mode === 'keys') return known === undefined ? undefined : [...known];
  return write.mode === 'append' ? [...(known ?? []), ...write.events] : [...write.list];
}

/**
 * Takes the lease's pending events for a write: taken at once so that two writes in flight (a renewal
 * and a checkpoint) never both carry them. Give them back with {@link returnPending} when the write did
 * not apply.
 */
export function takePending(lease: JobLease): HistoryEvent[] {
  const pending = lease.pendingHistory ?? [];
  lease.pendingHistory = undefined;
  return pending;
}

/** Puts back pending events a write took but did not write (it failed, or was refused). */
export function returnPending(lease: JobLease, pending: readonly HistoryEvent[]): void {
  if (pending.length === 0) return;
  lease.pendingHistory = [...pending, ...(lease.pendingHistory ?? [])];
}

/** What a write of a lease carries of its history (see {@link carryHistory}). */
export interface CarriedHistory {
  readonly write: HistoryWrite | undefined;
  /** The write applied: the lease now knows the list as written. */
  done(): void;
  /** The write did not apply: the pending events go back for the lease's next write. */
  undo(): void;
  /**
   * The item has no room for the events (the write was refused for size): they are dropped, and the
   * write goes again without them, with the `problems` index keys alone when the events set them
   * (`write` a `keys` write); done and undo do nothing then. Called again (no room for the keys
   * either), `write` becomes undefined.
   */
  leaveOut(): void;
  /** The item's list is `history`, not the one the lease knew: the write is built again over it. */
  rebase(history: readonly HistoryEvent[]): void;
}

/** `write` without its events: the index keys alone when it sets them, else nothing. */
function keysOf(write: HistoryWrite | undefined): HistoryWrite | undefined {
  if (write === undefined || write.mode === 'keys') return undefined;
  return write.problemShard !== undefined && write.problemAt !== undefined
    ? { mode: 'keys', problemShard: write.problemShard, problemAt: write.problemAt }
    : undefined;
}

/**
 * A write whose events were left out before it was sent (a give-up near 400 KB, protocol/give-up.ts):
 * the index keys `events` would have set, and no events (none taken from the lease).
 */
export function eventsLeftOut(
  dedupKey: string,
  events: readonly HistoryEvent[],
  now: number,
): CarriedHistory {
  let write = keysOf(historyWrite(dedupKey, undefined, events, now));
  return {
    get write() {
      return write;
    },
    done: () => {},
    undo: () => {},
    leaveOut: () => {
      write = undefined;
    },
    rebase: () => {},
  };
}

/** The history a write of `lease` carries: its pending events (taken now), then the write's own `events`. */
export function carryHistory(lease: JobLease, events: readonly HistoryEvent[], now: number): CarriedHistory {
  const pending = takePending(lease);
  let write = historyWrite(lease.dedupKey, lease.history, [...pending, ...events], now);
  let left = false;
  return {
    get write() {
      return write;
    },
    done: () => {
      if (left) return;
      const known = afterHistoryWrite(lease.history, write);
      if (known?.length) lease.history = known;
    },
    undo: () => {
      if (!left) returnPending(lease, pending);
    },
    leaveOut: () => {
      left = true;
      write = keysOf(write);
    },
    rebase: (history) => {
      if (left) return;
      lease.history = [...history];
      write = historyWrite(lease.dedupKey, lease.history, [...pending, ...events], now);
    },
  };
}

/**
 * Sends `write` (which reads `carried.write`); refused for size with history events in it, sends it
 * again without them: the item has no room for them, and a write that fits without its events must
 * never fail for them (a renewal, checkpoint or completion of a full item did not before the history).
 * The events are dropped, not kept for the next write, which would be refused the same way; their
 * `problems` index keys stay. A trim refused over a list another writer appended to (HistoryMovedError)
 * is built again over that list.
 */
export async function sendFitting<T>(carried: CarriedHistory, write: () => Promise<T>): Promise<T> {
  // For size, at most three sends: with the events, with the index keys alone, with neither. A trim
  // refused because another writer appended meanwhile (a lost lease's event: rare, one per earlier
  // holder) is built again over the list the refusal returned, a few times, then left out.
  let moves = 0;
  for (;;) {
    try {
      return await write();
    } catch (error) {
      if (error instanceof HistoryMovedError && moves < HISTORY_REBASES) {
        moves += 1;
        carried.rebase(error.history);
        continue;
      }
      if (error instanceof HistoryMovedError) {
        carried.leaveOut();
        continue;
      }
      if (carried.write === undefined || !(error instanceof StoreRefusedError)) throw error;
      if (error.problem !== 'item-too-large') throw error;
    }
    carried.leaveOut();
  }
}

/** How often a holder's trim is built again over a list another writer changed, before its events go. */
const HISTORY_REBASES = 3;

/** `item` with a history write applied, as DynamoDB applies withHistory's clauses (for the in-memory store). */
export function applyHistory<T extends JobItem>(item: T, write: HistoryWrite | undefined): T {
  if (write === undefined) return item;
  if (write.mode === 'keys') return { ...item, problemShard: write.problemShard, problemAt: write.problemAt };
  return {
    ...item,
    history:
      write.mode === 'append'
        ? [...(item.history ?? []), ...structuredClone(write.events)]
        : structuredClone([...write.list]),
    ...(write.mode === 'replace' ? { historyDropped: (item.historyDropped ?? 0) + write.dropped } : {}),
    ...(write.problemShard !== undefined && write.problemAt !== undefined
      ? { problemShard: write.problemShard, problemAt: write.problemAt }
      : {}),
  };
}

/**
 * An upper bound of the bytes a history holds (3 bytes a character, as protocol/item-size.ts counts): the
 * room a release or dead marking keeps for the list and its events when it shortens the error text.
 */
export function historyUpperBytes(...lists: readonly (readonly HistoryEvent[] | undefined)[]): number {
  return lists.reduce((n, list) => n + (list?.length ? 3 * JSON.stringify(list).length : 0), 0);
}
