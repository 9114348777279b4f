/**
 * The state directory (`LEASEQ_STATE_DIR`, else `.leaseq`) holds what leaseq runs as the operator (the
 * emulator's virtualenv, its launcher) and the emulator's credential. One another user made, or one
 * others may write to, could hold their planted python: it is never used as it is.
 */
import { chmodSync, lstatSync, mkdirSync, realpathSync, statSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { EmulatorError } from './emulator-errors.ts';

const REMEDY = 'leaseq will not use it; remove it, or set LEASEQ_STATE_DIR to a directory of your own';

/**
 * Creates `dir` (0700) when it is missing; checks that it is a directory owned by this user that no one
 * else may write to, and narrows it to 0700 when others may only read it.
 * @throws EmulatorError with one line saying why, when the directory is not the operator's alone
 */
export function checkStateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = statSync(dir);
  if (!stat.isDirectory())
    throw new EmulatorError(`the state directory ${dir} is not a directory: ${REMEDY}`);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    throw new EmulatorError(
      `the state directory ${dir} belongs to uid ${stat.uid}, not to you (uid ${uid}): ${REMEDY}`,
    );
  }
  const mode = stat.mode & 0o777;
  if ((mode & 0o022) !== 0) {
    throw new EmulatorError(
      `the state directory ${dir} can be written by others (mode ${mode.toString(8)}), so its contents may not be yours: ${REMEDY}`,
    );
  }
  if (uid !== undefined) {
    checkPathTo(dir, dir, uid);
    checkPathTo(dir, realpathSync(dir), uid);
  }
  if ((mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/**
 * Every step of `path` (each directory above the state directory, and any symlink on the way) must be
 * this user's or root's, and no directory above it writable by others unless sticky (as /tmp is):
 * otherwise another user could swap the state directory for one of theirs between the check and its use.
 */
function checkPathTo(dir: string, path: string, uid: number): void {
  const parts = resolve(path).split(sep).filter(Boolean);
  let current: string = sep;
  for (const [index, part] of parts.entries()) {
    current = join(current, part);
    const stat = lstatSync(current);
    if (stat.uid !== uid && stat.uid !== 0) {
      throw new EmulatorError(
        `the state directory ${dir} is reached through ${current}, which uid ${stat.uid} owns and may change: ${REMEDY}`,
      );
    }
    const above = index < parts.length - 1;
    if (above && !stat.isSymbolicLink() && (stat.mode & 0o022) !== 0 && (stat.mode & 0o1000) === 0) {
      throw new EmulatorError(
        `the state directory ${dir} is reached through ${current}, which others may write to (mode ${(stat.mode & 0o777).toString(8)}): ${REMEDY}`,
      );
    }
  }
}
