import { randomBytes, randomUUID } from 'node:crypto';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { awsConfigFromEnv, createAwsClients, isLocalEndpoint, serviceEndpoint } from '../aws/clients.ts';
import { groupIdProblem } from '../aws/message-group.ts';
import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import {
  checkMaxBodyBytes,
  isEnvelopeDedupKey,
  isValidTraceparent,
  type JobEnvelope,
  makeEnvelope,
  parseEnvelope,
} from '../core/contract/envelope.ts';
import type { CancelResult } from '../core/contract/job-store.ts';
import type { AnyJobDefinition } from '../core/model/job-definition.ts';
import { JobRegistry } from '../core/model/registry.ts';
import { payloadProblem } from '../core/model/standard-schema.ts';
import { traceparentOf } from '../core/observe/spans.ts';
import { InvalidEnvelopeError, LeaseqError } from '../errors.ts';
import { ClaimCheck } from './large-payloads.ts';
import type { CancelOptions, JobInput, JobInputOf, JobProducerOptions } from './producer-options.ts';
import { endFailed, producerSpan, type SendJobsResult, type SentJob, sendEnvelopes } from './send-batch.ts';
import { isFinalSetup } from './setup-problem.ts';

/** A job refused before sending: unknown type, bad payload, bad dedup key, body too large. */
export class InvalidJobError extends LeaseqError {
  readonly dedupKey: string | undefined;
  readonly index: number;

  constructor(index: number, dedupKey: string | undefined, detail: string) {
    super(`job ${index + 1}${dedupKey ? ` (${dedupKey})` : ''}: ${detail}; nothing was sent`, {
      retryable: false,
    });
    this.name = 'InvalidJobError';
    this.dedupKey = dedupKey;
    this.index = index;
  }
}

/**
 * Some jobs of a {@link JobProducer.send} call were not accepted by SQS. When the sender's setup failed (no
 * credentials, an endpoint that does not resolve) the message ends with what to set. Retryable, unless an
 * endpoint host does not resolve: missing credentials may be a credentials service that is briefly down.
 */
export class SendJobsError extends LeaseqError {
  readonly result: SendJobsResult;

  constructor(result: SendJobsResult) {
    const first = result.failed[0];
    const setup = result.failed.find((f) => f.setup)?.setup;
    super(
      `${result.failed.length} of ${result.sent.length + result.failed.length} jobs were not sent` +
        (first ? ` (first: ${first.code}: ${first.message})` : '') +
        (setup ? `: ${setup}` : ''),
      { retryable: !result.failed.some((f) => isFinalSetup(f.code)) },
    );
    this.name = 'SendJobsError';
    this.result = result;
  }
}

/**
 * Sends jobs to a leaseq queue: builds the envelope (schema version, ids, creation time, trace context),
 * checks it as the worker will, and sends in batches of 10 with SQS's own failures retried. Nobody
 * writes an envelope by hand.
 *
 * Given the job module's `jobs`, it is typed by them (`J`, inferred): `type` must be one of theirs and
 * `payload` its schema's input, checked by the compiler as well as before sending.
 *
 * ```ts
 * const producer = new JobProducer({ queueUrl, jobs });
 * await producer.send({ type: 'email.send', dedupKey: `welcome-${user.id}`, payload: { to: user.email } });
 * ```
 */
export class JobProducer<J extends AnyJobDefinition = AnyJobDefinition> {
  readonly #queueUrl: string;
  readonly #client: SQSClient;
  readonly #jobs: JobRegistry | undefined;
  readonly #traceparent: () => string | undefined;
  readonly #concurrency: number;
  readonly #groupId: (job: JobInput) => string | undefined;
  readonly #maxBodyBytes: number | undefined;
  readonly #claimCheck: ClaimCheck | undefined;
  readonly #options: JobProducerOptions<J>;
  #cancelStore: DynamoDbJobStore | undefined;

  constructor(options: JobProducerOptions<J>) {
    if (!options.queueUrl)
      throw new LeaseqError('JobProducer needs queueUrl (stack output JobsQueueUrl)', { retryable: false });
    this.#queueUrl = options.queueUrl;
    this.#client = options.client ?? defaultClients(options).sqs;
    this.#jobs = options.jobs === undefined ? undefined : JobRegistry.from(options.jobs);
    this.#traceparent = options.traceparent ?? (() => undefined);
    this.#concurrency = options.concurrency ?? 8;
    // Every job this producer builds is a JobInputOf<J>, so its own groupId sees only those.
    this.#groupId =
      (options.groupId as ((job: JobInput) => string | undefined) | undefined) ?? (() => undefined);
    this.#maxBodyBytes = checkedBodyLimit(options.maxBodyBytes);
    this.#claimCheck = options.largePayloads ? new ClaimCheck(options.largePayloads) : undefined;
    this.#options = options;
  }

