// The processor's options, their defaults (from contract/defaults.ts) and their validation, resolved
// once per worker into the one value every pipeline step reads.
import type { Logger } from '@aws-lambda-powertools/logger';
import { errorText, type RedactError } from '../../error-text.ts';
import { ConfigError } from '../../errors.ts';
import { DEFAULTS } from '../contract/defaults.ts';
import { checkMaxBodyBytes } from '../contract/envelope.ts';
import type { JobQueue } from '../contract/job-queue.ts';
import type { JobStore } from '../contract/job-store.ts';
import type { LeaseStore } from '../contract/lease-store.ts';
import type { PayloadStore } from '../contract/payload-store.ts';
import type { PlainBodyReader } from '../contract/plain-body.ts';
import type { RateStore } from '../contract/rate-store.ts';
import {
  type BackoffPolicy,
  backoffSeconds,
  CONFLICT_BACKOFF,
  DEFAULT_BACKOFF,
} from '../decisions/backoff.ts';
import { leaseTiming } from '../decisions/lease-timing.ts';
import type { TableHandleSource } from '../model/job-definition.ts';
import { rateLimits } from '../model/rate-limit.ts';
import { concurrencyLimits, type JobRegistry } from '../model/registry.ts';
import { type MetricsSink, noMetrics } from '../observe/metrics.ts';
import type { CompletedCache } from './completed-cache.ts';
import { RowTurns } from './row-turns.ts';

/** Settings of a {@link JobProcessor}; every default is applied by {@link resolveSettings}. */
export interface JobProcessorOptions {
  readonly store: JobStore;
  readonly queue: JobQueue;
  readonly registry: JobRegistry;
  /** This worker's id, stored as the lease owner and logged on every line. */
  readonly worker: string;
  readonly logger: Logger;
  /** @default noMetrics */
  readonly metrics?: MetricsSink;
  /** The application tables jobs reach as `ctx.tables`. @default none (a job that declares tables fails) */
  readonly tables?: TableHandleSource;
  /** Store of named leases behind `ctx.withLease`. @default none */
  readonly leases?: LeaseStore;
  /** Where rate-limited types take their permits (the leases table). @default none (such a type is refused) */
  readonly rates?: RateStore;
  /**
   * Where claim-checked payloads are read (`payloadRef` envelopes, construct prop `largePayloads`).
   * @default none (such a job is dead-lettered `invalid-payload-missing`)
   */
  readonly payloads?: PayloadStore;
  /** Run test hooks carried in payloads (`ctx.testHooksEnabled`). @default false */
  readonly testHooks?: boolean;
  /** @default undefined (no local cache) */
  readonly cache?: CompletedCache;
  /**
   * Read the job item before every fast run, not only once recent messages were mostly copies
   * (copy-share.ts): the interleaving model turns it on so its invariants cover that mode. @default false
   */
  readonly fastPathReadFirst?: boolean;
  /** Job lease length, at least DEFAULTS.minLeaseMs (1000). @default DEFAULTS.leaseMs (30000) */
  readonly leaseMs?: number;
  /** Heartbeat period. @default leaseMs / 3 */
  readonly heartbeatMs?: number;
  /** Claims that ran the job before it is dead-lettered. @default DEFAULTS.maxAttempts (5) */
  readonly maxAttempts?: number;
  /** Attempts one job item may have refunded (store outages) before they count. @default DEFAULTS.maxRefunds (3) */
  readonly maxRefunds?: number;
  /**
   * Optimistic conflicts one job may give back (each uses no attempt) before it is dead-lettered
   * `max-conflicts`. @default DEFAULTS.maxConflicts (20)
   */
  readonly maxConflicts?: number;
  /** @default DEFAULT_BACKOFF (2 s base, 900 s cap) */
  readonly backoff?: BackoffPolicy;
  /** The delay after an optimistic conflict. @default CONFLICT_BACKOFF (2 s base, 60 s cap) */
  readonly conflictBackoff?: BackoffPolicy;
  /** In-process tries of an optimistic completion before giving the job back. @default DEFAULTS.optimisticTries (3) */
  readonly optimisticTries?: number;
  /**
   * Largest message body accepted (1024 to 1048576); a larger one is dead-lettered `invalid-too-large`.
   * Set it to the jobs queue's `MaximumMessageSize` less RESEND_ATTRIBUTES_RESERVE_BYTES (256; the construct
   * does so), so a limit's re-send of any body it runs fits the queue. @default DEFAULT_MAX_BODY_BYTES (1015808)
   */
  readonly maxBodyBytes?: number;
  /**
   * The jobs queue's redrive `maxReceiveCount` (its safety net), when it is below what the construct sets:
   * a limit's bounce and a conflict's give-back re-send the message before its receives reach it. @default unset: the construct's
   * count (`redriveMaxReceiveCount` in shared/resources.ts), which is above every bounce's re-send point
   */
  readonly maxReceiveCount?: number;
  /** Injectable randomness for backoff jitter. @default Math.random */
  readonly random?: () => number;
  /** Injectable clock. @default Date.now */
  readonly now?: () => number;
  /**
   * Applied to every error text before it is stored (`lastError`, the dead letter's attributes) or
   * emitted (log lines, span status and events); the result is then capped at ERROR_TEXT_MAX (1000)
   * characters. A hook that throws gives "[error text withheld: redactError threw]". docs/security.md.
   * @default none (the text as thrown, capped)
   */
  readonly redactError?: RedactError;
}

