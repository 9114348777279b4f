import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { EmulatorBusyError } from '../../../shared/local/emulator-errors.ts';
import { withFileLock } from '../../../shared/local/lock.ts';
import { tempDir } from './fixtures.ts';

describe('Function: withFileLock', () => {
  let temp: ReturnType<typeof tempDir>;
  let file: string;
  beforeEach(() => {
    temp = tempDir();
    file = join(temp.dir, 'emulator.lock');
  });
  afterEach(() => temp.remove());

  test('runs callers one at a time and removes the lock afterwards', async () => {
    // Prepare
    const events: string[] = [];
    const task = (name: string) => async () => {
      events.push(`${name} in`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      events.push(`${name} out`);
      return name;
    };

    // Act
    const results = await Promise.all([
      withFileLock(file, 5000, task('a')),
      withFileLock(file, 5000, task('b')),
    ]);

    // Assess
    expect(results).toEqual(['a', 'b']);
    expect(events).toEqual(['a in', 'a out', 'b in', 'b out']);
    expect(existsSync(file)).toBe(false);
  });

  test('releases the lock when the callback throws', async () => {
    await expect(withFileLock(file, 1000, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(existsSync(file)).toBe(false);
  });

  test('takes over a lock whose holder is dead', async () => {
    // Prepare: the pid of a process that has exited.
    const child = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => child.once('exit', resolve));
    writeFileSync(file, String(child.pid));

    // Act + Assess
    expect(await withFileLock(file, 1000, async () => 'ran')).toBe('ran');
  });

  test('gives up with EmulatorBusyError while a live holder keeps it', async () => {
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 10000)']);
    try {
      writeFileSync(file, String(holder.pid));
      const started = Date.now();
      await expect(withFileLock(file, 600, async () => 'ran')).rejects.toBeInstanceOf(EmulatorBusyError);
      expect(Date.now() - started).toBeLessThan(3000);
      expect(existsSync(file)).toBe(true);
    } finally {
      holder.kill('SIGKILL');
    }
  });
});
