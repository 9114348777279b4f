import { randomBytes, randomUUID } from 'node:crypto';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ROOT_CONTEXT } from '@opentelemetry/api';
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
import { JobRegistry, type JobSource } from '../core/model/registry.ts';
import { payloadProblem } from '../core/model/standard-schema.ts';
import {
  contextFromTraceparent,
  leaseqTracer,
  recordFailure,
  SpanKind,
  traceparentOf,
} from '../core/observe/spans.ts';
import { InvalidEnvelopeError, LeaseqError } from '../errors.ts';
import { ClaimCheck, type LargePayloadsOptions } from './large-payloads.ts';
import { type OutgoingMessage, type SendFailure, sendMessages } from './send-messages.ts';
import { isFinalSetup } from './setup-problem.ts';

/** One job to send. */
export interface JobInput<P = unknown> {
  /** The job type (`email.send`). */
  readonly type: string;
  readonly payload: P;
  /**
   * The job's business identity (an order id, `invoice-2026-0042`): every message with the same key is
   * the same job, run at most once in effect. Not the message id: a resend of the same job keeps it.
   */
  readonly dedupKey: string;
  /** This message's own id (for logs). @default a random UUID */
  readonly id?: string;
  /** @default now */
  readonly createdAt?: Date;
  /**
   * W3C traceparent to continue; an invalid one is an {@link InvalidJobError}.
   * @default the producer's `traceparent()`, else a new trace
   */
  readonly traceparent?: string;
  /**
   * FIFO queues: the message group. Jobs of one group run one at a time, in send order, and a failing job
   * holds back the rest of its group. 1-128 characters of letters, digits and punctuation, no spaces;
   * another is an {@link InvalidJobError}. Not sent to a standard queue.
   * @default the producer's `groupId(job)`, else the dedup key (or, when SQS would refuse the key as a
   * group id, `leaseq-sha256-<hex SHA-256 of the key>`)
   */
  readonly groupId?: string;
}

/** Settings of {@link JobProducer}; every default is applied in the constructor. */
export interface JobProducerOptions {
  /** URL of the jobs queue (stack output `JobsQueueUrl`). */
  readonly queueUrl: string;
  /**
   * The SQS endpoint of the client the producer makes (ignored with `client`). An endpoint on this
   * machine (127.0.0.1, localhost, ::1) gets the emulator's test credentials unless AWS_ACCESS_KEY_ID is set.
   * @default AWS_ENDPOINT_URL_SQS, else AWS_ENDPOINT_URL, else the queue URL's own origin when it names this machine (no AWS queue
   * does), else AWS
   */
  readonly endpoint?: string;
  /** @default an SQSClient from the environment (AWS_REGION; the endpoint as `endpoint` says) */
  readonly client?: SQSClient;
  /**
   * Your job module's jobs: when given, an unknown type or a payload its schema refuses is an error
   * before anything is sent (otherwise the worker dead-letters it).
   * @default no check
   */
  readonly jobs?: JobSource;
  /**
   * The current trace context, called for every job without its own `traceparent` (wire your tracer's
   * active span here). Returning undefined starts a new trace.
   * @default () => undefined
   */
  readonly traceparent?: () => string | undefined;
  /** SendMessageBatch calls in flight (1 for a FIFO send with chosen groups, to keep their order). @default 8 */
  readonly concurrency?: number;
  /**
   * FIFO queues: the group of every job without its own `groupId`; `(job) => 'account-' + job.payload.account`
   * keeps each account's jobs in order. Returning undefined leaves the job in its dedup key's group.
   * @default () => undefined
   */
  readonly groupId?: (job: JobInput) => string | undefined;
  /**
   * The largest body sent (1024 to 1048576): a larger job is an {@link InvalidJobError}. Set it to the
   * jobs queue's `MaximumMessageSize` (the construct's `maxBodyBytes`).
   * @default DEFAULT_MAX_BODY_BYTES (1015808: the construct's default queue size)
   */
  readonly maxBodyBytes?: number;
  /**
   * The claim check for bodies over `maxBodyBytes`: the payload is put into this S3 bucket (the
   * construct's `largePayloads`) and the job is sent as a pointer the worker follows. Costs one PutObject
   * per such job; @aws-sdk/client-s3 is loaded on the first one. docs/envelope.md "Large payloads".
   * @default none (a body over the limit is an InvalidJobError)
   */
  readonly largePayloads?: LargePayloadsOptions;
  /** The `jobs` table (stack output `JobsTableName`): only {@link JobProducer.cancel} needs it. */
  readonly jobsTable?: string;
  /**
   * The DynamoDB document client {@link JobProducer.cancel} writes with.
   * @default one from the environment, with the same endpoint rule as the SQS client's
   */
  readonly dynamoDb?: DynamoDBDocumentClient;
}

