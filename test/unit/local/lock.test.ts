import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
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

  test('lets one of two takers that both saw the holder dead take over; the other waits for it', async () => {
    // Prepare: a lock left by a process that has exited; two takers paused once each has seen it dead,
    // then let go one after the other (two processes can interleave so).
    const child = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => child.once('exit', resolve));
    writeFileSync(file, String(child.pid));
    const seen: (() => void)[] = [];
    let bothSeen = () => {};
    const bothSeenDead = new Promise<void>((resolve) => {
      bothSeen = resolve;
    });
    const hooks = {
      beforeTakeover: () =>
        new Promise<void>((resolve) => {
          seen.push(resolve);
          if (seen.length === 2) bothSeen();
        }),
    };
    let inside = 0;
    let most = 0;
    const task = (name: string) => async () => {
      inside += 1;
      most = Math.max(most, inside);
      await new Promise((resolve) => setTimeout(resolve, 300));
      inside -= 1;
      return name;
    };

    // Act
    const a = withFileLock(file, 5000, task('a'), hooks);
    const b = withFileLock(file, 5000, task('b'), hooks);
    await bothSeenDead;
    seen[0]?.();
    await new Promise((resolve) => setTimeout(resolve, 50));
    seen[1]?.();
    const results = await Promise.all([a, b]);

    // Assess: both ran, never at the same time.
    expect(results).toEqual(['a', 'b']);
    expect(most, 'callers holding the lock at once').toBe(1);
    expect(readdirSync(temp.dir), 'lock, drafts and guards all removed').toEqual([]);
  });

  test('leaves a dead hold whose takeover guard was left behind to be removed by hand, never holding twice', async () => {
    // Prepare: a lock of a dead process, and the guard of a taker that died while taking it over.
    const child = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => child.once('exit', resolve));
    writeFileSync(file, String(child.pid));
    const digest = createHash('sha256').update(String(child.pid)).digest('hex').slice(0, 16);
    writeFileSync(`${file}.takeover-${digest}`, String(child.pid));

    // Act + Assess: busy (the error names the lock file to remove), and the dead hold is left as it was.
    const refused = withFileLock(file, 600, async () => 'ran');
    await expect(refused).rejects.toBeInstanceOf(EmulatorBusyError);
    await expect(refused).rejects.toThrow(file);
    expect(readFileSync(file, 'utf8')).toBe(String(child.pid));
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
