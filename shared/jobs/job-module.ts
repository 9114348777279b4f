import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isRegistryLike, JobRegistry } from '../core/model/registry.ts';
import { ConfigError } from '../errors.ts';
import { isInstalled, missingPackage } from '../optional-package.ts';

/** Environment variable naming the job module (a path); `--job-module` and package.json's `leaseq.jobs` come first. */
export const JOBS_MODULE_ENV = 'LEASEQ_JOBS_MODULE';

/**
 * Where the job module is, in order: the `--job-module` flag, `LEASEQ_JOBS_MODULE`, then the `leaseq.jobs`
 * field of the nearest package.json at or above `cwd` (relative to that package.json). Returns an
 * absolute path, or undefined when none names one.
 */
export function findJobModule(
  flag: string | undefined,
  cwd: string = process.cwd(),
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  if (flag) return resolve(cwd, flag);
  const fromEnv = env[JOBS_MODULE_ENV]?.trim();
  if (fromEnv) return resolve(cwd, fromEnv);
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      const field = readLeaseqField(manifest);
      return field === undefined ? undefined : resolve(dir, field);
    }
    if (dirname(dir) === dir) return undefined;
  }
}

function readLeaseqField(manifest: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(manifest, 'utf8'));
  } catch (error) {
    throw new ConfigError(
      `cannot read ${manifest}: ${error instanceof Error ? error.message : error}`,
      error,
    );
  }
  const field = (parsed as { leaseq?: { jobs?: unknown } } | null)?.leaseq?.jobs;
  if (field === undefined) return undefined;
  if (typeof field !== 'string' || field.trim() === '') {
    throw new ConfigError(
      `${manifest}: "leaseq.jobs" must be the path of your job module, e.g. "./src/jobs.ts"`,
    );
  }
  return field;
}

/**
 * Node's own answers to TypeScript it cannot load (no type stripping on Node 20; syntax stripping cannot
 * handle, such as an enum, on 22). Any other error is the module's own and is reported as it is.
 */
const TYPESCRIPT_REFUSALS = new Set([
  'ERR_UNKNOWN_FILE_EXTENSION',
  'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX',
  'ERR_INVALID_TYPESCRIPT_SYNTAX',
  'ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING',
]);

function needsTsx(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (typeof code === 'string' && TYPESCRIPT_REFUSALS.has(code)) || error instanceof SyntaxError;
}

/**
 * Imports a job module and returns its jobs. The module's default export (or its export `jobs`) is
 * `defineJobs([...])` or an array of `defineJob(...)` results. TypeScript modules load when tsx is
 * registered (the `leaseq` command and local workers register it when it is installed).
 * @throws ConfigError when the file is missing or exports no jobs.
 */
export async function loadJobModule(path: string): Promise<JobRegistry> {
  const file = isAbsolute(path) ? path : resolve(path);
  if (!existsSync(file)) throw new ConfigError(`job module ${file} does not exist`);
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (error) {
    if (/\.[cm]?tsx?$/.test(file) && needsTsx(error) && !isInstalled('tsx'))
      throw missingPackage('tsx', error);
    throw new ConfigError(
      `job module ${file} failed to load: ${error instanceof Error ? error.message : String(error)}`,
      error,
    );
  }
  let candidate = exports.default ?? exports.jobs;
  // A TypeScript module compiled as CommonJS arrives as { default: module.exports }.
  if (isModuleObject(candidate)) candidate = candidate.default ?? candidate.jobs;
  if (candidate instanceof JobRegistry || isRegistryLike(candidate) || Array.isArray(candidate)) {
    return JobRegistry.from(candidate);
  }
  throw new ConfigError(
    `job module ${file} exports no jobs: expected \`export default defineJobs([...])\` (or an export named jobs)`,
  );
}

function isModuleObject(value: unknown): value is { default?: unknown; jobs?: unknown } {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !isRegistryLike(value) &&
    ('default' in value || 'jobs' in value)
  );
}