/** Options of {@link JobProducer.cancel}. */
export interface CancelOptions {
  /** Why: kept (capped to 240 characters) in the job's history, shown by `leaseq inspect`. */
  readonly reason?: string;
  /** Who: kept in the history. @default 'producer' */
  readonly by?: string;
}

/** A job SQS accepted. */
export interface SentJob {
  readonly dedupKey: string;
  readonly id: string;
  readonly messageId: string;
  readonly traceparent: string;
}

/** A job SQS did not accept after the retries. */
export interface FailedJob {
  readonly dedupKey: string;
  readonly id: string;
  readonly code: string;
  readonly message: string;
  /**
   * What to set when the failure is the sender's setup (no credentials, an endpoint host that does not
   * resolve): sending again without it fails the same way.
   */
  readonly setup?: string;
}

/** What {@link JobProducer.sendBatch} did, job by job. */
export interface SendJobsResult {
  readonly sent: readonly SentJob[];
  readonly failed: readonly FailedJob[];
}

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
 * ```ts
 * const producer = new JobProducer({ queueUrl, jobs });
 * await producer.send({ type: 'email.send', dedupKey: `welcome-${user.id}`, payload: { to: user.email } });
 * ```
 */
export class JobProducer {
  readonly #queueUrl: string;
  readonly #client: SQSClient;
  readonly #jobs: JobRegistry | undefined;
  readonly #traceparent: () => string | undefined;
  readonly #concurrency: number;
  readonly #groupId: (job: JobInput) => string | undefined;
  readonly #maxBodyBytes: number | undefined;
  readonly #claimCheck: ClaimCheck | undefined;
  readonly #options: JobProducerOptions;
  #cancelStore: DynamoDbJobStore | undefined;

