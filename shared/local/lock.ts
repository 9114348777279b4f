import { createHash, randomUUID } from 'node:crypto';
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { EmulatorBusyError } from './emulator-errors.ts';
import { isProcessAlive, sleep } from './process.ts';

/** Points where a test can pause a taker, to interleave two of them as two processes could. */
export interface LockHooks {
  /** After seeing the holder dead, before taking the lock over. */
  readonly beforeTakeover?: () => Promise<void>;
  /**
   * Called once, the first time a live holder makes this taker wait, with the holder's pid (0 when the
   * lock names none), so a long wait is never silent.
   */
  readonly onWait?: (holderPid: number) => void;
}

/**
 * Runs `fn` holding an exclusive lock file, so two leaseq processes (say `npm start` and `npm test`)
 * never install or start the emulator at the same time. A lock whose holder died is taken over, by one
 * taker only however many saw it dead (see {@link takeOver}).
 *
 * The file holds `<pid> <nonce>`: the pid tells whether the holder lives, the nonce tells one hold from
 * another (two callers in one process, a later hold by the same pid).
 * @throws EmulatorBusyError when a live holder keeps it longer than `timeoutMs`
 */
export async function withFileLock<T>(
  file: string,
  timeoutMs: number,
  fn: () => Promise<T>,
  hooks: LockHooks = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  const token = `${process.pid} ${randomUUID()}`;
  let told = false;
  for (;;) {
    if (tryCreate(file, token)) break;
    const held = readToken(file);
    if (held === undefined) continue; // released between our attempt and the read
    const holder = pidOf(held);
    const dead = holder === undefined || !isProcessAlive(holder);
    if (dead) {
      await hooks.beforeTakeover?.();
      if (takeOver(file, held)) continue;
    }
    if (Date.now() >= deadline) throw new EmulatorBusyError(file, holder ?? 0);
    if (!told) {
      told = true;
      hooks.onWait?.(holder ?? 0);
    }
    await sleep(250);
  }
  try {
    return await fn();
  } finally {
    if (readToken(file) === token) rmSync(file, { force: true });
  }
}

/**
 * Creates the lock holding `token`, unless it exists. Written whole under a private name, then linked
 * (atomic, fails if the lock exists): the lock never exists empty or half-written, which a reader would
 * take for a lock whose holder died.
 */
function tryCreate(file: string, token: string): boolean {
  const draft = `${file}.${randomUUID()}.tmp`;
  writeFileSync(draft, token, { flag: 'wx', mode: 0o600 });
  try {
    linkSync(draft, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  } finally {
    rmSync(draft, { force: true });
  }
}

/**
 * Removes the lock if it still is the dead hold `stale`. A plain remove is not enough: two takers that
 * both saw the holder dead would each remove, the second removing the first one's new lock, and both
 * would hold. Here only the taker that creates the guard named after that hold may remove it, and it
 * re-reads the lock under the guard, so a second taker finds a live lock (or none) and leaves it.
 * The guard lives for three file operations; if its taker dies within them, the dead hold stays until
 * someone removes the lock file by hand, as {@link EmulatorBusyError} says (never two holders).
 *
 * @returns false when another taker holds the guard.
 */
function takeOver(file: string, stale: string): boolean {
  const guard = `${file}.takeover-${createHash('sha256').update(stale).digest('hex').slice(0, 16)}`;
  try {
    writeFileSync(guard, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  }
  try {
    if (readToken(file) === stale) rmSync(file, { force: true });
  } finally {
    rmSync(guard, { force: true });
  }
  return true;
}

function readToken(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The holder's pid (a lock written by an older leaseq holds the pid alone); undefined if unreadable. */
function pidOf(token: string): number | undefined {
  const pid = Number(token.split(' ')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}
