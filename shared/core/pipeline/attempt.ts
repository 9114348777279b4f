// The values one record carries through the pipeline: the job (message, envelope, its checked payload,
// log), and once it is
// claimed, the attempt (its definition, lease, renewer and time bounds). Steps take one of these
// instead of loose parameters.
import type { JobEnvelope } from '../contract/envelope.ts';
import type { JobLease } from '../contract/job-store.ts';
import type { JobRenewer } from '../leases/renewer.ts';
import type { FencedSlot } from '../model/job-context.ts';
import type { AnyJobDefinition } from '../model/job-definition.ts';
import type { JobLog } from '../observe/job-log.ts';
import type { RecordMessage } from './record-message.ts';

/** One record whose body parsed and whose payload passed its type's schema. */
export interface Job {
  readonly message: RecordMessage;
  readonly envelope: JobEnvelope;
  /** The payload as the type's schema parsed it: what `run` gets. */
  readonly payload: unknown;
  /** Its payload hash (decisions/payload-hash.ts); absent when its type compares none (or it was refused). */
  readonly payloadHash?: string;
  readonly log: JobLog;
  /** The concurrency slots taken for it (limits.ts), fenced into its writes with effects. */
  readonly slots?: readonly FencedSlot[];
}

/** A claimed job: the lease it runs under and what renews it. */
export interface Attempt extends Job {
  readonly definition: AnyJobDefinition;
  readonly lease: JobLease;
  readonly renewer: JobRenewer;
  /** The lease granted (capped to the deadline), in ms. */
  readonly leaseMs: number;
  /** When the claim was sent: beats are counted from here. */
  readonly claimedAt: number;
  /** Epoch ms by which the record's work must end (the invocation's deadline less a margin). */
  readonly deadline: number | undefined;
}

/**
 * What the local cache keys a COMPLETED job by besides its dedupKey: its type, and its payload hash when
 * it has one, so a message of another payload misses and meets the store's refusal.
 */
export function cacheType(job: Pick<Job, 'envelope' | 'payloadHash'>): string {
  return job.payloadHash === undefined ? job.envelope.type : `${job.envelope.type}#${job.payloadHash}`;
}

/**
 * The `jobType` dimension of per-job metrics: a registered type (the envelope was checked against the
 * registry), so a small fixed set; never the dedup key. One frozen object per type, built once (the
 * registry bounds the map): no allocation per metric call.
 */
export function byType(envelope: JobEnvelope): Readonly<Record<string, string>> {
  let dimensions = TYPE_DIMENSIONS.get(envelope.type);
  if (!dimensions) {
    dimensions = Object.freeze({ jobType: envelope.type });
    TYPE_DIMENSIONS.set(envelope.type, dimensions);
  }
  return dimensions;
}
const TYPE_DIMENSIONS = new Map<string, Readonly<Record<string, string>>>();

/**
 * The `jobType` and `worker` dimensions of JobsPerWorker (local pools; the EMF sink drops `worker`): like
 * {@link byType}, one frozen object per type and worker name, built once (for the first 64 workers).
 */
export function byTypeAndWorker(envelope: JobEnvelope, worker: string): Readonly<Record<string, string>> {
  let perWorker = WORKER_DIMENSIONS.get(envelope.type);
  if (!perWorker) {
    perWorker = new Map();
    WORKER_DIMENSIONS.set(envelope.type, perWorker);
  }
  let dimensions = perWorker.get(worker);
  if (!dimensions) {
    dimensions = Object.freeze({ ...byType(envelope), worker });
    // A process runs one worker, or a local pool's few; past that (tests making workers), no keeping.
    if (perWorker.size < WORKERS_KEPT) perWorker.set(worker, dimensions);
  }
  return dimensions;
}
const WORKERS_KEPT = 64;
const WORKER_DIMENSIONS = new Map<string, Map<string, Readonly<Record<string, string>>>>();
