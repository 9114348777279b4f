/**
 * The capacity model's named workloads: what a team's traffic looks like, in the terms the model needs.
 * Shares are of unique jobs unless named otherwise.
 */
export interface Workload {
  readonly id: string;
  readonly label: string;
  /** Share of messages that are copies of another message's job (they miss the local cache). */
  readonly duplicates: number;
  /** Share of jobs whose first attempt fails (a retry, and the job item in the `problems` index). */
  readonly problems: number;
  /** The job's own run time, ms (its calls elsewhere; leaseq's requests come on top). */
  readonly jobMs: number;
  /** Jobs on the one-write fast path. */
  readonly fastPath: boolean;
  /** Records per Lambda invocation (the event source's BatchSize). @default 10 */
  readonly batchSize?: number;
  /** A rate limit of `perSecond` on one key, which this share of the jobs carries. */
  readonly rateLimit?: { readonly perSecond: number; readonly share: number };
  /** A type-wide concurrency limit of `limit` slots over this share of the jobs. */
  readonly concurrency?: { readonly limit: number; readonly share: number };
  /** A named lease on one key (`acct#1`), taken by this share of the jobs for the job's run. */
  readonly namedLease?: { readonly share: number };
  /** A FIFO queue with this many message groups active (each group's jobs run one at a time). */
  readonly fifo?: { readonly groups: number };
}

export const WORKLOADS: readonly Workload[] = [
  {
    id: 'plain',
    label: 'plain jobs (leased, 50 ms)',
    duplicates: 0,
    problems: 0,
    jobMs: 50,
    fastPath: false,
  },
  { id: 'fast', label: 'plain jobs on the fast path', duplicates: 0, problems: 0, jobMs: 50, fastPath: true },
  {
    id: 'dup10',
    label: '10 % duplicates, 1 % problems',
    duplicates: 0.1,
    problems: 0.01,
    jobMs: 50,
    fastPath: false,
  },
  {
    id: 'rate',
    label: 'a rate limit of 1,000/s on one key (10 % of jobs)',
    duplicates: 0,
    problems: 0,
    jobMs: 50,
    fastPath: false,
    rateLimit: { perSecond: 1000, share: 0.1 },
  },
  {
    id: 'lease',
    label: 'a hot named lease (acct#1 on 1 % of jobs, 5 ms each)',
    duplicates: 0,
    problems: 0,
    jobMs: 5,
    fastPath: false,
    namedLease: { share: 0.01 },
  },
  {
    id: 'slots',
    label: 'a type-wide concurrency limit of 1,000 (all jobs)',
    duplicates: 0,
    problems: 0,
    jobMs: 50,
    fastPath: false,
    concurrency: { limit: 1000, share: 1 },
  },
  {
    id: 'fifo',
    label: 'FIFO, 1,000 message groups',
    duplicates: 0,
    problems: 0,
    jobMs: 50,
    fastPath: false,
    fifo: { groups: 1000 },
  },
];

/** The rates every table is printed at, jobs (messages) a second. */
export const RATES = [1000, 10_000, 100_000] as const;
