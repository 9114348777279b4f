import type { JobEnvelope } from '../core/envelope.ts';
import { makeEnvelope } from '../core/envelope.ts';

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
  /** Balance each account starts with. @default 1000 */
  readonly initialBalance?: number;
  /** Randomness, injectable for tests. @default Math.random */
  readonly random?: () => number;
}

/** One message to send: an envelope, or a raw body for the malformed case. */
export interface PlannedMessage {
  readonly body: string;
  readonly dedupKey?: string;
  readonly duplicate: boolean;
}

export interface Workload {
  readonly runId: string;
  readonly accounts: readonly string[];
  readonly initialBalance: number;
  readonly messages: readonly PlannedMessage[];
  /** Unique jobs that must complete (not poison). */
  readonly expectedDone: readonly string[];
  /** Dedup keys (and the raw body's tag) that must end dead-lettered. */
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

/**
 * Plans the demo: credits and transfers between the run's own accounts, with duplicates, flaky, slow,
 * crashing and poison jobs mixed in (the `simulate` field), and the ledger each account must end with if
 * every effect happens exactly once. Pure: the caller sends the messages.
 */
export function planWorkload(runId: string, mix: WorkloadMix = {}): Workload {
  const n = mix.jobs ?? 2000;
  const accountCount = Math.max(2, mix.accounts ?? 20);
  const random = mix.random ?? Math.random;
  const initialBalance = mix.initialBalance ?? 1000;
  const poison = Math.min(mix.poison ?? 4, n);
  const slow = Math.min(mix.slow ?? 5, n);
  const crashes = Math.min(mix.crashes ?? 2, n);
  const accounts = Array.from(
    { length: accountCount },
    (_, i) => `${runId}-acct-${String(i + 1).padStart(2, '0')}`,
  );
  const balances: Record<string, number> = Object.fromEntries(accounts.map((a) => [a, initialBalance]));
  const pick = () => accounts[Math.floor(random() * accounts.length)] as string;

  const messages: PlannedMessage[] = [];
  const expectedDone: string[] = [];
  const expectedDead: string[] = [];
  let flaky = 0;
  let duplicates = 0;
  for (let i = 0; i < n; i++) {
    const dedupKey = `${runId}-job-${String(i + 1).padStart(5, '0')}`;
    const amount = 1 + Math.floor(random() * 50);
    // Special jobs come first in index order so small runs still get each kind.
    const isPoison = i < poison;
    const isCrash = !isPoison && i < poison + crashes;
    const isSlow = !isPoison && !isCrash && i < poison + crashes + slow;
    const isFlaky = !isPoison && !isCrash && !isSlow && random() < (mix.flakyRate ?? 0.05);
    const transfer = isCrash || random() < 0.5;
    const simulate = isPoison
      ? { permanent: true }
      : isCrash
        ? { crashAfterStep: 'debit' }
        : isSlow
          ? { sleepMs: mix.slowMs ?? 6000 }
          : isFlaky
            ? { failTimes: 1 + Math.floor(random() * 2) }
            : undefined;
    if (isFlaky) flaky += 1;
    let envelope: JobEnvelope;
    if (transfer) {
      const from = pick();
      let to = pick();
      while (to === from) to = pick();
      envelope = makeEnvelope({
        id: `${dedupKey}-m`,
        dedupKey,
        type: 'ledger.transfer',
        payload: { from, to, amount, ...(simulate ? { simulate } : {}) },
      });
      if (!isPoison) {
        balances[from] = (balances[from] ?? 0) - amount;
        balances[to] = (balances[to] ?? 0) + amount;
      }
    } else {
      const account = pick();
      envelope = makeEnvelope({
        id: `${dedupKey}-m`,
        dedupKey,
        type: 'ledger.credit',
        payload: { account, amount, ...(simulate ? { simulate } : {}) },
      });
      if (!isPoison) balances[account] = (balances[account] ?? 0) + amount;
    }
    (isPoison ? expectedDead : expectedDone).push(dedupKey);
    const body = JSON.stringify(envelope);
    messages.push({ body, dedupKey, duplicate: false });
    if (!isCrash && random() < (mix.duplicateRate ?? 0.2)) {
      messages.push({
        body: JSON.stringify({ ...envelope, id: `${dedupKey}-dup` }),
        dedupKey,
        duplicate: true,
      });
      duplicates += 1;
    }
  }
  if (poison > 0) messages.push({ body: `{"not json": ${runId}`, duplicate: false });
  shuffle(messages, random);
  return {
    runId,
    accounts,
    initialBalance,
    messages,
    expectedDone,
    expectedDead,
    expectedBalances: balances,
    counts: { unique: n, duplicates, flaky, slow, poison, crashes },
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
