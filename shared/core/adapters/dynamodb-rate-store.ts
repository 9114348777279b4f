import { randomBytes } from 'node:crypto';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { RateStore, RateTake } from '../contract/rate-store.ts';
import { contendedWaitMs, decideRate, type RateLog } from '../decisions/rate.ts';
import { rateShardKey, rateShards, shardLimit } from '../decisions/rate-shards.ts';
import { guardStore } from './store-errors.ts';

export interface DynamoDbRateStoreOptions {
  readonly client: DynamoDBDocumentClient;
  /** The `leases` table (pk `leaseKey`); rate items are `rate:<type>:<scope>`. */
  readonly tableName: string;
  /** Seconds an idle rate item lingers past its window before TTL may delete it. @default 3600 */
  readonly idleTtlSeconds?: number;
  /**
   * The shards of a limit (decisions/rate-shards.ts): a test's way to shard small limits. The default
   * shards a limit only when its single item would cost over 300 WRU a second at full use.
   * @default rateShards
   */
  readonly shards?: (limit: number, perSeconds: number) => number;
  /** Where a sharded take starts (a number in [0, 1)). @default Math.random */
  readonly random?: () => number;
}

/** One shard's answer and the conditional writes it spent. */
interface ShardTake {
  readonly take: RateTake;
  readonly writes: number;
}

/** A log as this worker saw it, with the token `w` of the write that left it (none: an item without one). */
type Seen = RateLog & { readonly w?: string };

/** Conditional writes one take may try before it answers "wait" (each refusal returns the item). */
const MAX_TRIES = 8;
/** Items whose last seen log this worker remembers (a tenant key or shard each): the oldest goes first. */
const MAX_REMEMBERED = 4000;

/**
 * Rate items on the `leases` table: `{ leaseKey, v, g, w, expiresAt }`, `g` the grant times within the
 * window (decisions/rate.ts), `v` a version every write is conditioned on, `w` the token of the write
 * that left it (a write the SDK retried after its answer was lost is refused by its own landing, and
 * `w` tells that refusal apart from another worker's). Each write is conditioned on the version and the
 * token it saw: versions restart at 1 when TTL (or an operator) removes an item, and a worker remembering
 * version n of the old item would otherwise overwrite the new item's grants once it reached n. There is
 * no read: a take
 * writes against the log this worker last saw (none: the item must not exist); a refusal returns the
 * item as it is (ALL_OLD) and the next try decides on that. A remembered log that is already full
 * answers "wait" with no request at all: other workers only ever add grants to it.
 *
 * A limit one item cannot serve (rateShards) is split into shards, each such an item with its share of
 * the limit: a take starts at a random shard and goes on to the next while the shards it tries are
 * full, the ones this worker remembers full costing no request, at most MAX_TRIES writes in all.
 */
export class DynamoDbRateStore implements RateStore {
  readonly #doc: DynamoDBDocumentClient;
  readonly #table: string;
  readonly #ttl: number;
  readonly #seen = new Map<string, Seen | undefined>();
  /** The take in flight per key: this worker's takes of one key go one at a time (see `take`). */
  readonly #inFlight = new Map<string, Promise<unknown>>();
  readonly #shards: (limit: number, perSeconds: number) => number;
  readonly #random: () => number;

  constructor(options: DynamoDbRateStoreOptions) {
    this.#doc = options.client;
    this.#table = options.tableName;
    this.#ttl = options.idleTtlSeconds ?? 3600;
    this.#shards = options.shards ?? rateShards;
    this.#random = options.random ?? Math.random;
  }

  /**
   * One at a time per key in this worker: each take starts from what the one before it learned, so the
   * records of one batch do not race each other's conditional writes (each lost race is a refused,
   * billed write); only takes of other workers can still race it.
   */
  take(key: string, limit: number, perSeconds: number, now: number): Promise<RateTake> {
    const before = this.#inFlight.get(key);
    if (before === undefined) return this.#track(key, this.#take(key, limit, perSeconds, now));
    // `now` was read before this take queued: one that waited here goes on with the later clock.
    const queuedAt = Date.now();
    const next = () => this.#take(key, limit, perSeconds, now + Math.max(0, Date.now() - queuedAt));
    return this.#track(key, before.then(next, next));
  }

  #track(key: string, take: Promise<RateTake>): Promise<RateTake> {
    this.#inFlight.set(key, take);
    const settled = () => {
      if (this.#inFlight.get(key) === take) this.#inFlight.delete(key);
    };
    take.then(settled, settled);
    return take;
  }