/** The options with every default applied: what the pipeline's steps read. */
export interface Settings {
  readonly store: JobStore;
  readonly queue: JobQueue;
  readonly registry: JobRegistry;
  readonly worker: string;
  readonly logger: Logger;
  readonly metrics: MetricsSink;
  readonly tables: TableHandleSource | undefined;
  readonly leases: LeaseStore | undefined;
  readonly rates: RateStore | undefined;
  readonly payloads: PayloadStore | undefined;
  readonly testHooks: boolean;
  readonly cache: CompletedCache | undefined;
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  readonly maxAttempts: number;
  readonly maxRefunds: number;
  readonly maxConflicts: number;
  readonly optimisticTries: number;
  readonly maxReceiveCount: number | undefined;
  /** What readJobBody checks every body against: built once, not per record. */
  readonly parseOptions: {
    readonly maxBytes?: number;
    readonly isKnownType: (type: string) => boolean;
    /** The registry's plain bodies (contract/plain-body.ts); none: every body must be an envelope. */
    readonly plain?: PlainBodyReader;
  };
  readonly random: () => number;
  readonly now: () => number;
  /** The backoff policy with this worker's randomness: whole seconds before retry `attempts` + 1. */
  readonly backoffSeconds: (attempts: number) => number;
  /** This worker's turns on rows its jobs' commits conflicted on (row-turns.ts). */
  readonly rowTurns: RowTurns;
  /** The conflict backoff with this worker's randomness: whole seconds after conflict `n` (1 = first). */
  readonly conflictBackoffSeconds: (conflicts: number) => number;
  /** The text stored or emitted for a thrown value: `redactError` applied, capped, valid (error-text.ts errorText). */
  readonly errorText: (error: unknown) => string;
}

/** Applies the defaults and validates. @throws ConfigError for a type with concurrency limits and no leases store; RangeError for a lease, heartbeat, attempt or try count or a body limit out of range; TypeError for a redactError that is not a function. */
export function resolveSettings(options: JobProcessorOptions): Settings {
  const timing = leaseTiming(options.leaseMs ?? DEFAULTS.leaseMs, options.heartbeatMs);
  for (const [name, value] of [
    ['maxAttempts', options.maxAttempts],
    ['optimisticTries', options.optimisticTries],
    ['maxReceiveCount', options.maxReceiveCount],
  ] as const) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1)) {
      throw new RangeError(`${name} must be an integer >= 1, received ${value}`);
    }
  }
  if (options.maxBodyBytes !== undefined) checkMaxBodyBytes(options.maxBodyBytes);
  const maxRefunds = options.maxRefunds ?? DEFAULTS.maxRefunds;
  const maxConflicts = options.maxConflicts ?? DEFAULTS.maxConflicts;
  for (const [name, value] of [
    ['maxRefunds', maxRefunds],
    ['maxConflicts', maxConflicts],
  ] as const) {
    if (!(Number.isInteger(value) && value >= 0)) {
      throw new RangeError(`${name} must be an integer >= 0, received ${value}`);
    }
  }
  const registry = options.registry;
  // A registry may be absent where a test builds a processor it never runs a record through.
  if (options.leases === undefined && registry !== undefined) {
    const limited = registry.types().find((type) => {
      const definition = registry.get(type);
      return definition !== undefined && concurrencyLimits(definition).length > 0;
    });
    if (limited !== undefined) {
      throw new ConfigError(
        `job type ${limited} has concurrency limits, whose slots live on the leases table: set LEASEQ_LEASES_TABLE on the worker (the processor's leases option)`,
      );
    }
  }
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const random = options.random ?? Math.random;
  const redact = options.redactError;
  if (redact !== undefined && typeof redact !== 'function') {
    throw new TypeError(`redactError must be a function, received ${typeof redact}`);
  }
  return {
    store: options.store,
    queue: options.queue,
    registry,
    worker: options.worker,
    logger: options.logger,
    metrics: options.metrics ?? noMetrics,
    tables: options.tables,
    leases: options.leases,
    rates: options.rates,
    payloads: options.payloads,
    testHooks: options.testHooks ?? false,
    cache: options.cache,
    leaseMs: timing.leaseMs,
    heartbeatMs: timing.heartbeatMs,
    maxAttempts: options.maxAttempts ?? DEFAULTS.maxAttempts,
    maxRefunds,
    maxConflicts,
    optimisticTries: options.optimisticTries ?? DEFAULTS.optimisticTries,
    maxReceiveCount: options.maxReceiveCount,
    parseOptions: {
      ...(options.maxBodyBytes === undefined ? {} : { maxBytes: options.maxBodyBytes }),
      isKnownType: (type) => registry.has(type),
      ...(registry?.plainBodies === undefined ? {} : { plain: registry.plainBodies }),
    },
    random,
    now: options.now ?? Date.now,
    backoffSeconds: (attempts) => backoffSeconds(attempts, backoff, random),
    rowTurns: new RowTurns(),
    conflictBackoffSeconds: (conflicts) =>
      backoffSeconds(conflicts, options.conflictBackoff ?? CONFLICT_BACKOFF, random),
    errorText: (error) => errorText(error, redact),
  };
}

/**
 * The collaborators the registry's types need (not part of {@link resolveSettings}, which the worker's
 * config check also runs without any). @throws ConfigError for a rate-limited type without a rate store.
 */
export function checkCollaborators(s: Settings): void {
  if (s.rates !== undefined) return;
  const limited = s.registry.types().find((type) => {
    const definition = s.registry.get(type);
    return definition !== undefined && rateLimits(definition).length > 0;
  });
  if (limited !== undefined) {
    throw new ConfigError(
      `job type ${limited} has a rateLimit, but the processor has no rate store (option rates)`,
    );
  }
}
