import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { StoreConflictError } from '../../errors.ts';
import { DEFAULT_DEDUP_TTL_SECONDS } from '../../resources.ts';
import { type HistoryEvent, type MismatchEvent, problemShard } from '../contract/job-history.ts';
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
import { carryHistory, sendFitting } from '../decisions/history.ts';
import { attemptOf, droppedCopyEvent, eventMessage } from '../decisions/history-events.ts';
import { expiresAtSeconds, leaseEnd } from '../decisions/lease-arithmetic.ts';
import { checkpointEvents, checkpointUpdate } from '../protocol/checkpoint.ts';
import { claimAnswer, claimUpdate, droppedCopyUpdate, refusedClaim } from '../protocol/claim.ts';
import {
  cancelledFastCommit,
  completeUpdate,
  fastCommitUpdate,
  refusedFastCommit,
} from '../protocol/complete.ts';
import { leaseLostUpdate } from '../protocol/fence.ts';
import { type GiveUpRequest, giveUp } from '../protocol/give-up.ts';
import { withHistory } from '../protocol/history-writes.ts';
import { lifeToRenew, mismatchEventUpdate, newLifeClaim, withPayloadHash } from '../protocol/payload-hash.ts';
import { laterRenewal, renewUpdate } from '../protocol/renew.ts';
import { deadKeyToReset, refusedReset, resetClaim } from '../protocol/reset.ts';
import {
  bestEffort,
  carriedWrite,
  fencedWrite,
  refusal,
  refusedItem,
  sendUpdate,
  transact,
} from './dynamodb-job-writes.ts';
import { checkJobWrite, type JobWrite } from './dynamodb-limits.ts';
import { cancelJob, type OperatorTable, resetForRedrive, undoRedrive } from './dynamodb-operator-writes.ts';
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

