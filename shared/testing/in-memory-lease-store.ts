import type { Effect } from '../core/contract/job-store.ts';
import {
  type AcquireResult,
  isOwnAcquire,
  type LeaseItem,
  type LeaseStore,
  type NamedLease,
} from '../core/contract/lease-store.ts';
import { LeaseLostError } from '../errors.ts';
import { StoreFaults } from './store-faults.ts';

/** The operation names the DynamoDB lease store reports in `StoreUnavailableError.operation`. */
export type LeaseStoreOperation = 'lease-acquire' | 'lease-renew' | 'lease-release' | 'lease-get';

export interface InMemoryLeaseStoreOptions {
  /** Same meaning as the DynamoDB adapter's option (only sets `expiresAt`). @default 86400 (1 day) */
  readonly idleTtlSeconds?: number;
  /** The table name its fences carry (give the store to `InMemoryEffectApplier`'s `leases`). @default 'leases' */
  readonly tableName?: string;
}

type MutableLeaseItem = { -readonly [K in keyof LeaseItem]: LeaseItem[K] };

/**
 * A {@link LeaseStore} over a Map, for unit tests and the chaos harness; never a source of truth in
 * production (the state dies with the process). Same conditions and token rule as `DynamoDbLeaseStore`:
 * acquire when absent or `leaseUntil < now` (or when the refusing item is this very acquire's), a new
 * item's token starts from `now`, renew and release are compare-and-set on owner + token (renew never
 * moves the lease end backwards), and release of a lost lease is a no-op. Items are deep copies.
 */
export class InMemoryLeaseStore implements LeaseStore {
  readonly #items = new Map<string, LeaseItem>();
  readonly #ttlSeconds: number;
  readonly tableName: string;
  /** Injects store outages (see {@link StoreFaults}). */
  readonly faults = new StoreFaults<LeaseStoreOperation>();

  constructor(options: InMemoryLeaseStoreOptions = {}) {
    this.#ttlSeconds = options.idleTtlSeconds ?? 86_400;
    this.tableName = options.tableName ?? 'leases';
  }

  async tryAcquire(key: string, owner: string, leaseMs: number, now: number): Promise<AcquireResult> {
    return this.faults.run('lease-acquire', (): AcquireResult => {
      const old = this.#items.get(key);
      if (old !== undefined && !(old.leaseUntil < now)) {
        // The same request again after its answer was lost: it was this very acquire.
        if (isOwnAcquire(old, owner, now)) {
          return { acquired: true, lease: { key, owner, token: old.token, leaseUntil: old.leaseUntil } };
        }
        return { acquired: false, holder: structuredClone(old) };
      }
      const leaseUntil = now + leaseMs;
      const item: LeaseItem = {
        ...old,
        leaseKey: key,
        owner,
        leaseUntil,
        // A deleted item restarts its token from the clock, above every token issued before it.
        token: (old?.token ?? now) + 1,
        acquiredAt: now,
        expiresAt: this.#expiresAt(leaseUntil),
      };
      this.#items.set(key, item);
      return { acquired: true, lease: { key, owner, token: item.token, leaseUntil } };
    });
  }

  async renew(lease: NamedLease, leaseMs: number, now: number): Promise<void> {
    const asked = now + leaseMs;
    const granted = await this.faults.run('lease-renew', () => {
      const item = this.#fenced(lease, 'lease-renew');
      // Never backwards: a late renewal leaves a later one's lease end in place.
      if (item.leaseUntil > asked) return item.leaseUntil;
      this.#items.set(lease.key, { ...item, leaseUntil: asked, expiresAt: this.#expiresAt(asked) });
      return asked;
    });
    lease.leaseUntil = Math.max(lease.leaseUntil, granted);
  }

  async release(lease: NamedLease): Promise<void> {
    try {
      await this.faults.run('lease-release', () => {
        const next: MutableLeaseItem = { ...this.#fenced(lease, 'lease-release'), leaseUntil: 0 };
        delete next.owner;
        this.#items.set(lease.key, next);
      });
    } catch (error) {
      if (error instanceof LeaseLostError) return;
      throw error;
    }
  }

  async get(key: string): Promise<LeaseItem | undefined> {
    return this.faults.run('lease-get', () => {
      const item = this.#items.get(key);
      return item === undefined ? undefined : structuredClone(item);
    });
  }

  async getMany(keys: readonly string[]): Promise<LeaseItem[]> {
    return this.faults.run('lease-get', () =>
      keys.flatMap((key) => {
        const item = this.#items.get(key);
        return item === undefined ? [] : [structuredClone(item)];
      }),
    );
  }

  /**
   * The same ConditionCheck as the DynamoDB adapter's; an `InMemoryEffectApplier` given this store (its
   * `leases` option) evaluates it inside a commit, all or nothing with the other effects.
   */
  fence(lease: NamedLease): Effect {
    return {
      ConditionCheck: {
        TableName: this.tableName,
        Key: { leaseKey: lease.key },
        ConditionExpression: '#owner = :owner AND #token = :token',
        ExpressionAttributeNames: { '#owner': 'owner', '#token': 'token' },
        ExpressionAttributeValues: { ':owner': lease.owner, ':token': lease.token },
      },
    };
  }

  /** True while `owner` holds `key` with `token` (what a fence checks). Synchronous, fault-free. */
  holds(key: string, owner: string, token: number): boolean {
    const item = this.#items.get(key);
    return item?.owner === owner && item.token === token;
  }

  /** Test hook: the item as stored, past any injected fault (an audit's read must not spend one). */
  peek(key: string): LeaseItem | undefined {
    const item = this.#items.get(key);
    return item === undefined ? undefined : structuredClone(item);
  }

  /** Test hook: removes an item the way TTL would. Returns whether there was one. */
  delete(key: string): boolean {
    return this.#items.delete(key);
  }

  #fenced(lease: NamedLease, operation: string): LeaseItem {
    const item = this.#items.get(lease.key);
    if (item?.owner === lease.owner && item.token === lease.token) return item;
    throw new LeaseLostError(lease.key, lease.token, `${operation} refused`);
  }

  #expiresAt(leaseUntil: number): number {
    return Math.ceil(leaseUntil / 1000) + this.#ttlSeconds;
  }
}
