import type { Leftovers } from './leftovers.ts';
import type { RunResult } from './run.ts';
import { scenarioById } from './scenarios.ts';

/**
 * A fast-path job whose effect is outside DynamoDB may repeat it for a copy that misses the local cache
 * and is not read first: the documented trade-off of the fast path (docs/protocol.md, "Fast path"), shown
 * in the table's doubles column, not a broken guarantee.
 */
function outsideEffectOnFastPath(r: RunResult): boolean {
  return r.consumer === 'fast' && scenarioById(r.scenario)?.shape === 'no-effect';
}

/** A run that failed outright (an exception, not a measurement). */
export interface RunError {
  readonly consumer: string;
  readonly scenario: string;
  readonly repeat: number;
  readonly message: string;
}

/**
 * The correctness facts that must hold whatever the speed: every run finished, every job's effect is
 * there, leaseq applied no effect twice, every planned kill happened, nothing is left on the emulator.
 * Returns one line per problem (empty when all hold). Speed is never checked here.
 */
export function correctnessProblems(
  results: readonly RunResult[],
  errors: readonly RunError[],
  leftovers: Leftovers,
): string[] {
  const problems: string[] = [];
  const where = (r: { consumer: string; scenario: string; repeat: number }) =>
    `${r.consumer} in ${r.scenario} (round ${r.repeat + 1})`;
  for (const e of errors) problems.push(`${where(e)} failed: ${e.message}`);
  for (const r of results) {
    if (r.timedOut) {
      problems.push(
        `${where(r)} did not finish within --run-timeout (${r.leftInQueue} messages still queued at the end)`,
      );
    }
    if (r.effects.missing > 0) problems.push(`${where(r)} lost the effect of ${r.effects.missing} jobs`);
    if (
      (r.consumer === 'leased' || r.consumer === 'fast') &&
      r.effects.doubles > 0 &&
      !outsideEffectOnFastPath(r)
    ) {
      problems.push(`leaseq ${where(r)} applied ${r.effects.doubles} effects twice`);
    }
    if (r.kills.happened < r.kills.planned) {
      problems.push(`${where(r)}: only ${r.kills.happened} of ${r.kills.planned} planned kills happened`);
    }
  }
  const left = leftovers.queues.length + leftovers.tables.length;
  if (left > 0) {
    problems.push(
      `${left} queues/tables left on the emulator: ${[...leftovers.queues, ...leftovers.tables].slice(0, 3).join(', ')}`,
    );
  }
  return problems;
}
