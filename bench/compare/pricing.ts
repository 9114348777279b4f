/**
 * The prices the benchmark turns requests and capacity into dollars with: us-east-1 on-demand list
 * prices as the benchmark issue states them, taken as of the date below (this machine has no network to
 * re-check them; a reader should).
 */
export const PRICES = {
  asOf: '2026-12-01',
  region: 'us-east-1',
  currency: 'USD',
  /** DynamoDB on-demand, per million write request units. */
  dynamodbPerMillionWru: 0.625,
  /** DynamoDB on-demand, per million read request units. */
  dynamodbPerMillionRru: 0.125,
  /** SQS standard queue, per million requests (each 64 KB chunk of a request is one; these are far smaller). */
  sqsPerMillionRequests: 0.4,
  /** Lambda on arm64 (Graviton), per GB-second of billed duration (first tier, 1 ms steps). */
  lambdaArmPerGbSecond: 0.0000133334,
  /** Lambda, per million requests (invocations: one per batch). */
  lambdaPerMillionRequests: 0.2,
  /** The worker function's memory: the construct's default (infra/constructs/worker-function.ts). */
  lambdaMemoryMb: 256,
  note:
    "Worker requests only: the producer's SendMessageBatch (0.1 per message) is the same for every consumer " +
    'and not included; free tiers, data transfer and CloudWatch Logs are ignored. Lambda: the batch ' +
    "handler's time measured in the worker process, as if each worker were a Lambda instance of that memory " +
    '(on Lambda, 256 MB gets a fraction of a vCPU: CPU-bound parts would take longer there).',
} as const;

/** Units per job a cost is computed from. */
export interface PerJob {
  readonly wru: number;
  readonly rru: number;
  readonly sqsRequests: number;
}

/** Per unique job, what Lambda bills: ms of billed duration and invocations. */
export interface LambdaPerJob {
  readonly billedMs: number;
  readonly invocations: number;
}

/** Dollars per million jobs by service, and their total. */
export interface CostSplit {
  readonly lambda: number;
  readonly dynamodb: number;
  readonly sqs: number;
  readonly total: number;
}

/** Dollars per million jobs by service at {@link PRICES}. */
export function costSplit(perJob: PerJob, lambda: LambdaPerJob): CostSplit {
  const gbSeconds = (lambda.billedMs / 1000) * (PRICES.lambdaMemoryMb / 1024);
  const l =
    1e6 * gbSeconds * PRICES.lambdaArmPerGbSecond + lambda.invocations * PRICES.lambdaPerMillionRequests;
  const d = perJob.wru * PRICES.dynamodbPerMillionWru + perJob.rru * PRICES.dynamodbPerMillionRru;
  const q = perJob.sqsRequests * PRICES.sqsPerMillionRequests;
  return { lambda: l, dynamodb: d, sqs: q, total: l + d + q };
}

/** Dollars per million jobs at {@link PRICES}, DynamoDB and SQS only. */
export function costPerMillionJobs(perJob: PerJob): number {
  return (
    perJob.wru * PRICES.dynamodbPerMillionWru +
    perJob.rru * PRICES.dynamodbPerMillionRru +
    perJob.sqsRequests * PRICES.sqsPerMillionRequests
  );
}