/**
 * The `jobs` table adapter. Attributes as docs/protocol.md lists them ("The job item"); each edge's
 * request and the meaning of its answer are in core/protocol/ (one file per edge): this only sends them.
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

  claim(req: ClaimRequest, options: StoreCallOptions = {}): Promise<ClaimResult> {
    return this.#claim(req, options, true);
  }

  /** The claim; `mayReset`: a refusal by a DEAD key past its `deadKeyUntil` resets it (reset.ts). */
  async #claim(req: ClaimRequest, options: StoreCallOptions, mayReset: boolean): Promise<ClaimResult> {
    const leaseUntil = leaseEnd(req.now, req.leaseMs);
    const lease = { leaseUntil, expiresAt: this.#expiresAt(leaseUntil) };
    const update = withPayloadHash(claimUpdate(this.#table, req, lease), req.payloadHash);
    let previous: JobItem | undefined;
    try {
      // ALL_OLD on success too: the item we replaced tells a takeover from a retry.
      previous = await sendUpdate(this.#doc, 'claim', options.signal, update, true);
    } catch (error) {
      // Only a claim of one message's item (E13) is refused with no item: it went since it was read.
      if (req.onlyIfMessageId !== undefined && refusal(error) === undefined) {
        throw new StoreConflictError(
          'claim',
          `no job item under ${req.dedupKey} any more (TTL deleted it since it was read): nothing claimed`,
          error,
        );
      }
      const refused = refusedClaim(refusedItem(error), req);
      const dead = mayReset ? deadKeyToReset(refused, req) : undefined;
      if (dead) return this.#resetClaim(req, dead, options);
      const ended = mayReset ? lifeToRenew(refused, req) : undefined;
      return ended ? this.#newLifeClaim(req, ended, options) : refused;
    }
    return claimAnswer(req, previous, leaseUntil);
  }

  /**
   * A fresh send of a DEAD key whose `deadKeyUntil` passed: the item reset and claimed in one write (a
   * second request, after the refused claim). Refused (another copy reset it first): that refusal.
   */
  async #resetClaim(req: ClaimRequest, dead: JobItem, options: StoreCallOptions): Promise<ClaimResult> {
    const leaseUntil = leaseEnd(req.now, req.leaseMs);
    const reset = resetClaim(this.#table, req, dead, { leaseUntil, expiresAt: this.#expiresAt(leaseUntil) });
    try {
      const update = withPayloadHash(reset.update, req.payloadHash, 'replace');
      await sendUpdate(this.#doc, 'claim', options.signal, update);
    } catch (error) {
      const refused = refusedReset(refusal(error), req, dead);
      // The DEAD item is gone (TTL): the key is a new job's, claimed as any (never reset again).
      return refused === 'gone' ? this.#claim(req, options, false) : refused;
    }
    return reset.answer;
  }

  /** A finished job's key claimed as a new job for a message of another payload (payload-hash.ts). */
  async #newLifeClaim(req: ClaimRequest, ended: JobItem, options: StoreCallOptions): Promise<ClaimResult> {
    const leaseUntil = leaseEnd(req.now, req.leaseMs);
    const life = newLifeClaim(this.#table, req, ended, {
      leaseUntil,
      expiresAt: this.#expiresAt(leaseUntil),
    });
    try {
      await sendUpdate(this.#doc, 'claim', options.signal, life.update);
    } catch (error) {
      // Gone (TTL): the key is a new job's, claimed as any.
      const item = refusal(error);
      return item === undefined ? this.#claim(req, options, false) : refusedClaim(item, req);
    }
    return life.answer;
  }

  async claimAndComplete(
    req: FastCommitRequest,
    result: unknown,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FastCommitResult> {
    this.#check('claim-and-complete', req.dedupKey, { result: result ?? null }, effects);
    const completion = { result, maxAttempts: req.maxAttempts };
    const update = withPayloadHash(
      fastCommitUpdate(this.#table, req, this.#expiresAt(req.now), completion),
      req.payloadHash,
    );
    try {
      if (effects.length === 0) await sendUpdate(this.#doc, 'claim-and-complete', options.signal, update);
      else await transact(this.#doc, 'claim-and-complete', update, effects, options.signal);
    } catch (error) {
      if (effects.length === 0) return refusedFastCommit(refusedItem(error), req);
      if (!(error instanceof TransactionCanceledException)) throw error;
      return cancelledFastCommit(error);
    }
    return { ok: true };
  }

  async renew(lease: JobLease, leaseMs: number, now: number, options: RenewOptions = {}): Promise<void> {
    const leaseUntil = leaseEnd(now, leaseMs);
    let later: number | undefined;
    const carried = carryHistory(lease, [], now);
    const update = renewUpdate(
      this.#table,
      lease,
      leaseUntil,
      this.#expiresAt(leaseUntil),
      options.deadLetter,
    );
    try {
      await sendFitting(carried, () =>
        fencedWrite(
          this.#doc,
          lease,
          'renew',
          withHistory(update, carried.write),
          [],
          options.signal,
          (old) => {
            // Refused because a later renewal of this same lease already landed: nothing lost.
            later = laterRenewal(old, lease, leaseUntil, options.deadLetter);
            return later !== undefined;
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

  async checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FencedWriteResult> {
    this.#check('checkpoint', lease.dedupKey, { checkpoint }, effects);
    const carried = carryHistory(lease, checkpointEvents(lease, checkpoint), checkpoint.at);
    const update = checkpointUpdate(this.#table, lease, checkpoint);
    const result = await carriedWrite(carried, () =>
      fencedWrite(
        this.#doc,
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
    const carried = carryHistory(lease, [], now);
    const update = completeUpdate(this.#table, lease, { result, now, expiresAt: this.#expiresAt(now) });
    const out = await carriedWrite(carried, () =>
      fencedWrite(this.#doc, lease, 'complete', withHistory(update, carried.write), effects, options.signal),
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
    const { refundAttempt = false, conflict = false, leaseLost } = options;
    const status = JobStatus.RetryWait;
    await this.#giveUp(lease, 'release', options.signal, {
      status,
      leaseUntil: retryAt,
      error,
      refundAttempt,
      conflict,
      leaseLost,
    });
  }

  async markDead(lease: JobLease, error: DeadMarking, options: GiveUpOptions = {}): Promise<void> {
    const { leaseLost } = options;
    const status = JobStatus.Dead;
    await this.#giveUp(lease, 'mark-dead', options.signal, {
      status,
      leaseUntil: 0,
      error,
      refundAttempt: false,
      conflict: false,
      leaseLost,
    });
  }

  /** Fenced end of an attempt that did not complete (protocol/give-up.ts). */
  async #giveUp(
    lease: JobLease,
    operation: string,
    signal: AbortSignal | undefined,
    req: Omit<GiveUpRequest, 'now' | 'expiresAt'>,
  ): Promise<void> {
    const now = Date.now();
    const expiresAt = this.#expiresAt(Math.max(now, req.leaseUntil));
    const { update, carried } = giveUp(this.#table, lease, { ...req, now, expiresAt });
    await carriedWrite(carried, () =>
      fencedWrite(this.#doc, lease, operation, withHistory(update, carried.write), [], signal),
    );
    lease.version += 1;
  }

  async recordLeaseLost(
    lease: JobLease,
    why: string,
    now: number,
    options: StoreCallOptions = {},
  ): Promise<void> {
    const event: HistoryEvent = { e: 'lease-lost', at: now, ...attemptOf(lease), why: eventMessage(why) };
    const problem = { problemShard: problemShard(lease.dedupKey), problemAt: now };
    // Refused: gone, or its history full: nothing to record it on.
    await bestEffort(
      this.#doc,
      'record-lease-lost',
      leaseLostUpdate(this.#table, lease.dedupKey, event, problem),
      options.signal,
    );
  }

  async recordDroppedCopy(
    existing: JobItem,
    messageId: string,
    now: number,
    options: StoreCallOptions & { readonly life?: number } = {},
  ): Promise<void> {
    const dropped = droppedCopyEvent(existing.history, messageId, now, options.life);
    // Refused: the item changed since the refusal read it (a redrive, another copy counted): not counted.
    const update = droppedCopyUpdate(this.#table, existing, dropped);
    await bestEffort(this.#doc, 'record-dropped-copy', update, options.signal);
  }

  async recordMismatch(
    existing: JobItem,
    event: MismatchEvent,
    options: StoreCallOptions = {},
  ): Promise<void> {
    // Refused: the item is another job's now (a new token), gone, or its history is full.
    const update = mismatchEventUpdate(this.#table, existing, event);
    await bestEffort(this.#doc, 'record-mismatch', update, options.signal);
  }

  async get(dedupKey: string, options: GetOptions = {}): Promise<JobItem | undefined> {
    const out = await guardStore({ operation: 'get', key: dedupKey }, options.signal, (http) =>
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
}
