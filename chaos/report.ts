import type { CheckResult } from './check.ts';
import type { MeetResult } from './meet.ts';

/** Everything one chaos run reports (also written as JSON). */
export interface ChaosReport {
  readonly runId: string;
  readonly seed: string;
  readonly variant: string;
  readonly startedAt: string;
  readonly durationMs: number;
  readonly timedOut: boolean;
  readonly settings: Readonly<Record<string, unknown>>;
  readonly workload: Readonly<Record<string, number>>;
  readonly chaos: {
    readonly kills: number;
    readonly crashes: number;
    readonly exits: number;
    readonly restarts: number;
    readonly faults: Readonly<Record<string, number>>;
    readonly faultMode: string;
    readonly pauses: number;
    readonly pausedMs: number;
    /** Jobs unfinished when the chaos window closed; they then ran without faults (0: never closed early). */
    readonly leftAtWindowEnd: number;
  };
  readonly check: CheckResult;
  readonly counters: Readonly<Record<string, number>>;
  /** The `--meet` variant's figures (meet.ts), when it ran. */
  readonly meet?: MeetResult['figures'];
  readonly verdict: 'PASS' | 'FAIL';
}

/** The closing table for people: one figure a row, then the violations with their evidence. */
export function reportTable(r: ChaosReport): string {
  const f = r.check.figures;
  const rows: [string, string][] = [
    ['run', `${r.runId} (${r.variant}, seed ${r.seed})`],
    [
      'duration',
      `${(r.durationMs / 1000).toFixed(1)} s${r.timedOut ? ' (TIMED OUT)' : ''}` +
        (r.chaos.leftAtWindowEnd > 0
          ? `; chaos window closed with ${r.chaos.leftAtWindowEnd} jobs left, finished calm`
          : ''),
    ],
    ['sent', `${f.sent} messages (${r.workload.duplicates} duplicates, 1 non-JSON body)`],
    [
      'unique',
      `${f.unique} jobs: ${r.workload.flaky} flaky, ${r.workload.slow} slow, ${r.workload.crashes} crashing, ${r.workload.locked} named-lease, ${r.workload.fast} fast-path, ${r.workload.tenant} tenant, ${r.workload.poison} poison`,
    ],
    ['completed', String(f.completed)],
    ['dead', `${f.dead} (poison set ${f.deadExpected}; ${f.dlqLetters} letters in the DLQ)`],
    ['lost', String(f.lost)],
    ['stuck', String(f.stuck)],
    ['double effects', String(f.doubleEffects)],
    ['missing effects', String(f.missingEffects)],
    [
      'money',
      `${f.moneyActual} of ${f.moneyExpected} ${f.moneyActual === f.moneyExpected ? '(conserved)' : '(NOT CONSERVED)'}; ${f.accountsWrong} accounts wrong`,
    ],
    ['queue left', String(f.queueLeft)],
    [
      'fast path',
      `${f.fast.oneWrite} of ${f.fast.jobs} fast jobs completed in one write, ${f.fast.leased} leased; ` +
        `${f.fast.commitCalls} one-write commits tried, ${f.fast.fallbacks} failed fast attempts recorded under a lease`,
    ],
    [
      'tenant limit',
      `${f.tenants.limit} runs at once per tenant; most committed runs at once: ` +
        Object.entries(f.tenants.perTenant)
          .map(
            ([tenant, t]) =>
              `${tenant}${tenant === f.tenants.burstTenant ? ' (burst)' : ''} ${t.maxConcurrent}/${f.tenants.limit}` +
              `${t.maxConcurrent > f.tenants.limit ? ' OVER' : ''} of ${t.committed} runs (${t.jobs} jobs)`,
          )
          .join(', ') +
        `; ${r.counters.ConcurrencyWaits ?? 0} waits for a slot`,
    ],
    [
      'cancels',
      `${
        Object.entries(f.cancels.byAnswer)
          .map(([answer, n]) => `${answer} ${n}`)
          .join(', ') || 'none'
      }; ${f.cancels.acknowledged} acknowledged, ${f.cancels.violations} broken ` +
        `(${r.counters.JobCancelled ?? 0} running jobs stopped, ${r.counters.CancelledCopyDropped ?? 0} copies dropped)`,
    ],
    ['takeovers', String(f.takeovers)],
    ['retries', String(f.retries)],
    [
      'healthy aborted',
      `${f.healthyOwnersAborted} (${f.abortedOutsideFaults} outside any fault or pause window; ${f.renewalRacedOwnCommit} more were a renewal refused by the job's own commit)`,
    ],
    [
      'longest recovery',
      f.longestRecoveryMs === null
        ? '-'
        : `${(f.longestRecoveryMs / 1000).toFixed(1)} s (${f.longestRecoveryJob}, ${f.recoveredJobs} jobs taken over from dead workers)`,
    ],
    [
      'kills',
      `${r.chaos.kills} SIGKILLs by the harness, ${r.chaos.crashes} crashing jobs, ${r.chaos.exits} worker exits on error (${r.chaos.restarts} workers restarted)`,
    ],
    [
      'faults',
      `${Object.entries(r.chaos.faults)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ')} (${r.chaos.faultMode})`,
    ],
    ['pauses', `${r.chaos.pauses} SIGSTOPs, ${(r.chaos.pausedMs / 1000).toFixed(1)} s frozen in all`],
    ...(r.meet
      ? ([
          [
            'meet',
            `${r.meet.hotJobs} hot-row credits (${r.meet.hotConflictAttempts} attempts used by conflicts), ` +
              `${r.meet.redrives} redrives after a dead-key reset (${r.meet.redrivenOverNewer} letters sent over a newer job), ` +
              `${r.meet.strictJobs} jobs under a stricter schema`,
          ],
        ] as [string, string][])
      : []),
    ['verdict', r.verdict],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  const lines = rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`);
  for (const v of r.check.violations) {
    lines.push(`  VIOLATION: ${v}`);
    const keys = Object.entries(r.check.evidence).find(([name]) => v.startsWith(name))?.[1];
    if (keys) lines.push(`    e.g. ${keys.slice(0, 5).join(', ')}`);
  }
  return `\n${lines.join('\n')}\n\n`;
}
