import { ConfigError } from '../../errors.ts';
import { PayloadMismatch } from '../decisions/payload-hash.ts';

/** Longest `deadKeyTtl` (seconds): ten years, past any record's TTL. */
const MAX_DEAD_KEY_TTL = 10 * 365 * 24 * 3600;

import { compilePlainBodies, type PlainBodies, type PlainBodyReader } from '../contract/plain-body.ts';
import type { AnyJobDefinition, ConcurrencyLimit, JobDefinition } from './job-definition.ts';
import { assertRateLimit, rateLimits } from './rate-limit.ts';
import { isPayloadSchema } from './standard-schema.ts';
import { assertTableDefinition, sameTableSpec, type TableDefinition, type TableMap } from './table.ts';

const JOB_TYPE = /^[A-Za-z0-9._:-]{1,128}$/;

/** What a {@link JobRegistry} offers, structurally: a registry from another copy of leaseq has it too. */
export interface JobRegistryLike {
  types(): string[];
  get(type: string): AnyJobDefinition | undefined;
  /** How bodies that are not envelopes are read (docs/envelope.md, "Plain bodies"). */
  readonly plainBodies?: { readonly config: PlainBodies } | undefined;
}

/** Options of a job set beside its types (`defineJobs(jobs, options)`). */
export interface JobSetOptions {
  /**
   * Read messages that are not leaseq envelopes (a producer's own JSON, SNS, EventBridge or S3
   * notifications) as jobs of this set (docs/envelope.md, "Plain bodies"). @default none: every body must be an envelope
   */
  readonly plainBodies?: PlainBodies;
}

/**
 * Where jobs can come from: `defineJobs([...])`, a plain list of `defineJob(...)`, or another copy's
 * registry. `J` is the definitions' type, which types a producer's jobs; a registry of another copy
 * carries none, and its producer takes any type.
 */
export type JobSource<J extends AnyJobDefinition = AnyJobDefinition> =
  | JobRegistry<J>
  | JobRegistryLike
  | readonly J[];

/** True for a registry of this or another copy of leaseq. */
export function isRegistryLike(value: unknown): value is JobRegistryLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as JobRegistryLike).types === 'function' &&
    typeof (value as JobRegistryLike).get === 'function'
  );
}

/**
 * The job types a worker knows, and the application tables they write. An unregistered `type` is a permanent error.
 * `J` is the registered definitions' type (what `defineJobs` was given), for typing producers only.
 */
export class JobRegistry<J extends AnyJobDefinition = AnyJobDefinition> {
  /** Types only (never set): the definitions' type, read by `JobProducer` to type `type` and `payload`. */
  declare readonly '~jobs'?: J;
  readonly #definitions = new Map<string, AnyJobDefinition>();
  readonly #tables = new Map<string, TableDefinition>();
  /** Rate limit name -> "limit per perSeconds": a name shared by types must mean one limit. */
  readonly #rates = new Map<string, string>();
  #plainBodies: PlainBodyReader | undefined;

  /**
   * The registry of any job source: a registry (also one made by another installed copy of leaseq, as in
   * a monorepo with two node_modules), or a list of definitions.
   */
  static from(jobs: JobSource): JobRegistry {
    if (jobs instanceof JobRegistry) return jobs;
    if (isRegistryLike(jobs)) {
      const plain = jobs.plainBodies?.config;
      return JobRegistry.of(
        jobs.types().flatMap((type) => jobs.get(type) ?? []),
        plain === undefined ? {} : { plainBodies: plain },
      );
    }
    return JobRegistry.of(jobs);
  }

  /** A registry of `jobs` (what a job module exports). @throws ConfigError as register, and for bad plainBodies */
  static of(jobs: Iterable<AnyJobDefinition>, options: JobSetOptions = {}): JobRegistry {
    const registry = new JobRegistry();
    for (const job of jobs) registry.register(job);
    if (options.plainBodies !== undefined) {
      registry.#plainBodies = compilePlainBodies(options.plainBodies, registry.types());
    }
    return registry;
  }

  /** How this set reads bodies that are not envelopes; undefined when every body must be an envelope. */
  get plainBodies(): PlainBodyReader | undefined {
    return this.#plainBodies;
  }

