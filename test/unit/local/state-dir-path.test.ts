import { chmodSync, chownSync, lchownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { checkStateDir } from '../../../shared/local/state-dir.ts';

// A state directory of the operator's own is still not theirs alone when another user can swap it
// between leaseq's check and its use (a virtualenv install takes a minute): a symlink that user owns
// can be pointed at their own directory, a parent they own or may write to lets them rename it away
// and put theirs in its place. Both are refused, as a directory they own is.

const root = mkdtempSync(join(tmpdir(), 'leaseq-state-path-'));
chmodSync(root, 0o755);
afterAll(() => rmSync(root, { recursive: true, force: true }));
const asRoot = process.getuid?.() === 0;
const REMEDY = 'leaseq will not use it; remove it, or set LEASEQ_STATE_DIR to a directory of your own';

const refusal = (dir: string): string => {
  try {
    checkStateDir(dir);
    return 'accepted';
  } catch (error) {
    return (error as Error).message;
  }
};

it.skipIf(!asRoot)('refuses a state directory reached through a symlink another user owns', () => {
  const real = join(root, 'real');
  mkdirSync(real, { mode: 0o700 });
  const link = join(root, 'link');
  symlinkSync(real, link);
  lchownSync(link, 65534, 65534);

  expect(refusal(link)).toBe(
    `the state directory ${link} is reached through ${link}, which uid 65534 owns and may change: ${REMEDY}`,
  );
});

it.skipIf(!asRoot)('refuses a state directory inside a directory another user owns', () => {
  const parent = join(root, 'theirs');
  mkdirSync(parent, { mode: 0o755 });
  chownSync(parent, 65534, 65534);
  const dir = join(parent, 'state');
  mkdirSync(dir, { mode: 0o700 });

  expect(refusal(dir)).toBe(
    `the state directory ${dir} is reached through ${parent}, which uid 65534 owns and may change: ${REMEDY}`,
  );
});

it('refuses a state directory inside a directory others may write to that is not sticky', () => {
  const parent = join(root, 'open');
  mkdirSync(parent);
  chmodSync(parent, 0o777);
  const dir = join(parent, 'state');
  mkdirSync(dir, { mode: 0o700 });

  expect(refusal(dir)).toBe(
    `the state directory ${dir} is reached through ${parent}, which others may write to (mode 777): ${REMEDY}`,
  );
});

it('accepts one in a sticky directory others may write to (such as /tmp), and a symlink of its own', () => {
  const parent = join(root, 'sticky');
  mkdirSync(parent);
  chmodSync(parent, 0o1777);
  const dir = join(parent, 'state');
  mkdirSync(dir, { mode: 0o700 });
  const link = join(root, 'own-link');
  symlinkSync(dir, link);

  expect(refusal(dir)).toBe('accepted');
  expect(refusal(link)).toBe('accepted');
});
