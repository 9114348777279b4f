import { type Duration, type RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { PROBLEMS_INDEX } from '../../shared/core/contract/job-history.ts';
import { ConfigError } from '../../shared/errors.ts';
import { type ResourceNames, redriveMaxReceiveCount } from '../../shared/resources.ts';
import type { ExistingQueueFacts } from '../safety-checks.ts';
import {
  DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES,
  JOBS_QUEUE_MAX_MESSAGE_BYTES,
  JobQueue,
  VISIBILITY_TO_TIMEOUT_RATIO,
} from './job-queue.ts';
import {
  checkEventSourceScaling,
  type EventSourceScalingProps,
  type LeaseqProvisionedPollers,
} from './provisioned-pollers.ts';
import { StateTables } from './state-tables.ts';
import { WORKER_QUEUE_KMS_ACTIONS } from './worker-function.ts';

/** A construct property outside its allowed range; the message shows the value received and expected. */
export class InvalidLeaseqPropsError extends ConfigError {
  readonly prop: string;

  constructor(construct: string, prop: string, received: unknown, expected: string, cause?: unknown) {
    super(`${construct} prop ${prop} is ${JSON.stringify(received)}; expected ${expected}`, cause);
    this.name = 'InvalidLeaseqPropsError';
    this.prop = prop;
  }
}

/** `maxConcurrency` or `provisionedPollers` for the worker's event source (provisioned-pollers.ts). */
export function eventSourceScaling(
  props: EventSourceScalingProps & { readonly maxConcurrency?: number },
  maxConcurrency: number,
  construct = 'LeaseqPipeline',
): { readonly maxConcurrency?: number; readonly provisionedPollers?: LeaseqProvisionedPollers } {
  return checkEventSourceScaling(props, maxConcurrency, (prop, received, expected) => {
    return new InvalidLeaseqPropsError(construct, prop, received, expected);
  });
}

export type { EventSourceScalingProps, LeaseqProvisionedPollers };

/**
 * A jobs queue and DLQ made outside the construct (`LeaseqPipelineProps.existingQueue`). Nothing is created
 * for them and nothing of them is changed: the worker is granted its actions on these two ARNs.
 */
export interface LeaseqExistingQueue {
  /** The queue the worker consumes, e.g. `Queue.fromQueueArn(this, 'Orders', arn)`. */
  readonly queue: sqs.IQueue;
  /** The queue its redrive policy moves messages to; the worker dead-letters there explicitly too. */
  readonly deadLetterQueue: sqs.IQueue;
  /**
   * The queue's visibility timeout, for the safety rules (at least 6 x `workerTimeout`). Required for an
   * imported queue, whose settings synth cannot read; for a `Queue` of the same app its own value is read.
   */
  readonly visibilityTimeout?: Duration;
  /**
   * The queue's redrive `maxReceiveCount` (at least the pipeline's `maxAttempts + REDRIVE_MARGIN`, see
   * `maxAttempts`). Required for an imported queue, as `visibilityTimeout`.
   */
  readonly maxReceiveCount?: number;
}

/**
 * The `jobs` and `leases` tables made outside the construct (`LeaseqPipelineProps.existingStateTables`):
 * `jobs` keyed by the string `dedupKey` with the `problems` index (`addProblemsIndex`), `leases` by the
 * string `leaseKey`, both with TTL on `expiresAt`. For tables of the same app these are checked at synth;
 * an imported table's shape cannot be read there.
 */
export interface LeaseqExistingTables {
  readonly jobs: dynamodb.ITable;
  readonly leases: dynamodb.ITable;
}

/** What {@link pipelineResources} needs of the pipeline. */
export interface PipelineResourcesProps {
  readonly existingQueue?: LeaseqExistingQueue | undefined;
  readonly existingStateTables?: LeaseqExistingTables | undefined;
  readonly maxBodyBytes?: number | undefined;
  readonly settings: {
    readonly workerTimeout: Duration;
    readonly fifo: boolean;
    readonly maxAttempts: number;
    readonly batchSize: number;
    readonly batchConcurrency: number;
  };
  readonly names: ResourceNames;
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
}

/** The queues and state tables of a pipeline: made here, or the ones given. */
export interface PipelineResources {
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  readonly jobsTable: dynamodb.ITable;
  readonly leasesTable: dynamodb.ITable;
  readonly maxBodyBytes: number;
  /** The described settings of an imported queue (undefined when the queue's own resource is read). */
  readonly queueFacts?: ExistingQueueFacts;
}

const fail = (prop: string, received: unknown, expected: string) =>
  new InvalidLeaseqPropsError('LeaseqPipeline', prop, received, expected);

/**
 * The queue/table choice of `LeaseqPipeline`: creates what is not given, checks what is given as far as
 * synth can see it, and registers the checks that need the finished tree.
 * @throws InvalidLeaseqPropsError for a misfit that is known at once (FIFO-ness, a missing description).
 */
export function pipelineResources(scope: Construct, props: PipelineResourcesProps): PipelineResources {
  const { settings, names, removalPolicy } = props;
  const maxBodyBytes = props.maxBodyBytes ?? JOBS_QUEUE_MAX_MESSAGE_BYTES;
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 1024 || maxBodyBytes > JOBS_QUEUE_MAX_MESSAGE_BYTES) {
    throw fail(
      'maxBodyBytes',
      maxBodyBytes,
      `an integer from 1024 to ${JOBS_QUEUE_MAX_MESSAGE_BYTES} (1 MiB less ${DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES} bytes a dead letter's reason attributes need)`,
    );
  }
  const existing = props.existingStateTables;
  if (existing) checkTables(scope, existing, names);
  const tables = existing
    ? { jobsTable: existing.jobs, leasesTable: existing.leases }
    : ownTables(scope, props);
  const given = props.existingQueue;
  if (!given) {
    const own = new JobQueue(scope, 'JobQueue', {
      maxMessageSizeBytes: maxBodyBytes,
      queueName: names.queues.jobs,
      deadLetterQueueName: names.queues.dlq,
      consumerTimeout: settings.workerTimeout,
      maxReceiveCount: redriveMaxReceiveCount(settings),
      fifo: settings.fifo,
      removalPolicy,
    });
    return { ...tables, queue: own.queue, deadLetterQueue: own.deadLetterQueue, maxBodyBytes };
  }
  for (const [prop, queue] of [
    ['existingQueue.queue', given.queue],
    ['existingQueue.deadLetterQueue', given.deadLetterQueue],
  ] as const) {
    if (queue.fifo !== settings.fifo) {
      const dlq = prop.endsWith('deadLetterQueue');
      const why = settings.fifo
        ? dlq
          ? "(a FIFO queue's DLQ is FIFO)"
          : '(set fifo: false for a standard queue)'
        : dlq
          ? "(a standard queue's DLQ is standard)"
          : '(set fifo: true for a FIFO queue)';
      const wanted = settings.fifo ? 'a FIFO queue as fifo is true' : 'a standard queue as fifo is false';
      const label = queueLabel(queue);
      // A name synth cannot read (an ARN token) says nothing of `.fifo`: CDK takes such a queue as standard.
      const token =
        settings.fifo && label === queue.node.path
          ? 'its ARN is a token: import it with Queue.fromQueueAttributes({ queueArn, fifo: true }), or '
          : '';
      throw fail(prop, label, `${wanted} ${token ? `(${token}${why.slice(1)}` : why}`);
    }
  }
  const region = Stack.of(scope).region;
  const queueRegion = given.queue.env.region;
  if (!Token.isUnresolved(region) && !Token.isUnresolved(queueRegion) && queueRegion !== region) {
    throw fail(
      'existingQueue.queue',
      queueLabel(given.queue),
      `a queue in the stack's region ${region}, not ${queueRegion} (a Lambda event source reads a queue of its own region): deploy the pipeline in ${queueRegion}`,
    );
  }
  const base = { ...tables, queue: given.queue, deadLetterQueue: given.deadLetterQueue, maxBodyBytes };
  if (given.queue instanceof sqs.Queue) {
    checkRedriveTarget(scope, given.queue, given.deadLetterQueue);
    return base;
  }
  const minVisibility = VISIBILITY_TO_TIMEOUT_RATIO * settings.workerTimeout.toSeconds();
  if (given.visibilityTimeout === undefined) {
    throw fail(
      'existingQueue.visibilityTimeout',
      undefined,
      `the imported queue's visibility timeout (at least ${minVisibility} s, ${VISIBILITY_TO_TIMEOUT_RATIO} x workerTimeout): it cannot be read at synth`,
    );
  }
  const count = given.maxReceiveCount;
  if (count === undefined || !Number.isInteger(count) || count < 1 || count > 1000) {
    throw fail(
      'existingQueue.maxReceiveCount',
      count,
      `the imported queue's redrive maxReceiveCount, an integer from 1 to 1000 (at least ${redriveMaxReceiveCount(settings)} here): it cannot be read at synth`,
    );
  }
  return {
    ...base,
    queueFacts: {
      visibilityTimeoutSeconds: given.visibilityTimeout.toSeconds(),
      maxReceiveCount: count,
      fifo: settings.fifo,
    },
  };
}

function ownTables(scope: Construct, props: PipelineResourcesProps) {
  const state = new StateTables(scope, 'StateTables', {
    names: props.names.tables,
    removalPolicy: props.removalPolicy,
    deletionProtection: props.deletionProtection,
  });
  return { jobsTable: state.jobs, leasesTable: state.leases };
}

function queueLabel(queue: sqs.IQueue): string {
  const name = Stack.of(queue).resolve(queue.queueName);
  return typeof name === 'string' ? name : queue.node.path;
}

/** A queue of the same app: its redrive must move messages to the DLQ the worker was given. */
function checkRedriveTarget(scope: Construct, queue: sqs.Queue, dlq: sqs.IQueue): void {
  scope.node.addValidation({
    validate: () => {
      const stack = Stack.of(queue);
      const cfn = queue.node.defaultChild as sqs.CfnQueue;
      const redrive = stack.resolve(cfn.redrivePolicy) as { deadLetterTargetArn?: unknown } | undefined;
      if (!redrive) return []; // reported by the safety checks (no maxReceiveCount to read)
      const same =
        JSON.stringify(redrive.deadLetterTargetArn) === JSON.stringify(stack.resolve(dlq.queueArn));
      return same
        ? []
        : [
            'leaseq existing queue: jobs queue RedrivePolicy.deadLetterTargetArn names another queue than ' +
              "existingQueue.deadLetterQueue: set the queue's deadLetterQueue to it (or pass that queue)",
          ];
    },
  });
}

/** Tables of the same app: keys and the `problems` index, read from their CloudFormation resources. */
function checkTables(scope: Construct, given: LeaseqExistingTables, names: ResourceNames): void {
  scope.node.addValidation({
    validate: () => {
      const errors: string[] = [];
      for (const which of ['jobs', 'leases'] as const) {
        const table = given[which];
        if (!(table instanceof dynamodb.Table)) continue; // imported: its shape is not known at synth
        const cfn = table.node.defaultChild as dynamodb.CfnTable;
        const stack = Stack.of(table);
        const keys = stack.resolve(cfn.keySchema) as { attributeName: string; keyType: string }[];
        const key = names.tables[which].partitionKey;
        if (keys.length !== 1 || keys[0]?.attributeName !== key) {
          errors.push(
            `leaseq existing table: existingStateTables.${which} has the key ${keys.map((k) => `${k.attributeName} (${k.keyType})`).join(', ')}; ` +
              `required the partition key ${key} (string) alone: make the table with partitionKey ${key}`,
          );
        }
        const indexes = (stack.resolve(cfn.globalSecondaryIndexes) ?? []) as { indexName: string }[];
        if (which === 'jobs' && !indexes.some((i) => i.indexName === PROBLEMS_INDEX)) {
          errors.push(
            `leaseq existing table: existingStateTables.jobs has no global secondary index "${PROBLEMS_INDEX}": ` +
              'add it with addProblemsIndex(table) from leaseq/cdk',
          );
        }
      }
      return errors;
    },
  });
}

/**
 * `sqs:SendMessage` on the jobs queue and, for an existing queue encrypted with a KMS key (imported with
 * `keyArn`), Decrypt and GenerateDataKey on that key: SendMessage makes the message's data key with it.
 */
export function grantQueueSend(queue: sqs.IQueue, grantee: iam.IGrantable): void {
  queue.grant(grantee, 'sqs:SendMessage');
  queue.encryptionMasterKey?.grant(grantee, ...WORKER_QUEUE_KMS_ACTIONS);
}
