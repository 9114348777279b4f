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
  /** SQS standard queue, per million requests (each up to 64 KB; these messages are far smaller). */
  sqsPerMillionRequests: 0.4,
  note:
    "Worker requests only: the producer's SendMessageBatch (0.1 per message) is the same for every consumer " +
    'and not included; free tiers and data transfer are ignored.',
} as const;

/** Units per job a cost is computed from. */
export interface PerJob {
  readonly wru: number;
  readonly rru: number;
  readonly sqsRequests: number;
}

/** Dollars per million jobs at {@link PRICES}. */
export function costPerMillionJobs(perJob: PerJob): number {
  return (
    perJob.wru * PRICES.dynamodbPerMillionWru +
    perJob.rru * PRICES.dynamodbPerMillionRru +
    perJob.sqsRequests * PRICES.sqsPerMillionRequests
  );
}