  /** Adds a job type. @throws ConfigError for a duplicate or malformed type, a table declared two ways, or a bad rate limit. */
  register<P, T extends TableMap>(definition: JobDefinition<P, T>): this {
    assertDefinition(definition);
    if (this.#definitions.has(definition.type)) {
      throw new ConfigError(`job type ${definition.type} is already registered`);
    }
    assertRateLimit(definition.type, definition.rateLimit, this.#rates);
    for (const table of Object.values(definition.tables ?? {})) {
      assertTableDefinition(table);
      const known = this.#tables.get(table.name);
      if (known && !sameTableSpec(known, table)) {
        throw new ConfigError(
          `table ${table.name} is declared twice with different keys (job type ${definition.type}); declare it once with defineTable and share it`,
        );
      }
      this.#tables.set(table.name, table);
    }
    this.#definitions.set(definition.type, definition as AnyJobDefinition);
    return this;
  }

  get(type: string): AnyJobDefinition | undefined {
    return this.#definitions.get(type);
  }

  has(type: string): boolean {
    return this.#definitions.has(type);
  }

  types(): string[] {
    return [...this.#definitions.keys()];
  }

  /** Every application table the registered jobs write (each once). */
  tables(): TableDefinition[] {
    return [...this.#tables.values()];
  }

  /**
   * Which limits the registered jobs declare: what the worker's role needs beyond the protocol's own
   * actions (a concurrency scope's busy read is a BatchGetItem; a limit's bounce may re-send a message).
   */
  limits(): { readonly concurrency: boolean; readonly rate: boolean } {
    const all = [...this.#definitions.values()];
    return {
      concurrency: all.some((d) => concurrencyLimits(d).length > 0),
      rate: all.some((d) => rateLimits(d).length > 0),
    };
  }
}

function assertDefinition(definition: AnyJobDefinition): void {
  if (typeof definition !== 'object' || definition === null) {
    throw new ConfigError(
      `a job definition must be an object from defineJob(...), received ${typeof definition}`,
    );
  }
  if (typeof definition.type !== 'string' || !JOB_TYPE.test(definition.type)) {
    throw new ConfigError(
      `job type ${JSON.stringify(definition.type)} is not valid; expected 1-128 letters, digits or . _ : - (e.g. "email.send")`,
    );
  }
  if (!isPayloadSchema(definition.payload)) {
    throw new ConfigError(
      `job type ${definition.type}: payload must be a Standard Schema (a zod, valibot or arktype schema)`,
    );
  }
  if (definition.fastPath !== undefined && typeof definition.fastPath !== 'boolean') {
    throw new ConfigError(
      `job type ${definition.type}: fastPath must be true or false, received ${typeof definition.fastPath}`,
    );
  }
  const ttl: unknown = definition.deadKeyTtl;
  if (
    ttl !== undefined &&
    (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1 || ttl > MAX_DEAD_KEY_TTL)
  ) {
    throw new ConfigError(
      `job type ${definition.type}: deadKeyTtl must be a whole number of seconds from 1 to ${MAX_DEAD_KEY_TTL} (10 years), received ${typeof ttl === 'number' ? ttl : typeof ttl}`,
    );
  }
  assertConcurrency(definition.type, definition.concurrency);
  const policy: unknown = definition.onPayloadMismatch;
  if (policy !== undefined && !(Object.values(PayloadMismatch) as unknown[]).includes(policy)) {
    throw new ConfigError(
      `job type ${definition.type}: onPayloadMismatch must be one of ${Object.values(PayloadMismatch).join(', ')}, received ${JSON.stringify(policy)}`,
    );
  }
  if (definition.payloadHash !== undefined && typeof definition.payloadHash !== 'function') {
    throw new ConfigError(
      `job type ${definition.type}: payloadHash must be a function (payload) => the part that defines the same payload, received ${typeof definition.payloadHash}`,
    );
  }
  if (typeof definition.run !== 'function') {
    throw new ConfigError(`job type ${definition.type}: run must be a function (ctx, payload) => outcome`);
  }
}

/** Most slots one concurrency limit may have: each is an item, and a busy acquire reads them all. */
export const MAX_CONCURRENCY_LIMIT = 1000;
/** Most concurrency limits one type may declare: each costs an acquire and a release per job. */
const MAX_CONCURRENCY_LIMITS = 4;

/** The limits of a definition's `concurrency` option, as a list (none when unset). */
export function concurrencyLimits(definition: AnyJobDefinition): readonly ConcurrencyLimit[] {
  const option: unknown = definition.concurrency;
  if (option === undefined) return [];
  return Array.isArray(option) ? option : [option as ConcurrencyLimit];
}

function assertConcurrency(type: string, option: unknown): void {
  if (option === undefined) return;
  const limits: unknown[] = Array.isArray(option) ? option : [option];
  const where = `job type ${type}: concurrency`;
  if (limits.length === 0 || limits.length > MAX_CONCURRENCY_LIMITS) {
    throw new ConfigError(
      `${where} must be one limit or a list of 1 to ${MAX_CONCURRENCY_LIMITS}, received ${limits.length}`,
    );
  }
  // Each limit's slots are named by its owner (name or type) and whether it is keyed only: two limits
  // alike there would share slots, count each other's jobs, and a job with equal keys would wait for itself.
  const scopes = new Map<string, number>();
  for (const [i, entry] of limits.entries()) {
    const at = limits.length > 1 ? `${where}[${i}]` : where;
    if (typeof entry !== 'object' || entry === null) {
      throw new ConfigError(`${at} must be an object { limit, key?, name? }, received ${typeof entry}`);
    }
    const { limit, key, name } = entry as Record<string, unknown>;
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_CONCURRENCY_LIMIT) {
      throw new ConfigError(
        `${at}.limit must be a whole number from 1 to ${MAX_CONCURRENCY_LIMIT}, received ${typeof limit === 'number' ? limit : typeof limit}`,
      );
    }
    if (key !== undefined && typeof key !== 'function') {
      throw new ConfigError(`${at}.key must be a function (payload) => string, received ${typeof key}`);
    }
    if (name !== undefined && (typeof name !== 'string' || !JOB_TYPE.test(name))) {
      throw new ConfigError(
        `${at}.name ${JSON.stringify(name)} is not valid; expected 1-128 letters, digits or . _ : -`,
      );
    }
    // Slots are `slot:<owner>:*#i` and `slot:<owner>:k:<key>#i`: with ":k:" in the owner, a key value of
    // another limit could name the same slots.
    const owner = typeof name === 'string' ? name : type;
    if (owner.includes(':k:')) {
      throw new ConfigError(
        `${at}: the slots' name ${owner} holds ":k:", which a key value of another limit could reach; give the limit a name without it`,
      );
    }
    const scope = `${owner}:${key === undefined ? '*' : 'k'}`;
    const other = scopes.get(scope);
    if (other !== undefined) {
      throw new ConfigError(
        `${at} would share its slots with concurrency[${other}] (both ${key === undefined ? 'type-wide' : 'keyed'}, named ${JSON.stringify(name ?? type)}); give one a distinct name`,
      );
    }
    scopes.set(scope, i);
  }
}
