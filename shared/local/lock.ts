import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { EmulatorBusyError } from './emulator-errors.ts';
import { isProcessAlive, sleep } from './process.ts';

/**
 * Runs `fn` holding an exclusive lock file, so two leaseq processes (say `npm start` and `npm test`)
 * never install or start the emulator at the same time. A lock whose holder died is taken over.
 * @throws EmulatorBusyError when a live holder keeps it longer than `timeoutMs`
 */
export async function withFileLock<T>(file: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readHolder(file);
    if (holder === undefined || !isProcessAlive(holder)) {
      rmSync(file, { force: true });
      continue;
    }
    if (Date.now() >= deadline) throw new EmulatorBusyError(file, holder);
    await sleep(250);
  }
  try {
    return await fn();
  } finally {
    if (readHolder(file) === process.pid) rmSync(file, { force: true });
  }
}

function readHolder(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}
