import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { checkJobWrite } from '../core/adapters/dynamodb-limits.ts';
import { HISTORY_MAX, type HistoryEvent, problemShard } from '../core/contract/job-history.ts';
import type { Checkpoint, JobItem } from '../core/contract/job-item.ts';
import type {
  CancelRequest,
  CancelResult,
  ClaimRequest,
  ClaimResult,
  DeadMarking,
  Effect,
  FastCommitRequest,
  FastCommitResult,
  FencedWriteResult,
  GetOptions,
  GiveUpOptions,
  JobLease,
  JobStore,
  RedriveBy,
  RenewOptions,
  StoreCallOptions,
} from '../core/contract/job-store.ts';
import { cancelledEvent } from '../core/contract/job-store.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { classifyClaim, collides } from '../core/decisions/claim-decision.ts';
import { fenceRefusal, holdsFence } from '../core/decisions/fence-decision.ts';
import {
  afterHistoryWrite,
  applyHistory,
  carryHistory,
  checkHistoryKnown,
  eventsLeftOut,
  type HistoryWrite,
  historyWrite,
  sendFitting,
} from '../core/decisions/history.ts';
import {
  attemptOf,
  claimHistory,
  deadKeyExpired,
  deadKeyUntilOf,
  droppedCopyEvent,
  eventMessage,
  giveUpEvents,
  STEP_EVENTS,
} from '../core/decisions/history-events.ts';
import {
  claimCounters,
  expiresAtSeconds,
  isClaimable,
  leasedRunOnly,
  leaseEnd,
} from '../core/decisions/lease-arithmetic.ts';
import { giveUpWithHistory } from '../core/protocol/give-up.ts';
import { checkItemSize } from '../core/protocol/item-size.ts';
import { fenceCause, isMinimalCause } from '../core/protocol/renew.ts';
import type { StoreUnavailableError } from '../errors.ts';
import { DEFAULT_DEDUP_TTL_SECONDS } from '../resources.ts';
import { checkTransactionLimits, type EffectApplier } from './in-memory-effects.ts';
import { carriedWrite, checkJobItemSize, refusedAsDynamoDb } from './in-memory-job-writes.ts';
import { redriveReset, redriveUndone } from './in-memory-redrive.ts';
import { StoreFaults } from './store-faults.ts';

/*
 * In-memory doubles of the store ports, for unit tests and the chaos harness. They are never a source of
 * truth in production: state lives in one process and dies with it. They keep the DynamoDB adapters'
 * observable semantics (the contract suites in test/support/contracts run against both), including the
 * token rule, the fence (owner + token + IN_PROGRESS), the `completedByThisLease` answer and DynamoDB's
 * limits on a job write (the adapter's own check, dynamodb-limits.ts).
 */

/** The operation names the DynamoDB job store reports in {@link StoreUnavailableError.operation}. */
export type JobStoreOperation =
  | 'claim'
  | 'claim-and-complete'
  | 'renew'
  | 'checkpoint'
  | 'complete'
  | 'release'
  | 'mark-dead'
  | 'get'
  | 'reset-for-redrive'
  | 'undo-redrive'
  | 'record-lease-lost'
  | 'record-dropped-copy'
  | 'cancel';

export interface InMemoryJobStoreOptions {
  /**
   * Applies the effects of `checkpoint` and `complete`. Without one, a write carrying effects throws.
   * @default none
   */
  readonly effects?: EffectApplier;
  /** Same meaning as the DynamoDB adapter's option (only sets `expiresAt`). @default 1296000 (15 days) */
  readonly dedupTtlSeconds?: number;
}

type MutableJobItem = { -readonly [K in keyof JobItem]: JobItem[K] };

/**
 * A {@link JobStore} over a Map, for unit tests and the chaos harness; never a source of truth in
 * production. Same conditions, token rule and fence as `DynamoDbJobStore`; every item crosses the boundary
 * as a deep copy, so callers cannot change stored state behind the store's back. Each call is atomic.
 * `complete`, `release` and `markDead` read `Date.now()` for timestamps, like the adapter.
 */
