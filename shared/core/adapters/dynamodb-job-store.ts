import {
  ConditionalCheckFailedException,
  type ReturnValuesOnConditionCheckFailure,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { DEFAULT_DEDUP_TTL_SECONDS } from '../../resources.ts';
import { type HistoryEvent, problemShard } from '../contract/job-history.ts';
import type { Checkpoint, JobItem } from '../contract/job-item.ts';
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
} from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { classifyClaim } from '../decisions/claim-decision.ts';
import { holdsFence } from '../decisions/fence-decision.ts';
import {
  afterHistoryWrite,
  attemptOf,
  type CarriedHistory,
  carryHistory,
  claimHistory,
  deadKeyExpired,
  deadKeyUntilOf,
  droppedCopyEvent,
  eventMessage,
  eventsLeftOut,
  giveUpEvents,
  historyWrite,
  STEP_EVENTS,
  sendFitting,
} from '../decisions/history.ts';
import { claimCounters, expiresAtSeconds, leaseEnd } from '../decisions/lease-arithmetic.ts';
import {
  droppedCopyUpdate,
  HISTORY_KNOWN,
  leaseLostUpdate,
  withHistory,
} from './dynamodb-history-expressions.ts';
import {
  checkpointUpdate,
  claimUpdate,
  completeUpdate,
  giveUpUpdate,
  type JobItemUpdate,
  renewUpdate,
  resetClaimUpdate,
} from './dynamodb-job-expressions.ts';
import { checkJobWrite, giveUpWithHistory, type JobWrite } from './dynamodb-limits.ts';
import { cancelJob, type OperatorTable, resetForRedrive } from './dynamodb-operator-writes.ts';
import { undoRedrive } from './dynamodb-redrive.ts';
import {
  cancelledFastCommit,
  cancelledFencedWrite,
  refusedClaim,
  refusedFastCommit,
  refusedFencedWrite,
} from './dynamodb-refusals.ts';
import { guardStore } from './store-errors.ts';

export interface DynamoDbJobStoreOptions {
  readonly client: DynamoDBDocumentClient;
  readonly tableName: string;
  /**
   * How long a dedup record outlives its last write; after that TTL may delete it and the same dedup key
   * can run again. Keep it above the DLQ's retention (14 days): a redrive of an old dead letter must still
   * find its job's record (DEAD, or COMPLETED by a later copy) and its checkpoint.
   * @default 1296000 (15 days)
   */
  readonly dedupTtlSeconds?: number;
}

const ALL_OLD: ReturnValuesOnConditionCheckFailure = 'ALL_OLD';

/**
 * The `jobs` table adapter. Attributes as docs/protocol.md lists them ("The job item"); the expressions
 * are in dynamodb-job-expressions.ts, the meaning of a refusal in dynamodb-refusals.ts.
 */
