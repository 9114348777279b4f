import { planWorkload, type Workload } from '../examples/ledger/demo/workload.ts';
import type { OutgoingMessage } from '../examples/ledger/generate.ts';
import { seededRandom } from '../examples/ledger/generate.ts';
import { LOCKED_TRANSFER } from './jobs.ts';

/** The chaos mix on top of the demo's workload planner. */
export interface ChaosMix {
  readonly jobs: number;
  readonly seed: string;
  readonly leaseMs: number;
  /** Share of the plain transfers turned into named-lease transfers. @default 0.15 */
  readonly lockedRate?: number;
}

export interface ChaosWorkload extends Workload {
  /** Unique jobs that run as `chaos.lockedTransfer`. */
  readonly locked: number;
  /** Dedup keys of the jobs whose effects include a checkpointed `debit` step. */
  readonly transfers: ReadonlySet<string>;
}

/**
 * The demo's workload (duplicates, flaky, slow, crashing and poison jobs, one non-JSON body), scaled to the
 * run, with a share of its transfers turned into `chaos.lockedTransfer` (same payload, so the expected
 * balances stand). Deterministic for a seed: the run id is derived from it, and so is every choice.
 */
export function planChaosWorkload(runId: string, mix: ChaosMix): ChaosWorkload {
  const n = mix.jobs;
  const random = seededRandom(mix.seed);
  const base = planWorkload(runId, {
    jobs: n,
    accounts: Math.max(10, Math.min(50, Math.round(n / 100))),
    duplicateRate: 0.2,
    flakyRate: 0.05,
    slow: Math.max(3, Math.round(n / 500)),
    slowMs: mix.leaseMs * 2,
    poison: Math.max(3, Math.round(n / 1000)),
    crashes: Math.max(3, Math.round(n / 500)),
    random,
  });
  const lockedRate = mix.lockedRate ?? 0.15;
  const lockedKeys = new Set<string>();
  const transfers = new Set<string>();
  const messages = base.messages.map((message): OutgoingMessage => {
    const envelope = parse(message.body);
    if (envelope?.type !== 'ledger.transfer') return message;
    const key = String(envelope.dedupKey);
    transfers.add(key);
    // Decided by the key alone, so a duplicate is turned exactly as its original.
    if (seededRandom(key)() >= lockedRate) return message;
    lockedKeys.add(key);
    return { ...message, body: JSON.stringify({ ...envelope, type: LOCKED_TRANSFER }) };
  });
  return { ...base, messages, locked: lockedKeys.size, transfers };
}

function parse(body: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
