// Cancels during the run: a sample of the tenant jobs, picked by the state the harness last saw them in
// (running, waiting for a retry, not yet started, finished), cancelled through the operators' API at random
// times while the faults go on. The answers are what the checker judges the jobs by.
import { refreshStates } from '../examples/ledger/demo/run-demo.ts';
import type { CancelResult } from '../shared/core/contract/job-store.ts';
import { JobStatus } from '../shared/core/contract/statuses.ts';
import { cancelJob } from '../shared/ops/cancel.ts';
import type { OpsTarget } from '../shared/ops/target.ts';
import { sleep } from './timing.ts';

/** What the harness saw of a job when it picked it (`states` is a second old at most). */
export type CancelAim = 'running' | 'waiting' | 'not-started' | 'finished';

/** An answer to a cancel; `error` when the call failed (its write may or may not have happened). */
export type CancelAnswer = CancelResult['outcome'] | 'error';

export interface CancelRecord {
  readonly dedupKey: string;
  readonly aim: CancelAim;
  readonly answer: CancelAnswer;
  /** The store's word: the job was IN_PROGRESS when the cancel was written. */
  readonly wasRunning: boolean;
  /** When the answer came (epoch ms). */
  readonly at: number;
}

/** Answers that acknowledge the cancel: the job must end CANCELLED with nothing committed after it. */
export const ACKNOWLEDGED: ReadonlySet<CancelAnswer> = new Set([
  'cancelled',
  'tombstone',
  'already-cancelled',
]);

// Running jobs are the cancels that matter most (stopped at a heartbeat, commit refused) and the hardest
// to hit: a tenant run lasts a few hundred ms. Every other turn aims at one.
const AIMS: readonly CancelAim[] = ['running', 'not-started', 'running', 'finished', 'running', 'waiting'];

function aimOf(status: string | undefined): CancelAim {
  switch (status) {
    case undefined:
      return 'not-started';
    case JobStatus.InProgress:
      return 'running';
    case JobStatus.RetryWait:
      return 'waiting';
    default:
      return 'finished';
  }
}

export class Canceller {
  readonly records: CancelRecord[] = [];

  constructor(
    private readonly target: OpsTarget,
    /** The jobs that may be cancelled (the tenant jobs: their effects touch only their tenants' accounts). */
    private readonly candidates: readonly string[],
    private readonly quota: number,
  ) {}

  /**
   * Cancels one job every `idle` ms until the quota is reached or `signal` aborts, aiming at each kind of
   * state in turn (a kind with no job in it is skipped).
   */
  async run(
    signal: AbortSignal,
    random: () => number,
    idle: readonly [number, number],
    log: (line: string) => void,
  ): Promise<void> {
    const done = new Set<string>();
    // Read just before each pick (one BatchGetItem per 100 unfinished jobs), so a run of a few hundred ms
    // can still be seen running.
    const states = new Map<string, string>();
    let turn = 0;
    while (!signal.aborted && this.records.length < this.quota) {
      await sleep(idle[0] + random() * (idle[1] - idle[0]), signal);
      if (signal.aborted) break;
      const { clients, names } = this.target;
      await refreshStates(clients, names.jobsTable, this.candidates, states).catch(() => undefined);
      const byAim = new Map<CancelAim, string[]>();
      for (const key of this.candidates) {
        if (done.has(key)) continue;
        const aim = aimOf(states.get(key));
        byAim.set(aim, [...(byAim.get(aim) ?? []), key]);
      }
      let aim: CancelAim | undefined;
      for (let i = 0; i < AIMS.length && aim === undefined; i++) {
        const next = AIMS[(turn + i) % AIMS.length] as CancelAim;
        if ((byAim.get(next)?.length ?? 0) > 0) aim = next;
      }
      turn += 1;
      if (aim === undefined) break;
      const keys = byAim.get(aim) ?? [];
      const key = keys[Math.floor(random() * keys.length)] as string;
      done.add(key);
      let answer: CancelAnswer = 'error';
      let wasRunning = false;
      try {
        const result = await cancelJob(this.target, key, { reason: 'chaos', by: 'chaos harness' });
        answer = result.outcome;
        wasRunning = result.outcome === 'cancelled' && result.wasRunning === true;
      } catch {
        // A cancel lost in a pause of the emulator: its write may have happened; the checker allows both.
      }
      this.records.push({ dedupKey: key, aim, answer, wasRunning, at: Date.now() });
      log(`cancel ${key} (seen ${aim}): ${answer}${wasRunning ? ', was running' : ''}`);
    }
  }
}