export class DynamoDbJobStore implements JobStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #table: string;
  readonly #ttlSeconds: number;

  constructor(options: DynamoDbJobStoreOptions) {
    this.#doc = options.client;
    this.#table = options.tableName;
    this.#ttlSeconds = options.dedupTtlSeconds ?? DEFAULT_DEDUP_TTL_SECONDS;
  }

  async claim(req: ClaimRequest, options: StoreCallOptions = {}): Promise<ClaimResult> {
    const leaseUntil = leaseEnd(req.now, req.leaseMs);
    try {
      const out = await guardStore('claim', options.signal, (http) =>
        this.#doc.send(
          new UpdateCommand({
            ...claimUpdate(this.#table, req, { leaseUntil, expiresAt: this.#expiresAt(leaseUntil) }),
            // ALL_OLD on success too: the item we replaced tells a takeover from a retry, and the new
            // values follow from it exactly as the update expression computes them.
            ReturnValues: 'ALL_OLD',
            ReturnValuesOnConditionCheckFailure: ALL_OLD,
          }),
          http,
        ),
      );
      const previous = out.Attributes as JobItem | undefined;
      const counted = claimCounters(previous, req.now);
      const kind = classifyClaim(previous);
      const lease: JobLease = {
        dedupKey: req.dedupKey,
        owner: req.owner,
        token: counted.token,
        attempts: counted.attempts,
        messageId: req.messageId,
        version: counted.version,
        leaseUntil,
        ...(previous?.refunds ? { refunds: previous.refunds } : {}),
        ...(previous?.conflicts ? { conflicts: previous.conflicts } : {}),
        ...(previous?.checkpoint ? { checkpoint: previous.checkpoint } : {}),
      };
      Object.assign(
        lease,
        claimHistory(previous, { owner: req.owner, ...counted }, kind === 'takeover', req.now),
      );
      return previous ? { claimed: true, lease, kind, previous } : { claimed: true, lease, kind: 'fresh' };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException && error.Item) {
        const refused = refusedClaim(error.Item, req);
        if (
          !refused.claimed &&
          req.onlyIfMessageId === undefined &&
          refused.existing.type === req.type &&
          deadKeyExpired(refused.existing, req.now, req)
        ) {
          return this.#resetClaim(req, refused.existing, options);
        }
        return refused;
      }
      throw error;
    }
  }

  /**
   * A fresh send of a DEAD key whose `deadKeyUntil` passed: the item reset and claimed in one write (a
   * second request, after the refused claim). Refused (another copy reset it first): that refusal.
   */
  async #resetClaim(req: ClaimRequest, dead: JobItem, options: StoreCallOptions): Promise<ClaimResult> {
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
    // Over the DEAD item's list as refused (its token is the condition): a refusal here would drop the
    // fresh send as a dead copy, so a dropped copy counted in between may be written over.
    const update = withHistory(
      resetClaimUpdate(this.#table, req, dead, { leaseUntil, expiresAt: this.#expiresAt(leaseUntil) }),
      history,
      { overKnownList: false },
    );
    try {
      await guardStore('claim', options.signal, (http) =>
        this.#doc.send(new UpdateCommand({ ...update, ReturnValuesOnConditionCheckFailure: ALL_OLD }), http),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException && error.Item)
        return refusedClaim(error.Item, req);
      throw error;
    }
    const known = afterHistoryWrite(dead.history, history);
    if (known?.length) lease.history = known;
    return { claimed: true, lease, kind: 'fresh', wasDeadAt: dead.deadAt ?? 0 };
  }

  async claimAndComplete(
    req: FastCommitRequest,
    result: unknown,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FastCommitResult> {
    this.#check('claim-and-complete', req.dedupKey, { result: result ?? null }, effects);
    const update = claimUpdate(
      this.#table,
      req,
      { leaseUntil: req.now, expiresAt: this.#expiresAt(req.now) },
      { result, maxAttempts: req.maxAttempts },
    );
    if (effects.length === 0) {
      try {
        await guardStore('claim-and-complete', options.signal, (http) =>
          this.#doc.send(
            new UpdateCommand({ ...update, ReturnValuesOnConditionCheckFailure: ALL_OLD }),
            http,
          ),
        );
        return { ok: true };
      } catch (error) {
        if (error instanceof ConditionalCheckFailedException && error.Item) {
          return refusedFastCommit(error.Item, req);
        }
        throw error;
      }
    }
    try {
      await this.#transact('claim-and-complete', update, effects, options.signal);
      return { ok: true };
    } catch (error) {
      if (!(error instanceof TransactionCanceledException)) throw error;
      return cancelledFastCommit(error);
    }
  }

  async renew(lease: JobLease, leaseMs: number, now: number, options: RenewOptions = {}): Promise<void> {
    const leaseUntil = leaseEnd(now, leaseMs);
    let later: number | undefined;
    const carried = this.#carry(lease, [], now);
    const update = renewUpdate(
      this.#table,
      lease,
      leaseUntil,
      this.#expiresAt(leaseUntil),
      options.deadLetter,
    );
    try {
      await sendFitting(carried, () =>
        this.#writeWithEffects(
          lease,
          'renew',
          withHistory(update, carried.write),
          [],
          options.signal,
          (old) => {
            // Refused because a later renewal of this same lease already landed: nothing lost. (The
            // dead-letter fence has no such condition: its refusal is always the fence's.)
            if (options.deadLetter || !holdsFence(old, lease) || old.leaseUntil <= leaseUntil) return false;
            later = old.leaseUntil;
            return true;
          },
        ),
      );
    } catch (error) {
      carried.undo();
      throw error;
    }
    if (later === undefined) carried.done();
    else carried.undo();
    lease.leaseUntil = later ?? leaseUntil;
  }

  #carry(lease: JobLease, events: readonly HistoryEvent[], now: number): CarriedHistory {
    return carryHistory(lease, events, now);
  }

  async checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FencedWriteResult> {
    this.#check('checkpoint', lease.dedupKey, { checkpoint }, effects);
    const step: HistoryEvent[] = STEP_EVENTS
      ? [{ e: 'step', at: checkpoint.at, ...attemptOf(lease), step: checkpoint.step }]
      : [];
    const carried = this.#carry(lease, step, checkpoint.at);
    const update = checkpointUpdate(this.#table, lease, checkpoint);
    const result = await this.#carried(carried, () =>
      this.#writeWithEffects(
        lease,
        'checkpoint',
        withHistory(update, carried.write),
        effects,
        options.signal,
      ),
    );
    if (result.ok) {
      lease.version += 1;
      lease.checkpoint = checkpoint;
    }
    return result;
  }

  async complete(
    lease: JobLease,
    result: unknown,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FencedWriteResult> {
    // The completion keeps the checkpoint beside the result.
    this.#check(
      'complete',
      lease.dedupKey,
      { checkpoint: lease.checkpoint, result: result ?? null },
      effects,
    );
    const now = Date.now();
    // A first-time success carries nothing: no history, no index keys.
    const carried = this.#carry(lease, [], now);
    const update = completeUpdate(this.#table, lease, { result, now, expiresAt: this.#expiresAt(now) });
    const out = await this.#carried(carried, () =>
      this.#writeWithEffects(lease, 'complete', withHistory(update, carried.write), effects, options.signal),
    );
    if (out.ok) lease.version += 1;
    return out;
  }

  /** Runs a fenced write that carries history: done when it applied, undone when not (or it threw). */
  async #carried(
    carried: CarriedHistory,
    write: () => Promise<FencedWriteResult>,
  ): Promise<FencedWriteResult> {
    let out: FencedWriteResult;
    try {
      out = await sendFitting(carried, write);
    } catch (error) {
      carried.undo();
      throw error;
    }
    if (out.ok) carried.done();
    else carried.undo();
    return out;
  }

  async release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options: GiveUpOptions & { refundAttempt?: boolean; conflict?: boolean } = {},
  ): Promise<void> {
    await this.#giveUp(lease, 'release', JobStatus.RetryWait, retryAt, error, {
      refundAttempt: options.refundAttempt ?? false,
      conflict: options.conflict ?? false,
      signal: options.signal,
      leaseLost: options.leaseLost,
    });
  }

  async markDead(lease: JobLease, error: DeadMarking, options: GiveUpOptions = {}): Promise<void> {
    await this.#giveUp(lease, 'mark-dead', JobStatus.Dead, 0, error, {
      refundAttempt: false,
      conflict: false,
      signal: options.signal,
      leaseLost: options.leaseLost,
    });
  }

  async recordLeaseLost(
    lease: JobLease,
    why: string,
    now: number,
    options: StoreCallOptions = {},
  ): Promise<void> {
    const event: HistoryEvent = { e: 'lease-lost', at: now, ...attemptOf(lease), why: eventMessage(why) };
    const update = leaseLostUpdate(this.#table, lease.dedupKey, event, {
      problemShard: problemShard(lease.dedupKey),
      problemAt: now,
    });
    try {
      await guardStore('record-lease-lost', options.signal, (http) =>
        this.#doc.send(new UpdateCommand(update), http),
      );
    } catch (error) {
      // Gone, or its history full: nothing to record it on.
      if (error instanceof ConditionalCheckFailedException) return;
      throw error;
    }
  }

  async recordDroppedCopy(
    existing: JobItem,
    messageId: string,
    now: number,
    options: StoreCallOptions = {},
  ): Promise<void> {
    const update = droppedCopyUpdate(
      this.#table,
      existing,
      droppedCopyEvent(existing.history, messageId, now),
    );
    try {
      await guardStore('record-dropped-copy', options.signal, (http) =>
        this.#doc.send(new UpdateCommand(update), http),
      );
    } catch (error) {
      // The item changed since the refusal read it (a redrive, another copy counted): not counted here.
      if (error instanceof ConditionalCheckFailedException) return;
      throw error;
    }
  }

  /** Fenced end of an attempt that did not complete: new status, lease end, last error; owner removed. */
  async #giveUp(
    lease: JobLease,
    operation: string,
    status: JobStatus,
    leaseUntil: number,
    error: { message: string; errorClass: string; reason?: string; deadKeyTtlSeconds?: number },
    {
      refundAttempt,
      conflict,
      signal,
      leaseLost,
    }: {
      refundAttempt: boolean;
      conflict: boolean;
      signal: AbortSignal | undefined;
      leaseLost: string | undefined;
    },
  ): Promise<void> {
    const now = Date.now();
    const dead = status === JobStatus.Dead;
    const events = giveUpEvents(lease, status, leaseUntil, error, refundAttempt || conflict, leaseLost, now);
    // Near 400 KB the give-up must still fit: the history's new events are then left out.
    const fit = giveUpWithHistory(lease, error, events);
    // Left out, the events' `problems` index keys are still written: a DEAD job must be listed.
    const carried = fit.withEvents
      ? this.#carry(lease, events, now)
      : eventsLeftOut(lease.dedupKey, events, now);
    const update = giveUpUpdate(this.#table, lease, {
      status,
      leaseUntil,
      now,
      error: fit.error,
      refundAttempt,
      conflict,
      expiresAt: this.#expiresAt(Math.max(now, leaseUntil)),
      ...(dead ? { dead: deadKeyUntilOf(now, error.deadKeyTtlSeconds) } : {}),
    });
    await this.#carried(carried, () =>
      this.#writeWithEffects(lease, operation, withHistory(update, carried.write), [], signal),
    );
    lease.version += 1;
  }

  async get(dedupKey: string, options: GetOptions = {}): Promise<JobItem | undefined> {
    const out = await guardStore('get', options.signal, (http) =>
      this.#doc.send(
        new GetCommand({
          TableName: this.#table,
          Key: { dedupKey },
          ConsistentRead: options.consistent !== false,
        }),
        http,
      ),
    );
    return out.Item as JobItem | undefined;
  }

  async resetForRedrive(
    dedupKey: string,
    now: number,
    leaseEndedBefore = now,
    by: RedriveBy = { by: 'unknown' },
    planned?: number,
  ): Promise<boolean> {
    return resetForRedrive(this.#operatorTable(), dedupKey, { now, leaseEndedBefore, by, planned });
  }

  undoRedrive(before: JobItem, resetVersion: number, now: number): Promise<boolean> {
    return undoRedrive(this.#operatorTable(), before, resetVersion, now);
  }

  async cancel(dedupKey: string, request: CancelRequest): Promise<CancelResult> {
    return cancelJob(this.#operatorTable(), dedupKey, request);
  }

  #operatorTable(): OperatorTable {
    return {
      doc: this.#doc,
      tableName: this.#table,
      expiresAt: (fromMs) => this.#expiresAt(fromMs),
      get: (dedupKey) => this.get(dedupKey),
    };
  }

  /** DynamoDB's limits on a job write, checked before any request (dynamodb-limits.ts). */
  #check(
    operation: string,
    dedupKey: string,
    jobValues: JobWrite['jobValues'],
    effects: readonly Effect[],
  ): void {
    checkJobWrite({ operation, jobValues, jobItem: { tableName: this.#table, key: { dedupKey } }, effects });
  }

  #expiresAt(fromMs: number): number {
    return expiresAtSeconds(fromMs, this.#ttlSeconds);
  }

  /** One transaction: the job item's update first (its old item returned on refusal), then the effects. */
  async #transact(
    operation: string,
    update: JobItemUpdate,
    effects: readonly Effect[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    await guardStore(operation, signal, (http) =>
      this.#doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Update: { ...update, ReturnValuesOnConditionCheckFailure: ALL_OLD } },
            ...effects,
          ],
        }),
        http,
      ),
    );
  }

  /**
   * The job item's fenced update and the effects, all or nothing. `accept`: a refusal without effects
   * that is not a loss (the item as it is); the call then succeeds without writing.
   */
  async #writeWithEffects(
    lease: JobLease,
    operation: string,
    update: JobItemUpdate,
    effects: readonly Effect[],
    signal: AbortSignal | undefined,
    accept?: (old: JobItem) => boolean,
  ): Promise<FencedWriteResult> {
    if (effects.length === 0) {
      try {
        await guardStore(operation, signal, (http) =>
          this.#doc.send(
            new UpdateCommand({ ...update, ReturnValuesOnConditionCheckFailure: ALL_OLD }),
            http,
          ),
        );
        return { ok: true };
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
        const writtenAt = update.ExpressionAttributeValues[':now'];
        const historyKnown = update.ExpressionAttributeValues[HISTORY_KNOWN];
        refusedFencedWrite(
          lease,
          operation,
          { item: error.Item, writtenAt, cause: error, historyKnown },
          accept,
        );
        return { ok: true };
      }
    }
    try {
      await this.#transact(operation, update, effects, signal);
      return { ok: true };
    } catch (error) {
      if (!(error instanceof TransactionCanceledException)) throw error;
      return cancelledFencedWrite(lease, operation, error, update.ExpressionAttributeValues[HISTORY_KNOWN]);
    }
  }
}