export class InMemoryJobStore implements JobStore {
  readonly #items = new Map<string, JobItem>();
  readonly #effects: EffectApplier | undefined;
  readonly #ttlSeconds: number;
  /** Injects store outages (see {@link StoreFaults}). */
  readonly faults = new StoreFaults<JobStoreOperation>();

  constructor(options: InMemoryJobStoreOptions = {}) {
    this.#effects = options.effects;
    this.#ttlSeconds = options.dedupTtlSeconds ?? DEFAULT_DEDUP_TTL_SECONDS;
  }

  async claim(req: ClaimRequest, options: StoreCallOptions = {}): Promise<ClaimResult> {
    return this.faults.run(
      'claim',
      (): ClaimResult => {
        const old = this.#items.get(req.dedupKey);
        if (req.onlyIfMessageId !== undefined) {
          // The adapter's `attribute_exists(#dedupKey) AND ... #messageId = :onlyIfMessageId`: no item is
          // refused with nothing to return (DynamoDB's refusal carries no item), any other as a claim's.
          if (old === undefined) {
            throw new ConditionalCheckFailedException({
              message: 'The conditional request failed',
              $metadata: {},
            });
          }
          if (old.messageId !== req.onlyIfMessageId)
            return { claimed: false, existing: structuredClone(old) };
        }
        // A DEAD key past its deadKeyUntil: reset and claimed (the adapter's second write, resetClaimUpdate).
        if (
          old !== undefined &&
          req.onlyIfMessageId === undefined &&
          !collides(old, req.type) &&
          deadKeyExpired(old, req.now, req)
        ) {
          return this.#resetClaim(req, old);
        }
        // `#type = :type` in the adapter's condition: a job of another type is never taken.
        if (!isClaimable(old, req.now) || collides(old, req.type)) {
          return { claimed: false, existing: structuredClone(old as JobItem) };
        }
        const leaseUntil = leaseEnd(req.now, req.leaseMs);
        const item = this.#claimed(old, req, JobStatus.InProgress, leaseUntil);
        this.#items.set(req.dedupKey, item);
        const lease: JobLease = {
          dedupKey: item.dedupKey,
          owner: req.owner,
          token: item.token,
          attempts: item.attempts,
          messageId: req.messageId,
          version: item.version,
          leaseUntil,
          ...(old?.refunds ? { refunds: old.refunds } : {}),
          ...(old?.conflicts ? { conflicts: old.conflicts } : {}),
          ...(old?.checkpoint ? { checkpoint: structuredClone(old.checkpoint) } : {}),
        };
        const kind = classifyClaim(old);
        Object.assign(lease, claimHistory(old && structuredClone(old), lease, kind === 'takeover', req.now));
        return old
          ? { claimed: true, lease, kind, previous: structuredClone(old) }
          : { claimed: true, lease, kind: 'fresh' };
      },
      options.signal,
    );
  }

