import type { Command } from 'commander';
import type { JobRegistry } from '../shared/core/model/registry.ts';
import { findJobModule, JOBS_MODULE_ENV, loadJobModule } from '../shared/jobs/job-module.ts';
import { TargetError } from './target.ts';

/** The job module a command works with. */
export interface CliJobs {
  readonly path: string;
  readonly jobs: JobRegistry;
}

/** Adds `--job-module <path>` to a command. */
export function jobModuleOption(command: Command): Command {
  return command.option(
    '--job-module <path>',
    `your job module (default: ${JOBS_MODULE_ENV}, else "leaseq.jobs" in package.json)`,
  );
}

/** Loads the job module the flags, the environment or package.json name; undefined when none does. */
export async function loadCliJobs(flag: string | undefined): Promise<CliJobs | undefined> {
  const path = findJobModule(flag);
  return path === undefined ? undefined : { path, jobs: await loadJobModule(path) };
}

/** Like {@link loadCliJobs}, but a missing job module is an error that says how to name one. */
export async function requireCliJobs(flag: string | undefined): Promise<CliJobs> {
  const found = await loadCliJobs(flag);
  if (!found) {
    throw new TargetError(
      `no job module: pass --job-module <file>, set ${JOBS_MODULE_ENV}, or add "leaseq": { "jobs": "./src/jobs.ts" } to package.json`,
    );
  }
  return found;
}
