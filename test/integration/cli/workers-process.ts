import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { testEndpoint } from '../../support/env.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Carried in the environment of `leaseq workers` and, inherited, of every process it starts. */
const MARK = 'LEASEQ_TEST_PROCESS_MARK';

/** One real `leaseq workers` process, with what it printed and a way to find every process it started. */
export interface WorkersRun {
  readonly child: ChildProcess;
  readonly mark: string;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Everything it wrote to stdout so far (the closing table, or its JSON with `--json`). */
  stdout(): string;
  /** Resolves when it exits. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once stderr contains `text` (rejects after `timeoutMs`). */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
}

/**
 * Spawns `node bin/leaseq.mjs workers <args>` against the test endpoint with a unique mark in its
 * environment; the shell's LEASEQ_* worker settings are removed unless `env` sets them.
 */
export function startWorkers(args: readonly string[], env: NodeJS.ProcessEnv = {}): WorkersRun {
  const mark = randomUUID();
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(childEnv)) if (name.startsWith('LEASEQ_')) delete childEnv[name];
  Object.assign(childEnv, { AWS_ENDPOINT_URL: testEndpoint(), [MARK]: mark }, env);
  const child = spawn(process.execPath, ['bin/leaseq.mjs', 'workers', ...args], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  let text = '';
  const waiters = new Set<() => void>();
  child.stderr?.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    for (const wake of waiters) wake();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const waitFor = (wanted: string | RegExp, timeoutMs = 60_000) =>
    new Promise<void>((resolve, reject) => {
      const found = () => (typeof wanted === 'string' ? text.includes(wanted) : wanted.test(text));
      const check = () => {
        if (!found()) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`leaseq workers did not print ${String(wanted)} in ${timeoutMs} ms: ${text}`));
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  return { child, mark, stderr: () => text, stdout: () => out, exited, waitFor };
}

/** Pids of the running (not zombie) processes whose environment carries `mark`: the test's own processes. */
export function markedPids(mark: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1');
      if (environ.split('\0').includes(`${MARK}=${mark}`) && isRunning(Number(entry))) {
        found.push(Number(entry));
      }
    } catch {
      // Gone, or not ours.
    }
  }
  return found;
}

/** True while `pid` runs: a zombie (exited, not yet reaped) has stopped. */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Watches for marked processes every 50 ms until stopped; returns every pid seen. */
export function recordPids(mark: string): { stop(): Set<number> } {
  const seen = new Set<number>();
  const timer = setInterval(() => {
    for (const pid of markedPids(mark)) seen.add(pid);
  }, 50);
  return {
    stop() {
      clearInterval(timer);
      for (const pid of markedPids(mark)) seen.add(pid);
      return seen;
    },
  };
}

/** The pids of `pids` (and any process still carrying `mark`) running after up to `settleMs`. */
export async function survivors(mark: string, pids: Iterable<number>, settleMs = 1000): Promise<number[]> {
  const all = new Set(pids);
  for (const started = Date.now(); ; ) {
    for (const pid of markedPids(mark)) all.add(pid);
    const running = [...all].filter(isRunning);
    if (running.length === 0 || Date.now() - started >= settleMs) return running;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** SIGKILLs whatever a failed test left running (cleanup only; the assertions come first). */
export function killMarked(mark: string): void {
  for (const pid of markedPids(mark)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}
