import type { Command } from 'commander';
import { cancelJob, checkDedupKey, describeCancel } from '../../shared/ops/cancel.ts';
import { confirmChange } from '../confirm.ts';
import { print, printJson } from '../format.ts';
import { safeText } from '../safe-text.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';
import { operatorIdentity } from './redrive-input.ts';

interface CancelFlags extends TargetFlags {
  readonly reason?: string;
  readonly yes?: boolean;
  readonly json?: boolean;
}

/** Exit code of a cancel that found the job finished (COMPLETED or DEAD): nothing was cancelled. */
export const EXIT_FINISHED = 3;

/** Adds `leaseq cancel <dedupKey>`. */
export function register(program: Command): void {
  targetOptions(
    program
      .command('cancel')
      .description(
        'cancel a job by dedup key: a running job stops at its next heartbeat and commits nothing, a job ' +
          'waiting for a retry never runs again, a key not sent yet drops its message when it comes; exit 0 ' +
          `when cancelled (or already), ${EXIT_FINISHED} when the job had already finished (COMPLETED or DEAD)`,
      )
      .argument('<dedupKey>', 'the dedup key of the job')
      .option('--reason <text>', 'why: kept in the job history (`leaseq inspect` shows it)')
      .option('--yes', 'do not ask (scripts, CI); without a terminal a cancel refuses without it')
      .option('--json', 'print the result as JSON on stdout'),
  ).action(async (dedupKey: string, flags: CancelFlags) => {
    // A key no job can have is refused before anything is asked or touched.
    checkDedupKey(dedupKey);
    const target = await resolveTarget(flags);
    try {
      const key = safeText(dedupKey);
      const confirmed = await confirmChange(
        {
          verb: 'cancel',
          name: key,
          what: `job ${key} in table ${target.names.jobsTable}: it will never run (again); this cannot be undone`,
          local: target.local,
        },
        flags.yes,
      );
      if (!confirmed) {
        process.exitCode = 1;
        return;
      }
      const result = await cancelJob(target, dedupKey, {
        by: operatorIdentity(),
        ...(flags.reason === undefined ? {} : { reason: flags.reason }),
      });
      if (flags.json) printJson({ dedupKey, ...result });
      else print(safeText(describeCancel(dedupKey, result)));
      if (result.outcome === 'finished') process.exitCode = EXIT_FINISHED;
    } finally {
      target.close();
    }
  });
}