  async #take(key: string, limit: number, perSeconds: number, now: number): Promise<RateTake> {
    const shards = Math.max(1, Math.min(limit, Math.floor(this.#shards(limit, perSeconds))));
    const started = Date.now();
    if (shards === 1) return (await this.#takeShard(key, limit, perSeconds, now, started, MAX_TRIES)).take;
    const first = Math.min(shards - 1, Math.floor(this.#random() * shards));
    let tries = MAX_TRIES;
    let waitMs = Number.POSITIVE_INFINITY;
    for (let j = 0; j < shards && tries > 0; j++) {
      const index = (first + j) % shards;
      const share = shardLimit(limit, shards, index);
      const shard = rateShardKey(key, index);
      const { take, writes } = await this.#takeShard(shard, share, perSeconds, now, started, tries);
      if (take.granted) return take;
      tries -= writes;
      waitMs = Math.min(waitMs, take.waitMs);
    }
    if (tries <= 0) waitMs = Math.min(waitMs, contendedWaitMs(limit, perSeconds));
    return { granted: false, waitMs };
  }

  async #takeShard(
    key: string,
    limit: number,
    perSeconds: number,
    now: number,
    started: number,
    tries: number,
  ): Promise<ShardTake> {
    let known = this.#seen.get(key);
    // This worker's clock as its tries go on (`now` was read before the take, maybe before a stall of the
    // event loop): a log a refusal returned is judged against the time it came back, so another
    // worker's grant made meanwhile never looks like one from a fast clock.
    const latest = () => Math.max(now + Date.now() - started, Date.now());
    for (let i = 0; i < tries; i++) {
      const decision = decideRate(known, limit, perSeconds, now, latest());
      if (!decision.grant) {
        this.#remember(key, known);
        return { take: { granted: false, waitMs: decision.waitMs }, writes: i };
      }
      const refused = await this.#write(key, known, decision.next, now + perSeconds * 1000);
      if (typeof refused === 'string') {
        this.#remember(key, { ...decision.next, w: refused });
        return { take: { granted: true }, writes: i + 1 };
      }
      known = refused;
    }
    this.#remember(key, known);
    return { take: { granted: false, waitMs: contendedWaitMs(limit, perSeconds) }, writes: tries };
  }

  /** The write's token when written; else the log that refused it (undefined: there is no item). */
  async #write(
    key: string,
    expected: Seen | undefined,
    next: RateLog,
    windowEnd: number,
  ): Promise<string | Seen | undefined> {
    const token = randomBytes(6).toString('base64url');
    try {
      await guardStore({ operation: 'rate-take', key }, (http) =>
        this.#doc.send(
          new UpdateCommand({
            TableName: this.#table,
            Key: { leaseKey: key },
            UpdateExpression: 'SET #v = :v, #g = :g, #w = :w, #expiresAt = :expiresAt',
            // Version 0 is an item without one (no item, or one this store did not write).
            ConditionExpression: !expected?.version
              ? 'attribute_not_exists(#v)'
              : expected.w === undefined
                ? '#v = :seen AND attribute_not_exists(#w)'
                : '#v = :seen AND #w = :seenW',
            ExpressionAttributeNames: { '#v': 'v', '#g': 'g', '#w': 'w', '#expiresAt': 'expiresAt' },
            ExpressionAttributeValues: {
              ':v': next.version,
              ':g': next.grants,
              ':w': token,
              ':expiresAt': Math.ceil(windowEnd / 1000) + this.#ttl,
              ...(expected?.version ? { ':seen': expected.version } : {}),
              ...(expected?.version && expected.w !== undefined ? { ':seenW': expected.w } : {}),
            },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
          http,
        ),
      );
      return token;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        if (!error.Item) return undefined;
        const item = unmarshall(error.Item);
        // This write's own earlier send landed (the SDK retried it): the permit is this take's.
        if (item.w === token) return token;
        return logOf(item);
      }
      throw error;
    }
  }

  #remember(key: string, log: Seen | undefined): void {
    this.#seen.delete(key);
    this.#seen.set(key, log);
    if (this.#seen.size > MAX_REMEMBERED) {
      const oldest = this.#seen.keys().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
  }
}

/** The log of a stored rate item; an item written by something else counts as version 0, no grants. */
function logOf(item: Record<string, unknown>): Seen {
  const version = typeof item.v === 'number' ? item.v : 0;
  const grants = Array.isArray(item.g) ? item.g.filter((t): t is number => typeof t === 'number') : [];
  return { version, grants, ...(typeof item.w === 'string' ? { w: item.w } : {}) };
}
