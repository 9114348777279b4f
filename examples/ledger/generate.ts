import { randomBytes } from 'node:crypto';
import { type JobEnvelope, makeEnvelope } from '../../shared/core/contract/envelope.ts';

/** The example job types the generator knows how to fill (examples/ledger/jobs.ts). */
export const GENERATED_TYPES = ['ledger.credit', 'ledger.transfer'] as const;
export type GeneratedType = (typeof GENERATED_TYPES)[number];

import type { OutgoingMessage } from '../../shared/producer/send-messages.ts';

export type { OutgoingMessage };

/** Settings of {@link generateJobs}; every default is applied in that function. */
export interface GenerateOptions {
  /** Distinct jobs (distinct dedup keys). */
  readonly count: number;
  /** Share of the jobs sent twice, 0..1; exactly `round(count * rate)` jobs get a second copy. @default 0 */
  readonly duplicateRate?: number;
  /** Job types to mix, chosen uniformly. @default both GENERATED_TYPES */
  readonly types?: readonly GeneratedType[];
  /** Accounts the jobs credit or move money between (transfers need at least 2). @default 10 */
  readonly accounts?: number;
  /** Largest amount; amounts are integers from 1. @default 100 */
  readonly maxAmount?: number;
  /** Dedup keys are `<runId>-<index>`, so sending the same run id again sends only duplicates. @default newRunId() */
  readonly runId?: string;
  /** Account names are `<accountPrefix><n>`. @default `<runId>-acct-` (each run has its own accounts) */
  readonly accountPrefix?: string;
  /**
   * @default a generator seeded from `runId` when one is given (the same run id regenerates the very same
   * jobs, so a resend is pure duplicates), else Math.random
   */
  readonly random?: () => number;
  /** Creation time written into every envelope. @default new Date() */
  readonly now?: Date;
  /** Forces the type of the `index`-th job (a scenario that needs a transfer); `undefined` picks at random. */
  readonly typeFor?: (index: number) => GeneratedType | undefined;
  /** Extra payload fields of the `index`-th job, e.g. the demo's `simulate` failures. */
  readonly extraPayload?: (index: number, type: GeneratedType) => Record<string, unknown> | undefined;
}

export interface GeneratedJobs {
  readonly runId: string;
  readonly accounts: readonly string[];
  /** One envelope per distinct job, in dedup-key order. */
  readonly jobs: readonly JobEnvelope[];
  /** What to send: every job once plus the duplicates, each duplicate a few places after its original. */
  readonly messages: readonly OutgoingMessage[];
  readonly duplicates: number;
}

/** How far (in messages) a duplicate may trail its original, so copies race as real re-sends do. */
const DUPLICATE_SPREAD = 20;

/** A short run id, unique enough to keep runs apart: `run-<time><random>`. */
export function newRunId(): string {
  return `run-${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

/** The dedup key of the `index`-th (0-based) generated job of a run. */
export function dedupKeyFor(runId: string, index: number): string {
  return `${runId}-${String(index + 1).padStart(6, '0')}`;
}

/**
 * Generates example ledger jobs with unique dedup keys from a run id, and picks exactly
 * `round(count * duplicateRate)` of them to be sent twice (same body, as a producer retry would).
 * Pure apart from `random`/`now`; the caller sends `messages`.
 * @throws RangeError for a count, rate or account number out of range.
 */
export function generateJobs(options: GenerateOptions): GeneratedJobs {
  const count = options.count;
  const rate = options.duplicateRate ?? 0;
  const types = options.types ?? GENERATED_TYPES;
  const accountCount = options.accounts ?? 10;
  const maxAmount = options.maxAmount ?? 100;
  const random = options.random ?? (options.runId === undefined ? Math.random : seededRandom(options.runId));
  const now = options.now ?? new Date();
  const runId = options.runId ?? newRunId();
  const accountPrefix = options.accountPrefix ?? `${runId}-acct-`;

  if (!Number.isInteger(count) || count < 0) {
    throw new RangeError(`count must be an integer >= 0, received ${count}`);
  }
  if (!(rate >= 0 && rate <= 1)) throw new RangeError(`duplicateRate must be in 0..1, received ${rate}`);
  if (types.length === 0) throw new RangeError('types must name at least one job type');
  const minAccounts = types.includes('ledger.transfer') ? 2 : 1;
  if (!Number.isInteger(accountCount) || accountCount < minAccounts) {
    throw new RangeError(
      `accounts must be an integer >= ${minAccounts}${minAccounts === 2 ? ' (a transfer needs two)' : ''}, received ${accountCount}`,
    );
  }
  if (!Number.isInteger(maxAmount) || maxAmount < 1) {
    throw new RangeError(`maxAmount must be an integer >= 1, received ${maxAmount}`);
  }

  const pick = (n: number) => Math.min(n - 1, Math.floor(random() * n));
  const accounts = Array.from({ length: accountCount }, (_, i) => `${accountPrefix}${i + 1}`);
  const account = () => accounts[pick(accounts.length)] as string;

  const jobs = Array.from({ length: count }, (_, index): JobEnvelope => {
    const type = options.typeFor?.(index) ?? (types[pick(types.length)] as GeneratedType);
    const amount = 1 + pick(maxAmount);
    const dedupKey = dedupKeyFor(runId, index);
    let payload: Record<string, unknown>;
    if (type === 'ledger.credit') {
      payload = { account: account(), amount };
    } else {
      const from = pick(accounts.length);
      const to = (from + 1 + pick(accounts.length - 1)) % accounts.length;
      payload = { from: accounts[from], to: accounts[to], amount };
    }
    const extra = options.extraPayload?.(index, type);
    if (extra) payload = { ...payload, ...extra };
    return makeEnvelope({ id: dedupKey, dedupKey, type, payload, createdAt: now });
  });

  const duplicates = Math.round(count * rate);
  const chosen = chooseIndices(count, duplicates, pick);
  // Sort keys: an original sits at its index, a duplicate a random distance after it.
  const keyed: { key: number; message: OutgoingMessage }[] = jobs.map((job, index) => ({
    key: index,
    message: { body: JSON.stringify(job), dedupKey: job.dedupKey },
  }));
  for (const index of chosen) {
    const job = jobs[index] as JobEnvelope;
    keyed.push({
      key: index + 0.5 + random() * DUPLICATE_SPREAD,
      message: { body: JSON.stringify(job), dedupKey: job.dedupKey, duplicate: true },
    });
  }
  keyed.sort((a, b) => a.key - b.key);
  return { runId, accounts, jobs, messages: keyed.map((k) => k.message), duplicates };
}

/** `k` distinct indices of 0..n-1 (partial Fisher-Yates). */
function chooseIndices(n: number, k: number, pick: (n: number) => number): number[] {
  const pool = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < k; i++) {
    const j = i + pick(n - i);
    const a = pool[i] as number;
    pool[i] = pool[j] as number;
    pool[j] = a;
  }
  return pool.slice(0, k);
}

/**
 * A small deterministic generator (a 32-bit xorshift-multiply mix) seeded from a string: same seed, same
 * sequence. Not for anything secret.
 */
export function seededRandom(seed: string): () => number {
  let state = 0x9e3779b9;
  for (let i = 0; i < seed.length; i++) state = Math.imul(state ^ seed.charCodeAt(i), 0x85ebca6b) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
