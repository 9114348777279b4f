import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { testEndpoint } from '../../support/env.ts';

const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `node bin/leaseq.mjs <args>` as a real subprocess against the test endpoint: stdin is not a
 * terminal, so commands behave as they do in scripts and CI.
 */
export function leaseq(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 60_000,
): Promise<CliRun> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, AWS_ENDPOINT_URL: testEndpoint(), ...env };
  // Whatever the developer's shell says, the flags decide the target and errors stay one line.
  delete childEnv.LEASEQ_PREFIX;
  delete childEnv.LEASEQ_DEBUG;
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      {
        env: childEnv,
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error && typeof error.code === 'number' ? error.code : error ? 1 : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

/** Runs a command that must succeed and print JSON; returns the parsed JSON. */
export async function leaseqJson<T>(args: readonly string[]): Promise<T> {
  const run = await leaseq([...args, '--json']);
  if (run.code !== 0) {
    throw new Error(`leaseq ${args.join(' ')} exited ${run.code}: ${run.stderr.trim()}`);
  }
  return JSON.parse(run.stdout) as T;
}
