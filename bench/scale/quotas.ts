/**
 * The AWS quotas the capacity model compares against, each with the page it is read from (read
 * 2026-12-03; quotas change: a reader should check them). Prices are the benchmark's (compare/pricing.ts).
 */
export const QUOTAS = {
  /** DynamoDB: units per second one partition serves; one item never spans partitions. */
  partitionWru: 1000,
  partitionRru: 3000,
  partitionSource:
    'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html (and warm-throughput-scenarios.html: "each partition is limited to 1,000 write units per second and 3,000 read units per second")',
  /** DynamoDB on-demand: a table's default maximum per second (adjustable by a quota request). */
  tableWru: 40_000,
  tableRru: 40_000,
  tableSource:
    'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html (on-demand, per table)',
  /** SQS: messages received and not yet deleted. */
  inFlightStandard: 120_000,
  /**
   * FIFO: the quotas page now gives 120,000 too; 20,000 is the figure it gave before, which the issue
   * names. The model takes the lower one (a queue may still be held to it: check the account's quotas).
   */
  inFlightFifo: 20_000,
  inFlightSource:
    'https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html; quotas-fifo.html',
  /** SQS FIFO, high-throughput mode, us-east-1: API calls per second per action (10 messages per batch call). */
  fifoCallsPerSecond: 70_000,
  fifoSource:
    'https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html',
  /** Lambda SQS event source, standard mode: concurrent invocations it scales to (+300 a minute). */
  esmStandard: 1250,
  /** Provisioned mode: up to 2,000 pollers (MaximumPollers), each up to 10 concurrent invocations. */
  esmProvisioned: 20_000,
  pollerInvocations: 10,
  maxPollers: 2000,
  esmSource:
    'https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html; https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html; https://aws.amazon.com/blogs/aws/aws-lambda-enhances-sqs-processing-with-new-provisioned-mode-3x-faster-scaling-16x-higher-capacity/',
  /** Lambda: an account's concurrent executions per Region by default (raised on request). */
  accountConcurrency: 1000,
  accountSource: 'https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html',
} as const;