  async claimAndComplete(
    req: FastCommitRequest,
    result: unknown,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FastCommitResult> {
    checkJobWrite({ operation: 'claim-and-complete', jobValues: { result: result ?? null }, effects });
    const stored: unknown = result == null ? null : structuredClone(result);
    return refusedAsDynamoDb(
      'claim-and-complete',
      this.faults.run(
        'claim-and-complete',
        (): FastCommitResult => {
          const old = this.#items.get(req.dedupKey);
          // A checkpointed job resumes leased only (its steps' effects are already committed), and one whose
          // attempts are used up is a leased claim's to dead-letter.
          if (!isClaimable(old, req.now) || collides(old, req.type) || leasedRunOnly(old, req.maxAttempts)) {
            return { ok: false, reason: 'refused', existing: structuredClone(old as JobItem) };
          }
          if (effects.length > 0) checkTransactionLimits(effects, 1);
          checkJobItemSize(stored);
          if (effects.length > 0) {
            if (this.#effects === undefined) {
              throw new Error(
                `InMemoryJobStore.claimAndComplete got ${effects.length} effect(s) but was built without an effect applier`,
              );
            }
            const applied = this.#effects.apply(effects);
            if (!applied.ok) return { ok: false, reason: 'effect-conflict', index: applied.index };
          }
          const item: MutableJobItem = {
            ...this.#claimed(old, req, JobStatus.Completed, req.now),
            completedAt: req.now,
            result: stored,
          };
          delete item.lastError;
          delete item.lastErrorClass;
          this.#items.set(req.dedupKey, item);
          return { ok: true };
        },
        options.signal,
      ),
    );
  }

  /** A fresh send of a DEAD key past its `deadKeyUntil`: reset and claimed (see resetClaimUpdate). */
  #resetClaim(req: ClaimRequest, dead: JobItem): ClaimResult {
    const leaseUntil = leaseEnd(req.now, req.leaseMs);
    const lease: JobLease = {
      dedupKey: req.dedupKey,
      owner: req.owner,
      token: dead.token + 1,
      attempts: 1,
      messageId: req.messageId,
      version: dead.version + 1,
      leaseUntil,
    };
    const reset: HistoryEvent = { e: 'reset', at: req.now, ...attemptOf(lease), wasDeadAt: dead.deadAt ?? 0 };
    const history = historyWrite(req.dedupKey, dead.history, [reset], req.now);
    const next: MutableJobItem = applyHistory(
      {
        ...structuredClone(dead),
        status: JobStatus.InProgress,
        owner: req.owner,
        leaseUntil,
        token: lease.token,
        attempts: 1,
        version: lease.version,
        messageId: req.messageId,
        ...(req.originId === undefined ? {} : { originId: req.originId }),
        createdAt: req.createdAt,
        claimedAt: req.now,
        updatedAt: req.now,
        expiresAt: this.#expiresAt(leaseUntil),
      },
      history,
    );
    for (const gone of [
      'checkpoint',
      'deadReason',
      'deadAt',
      'deadKeyUntil',
      'lastError',
      'lastErrorClass',
      'refunds',
      'conflicts',
      'completedAt',
    ] as const) {
      delete next[gone];
    }
    if (req.originId === undefined) delete next.originId;
    this.#items.set(req.dedupKey, next);
    const known = afterHistoryWrite(dead.history, history);
    if (known?.length) lease.history = known;
    return { claimed: true, lease, kind: 'fresh', wasDeadAt: dead.deadAt ?? 0 };
  }

