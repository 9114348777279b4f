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
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { LeaseLostError, StoreUnavailableError } from '../../errors.ts';
import { DEFAULT_DEDUP_TTL_SECONDS } from '../../resources.ts';
import type { Checkpoint, JobItem } from '../contract/job-item.ts';
import type {
  ClaimRequest,
  ClaimResult,
  Effect,
  FastCommitRequest,
  FastCommitResult,
  FencedWriteResult,
  JobLease,
  JobStore,
  StoreCallOptions,
} from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { classifyClaim, isOwnClaim } from '../decisions/claim-decision.ts';
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
// Every write after the claim: still my lease (owner + token) and the job still running. The status check
// keeps a COMPLETED job from being released or marked DEAD by its own owner after a commit whose answer
// was lost (the owner would otherwise hand a finished job out again).
const FENCE = '#owner = :owner AND #token = :token AND #status = :inProgress';

/** The `jobs` table adapter. Attributes as docs/protocol.md lists them ("The job item"). */
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
    const leaseUntil = req.now + req.leaseMs;
    try {
      const out = await guardStore('claim', options.signal, (http) =>
        this.#doc.send(
          new UpdateCommand({
            ...this.#claimUpdate(req, JobStatus.InProgress, leaseUntil),
            // ALL_OLD on success too: the item we replaced tells a takeover from a retry, and the new
            // values follow from it exactly as the update expression computes them.
            ReturnValues: 'ALL_OLD',
            ReturnValuesOnConditionCheckFailure: ALL_OLD,
          }),
          http,
        ),
      );
      const previous = out.Attributes as JobItem | undefined;
      const lease: JobLease = {
        dedupKey: req.dedupKey,
        owner: req.owner,
        token: (previous?.token ?? req.now) + 1,
        attempts: (previous?.attempts ?? 0) + 1,
        messageId: req.messageId,
        version: (previous?.version ?? 0) + 1,
        leaseUntil,
        ...(previous?.checkpoint ? { checkpoint: previous.checkpoint } : {}),
      };
      return previous
        ? { claimed: true, lease, kind: classifyClaim(previous), previous }
        : { claimed: true, lease, kind: 'fresh' };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException && error.Item) {
        const existing = unmarshallItem(error.Item);
        if (isOwnClaim(existing, req)) {
          // Our claim went through and only its answer was lost (the SDK retried it): hold it.
          const lease: JobLease = {
            dedupKey: req.dedupKey,
            owner: req.owner,
            token: existing.token,
            attempts: existing.attempts,
            messageId: req.messageId,
            version: existing.version,
            leaseUntil: existing.leaseUntil,
            ...(existing.checkpoint ? { checkpoint: existing.checkpoint } : {}),
          };
          return { claimed: true, lease, kind: existing.attempts > 1 ? 'retry' : 'fresh' };
        }
        return { claimed: false, existing };
      }
      throw error;
    }
  }

  async claimAndComplete(
    req: FastCommitRequest,
    result: unknown,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FastCommitResult> {
    const update = this.#claimUpdate(req, JobStatus.Completed, req.now, result);
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
          const existing = unmarshallItem(error.Item);
          // Refused by itself: the answer was lost and the SDK retried a write that went through.
          if (isOwnFastCommit(existing, req)) return { ok: true };
          return { ok: false, reason: 'refused', existing };
        }
        throw error;
      }
    }
    try {
      await this.#transact('claim-and-complete', update, effects, options.signal);
      return { ok: true };
    } catch (error) {
      if (!(error instanceof TransactionCanceledException)) throw error;
      const first = error.CancellationReasons?.[0];
      if (first?.Code === 'ConditionalCheckFailed' && first.Item) {
        return { ok: false, reason: 'refused', existing: unmarshallItem(first.Item) };
      }
      return effectCancellation('claim-and-complete', error);
    }
  }

  /**
   * The claim's write: takes the job if there is no item, or it is not finished and its lease is over.
   * `status` IN_PROGRESS is a claim; COMPLETED (with the result) is the fast path's one-write commit.
   */
  #claimUpdate(
    req: Omit<ClaimRequest, 'leaseMs'> | FastCommitRequest,
    status: JobStatus,
    leaseUntil: number,
    result?: unknown,
  ): NonNullable<Effect['Update']> & { Key: Record<string, unknown> } {
    const completes = status === JobStatus.Completed;
    return {
      TableName: this.#table,
      Key: { dedupKey: req.dedupKey },
      // The token starts from the clock when the item is new, so it keeps growing even after TTL
      // deleted an old item (whose tokens were all issued long before it expired).
      UpdateExpression:
        'SET #status = :status, #owner = :owner, #leaseUntil = :leaseUntil, ' +
        '#token = if_not_exists(#token, :now) + :one, #attempts = if_not_exists(#attempts, :zero) + :one, ' +
        '#version = if_not_exists(#version, :zero) + :one, #messageId = :messageId, #type = :type, ' +
        '#createdAt = if_not_exists(#createdAt, :createdAt), #claimedAt = :now, #updatedAt = :now, ' +
        '#expiresAt = :expiresAt' +
        (completes ? ', #completedAt = :now, #result = :result REMOVE #lastError, #lastErrorClass' : ''),
      // A fast commit also refuses an item with a checkpoint (its steps' effects are already committed,
      // and only a leased run resumes from them) and one whose attempts are used up (a leased claim
      // dead-letters it).
      ConditionExpression: completes
        ? 'attribute_not_exists(#dedupKey) OR (NOT #status IN (:completed, :dead) AND #leaseUntil < :now ' +
          'AND attribute_not_exists(#checkpoint) AND #attempts < :maxAttempts)'
        : 'attribute_not_exists(#dedupKey) OR (NOT #status IN (:completed, :dead) AND #leaseUntil < :now)',
      ExpressionAttributeNames: {
        '#dedupKey': 'dedupKey',
        '#status': 'status',
        '#owner': 'owner',
        '#leaseUntil': 'leaseUntil',
        '#token': 'token',
        '#attempts': 'attempts',
        '#version': 'version',
        '#messageId': 'messageId',
        '#type': 'type',
        '#createdAt': 'createdAt',
        '#claimedAt': 'claimedAt',
        '#updatedAt': 'updatedAt',
        '#expiresAt': 'expiresAt',
        ...(completes
          ? {
              '#completedAt': 'completedAt',
              '#result': 'result',
              '#checkpoint': 'checkpoint',
              '#lastError': 'lastError',
              '#lastErrorClass': 'lastErrorClass',
            }
          : {}),
      },
      ExpressionAttributeValues: {
        ':status': status,
        ':completed': JobStatus.Completed,
        ':dead': JobStatus.Dead,
        ':owner': req.owner,
        ':leaseUntil': leaseUntil,
        ':now': req.now,
        ':one': 1,
        ':zero': 0,
        ':messageId': req.messageId,
        ':type': req.type,
        ':createdAt': req.createdAt,
        ':expiresAt': this.#expiresAt(leaseUntil),
        ...(completes
          ? { ':result': result ?? null, ':maxAttempts': (req as FastCommitRequest).maxAttempts }
          : {}),
      },
    };
  }

  async renew(lease: JobLease, leaseMs: number, now: number, options: StoreCallOptions = {}): Promise<void> {
    const leaseUntil = now + leaseMs;
    let later: number | undefined;
    await this.#fencedUpdate(lease, 'renew', options.signal, {
      UpdateExpression: 'SET #leaseUntil = :leaseUntil, #expiresAt = :expiresAt',
      // Never backwards: a renewal that lands after a later one of the same lease changes nothing.
      ConditionSuffix: ' AND #leaseUntil <= :leaseUntil',
      ExpressionAttributeNames: { '#leaseUntil': 'leaseUntil', '#expiresAt': 'expiresAt' },
      ExpressionAttributeValues: { ':leaseUntil': leaseUntil, ':expiresAt': this.#expiresAt(leaseUntil) },
      accept: (old) => {
        if (!holdsFence(old, lease) || old.leaseUntil <= leaseUntil) return false;
        later = old.leaseUntil;
        return true;
      },
    });
    lease.leaseUntil = later ?? leaseUntil;
  }

  async checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects: readonly Effect[] = [],
    options: StoreCallOptions = {},
  ): Promise<FencedWriteResult> {
    const update = {
      TableName: this.#table,
      Key: { dedupKey: lease.dedupKey },
      UpdateExpression: 'SET #checkpoint = :checkpoint, #version = #version + :one, #updatedAt = :now',
      ConditionExpression: `${FENCE} AND #version = :version`,
      ExpressionAttributeNames: {
        '#checkpoint': 'checkpoint',
        '#version': 'version',
        '#updatedAt': 'updatedAt',
        '#owner': 'owner',
        '#token': 'token',
        '#status': 'status',
      },
      ExpressionAttributeValues: {
        ':inProgress': JobStatus.InProgress,
        ':checkpoint': checkpoint,
        ':one': 1,
        ':now': checkpoint.at,
        ':owner': lease.owner,
        ':token': lease.token,
        ':version': lease.version,
      },
    };
    const result = await this.#writeWithEffects(lease, 'checkpoint', update, effects, options.signal);
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
    const now = Date.now();
    const update = {
      TableName: this.#table,
      Key: { dedupKey: lease.dedupKey },
      UpdateExpression:
        'SET #status = :completed, #version = #version + :one, #updatedAt = :now, #completedAt = :now, ' +
        '#result = :result, #expiresAt = :expiresAt REMOVE #lastError, #lastErrorClass',
      ConditionExpression: FENCE,
      ExpressionAttributeNames: {
        '#status': 'status',
        '#version': 'version',
        '#updatedAt': 'updatedAt',
        '#completedAt': 'completedAt',
        '#result': 'result',
        '#expiresAt': 'expiresAt',
        '#lastError': 'lastError',
        '#lastErrorClass': 'lastErrorClass',
        '#owner': 'owner',
        '#token': 'token',
      },
      ExpressionAttributeValues: {
        ':completed': JobStatus.Completed,
        ':inProgress': JobStatus.InProgress,
        ':one': 1,
        ':now': now,
        ':result': result ?? null,
        ':expiresAt': this.#expiresAt(now),
        ':owner': lease.owner,
        ':token': lease.token,
      },
    };
    const out = await this.#writeWithEffects(lease, 'complete', update, effects, options.signal);
    if (out.ok) lease.version += 1;
    return out;
  }

  async release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options: StoreCallOptions & { refundAttempt?: boolean } = {},
  ): Promise<void> {
    await this.#giveUp(lease, 'release', JobStatus.RetryWait, retryAt, error, {
      refundAttempt: options.refundAttempt ?? false,
      signal: options.signal,
    });
  }

  async markDead(
    lease: JobLease,
    error: { message: string; errorClass: string },
    options: StoreCallOptions = {},
  ): Promise<void> {
    await this.#giveUp(lease, 'mark-dead', JobStatus.Dead, 0, error, {
      refundAttempt: false,
      signal: options.signal,
    });
  }

  /** Fenced end of an attempt that did not complete: new status, lease end, last error; owner removed. */
  async #giveUp(
    lease: JobLease,
    operation: string,
    status: JobStatus,
    leaseUntil: number,
    error: { message: string; errorClass: string },
    { refundAttempt, signal }: { refundAttempt: boolean; signal: AbortSignal | undefined },
  ): Promise<void> {
    const now = Date.now();
    await this.#fencedUpdate(lease, operation, signal, {
      UpdateExpression:
        'SET #status = :status, #leaseUntil = :leaseUntil, #version = #version + :one, #updatedAt = :now, ' +
        '#lastError = :lastError, #lastErrorClass = :lastErrorClass, #expiresAt = :expiresAt' +
        (refundAttempt ? ', #attempts = #attempts - :one' : '') +
        ' REMOVE #owner',
      ExpressionAttributeNames: {
        ...(refundAttempt ? { '#attempts': 'attempts' } : {}),
        '#status': 'status',
        '#leaseUntil': 'leaseUntil',
        '#version': 'version',
        '#updatedAt': 'updatedAt',
        '#lastError': 'lastError',
        '#lastErrorClass': 'lastErrorClass',
        '#expiresAt': 'expiresAt',
      },
      ExpressionAttributeValues: {
        ':status': status,
        ':leaseUntil': leaseUntil,
        ':one': 1,
        ':now': now,
        ':lastError': error.message.slice(0, 1000),
        ':lastErrorClass': error.errorClass,
        ':expiresAt': this.#expiresAt(Math.max(now, leaseUntil)),
      },
    });
    lease.version += 1;
  }

  async get(dedupKey: string, options: StoreCallOptions = {}): Promise<JobItem | undefined> {
    const out = await guardStore('get', options.signal, (http) =>
      this.#doc.send(
        new GetCommand({ TableName: this.#table, Key: { dedupKey }, ConsistentRead: true }),
        http,
      ),
    );
    return out.Item as JobItem | undefined;
  }

  async resetForRedrive(dedupKey: string, now: number): Promise<boolean> {
    try {
      await guardStore('reset-for-redrive', () =>
        this.#doc.send(
          new UpdateCommand({
            TableName: this.#table,
            Key: { dedupKey },
            UpdateExpression:
              'SET #status = :retryWait, #leaseUntil = :zero, #attempts = :zero, #version = #version + :one, ' +
              '#updatedAt = :now, #expiresAt = :expiresAt REMOVE #owner',
            // Not finished, and no live lease: DEAD, RETRY_WAIT, or IN_PROGRESS whose lease has ended.
            ConditionExpression:
              'attribute_exists(#status) AND #status <> :completed AND (#status <> :inProgress OR #leaseUntil < :now)',
            ExpressionAttributeNames: {
              '#status': 'status',
              '#leaseUntil': 'leaseUntil',
              '#attempts': 'attempts',
              '#version': 'version',
              '#updatedAt': 'updatedAt',
              '#expiresAt': 'expiresAt',
              '#owner': 'owner',
            },
            ExpressionAttributeValues: {
              ':retryWait': JobStatus.RetryWait,
              ':completed': JobStatus.Completed,
              ':inProgress': JobStatus.InProgress,
              ':zero': 0,
              ':one': 1,
              ':now': now,
              ':expiresAt': this.#expiresAt(now),
            },
          }),
        ),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  #expiresAt(fromMs: number): number {
    return Math.ceil(fromMs / 1000) + this.#ttlSeconds;
  }

  async #fencedUpdate(
    lease: JobLease,
    operation: string,
    signal: AbortSignal | undefined,
    parts: {
      UpdateExpression: string;
      /** Appended to the fence (`' AND ...'`). */
      ConditionSuffix?: string;
      ExpressionAttributeNames: Record<string, string>;
      ExpressionAttributeValues: Record<string, unknown>;
      /** A refusal that is not a loss (the item as it is): the call then succeeds without writing. */
      accept?: (old: JobItem) => boolean;
    },
  ): Promise<void> {
    try {
      await guardStore(operation, signal, (http) =>
        this.#doc.send(
          new UpdateCommand({
            TableName: this.#table,
            Key: { dedupKey: lease.dedupKey },
            UpdateExpression: parts.UpdateExpression,
            ConditionExpression: FENCE + (parts.ConditionSuffix ?? ''),
            ExpressionAttributeNames: {
              ...parts.ExpressionAttributeNames,
              '#owner': 'owner',
              '#token': 'token',
              '#status': 'status',
            },
            ExpressionAttributeValues: {
              ...parts.ExpressionAttributeValues,
              ':owner': lease.owner,
              ':token': lease.token,
              ':inProgress': JobStatus.InProgress,
            },
            ReturnValuesOnConditionCheckFailure: ALL_OLD,
          }),
          http,
        ),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        if (isOwnWrite(error.Item, lease, parts.ExpressionAttributeValues[':now'])) return;
        if (error.Item && parts.accept?.(unmarshallItem(error.Item))) return;
        throw fenceRefusal(lease, operation, error.Item, error);
      }
      throw error;
    }
  }

  /** One transaction: the job item's update first (its old item returned on refusal), then the effects. */
  async #transact(
    operation: string,
    update: NonNullable<Effect['Update']>,
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

  /** The job item's fenced update and the effects, all or nothing. */
  async #writeWithEffects(
    lease: JobLease,
    operation: string,
    update: NonNullable<Effect['Update']>,
    effects: readonly Effect[],
    signal: AbortSignal | undefined,
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
        if (error instanceof ConditionalCheckFailedException) {
          if (isOwnWrite(error.Item, lease, update.ExpressionAttributeValues?.[':now'])) return { ok: true };
          throw fenceRefusal(lease, operation, error.Item, error);
        }
        throw error;
      }
    }
    try {
      await this.#transact(operation, update, effects, signal);
      return { ok: true };
    } catch (error) {
      if (!(error instanceof TransactionCanceledException)) throw error;
      if (error.CancellationReasons?.[0]?.Code === 'ConditionalCheckFailed') {
        throw fenceRefusal(lease, operation, error.CancellationReasons[0].Item, error);
      }
      return effectCancellation(operation, error);
    }
  }
}

