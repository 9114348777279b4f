/**
 * `localJobProducer()`: a {@link JobProducer} for the deployment the CLI acts on locally, found the way
 * the CLI finds it (AWS_ENDPOINT_URL, else the emulator `leaseq local up` runs, from its state file),
 * with the emulator's test credentials, so a program on this machine sends with no setup.
 */
import { GetQueueUrlCommand, QueueDoesNotExist, type SQSClient } from '@aws-sdk/client-sqs';
import { awsConfigFromEnv, createAwsClients } from '../aws/clients.ts';
import { endpointText } from '../aws/endpoint-text.ts';
import type { AnyJobDefinition } from '../core/model/job-definition.ts';
import { LeaseqError } from '../errors.ts';
import { JobProducer } from '../producer/job-producer.ts';
import type { JobProducerOptions } from '../producer/producer-options.ts';
import { defaultResourcePrefix, resourceNames } from '../resources.ts';
import { emulatorStatus } from './emulator.ts';
import { DEFAULT_LOCAL_STAGE } from './provision-template.ts';

/** Settings of {@link localJobProducer}: those of {@link JobProducerOptions}, the queue found for you. */
export interface LocalJobProducerOptions<J extends AnyJobDefinition = AnyJobDefinition>
  extends Omit<JobProducerOptions<J>, 'queueUrl' | 'client' | 'endpoint'> {
  /** @default the jobs queue of the local deployment named by `prefix` */
  readonly queueUrl?: string;
  /** Resource prefix of the local deployment. @default LEASEQ_PREFIX, else `leaseq-local` (as the CLI) */
  readonly prefix?: string;
  /** True for a FIFO deployment (`<prefix>-jobs.fifo`). @default LEASEQ_FIFO is `true` */
  readonly fifo?: boolean;
  /** Where AWS_ENDPOINT_URL, AWS_REGION and LEASEQ_* are read. @default process.env */
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * A producer for the local deployment: the endpoint `leaseq send` would use (AWS_ENDPOINT_URL, else the
 * running embedded emulator), the emulator's test credentials, and its jobs queue.
 * @throws LeaseqError (not retryable) when no emulator runs or the queue does not exist, saying what to run.
 */
export async function localJobProducer<J extends AnyJobDefinition = AnyJobDefinition>(
  options: LocalJobProducerOptions<J> = {},
): Promise<JobProducer<J>> {
  const { prefix, fifo, env = process.env, queueUrl, ...producerOptions } = options;
  const status = await emulatorStatus({ env });
  if (status.mode === 'embedded' && !status.running) {
    throw new LeaseqError(
      `no local emulator is running (expected on ${endpointText(status.endpoint)}): start it with \`npx leaseq local up\`, or set AWS_ENDPOINT_URL`,
      { retryable: false },
    );
  }
  const config = { ...awsConfigFromEnv(env), endpoint: status.endpoint };
  const clients = createAwsClients(config);
  const client = clients.sqs;
  const resourcePrefix = prefix ?? env.LEASEQ_PREFIX ?? defaultResourcePrefix(DEFAULT_LOCAL_STAGE);
  const url =
    queueUrl ??
    (await jobsQueueUrl(client, resourcePrefix, fifo ?? env.LEASEQ_FIFO === 'true', status.endpoint));
  // The local deployment's jobs table, so `cancel` works as it does against a deployed stack.
  return new JobProducer<J>({
    jobsTable: resourceNames(resourcePrefix).tables.jobs.name,
    dynamoDb: clients.doc,
    ...producerOptions,
    queueUrl: url,
    client,
  });
}

async function jobsQueueUrl(
  client: SQSClient,
  prefix: string,
  fifo: boolean,
  endpoint: string,
): Promise<string> {
  const name = resourceNames(prefix, { fifo }).queues.jobs;
  try {
    const out = await client.send(new GetQueueUrlCommand({ QueueName: name }));
    if (out.QueueUrl) return out.QueueUrl;
  } catch (error) {
    // Emulators name the error as the SQS query protocol did (AWS.SimpleQueueService.NonExistentQueue).
    const missing =
      error instanceof QueueDoesNotExist ||
      (error instanceof Error && error.name.includes('NonExistentQueue'));
    if (!missing) throw error;
  }
  throw new LeaseqError(
    `queue ${name} does not exist at ${endpointText(endpoint)}: run \`npm start\` or \`npx leaseq local provision\`, or pass prefix or queueUrl`,
    { retryable: false },
  );
}