  /** The item a claim (IN_PROGRESS) or a fast commit (COMPLETED) writes over `old`: the token rule. */
  #claimed(
    old: JobItem | undefined,
    req: Omit<ClaimRequest, 'leaseMs'>,
    status: JobStatus,
    leaseUntil: number,
  ): JobItem {
    // Stored items are never changed in place (every write stores a new object), so the new item may
    // share what it keeps of `old`; only what crosses the boundary is copied.
    const item: MutableJobItem = {
      ...old,
      dedupKey: req.dedupKey,
      status,
      owner: req.owner,
      leaseUntil,
      ...claimCounters(old, req.now),
      messageId: req.messageId,
      ...(req.originId === undefined ? {} : { originId: req.originId }),
      type: req.type,
      createdAt: old?.createdAt ?? req.createdAt,
      claimedAt: req.now,
      updatedAt: req.now,
      expiresAt: this.#expiresAt(leaseUntil),
    };
    // The origin is an earlier claimer's unless this request set it (the adapter's REMOVE #originId).
    if (req.originId === undefined) delete item.originId;
    return item;
  }

  async renew(lease: JobLease, leaseMs: number, now: number, options: RenewOptions = {}): Promise<void> {
    const leaseUntil = leaseEnd(now, leaseMs);
    const cause = options.deadLetter;
    const carried = carryHistory(lease, [], now);
    let applied = false;
    const stored = await sendFitting(carried, () =>
      this.faults.run(
        'renew',
        () => {
          const fenced = this.#fenced(lease, 'renew');
          // The adapter's `size(#history) = :historyKnown` on a trim.
          checkHistoryKnown(fenced, carried.write);
          const item = applyHistory(fenced, carried.write);
          applied = true;
          if (cause !== undefined) {
            // The dead-letter fence: records the cause, and sets the lease end as given (see RenewOptions).
            const stored = fenceCause(lease, cause);
            const next: MutableJobItem = {
              ...item,
              leaseUntil,
              expiresAt: this.#expiresAt(leaseUntil),
              deadReason: stored.reason,
              ...(isMinimalCause(stored)
                ? {}
                : { lastError: stored.errorMessage, lastErrorClass: stored.errorClass }),
            };
            checkItemSize(next, 'renew');
            this.#items.set(lease.dedupKey, next);
            return leaseUntil;
          }
          // Never backwards: a renewal that lands after a later one of the same lease changes nothing.
          if (item.leaseUntil > leaseUntil) {
            applied = false;
            return item.leaseUntil;
          }
          const next = { ...item, leaseUntil, expiresAt: this.#expiresAt(leaseUntil) };
          checkItemSize(next, 'renew');
          this.#items.set(lease.dedupKey, next);
          return leaseUntil;
        },
        options.signal,
      ),
    )
      .catch((error: unknown) => {
        applied = false;
        throw error;
      })
      .finally(() => (applied ? carried.done() : carried.undo()));
    lease.leaseUntil = stored;
  }

  async checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FencedWriteResult> {
    checkJobWrite({ operation: 'checkpoint', jobValues: { checkpoint }, effects });
    const stored = structuredClone(checkpoint);
    const carried = carryHistory(
      lease,
      STEP_EVENTS ? [{ e: 'step', at: checkpoint.at, ...attemptOf(lease), step: checkpoint.step }] : [],
      checkpoint.at,
    );
    const result = await carriedWrite(carried, () =>
      refusedAsDynamoDb(
        'checkpoint',
        this.faults.run(
          'checkpoint',
          () =>
            this.#writeWithEffects(
              lease,
              'checkpoint',
              carried.write,
              (item) => item.version === lease.version,
              (item) =>
                applyHistory(
                  { ...item, checkpoint: stored, version: item.version + 1, updatedAt: checkpoint.at },
                  carried.write,
                ),
              effects,
            ),
          options.signal,
        ),
      ),
    );
    if (result.ok) {
      lease.version += 1;
      lease.checkpoint = structuredClone(checkpoint);
    }
    return result;
  }

  async complete(
    lease: JobLease,
    result: unknown,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FencedWriteResult> {
    checkJobWrite({
      operation: 'complete',
      jobValues: { checkpoint: lease.checkpoint, result: result ?? null },
      effects,
    });
    const now = Date.now();
    const stored: unknown = result == null ? null : structuredClone(result);
    const carried = carryHistory(lease, [], now);
    const out = await carriedWrite(carried, () =>
      refusedAsDynamoDb(
        'complete',
        this.faults.run(
          'complete',
          () =>
            checkJobItemSize(stored) ??
            this.#writeWithEffects(
              lease,
              'complete',
              carried.write,
              () => true,
              (item) => {
                const next: MutableJobItem = {
                  ...item,
                  status: JobStatus.Completed,
                  version: item.version + 1,
                  updatedAt: now,
                  completedAt: now,
                  result: stored,
                  expiresAt: this.#expiresAt(now),
                };
                delete next.lastError;
                delete next.lastErrorClass;
                delete next.deadReason;
                return applyHistory(next, carried.write);
              },
              effects,
            ),
          options.signal,
        ),
      ),
    );
    if (out.ok) lease.version += 1;
    return out;
  }

  async release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options: GiveUpOptions & { refundAttempt?: boolean; conflict?: boolean } = {},
  ): Promise<void> {
    await this.#giveUp(
      lease,
      'release',
      JobStatus.RetryWait,
      retryAt,
      error,
      options.conflict ? 'conflicts' : options.refundAttempt ? 'refunds' : undefined,
      options.signal,
      options.leaseLost,
    );
  }

  async markDead(lease: JobLease, error: DeadMarking, options: GiveUpOptions = {}): Promise<void> {
    await this.#giveUp(
      lease,
      'mark-dead',
      JobStatus.Dead,
      0,
      error,
      undefined,
      options.signal,
      options.leaseLost,
    );
  }

  async recordLeaseLost(
    lease: JobLease,
    why: string,
    now: number,
    options: StoreCallOptions = {},
  ): Promise<void> {
    await this.faults.run(
      'record-lease-lost',
      () => {
        const item = this.#items.get(lease.dedupKey);
        if (item === undefined || (item.history?.length ?? 0) >= HISTORY_MAX) return;
        const event: HistoryEvent = { e: 'lease-lost', at: now, ...attemptOf(lease), why: eventMessage(why) };
        this.#items.set(lease.dedupKey, {
          ...item,
          history: [...(item.history ?? []), event],
          problemShard: problemShard(lease.dedupKey),
          problemAt: now,
        });
      },
      options.signal,
    );
  }

  async recordDroppedCopy(
    existing: JobItem,
    messageId: string,
    now: number,
    options: StoreCallOptions = {},
  ): Promise<void> {
    await this.faults.run(
      'record-dropped-copy',
      () => {
        const item = this.#items.get(existing.dedupKey);
        if (item?.status !== JobStatus.Dead || item.token !== existing.token) return;
        const dropped = droppedCopyEvent(existing.history, messageId, now);
        const history = [...(item.history ?? [])];
        if (dropped.index !== undefined) {
          if (history.length !== (existing.history ?? []).length) return;
          history[dropped.index] = dropped.event;
        } else {
          if (history.length >= HISTORY_MAX) return;
          history.push(dropped.event);
        }
        this.#items.set(existing.dedupKey, { ...item, history });
      },
      options.signal,
    );
  }

  /** Always the latest version: a valid answer to an eventually consistent read too. */
  async get(dedupKey: string, options: GetOptions = {}): Promise<JobItem | undefined> {
    return this.faults.run(
      'get',
      () => {
        const item = this.#items.get(dedupKey);
        return item === undefined ? undefined : structuredClone(item);
      },
      options.signal,
    );
  }

  async resetForRedrive(
    dedupKey: string,
    now: number,
    leaseEndedBefore = now,
    by: RedriveBy = { by: 'unknown' },
    planned?: number,
  ): Promise<boolean> {
    return this.faults.run('reset-for-redrive', () => {
      const reset = { now, leaseEndedBefore, by, planned, expiresAt: this.#expiresAt(now) };
      const next = redriveReset(this.#items.get(dedupKey), dedupKey, reset);
      if (next) this.#items.set(dedupKey, structuredClone(next));
      return next !== undefined;
    });
  }

  async undoRedrive(before: JobItem, resetVersion: number, now: number): Promise<boolean> {
    return this.faults.run('undo-redrive', () => {
      const next = redriveUndone(this.#items.get(before.dedupKey), before, resetVersion, now);
      if (next) this.#items.set(before.dedupKey, structuredClone(next));
      return next !== undefined;
    });
  }

  async cancel(dedupKey: string, request: CancelRequest): Promise<CancelResult> {
    return this.faults.run('cancel', (): CancelResult => {
      const item = this.#items.get(dedupKey);
      if (item?.status === JobStatus.Completed) return { outcome: 'finished', status: 'COMPLETED' };
      if (item?.status === JobStatus.Dead) return { outcome: 'finished', status: 'DEAD' };
      if (item?.status === JobStatus.Cancelled) return { outcome: 'already-cancelled', status: 'CANCELLED' };
      // Its dead-lettering began (the fence recorded the cause): its end is decided, its letter may be on its way.
      if (item?.deadReason !== undefined) return { outcome: 'finished', status: 'DEAD' };
      const history = [...(item?.history ?? []), cancelledEvent(request)];
      // A tombstone: the counters a claim would start from, no type, owner or message (cancelUpdate).
      const next: MutableJobItem = {
        ...(item ?? { dedupKey, token: request.now, attempts: 0, leaseUntil: 0 }),
        status: JobStatus.Cancelled,
        version: (item?.version ?? 0) + 1,
        updatedAt: request.now,
        expiresAt: this.#expiresAt(request.now),
        history: history.slice(-HISTORY_MAX),
        problemShard: problemShard(dedupKey),
        problemAt: request.now,
      } as MutableJobItem;
      if (history.length > HISTORY_MAX) {
        next.historyDropped = (item?.historyDropped ?? 0) + history.length - HISTORY_MAX;
      }
      this.#items.set(dedupKey, next);
      if (item === undefined) return { outcome: 'tombstone' };
      const running = item.status === JobStatus.InProgress;
      return { outcome: 'cancelled', status: running ? 'IN_PROGRESS' : 'RETRY_WAIT', wasRunning: running };
    });
  }

  /** Test hook: the item as stored, past any injected fault (an audit's read must not spend one). */
  peek(dedupKey: string): JobItem | undefined {
    const item = this.#items.get(dedupKey);
    return item === undefined ? undefined : structuredClone(item);
  }

  /** Test hook: removes an item the way TTL would. Returns whether there was one. */
  delete(dedupKey: string): boolean {
    return this.#items.delete(dedupKey);
  }

  async #giveUp(
    lease: JobLease,
    operation: 'release' | 'mark-dead',
    status: JobStatus,
    leaseUntil: number,
    error: { message: string; errorClass: string; reason?: string; deadKeyTtlSeconds?: number },
    /** The attempt is taken back, counted in this counter (a store outage's `refunds`, or `conflicts`). */
    refund: 'refunds' | 'conflicts' | undefined,
    signal: AbortSignal | undefined,
    leaseLost: string | undefined,
  ): Promise<void> {
    const now = Date.now();
    const events = giveUpEvents(lease, status, leaseUntil, error, refund !== undefined, leaseLost, now);
    const fit = giveUpWithHistory(lease, error, events);
    const capped = fit.error;
    const carried = fit.withEvents
      ? carryHistory(lease, events, now)
      : eventsLeftOut(lease.dedupKey, events, now);
    let applied = false;
    await sendFitting(carried, () =>
      this.faults.run(
        operation,
        () => {
          const item = this.#fenced(lease, operation);
          checkHistoryKnown(item, carried.write);
          const next: MutableJobItem = applyHistory(
            {
              ...item,
              status,
              leaseUntil,
              version: item.version + 1,
              updatedAt: now,
              lastError: capped.message,
              lastErrorClass: capped.errorClass,
              expiresAt: this.#expiresAt(Math.max(now, leaseUntil)),
              ...(refund ? { attempts: item.attempts - 1, [refund]: (item[refund] ?? 0) + 1 } : {}),
              ...(status === JobStatus.Dead
                ? { deadAt: now, ...deadKeyUntilOf(now, error.deadKeyTtlSeconds) }
                : {}),
            } as MutableJobItem,
            carried.write,
          );
          delete next.owner;
          if (status === JobStatus.Dead && error.deadKeyTtlSeconds === undefined) delete next.deadKeyUntil;
          checkItemSize(next, operation);
          this.#items.set(lease.dedupKey, next);
          applied = true;
        },
        signal,
      ),
    ).finally(() => (applied ? carried.done() : carried.undo()));
    lease.version += 1;
  }

  /** The stored item if the fence (and `extra`) holds; else the LeaseLostError the adapter would throw. */
  #fenced(lease: JobLease, operation: string, extra: (item: JobItem) => boolean = () => true): JobItem {
    const item = this.#items.get(lease.dedupKey);
    if (item !== undefined && holdsFence(item, lease) && extra(item)) return item;
    throw fenceRefusal(lease, operation, item);
  }

  /** The fence first (a fenced-out writer learns it lost the lease), then the effects, then the item. */
  #writeWithEffects(
    lease: JobLease,
    operation: 'checkpoint' | 'complete',
    history: HistoryWrite | undefined,
    extra: (item: JobItem) => boolean,
    build: (item: JobItem) => JobItem,
    effects: readonly Effect[],
  ): FencedWriteResult {
    if (effects.length > 0 && this.#effects === undefined) {
      throw new Error(
        `InMemoryJobStore.${operation} got ${effects.length} effect(s) but was built without an effect applier`,
      );
    }
    // DynamoDB validates the request before it evaluates any condition.
    if (effects.length > 0) checkTransactionLimits(effects, 1);
    const item = this.#fenced(lease, operation, extra);
    checkHistoryKnown(item, history);
    if (this.#effects !== undefined && effects.length > 0) {
      const applied = this.#effects.apply(effects);
      if (!applied.ok) return { ok: false, reason: 'effect-conflict', index: applied.index };
    }
    this.#items.set(lease.dedupKey, build(item));
    return { ok: true };
  }

  #expiresAt(fromMs: number): number {
    return expiresAtSeconds(fromMs, this.#ttlSeconds);
  }
}