  constructor(options: JobProducerOptions) {
    if (!options.queueUrl)
      throw new LeaseqError('JobProducer needs queueUrl (stack output JobsQueueUrl)', { retryable: false });
    this.#queueUrl = options.queueUrl;
    this.#client = options.client ?? defaultClient(options);
    this.#jobs = options.jobs === undefined ? undefined : JobRegistry.from(options.jobs);
    this.#traceparent = options.traceparent ?? (() => undefined);
    this.#concurrency = options.concurrency ?? 8;
    this.#groupId = options.groupId ?? (() => undefined);
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
  envelope<P>(job: JobInput<P>, index = 0): JobEnvelope {
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
  async send(...jobs: JobInput[]): Promise<SentJob[]> {
    const result = await this.sendBatch(jobs);
    if (result.failed.length > 0) throw new SendJobsError(result);
    return [...result.sent];
  }

  /**
   * Sends jobs and reports each one's fate instead of throwing for the ones SQS refused.
   * @throws InvalidJobError before sending anything when a job is invalid.
   */
  async sendBatch(jobs: readonly JobInput[]): Promise<SendJobsResult> {
    // A PRODUCER span per job (a no-op without an OpenTelemetry SDK): its context is the envelope's
    // traceparent, so the worker's spans continue this trace. A job given its own traceparent keeps it.
    // The traceparent() option, when it answers, is the span's parent rather than the active context:
    // the caller named the trace to continue (docs/envelope.md), and the span still sits in between.
    const hooked = jobs.map((job) => (job.traceparent ? undefined : this.#traceparent()));
    const spans = jobs.map((job, i) => {
      if (job.traceparent) return undefined;
      const hook = hooked[i];
      const parent = hook === undefined ? undefined : contextFromTraceparent(hook);
      // A value that is not a version-00 traceparent cannot parent a span: the envelope takes it as it
      // is (and the job is refused when it is not a W3C traceparent at all).
      if (parent === ROOT_CONTEXT) return undefined;
      return leaseqTracer().startSpan(
        `leaseq.send ${job.type}`,
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            'messaging.system': 'aws_sqs',
            'messaging.operation.type': 'send',
            'leaseq.job.type': job.type,
          },
        },
        parent,
      );
    });
    let envelopes: JobEnvelope[];
    let groups: (string | undefined)[];
    try {
      envelopes = jobs.map((job, i) => {
        const span = spans[i];
        const hook = hooked[i];
        return this.#envelope(job, i, (span ? traceparentOf(span) : undefined) ?? hook);
      });
      groups = jobs.map((job, i) => this.#chosenGroup(job, i));
    } catch (error) {
      for (const span of spans) {
        if (span) recordFailure(span, error);
        span?.end();
      }
      throw error;
    }
    const sent: SentJob[] = [];
    const failed: FailedJob[] = [];
    const spanOf = new Map(envelopes.map((e, i) => [e, spans[i]]));
    let toSend: (JobEnvelope | undefined)[] = envelopes;
    if (this.#claimCheck) {
      const checked = await this.#claimCheck.apply(envelopes, this.#maxBodyBytes);
      toSend = envelopes.map((e, i) => {
        const outcome = checked[i];
        if (outcome?.status === 'fulfilled') {
          spanOf.set(outcome.value, spans[i]);
          return outcome.value;
        }
        const error = outcome?.reason;
        failed.push({
          dedupKey: e.dedupKey,
          id: e.id,
          code: error instanceof Error ? error.name : 'Error',
          message: `payload not stored in the large-payload bucket: ${error instanceof Error ? error.message : String(error)}`,
        });
        const span = spans[i];
        if (span) recordFailure(span, error);
        span?.end();
        return undefined;
      });
    }
    const byMessage = new Map<OutgoingMessage, JobEnvelope>();
    const messages = toSend.flatMap((envelope, i) => {
      if (!envelope) return [];
      const groupId = groups[i];
      const message: OutgoingMessage = {
        body: JSON.stringify(envelope),
        dedupKey: envelope.dedupKey,
        ...(groupId === undefined ? {} : { groupId }),
      };
      byMessage.set(message, envelope);
      return [message];
    });
    await sendMessages(this.#client, this.#queueUrl, messages, {
      concurrency: this.#concurrency,
      onSent: (message, messageId) => {
        const e = byMessage.get(message);
        if (!e) return;
        sent.push({ dedupKey: e.dedupKey, id: e.id, messageId, traceparent: e.trace ?? '' });
        const span = spanOf.get(e);
        span?.setAttribute('messaging.message.id', messageId);
        span?.end();
      },
      onFailed: (message, failure: SendFailure) => {
        const e = byMessage.get(message);
        if (!e) return;
        failed.push({
          dedupKey: e.dedupKey,
          id: e.id,
          code: failure.code,
          message: failure.message,
          ...(failure.setup ? { setup: failure.setup } : {}),
        });
        const span = spanOf.get(e);
        if (span) recordFailure(span, new Error(`${failure.code}: ${failure.message}`));
        span?.end();
      },
    });
    return { sent, failed };
  }
}

/**
 * The producer's own client. A queue URL on this machine is the endpoint when none is configured: an
 * emulator hands out URLs of its own address, AWS never a loopback one, so the only other reading
 * (send to sqs.<region>.amazonaws.com, naming a queue on 127.0.0.1) fails on every call.
 */
function defaultClient(options: JobProducerOptions): SQSClient {
  return defaultClients(options).sqs;
}

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
export function sendJobs(options: JobProducerOptions, jobs: readonly JobInput[]): Promise<SentJob[]> {
  return new JobProducer(options).send(...jobs);
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
