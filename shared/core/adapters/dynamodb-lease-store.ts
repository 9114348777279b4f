import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { LeaseLostError, StoreUnavailableError } from '../../errors.ts';
import type { Effect } from '../contract/job-store.ts';
import {
  type AcquireResult,
  isOwnAcquire,
  type LeaseItem,
  type LeaseStore,
  type NamedLease,
} from '../contract/lease-store.ts';
import { guardStore } from './store-errors.ts';

/** BatchGet requests per batch of keys before its unprocessed keys are an outage (getMany). */
export const BATCH_GET_TRIES = 6;
/** The pause before the second BatchGet of a batch; it doubles each time (25 + 50 + ... + 400 ms). */
const BATCH_GET_PAUSE_MS = 25;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface DynamoDbLeaseStoreOptions {
  readonly client: DynamoDBDocumentClient;
  readonly tableName: string;
  /** How long an idle lease item lingers before TTL may delete it. @default 86400 (1 day) */
  readonly idleTtlSeconds?: number;
}

/** The `leases` table adapter (pk `leaseKey`). */
export class DynamoDbLeaseStore implements LeaseStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #table: string;
  readonly #ttl: number;

  constructor(options: DynamoDbLeaseStoreOptions) {
    this.#doc = options.client;
    this.#table = options.tableName;
    this.#ttl = options.idleTtlSeconds ?? 86_400;
  }

  async tryAcquire(key: string, owner: string, leaseMs: number, now: number): Promise<AcquireResult> {
    const leaseUntil = now + leaseMs;
    try {
      const out = await guardStore({ operation: 'lease-acquire', key }, (http) =>
        this.#doc.send(
          new UpdateCommand({
            TableName: this.#table,
            Key: { leaseKey: key },
            // A deleted item restarts its token from the clock, above every token issued before it
            // (TTL deletes only items idle for `idleTtlSeconds`), so tokens never go backwards.
            UpdateExpression:
              'SET #owner = :owner, #leaseUntil = :leaseUntil, #token = if_not_exists(#token, :now) + :one, ' +
              '#acquiredAt = :now, #expiresAt = :expiresAt',
            ConditionExpression: 'attribute_not_exists(#leaseKey) OR #leaseUntil < :now',
            ExpressionAttributeNames: {
              '#leaseKey': 'leaseKey',
              '#owner': 'owner',
              '#leaseUntil': 'leaseUntil',
              '#token': 'token',
              '#acquiredAt': 'acquiredAt',
              '#expiresAt': 'expiresAt',
            },
            ExpressionAttributeValues: {
              ':owner': owner,
              ':leaseUntil': leaseUntil,
              ':now': now,
              ':one': 1,
              ':expiresAt': Math.ceil(leaseUntil / 1000) + this.#ttl,
            },
            ReturnValues: 'ALL_NEW',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
          http,
        ),
      );
      const item = out.Attributes as LeaseItem;
      return { acquired: true, lease: { key, owner, token: item.token, leaseUntil } };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException && error.Item) {
        const holder = unmarshall(error.Item) as LeaseItem;
        // Refused by itself: the SDK sent again a write whose answer was lost, and it had landed.
        if (isOwnAcquire(holder, owner, now)) {
          return {
            acquired: true,
            lease: { key, owner, token: holder.token, leaseUntil: holder.leaseUntil },
          };
        }
        return { acquired: false, holder };
      }
      throw error;
    }
  }

  async renew(lease: NamedLease, leaseMs: number, now: number): Promise<void> {
    const leaseUntil = now + leaseMs;
    try {
      await this.#fenced(
        lease,
        'lease-renew',
        'SET #leaseUntil = :leaseUntil, #expiresAt = :expiresAt',
        { ':leaseUntil': leaseUntil, ':expiresAt': Math.ceil(leaseUntil / 1000) + this.#ttl },
        // Never backwards: a renewal held up in the network must not shorten what a later one granted.
        ' AND #leaseUntil <= :leaseUntil',
      );
      lease.leaseUntil = Math.max(lease.leaseUntil, leaseUntil);
    } catch (error) {
      const old = error instanceof LeaseLostError ? refusedItem(error) : undefined;
      // Refused only because a later renewal of this same lease already landed: nothing lost.
      if (old?.owner === lease.owner && old.token === lease.token && old.leaseUntil > leaseUntil) {
        lease.leaseUntil = Math.max(lease.leaseUntil, old.leaseUntil);
        return;
      }
      throw error;
    }
  }

  async release(lease: NamedLease): Promise<void> {
    try {
      await this.#fenced(lease, 'lease-release', 'SET #leaseUntil = :zero REMOVE #owner', { ':zero': 0 });
    } catch (error) {
      if (error instanceof LeaseLostError) return;
      throw error;
    }
  }

  fence(lease: NamedLease): Effect {
    return {
      ConditionCheck: {
        TableName: this.#table,
        Key: { leaseKey: lease.key },
        ConditionExpression: '#owner = :owner AND #token = :token',
        ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token' },
        ExpressionAttributeValues: { ':owner': lease.owner, ':token': lease.token },
      },
    };
  }

  async get(key: string): Promise<LeaseItem | undefined> {
    const out = await guardStore({ operation: 'lease-get', key }, (http) =>
      this.#doc.send(
        new GetCommand({ TableName: this.#table, Key: { leaseKey: key }, ConsistentRead: true }),
        http,
      ),
    );
    return out.Item as LeaseItem | undefined;
  }

  /**
   * The lease items of `keys` that exist, 100 keys per BatchGet (eventually consistent, half the read
   * units: a hint, never a grant; the acquire's condition decides). Keys a BatchGet leaves unprocessed (a
   * throttled table answers so, with no error) are asked for again with a doubling pause, up to
   * {@link BATCH_GET_TRIES} requests per batch; left then: StoreUnavailableError, never a partial list.
   */
  async getMany(keys: readonly string[]): Promise<LeaseItem[]> {
    const items: LeaseItem[] = [];
    for (let at = 0; at < keys.length; at += 100) {
      const chunk = keys.slice(at, at + 100);
      let wanted: Record<string, unknown>[] = chunk.map((leaseKey) => ({ leaseKey }));
      for (let tries = 1; wanted.length > 0; tries++) {
        if (tries > 1) await sleep(BATCH_GET_PAUSE_MS * 2 ** (tries - 2));
        const out = await guardStore('lease-get', (http) =>
          this.#doc.send(new BatchGetCommand({ RequestItems: { [this.#table]: { Keys: wanted } } }), http),
        );
        items.push(...((out.Responses?.[this.#table] ?? []) as LeaseItem[]));
        wanted = (out.UnprocessedKeys?.[this.#table]?.Keys ?? []) as Record<string, unknown>[];
        if (wanted.length > 0 && tries >= BATCH_GET_TRIES) {
          const left = new Error(
            `${wanted.length} of ${chunk.length} keys left unprocessed by BatchGetItem after ${tries} tries (the table throttled them)`,
          );
          left.name = 'UnprocessedKeys';
          throw new StoreUnavailableError('lease-get', left);
        }
      }
    }
    return items;
  }

  async #fenced(
    lease: NamedLease,
    operation: string,
    expression: string,
    values: Record<string, unknown>,
    conditionSuffix = '',
  ) {
    try {
      await guardStore({ operation, key: lease.key }, (http) =>
        this.#doc.send(
          new UpdateCommand({
            TableName: this.#table,
            Key: { leaseKey: lease.key },
            UpdateExpression: expression,
            ConditionExpression: `#owner = :owner AND #token = :token${conditionSuffix}`,
            ExpressionAttributeNames: {
              '#owner': 'owner',
              '#token': 'token',
              '#leaseUntil': 'leaseUntil',
              ...(expression.includes('#expiresAt') ? { '#expiresAt': 'expiresAt' } : {}),
            },
            ExpressionAttributeValues: { ...values, ':owner': lease.owner, ':token': lease.token },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
          http,
        ),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        throw new LeaseLostError(lease.key, lease.token, `${operation} refused`, error);
      }
      throw error;
    }
  }
}

/** The item that refused a fenced lease write, when DynamoDB returned it. */
function refusedItem(error: LeaseLostError): LeaseItem | undefined {
  const cause = error.cause;
  return cause instanceof ConditionalCheckFailedException && cause.Item
    ? (unmarshall(cause.Item) as LeaseItem)
    : undefined;
}