/**
 * A cancelled transaction whose first item (the job item) passed: a throttled transaction is an outage;
 * a refused or busy effect (or lease fence) is an effect conflict, nothing written. Throws otherwise.
 */
function effectCancellation(operation: string, error: TransactionCanceledException): FencedWriteResult {
  const reasons = error.CancellationReasons ?? [];
  if (reasons.some((r) => r.Code === 'ThrottlingError' || r.Code === 'ProvisionedThroughputExceeded')) {
    throw new StoreUnavailableError(operation, error);
  }
  const index = reasons.findIndex(
    (r, i) => i > 0 && (r.Code === 'ConditionalCheckFailed' || r.Code === 'TransactionConflict'),
  );
  if (index > 0) {
    // A transaction conflict (another write to that item in flight, e.g. a renewal) is not a
    // failed condition: worth telling apart for named-lease fences.
    const busy = reasons[index]?.Code === 'TransactionConflict';
    return { ok: false, reason: 'effect-conflict', index: index - 1, ...(busy ? { busy } : {}) };
  }
  // Conflicts on the job item itself (a concurrent renew) are transient too.
  if (reasons.some((r) => r.Code === 'TransactionConflict')) {
    return { ok: false, reason: 'effect-conflict', index: -1 };
  }
  throw error;
}