  /**
   * Cancels the job sent under `dedupKey` (docs/jobs.md, "Cancelling a job"): one conditional write of
   * its job item. A job not yet run or waiting for a retry never runs; a running one stops at its next
   * heartbeat and commits nothing; a cancel before the job's message leaves a tombstone that drops it.
   * A COMPLETED or DEAD job answers `finished` and is left alone.
   * @throws LeaseqError (not retryable) without the `jobsTable` option, or for a key no envelope can carry
   */
  async cancel(dedupKey: string, options: CancelOptions = {}): Promise<CancelResult> {
    if (!isEnvelopeDedupKey(dedupKey)) {
      throw new LeaseqError(`cancel: not a dedupKey (${keyShape(dedupKey)}; 1-256 printable)`, {
        retryable: false,
      });
    }
    return this.#jobsStore().cancel(dedupKey, {
      now: Date.now(),
      by: options.by ?? 'producer',
      ...(options.reason === undefined ? {} : { reason: options.reason }),
    });
  }

  #jobsStore(): DynamoDbJobStore {
    const { jobsTable } = this.#options;
    if (!jobsTable) {
      throw new LeaseqError('JobProducer.cancel needs the jobsTable option (stack output JobsTableName)', {
        retryable: false,
      });
    }
    this.#cancelStore ??= new DynamoDbJobStore({
      client: this.#options.dynamoDb ?? defaultClients(this.#options).doc,
      tableName: jobsTable,
    });
    return this.#cancelStore;
  }

  /**
   * The job's chosen FIFO group, checked; undefined leaves it to the dedup key's group.
   * @throws InvalidJobError when SQS would refuse it (on every resend).
   */
  #chosenGroup(job: JobInput, index: number): string | undefined {
    const group = job.groupId ?? this.#groupId(job);
    if (group === undefined) return undefined;
    const problem = groupIdProblem(group);
    if (problem) throw new InvalidJobError(index, job.dedupKey, problem);
    return group;
  }

  /**
   * The envelope of one job, checked: the body the worker receives.
   * @throws InvalidJobError when the worker would refuse it.
   */
  envelope(job: JobInputOf<J>, index = 0): JobEnvelope {
    return this.#envelope(job, index, job.traceparent ? undefined : this.#traceparent());
  }

  /** The envelope with `hookTrace` (the send span's, else the traceparent() option's) unless the job has its own. */
  #envelope<P>(job: JobInput<P>, index: number, hookTrace: string | undefined): JobEnvelope {
    const trace = job.traceparent ?? hookTrace ?? newTraceparent();
    // The worker drops a bad trace and runs the job; here the caller can still fix it, so it is refused.
    if (!isValidTraceparent(trace)) {
      throw new InvalidJobError(
        index,
        job.dedupKey,
        `traceparent ${JSON.stringify(trace).slice(0, 80)} is not a W3C traceparent ` +
          '(vv-<32 hex>-<16 hex>-<2 hex>, lower case, version not ff, ids not all zeros)',
      );
    }
    const envelope = makeEnvelope({
      id: job.id ?? randomUUID(),
      dedupKey: job.dedupKey,
      type: job.type,
      payload: job.payload,
      ...(job.createdAt ? { createdAt: job.createdAt } : {}),
      trace,
    });
    try {
      parseEnvelope(JSON.stringify(envelope), {
        ...(this.#jobs ? { isKnownType: (t: string) => this.#jobs?.has(t) ?? true } : {}),
        // With the claim check a larger body is sent as a pointer (sendBatch): every other check still applies.
        ...(this.#claimCheck
          ? { maxBytes: Number.POSITIVE_INFINITY }
          : this.#maxBodyBytes === undefined
            ? {}
            : { maxBytes: this.#maxBodyBytes }),
      });
    } catch (error) {
      if (error instanceof InvalidEnvelopeError)
        throw new InvalidJobError(index, job.dedupKey, error.message);
      throw error;
    }
    const schema = this.#jobs?.get(job.type)?.payload;
    const problem = schema ? payloadProblem(schema, job.payload) : undefined;
    if (problem) throw new InvalidJobError(index, job.dedupKey, `${job.type} ${problem}`);
    return envelope;
  }

  /**
   * Sends jobs; resolves when every one was accepted.
   * @throws InvalidJobError before sending anything when a job is invalid;
   * @throws SendJobsError (with the per-job result) when SQS did not accept some.
   */
  async send(...jobs: JobInputOf<J>[]): Promise<SentJob[]> {
    const result = await this.sendBatch(jobs);
    if (result.failed.length > 0) throw new SendJobsError(result);
    return [...result.sent];
  }

  /**
   * Sends jobs and reports each one's fate instead of throwing for the ones SQS refused.
   * @throws InvalidJobError before sending anything when a job is invalid.
   */
  async sendBatch(jobs: readonly JobInputOf<J>[]): Promise<SendJobsResult> {
    // A PRODUCER span per job: its context is the envelope's traceparent, so the worker's spans continue
    // this trace. A job given its own traceparent keeps it. The traceparent() option, when it answers, is
    // the span's parent rather than the active context: the caller named the trace to continue
    // (docs/envelope.md), and the span still sits in between.
    const hooked = jobs.map((job) => (job.traceparent ? undefined : this.#traceparent()));
    const spans = jobs.map((job, i) => (job.traceparent ? undefined : producerSpan(job.type, hooked[i])));
    let envelopes: JobEnvelope[];
    let groups: (string | undefined)[];
    try {
      envelopes = jobs.map((job, i) => {
        const span = spans[i];
        return this.#envelope(job, i, (span ? traceparentOf(span) : undefined) ?? hooked[i]);
      });
      groups = jobs.map((job, i) => this.#chosenGroup(job, i));
    } catch (error) {
      for (const span of spans) endFailed(span, error);
      throw error;
    }
    const to = {
      client: this.#client,
      queueUrl: this.#queueUrl,
      concurrency: this.#concurrency,
      claimCheck: this.#claimCheck,
      maxBodyBytes: this.#maxBodyBytes,
    };
    return sendEnvelopes(to, envelopes, groups, spans);
  }
}

/**
 * The producer's own clients (SQS, and the document client cancel writes with). A queue URL on this
 * machine is the endpoint when none is configured: an emulator hands out URLs of its own address, AWS
 * never a loopback one, so the only other reading (send to sqs.<region>.amazonaws.com, naming a queue on
 * 127.0.0.1) fails on every call.
 */
function defaultClients(options: JobProducerOptions): ReturnType<typeof createAwsClients> {
  const config = awsConfigFromEnv();
  // The option is both clients' endpoint, and SQS's over AWS_ENDPOINT_URL_SQS; a loopback queue URL is
  // its own endpoint only when nothing names one (a compose setup's URLs may name another port).
  const sqs = options.endpoint ?? serviceEndpoint(config, 'sqs');
  const endpoint =
    options.endpoint ?? config.endpoint ?? (sqs ? undefined : loopbackOrigin(options.queueUrl));
  const endpoints = { ...config.endpoints, ...(sqs ? { sqs } : {}) };
  return createAwsClients({ ...config, ...(endpoint ? { endpoint } : {}), endpoints });
}

/** What a refused key is, without the key itself (it may hold what a log or terminal must not show). */
function keyShape(key: unknown): string {
  return typeof key === 'string' ? `${key.length} characters` : `a ${key === null ? 'null' : typeof key}`;
}

/** The origin (`http://127.0.0.1:4566`) of a URL naming this machine, else undefined. */
function loopbackOrigin(queueUrl: string): string | undefined {
  if (!isLocalEndpoint(queueUrl)) return undefined;
  return new URL(queueUrl).origin;
}

/**
 * Sends jobs with a one-off {@link JobProducer}.
 * @throws InvalidJobError or SendJobsError as {@link JobProducer.send}.
 */
export function sendJobs<J extends AnyJobDefinition = AnyJobDefinition>(
  options: JobProducerOptions<J>,
  jobs: readonly JobInputOf<J>[],
): Promise<SentJob[]> {
  return new JobProducer<J>(options).send(...jobs);
}

/** The maxBodyBytes option, checked. @throws LeaseqError (not retryable) naming the range. */
function checkedBodyLimit(value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  try {
    return checkMaxBodyBytes(value);
  } catch (error) {
    throw new LeaseqError(`JobProducer ${(error as Error).message}`, { retryable: false });
  }
}

/** A fresh W3C traceparent (version 00, sampled), so every job has a trace id to follow in the logs. */
export function newTraceparent(): string {
  return `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
}
