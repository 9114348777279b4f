import type { Effect } from '../contract/job-store.ts';
import type { PayloadMismatch } from '../decisions/payload-hash.ts';
import type { EffectTable } from './effect-table.ts';
import type { JobContext } from './job-context.ts';
import type { PayloadSchema } from './standard-schema.ts';
import type { TableMap } from './table.ts';

/** What a job hands back: DynamoDB effects committed atomically with its completion, and a result. */
export interface JobOutcome {
  /** Writes committed in the same transaction that marks the job COMPLETED (fenced by the token). */
  readonly effects?: readonly Effect[];
  /** Stored on the job item (keep it small). */
  readonly result?: unknown;
}

/**
 * A cap on how many jobs run at once, enforced across all workers with slots on the `leases` table
 * (docs/jobs.md, "Concurrency limits"). With `key`, one limit per key value computed from the checked
 * payload (a tenant); without, one for the whole type.
 */
export interface ConcurrencyLimit<P = unknown> {
  /** Jobs that may run at once in this scope: a whole number from 1 to MAX_CONCURRENCY_LIMIT (1000). */
  readonly limit: number;
  /** The scope's key (e.g. `p => p.tenantId`): a non-empty string of at most 200 characters. */
  readonly key?: (payload: P) => string;
  /** Replaces the type in the slots' names, so two types sharing a `name` share the limit. */
  readonly name?: string;
}

/** One job type: its payload schema, the tables its effects write and the function that runs it. */
export interface JobDefinition<P = unknown, T extends TableMap = TableMap> {
  /** The envelope `type` that selects this job: letters, digits and `. _ : -` (e.g. `email.send`). */
  readonly type: string;
  /** Validates the payload (any Standard Schema: zod, valibot, ...); a mismatch is dead-lettered at once. */
  readonly payload: PayloadSchema<P>;
  /** Application tables the job reads and writes, reachable as `ctx.tables.<key>`. @default {} */
  readonly tables?: T;
  /**
   * Runs the job on the one-write fast path (docs/protocol.md, "Fast path"): no claim before the run;
   * its effects and the job's completion are one transaction under the claim's condition, so a unique
   * job costs one write instead of two. A racing copy may run the job too; exactly one commit applies.
   * Only for short jobs whose every effect is a DynamoDB write it returns as `effects`: no `ctx.step`,
   * no `ctx.withLease`, nothing done outside the commit (it could be done twice). A failed attempt is
   * recorded under a lease as usual, and every redelivery of the message runs leased.
   * @default false
   */
  readonly fastPath?: boolean;
  /**
   * Caps how often jobs of this type (or of one key) start, across all workers: at most `limit` starts
   * in any window of `perSeconds` (docs/jobs.md, "Rate limits"); several limits may apply together (per
   * second and per hour). A job over the rate waits for its permit without using an attempt. Needs the
   * leases table. @default none
   */
  readonly rateLimit?: RateLimit<P> | readonly RateLimit<P>[];
  /**
   * Seconds a dead-lettered job's key stays dead: until then a fresh send under the key is dropped (and
   * counted on the item), after it the send runs as a new job (attempts from 1, no checkpoint; the
   * history is kept). Unset: dropped until the record's TTL removes it, so only a redrive runs it again
   * (docs/protocol.md, "History").
   * @default unset
   */
  readonly deadKeyTtl?: number;
  /**
   * What a message does whose dedupKey names a job of this type with another payload (its hash differs
   * from the one the job's first claim stored; docs/jobs.md, "A duplicate with another payload"):
   * `dead-letter` it with reason `payload-mismatch`, never run, the job untouched but for a `mismatch`
   * event naming both hashes; take it as a `copy` (no hash is computed or stored: the behaviour before
   * hashes); or run it as a `new-job` once the job under the key ended (COMPLETED or DEAD: the key
   * starts a new life, as a fresh send past a dead key's `deadKeyTtl` does; unfinished: the message
   * waits, hidden, and is decided again). Costs one hash per message (CPU) and 33 bytes on the item.
   * @default 'dead-letter'
   */
  readonly onPayloadMismatch?: PayloadMismatch;
  /**
   * What defines "the same payload": the hash is taken of what this returns from the checked payload
   * (e.g. `p => ({ orderId: p.orderId, amount: p.amount })`, leaving out a timestamp a producer sets on
   * every send). @default the whole checked payload
   */
  readonly payloadHash?: (payload: P) => unknown;
  /**
   * Caps how many jobs of this type (or of one key) run at once; several limits may apply together (a
   * per-tenant one and a type-wide cap). A job that finds no free slot goes back to the queue with a short
   * delay without using an attempt. Needs the leases table. @default none
   */
  readonly concurrency?: ConcurrencyLimit<P> | readonly ConcurrencyLimit<P>[];
  /**
   * Runs the job. It may be called again in the same attempt when its final effects hit an optimistic
   * conflict, and again on a later attempt: steps already checkpointed are skipped by `ctx.step`.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a job with nothing to commit may simply not return.
  run(ctx: JobContext<T>, payload: P): Promise<JobOutcome | undefined | void>;
}

/** A job definition whose payload and table types are erased (how a registry holds them). */
// biome-ignore lint/suspicious/noExplicitAny: erasing the payload type needs a bivariant parameter here.
export type AnyJobDefinition = JobDefinition<any, any>;

/**
 * Where the engine gets the `ctx.tables` handles of a job type: the port the authoring layer implements
 * (shared/jobs/effect-tables.ts), so the engine never imports it.
 */
export interface TableHandleSource {
  for(job: AnyJobDefinition): Readonly<Record<string, EffectTable>>;
}

/**
 * A cap on job starts per window, shared by all workers through the `leases` table (docs/jobs.md, "Rate
 * limits"). With `key`, one limit per key value computed from the checked payload (a tenant, an API
 * account); without, one for the whole type.
 */
export interface RateLimit<P = unknown> {
  /** Starts allowed in any window of `perSeconds`: a whole number from 1 to MAX_RATE_LIMIT (100,000). */
  readonly limit: number;
  /** The window's length in seconds, > 0 (fractions allowed) and at most a day. */
  readonly perSeconds: number;
  /** The scope's key (e.g. `p => p.tenantId`): a non-empty string of at most 200 characters. */
  readonly key?: (payload: P) => string;
  /** Replaces the type in the permit item's name, so types sharing a `name` share the limit. */
  readonly name?: string;
}
