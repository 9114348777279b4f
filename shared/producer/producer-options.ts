// What a JobProducer (job-producer.ts) is given: its settings, each job to send, a cancel's options.
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { AnyJobDefinition } from '../core/model/job-definition.ts';
import type { JobSource } from '../core/model/registry.ts';
import type { PayloadInputOf } from '../core/model/standard-schema.ts';
import type { LargePayloadsOptions } from './large-payloads.ts';

/** One job to send: `P` its payload's type, `K` its type's. */
export interface JobInput<P = unknown, K extends string = string> {
  /** The job type (`email.send`). */
  readonly type: K;
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

/**
 * One job of the job set `J` (a union of job definitions): for each definition, its `type` with a payload
 * of its schema's input type, so a misspelt type or a payload of the wrong shape does not compile. With
 * the default (any definition) it is {@link JobInput}: any type, any payload.
 */
export type JobInputOf<J extends AnyJobDefinition = AnyJobDefinition> = J extends AnyJobDefinition
  ? JobInput<PayloadInputOf<J['payload']>, J['type']>
  : never;

/** The job types of the job set `J`: `string` for an untyped producer. */
export type JobTypeOf<J extends AnyJobDefinition = AnyJobDefinition> = J['type'];

/**
 * The definitions' type of a job set (`JobsOf<typeof jobs>`), to name a typed producer's type:
 * `JobProducer<JobsOf<typeof jobs>>`.
 */
export type JobsOf<S> = S extends JobSource<infer J> ? J : AnyJobDefinition;

/**
 * Settings of {@link JobProducer}; every default is applied in the constructor. `J`, the job set's
 * definitions, is inferred from `jobs` (`defineJobs([...])` or a list of `defineJob(...)`).
 */
export interface JobProducerOptions<J extends AnyJobDefinition = AnyJobDefinition> {
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
   * before anything is sent (otherwise the worker dead-letters it). Their types also type the producer:
   * `send` then takes only their `type`s, each with its schema's input as `payload`.
   * @default no check, and any type and payload compile
   */
  readonly jobs?: JobSource<J>;
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
  readonly groupId?: (job: JobInputOf<J>) => string | undefined;
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
