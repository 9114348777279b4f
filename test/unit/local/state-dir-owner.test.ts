import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ensureEmulator } from '../../../shared/local/emulator.ts';
import { EMULATORS } from '../../../shared/local/emulators.ts';

// A state directory (LEASEQ_STATE_DIR or .leaseq) that is not the operator's own, or that others may
// write, is never used as it is: another user could have planted the virtualenv's python in it, which
// leaseq would run as the operator. Refused with one line that says why and what to do.

const root = mkdtempSync(join(tmpdir(), 'leaseq-state-owner-'));
chmodSync(root, 0o755);
afterAll(() => rmSync(root, { recursive: true, force: true }));
const asRoot = process.getuid?.() === 0;

/** A state directory holding a "complete install" whose python leaves a marker when run. */
function planted(name: string): { dir: string; marker: string } {
  const dir = join(root, name);
  const bin = join(dir, 'venv', 'bin');
  mkdirSync(bin, { recursive: true });
  const marker = join(root, `${name}.ran`);
  for (const exe of ['python', 'python3', 'ministack']) {
    writeFileSync(join(bin, exe), `#!/bin/sh\ntouch ${marker}\nsleep 30\n`, { mode: 0o755 });
  }
  const spec = EMULATORS.ministack;
  writeFileSync(
    join(dir, 'venv', 'leaseq-emulator.json'),
    JSON.stringify({ requirements: spec.requirements, constraints: spec.constraints }),
  );
  return { dir, marker };
}

const start = (stateDir: string) =>
  ensureEmulator({
    stateDir,
    port: 20_000 + Math.floor(Math.random() * 10_000),
    env: { PATH: process.env.PATH, AWS_ENDPOINT_URL: '' },
    startTimeoutMs: 3000,
  }).then(
    (handle) => `started pid ${handle.pid}`,
    (error: Error) => error.message,
  );

it.skipIf(!asRoot)('refuses a state directory another user owns, and runs nothing in it', async () => {
  const { dir, marker } = planted('foreign');
  chownSync(dir, 65534, 65534);
  chmodSync(dir, 0o700);

  const message = await start(dir);

  expect(existsSync(marker), `the planted python ran as the operator (${message})`).toBe(false);
  expect(message).toBe(
    `the state directory ${dir} belongs to uid 65534, not to you (uid 0): leaseq will not use it; remove it, or set LEASEQ_STATE_DIR to a directory of your own`,
  );
});

it('refuses a state directory of its own that others may write to', async () => {
  const { dir, marker } = planted('open');
  chmodSync(dir, 0o777);

  const message = await start(dir);

  expect(existsSync(marker), `the planted python ran as the operator (${message})`).toBe(false);
  expect(message).toBe(
    `the state directory ${dir} can be written by others (mode 777), so its contents may not be yours: leaseq will not use it; remove it, or set LEASEQ_STATE_DIR to a directory of your own`,
  );
});

it('narrows a state directory of its own that others may only read to 0700', async () => {
  const dir = join(root, 'readable');
  mkdirSync(dir, { mode: 0o755 });
  chmodSync(dir, 0o755);
  const { checkStateDir } = await import('../../../shared/local/state-dir.ts');

  checkStateDir(dir);

  const { statSync } = await import('node:fs');
  expect((statSync(dir).mode & 0o777).toString(8)).toBe('700');
});