/** True while the item is still this lease's: owner, token, IN_PROGRESS. */
function holdsFence(item: JobItem, lease: JobLease): boolean {
  return item.owner === lease.owner && item.token === lease.token && item.status === JobStatus.InProgress;
}

/** A refused fast commit that was this very commit: COMPLETED by our owner and message at our time. */
function isOwnFastCommit(old: JobItem, req: FastCommitRequest): boolean {
  return (
    old.status === JobStatus.Completed &&
    old.owner === req.owner &&
    old.messageId === req.messageId &&
    old.claimedAt === req.now
  );
}

/**
 * True when a refused write was refused by itself: the item already carries what this very write set
 * (this lease's token, the version after ours, our timestamp). That is a write whose answer was lost and
 * which the SDK retried; it went through. (Transactions need no such check: the SDK retries them with
 * the same ClientRequestToken, which DynamoDB treats as the same request.)
 */
function isOwnWrite(item: Record<string, unknown> | undefined, lease: JobLease, writtenAt: unknown): boolean {
  if (!item || typeof writtenAt !== 'number') return false;
  const old = unmarshallItem(item);
  return old.token === lease.token && old.version === lease.version + 1 && old.updatedAt === writtenAt;
}

/**
 * The error for a refused fenced write. When the refusal shows the job COMPLETED under this very lease
 * (an earlier commit went through but its answer was lost), the error says so, and the caller treats the
 * job as done instead of lost.
 */
function fenceRefusal(
  lease: JobLease,
  operation: string,
  item: Record<string, unknown> | undefined,
  cause: unknown,
): LeaseLostError {
  if (!item)
    return new LeaseLostError(
      lease.dedupKey,
      lease.token,
      `${operation} refused: the job item is gone`,
      cause,
    );
  const old = unmarshallItem(item);
  const completedByUs =
    old.status === JobStatus.Completed && old.token === lease.token && old.owner === lease.owner;
  return new LeaseLostError(
    lease.dedupKey,
    lease.token,
    `${operation} refused: item now has owner ${old.owner ?? '(none)'}, token ${old.token}, status ${old.status}`,
    cause,
    completedByUs,
  );
}

function unmarshallItem(item: Record<string, unknown>): JobItem {
  return unmarshallRecord(item) as unknown as JobItem;
}

function unmarshallRecord(item: Record<string, unknown>): Record<string, unknown> {
  // ConditionalCheckFailedException.Item arrives in the low-level (typed) attribute form.
  return unmarshall(item as Parameters<typeof unmarshall>[0]);
}
