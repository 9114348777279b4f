import { readFileSync } from 'node:fs';

/**
 * True when `pid` names a live process. A zombie (exited, not yet reaped by its parent) counts as
 * gone: it no longer serves anything, although `kill(pid, 0)` still succeeds on it.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  return procState(pid) !== 'Z';
}

/** The command line of `pid` (Linux `/proc`), or `undefined` where that is not available. */
export function processCommandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return undefined;
  }
}

/** Resident set size of `pid` in bytes (Linux `/proc`), or `undefined` where that is not available. */
export function processRssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

function procState(pid: number): string | undefined {
  try {
    // Format: "pid (comm) S ..."; comm may contain spaces or parentheses, so cut at the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

/** Sends `signal` to the process group led by `pid`, falling back to the process alone. */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
