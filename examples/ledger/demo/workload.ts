import type { OutgoingMessage } from '../generate.ts';
import { generateJobs } from '../generate.ts';

/** The mix of the demo workload. Every default is applied in `planWorkload`. */
export interface WorkloadMix {
  /** Unique jobs. @default 2000 */
  readonly jobs?: number;
  /** Accounts the jobs move money between. @default 20 */
  readonly accounts?: number;
  /** Share of jobs sent twice (a duplicate send). @default 0.2 */
  readonly duplicateRate?: number;
  /** Share of jobs that fail transiently 1-2 times first. @default 0.05 */
  readonly flakyRate?: number;
  /** Jobs that run longer than their lease (the heartbeat must keep them). @default 5 */
  readonly slow?: number;
  /** How long slow jobs run. @default 6000 */
  readonly slowMs?: number;
  /** Jobs that always fail (dead-lettered), plus one body that is not JSON. @default 4 */
  readonly poison?: number;
  /** Transfers whose worker process dies between debit and credit. @default 2 */
  readonly crashes?: number;
  /**
   * How long a crashing transfer works before its debit. Past a heartbeat, the message's visibility is
   * already down to the lease when the worker dies, so it comes back within seconds (a deployed
   * function's batch is otherwise hidden for 6 x its timeout). @default 0
   */
  readonly crashAfterMs?: number;
  /** Balance each account starts with. @default 1000 */
  readonly initialBalance?: number;
  /** Randomness, injectable for tests. @default Math.random */
  readonly random?: () => number;
}

export interface Workload {
  readonly runId: string;
  readonly accounts: readonly string[];
  readonly initialBalance: number;
  readonly messages: readonly OutgoingMessage[];
  /** Unique jobs that must complete (not poison). */
  readonly expectedDone: readonly string[];
  /** Dedup keys that must end dead-lettered. */
  readonly expectedDead: readonly string[];
  /** Final balance per account if each job's effect happened exactly once. */
  readonly expectedBalances: Readonly<Record<string, number>>;
  readonly counts: {
    readonly unique: number;
    readonly duplicates: number;
    readonly flaky: number;
    readonly slow: number;
    readonly poison: number;
    readonly crashes: number;
  };
}

interface LedgerPayload {
  readonly account?: string;
  readonly from?: string;
  readonly to?: string;
  readonly amount: number;
}

/**
 * Plans the demo on top of the `leaseq send` generator: credits and transfers between the run's own
 * accounts, with duplicates, and flaky, slow, crashing and poison jobs mixed in through `simulate`; plus
 * the ledger each account must end with if every effect happens exactly once. Pure: the caller sends.
 */
export function planWorkload(runId: string, mix: WorkloadMix = {}): Workload {
  const n = mix.jobs ?? 2000;
  const random = mix.random ?? Math.random;
  const initialBalance = mix.initialBalance ?? 1000;
  const poison = Math.min(mix.poison ?? 4, n);
  const crashes = Math.min(mix.crashes ?? 2, n - poison);
  const slow = Math.min(mix.slow ?? 5, n - poison - crashes);
  // Special jobs take the first indices, so small runs still get each kind.
  const kind = (i: number) =>
    i < poison ? 'poison' : i < poison + crashes ? 'crash' : i < poison + crashes + slow ? 'slow' : 'plain';
  let flaky = 0;
  const generated = generateJobs({
    count: n,
    duplicateRate: mix.duplicateRate ?? 0.2,
    accounts: Math.max(2, mix.accounts ?? 20),
    maxAmount: 50,
    runId,
    random,
    typeFor: (i) => (kind(i) === 'crash' ? 'ledger.transfer' : undefined),
    extraPayload: (i) => {
      switch (kind(i)) {
        case 'poison':
          return { simulate: { permanent: true } };
        case 'crash':
          return {
            simulate: { crashAfterStep: 'debit', ...(mix.crashAfterMs ? { sleepMs: mix.crashAfterMs } : {}) },
          };
        case 'slow':
          return { simulate: { sleepMs: mix.slowMs ?? 6000 } };
        default:
          if (random() >= (mix.flakyRate ?? 0.05)) return undefined;
          flaky += 1;
          return { simulate: { failTimes: 1 + Math.floor(random() * 2) } };
      }
    },
  });

  const balances: Record<string, number> = Object.fromEntries(
    generated.accounts.map((a) => [a, initialBalance]),
  );
  const expectedDone: string[] = [];
  const expectedDead: string[] = [];
  generated.jobs.forEach((job, i) => {
    if (kind(i) === 'poison') {
      expectedDead.push(job.dedupKey);
      return;
    }
    expectedDone.push(job.dedupKey);
    const p = job.payload as LedgerPayload;
    if (p.account !== undefined) balances[p.account] = (balances[p.account] ?? 0) + p.amount;
    if (p.from !== undefined) balances[p.from] = (balances[p.from] ?? 0) - p.amount;
    if (p.to !== undefined) balances[p.to] = (balances[p.to] ?? 0) + p.amount;
  });

  const messages: OutgoingMessage[] = [...generated.messages];
  // One body that is not even JSON.
  if (poison > 0) messages.push({ body: `{"not json": ${runId}` });
  // Spread the special jobs through the stream, as real traffic would: left in index order they would all
  // land in the first batch, where a crash job kills its worker in the middle of everything else.
  shuffle(messages, random);
  return {
    runId,
    accounts: generated.accounts,
    initialBalance,
    messages,
    expectedDone,
    expectedDead,
    expectedBalances: balances,
    counts: { unique: n, duplicates: generated.duplicates, flaky, slow, poison, crashes },
  };
}

function shuffle<T>(items: T[], random: () => number): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const a = items[i] as T;
    items[i] = items[j] as T;
    items[j] = a;
  }
}
