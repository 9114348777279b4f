import { spawn } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import {
  isProcessAlive,
  processCommandLine,
  processRssBytes,
  signalGroup,
} from '../../../shared/local/process.ts';

function exited(child: ReturnType<typeof spawn>): Promise<void> {
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

describe('Function: isProcessAlive', () => {
  test('is true for this process', () => {
    expect(isProcessAlive(process.pid)).toBe(true);
  });

  test('is false for a process that has exited', async () => {
    const child = spawn(process.execPath, ['-e', '']);
    await exited(child);
    expect(child.pid).toBeDefined();
    expect(isProcessAlive(child.pid ?? 0)).toBe(false);
  });
});

describe.runIf(process.platform === 'linux')('Linux /proc readers', () => {
  test('processCommandLine shows the executable and its arguments', () => {
    expect(processCommandLine(process.pid)).toContain(process.execPath);
  });

  test('processRssBytes reports resident memory in bytes', () => {
    const rss = processRssBytes(process.pid) ?? 0;
    expect(rss).toBeGreaterThan(10 * 1024 * 1024);
  });

  test('both are undefined for a pid that does not exist', () => {
    expect(processCommandLine(2 ** 22 + 7)).toBeUndefined();
    expect(processRssBytes(2 ** 22 + 7)).toBeUndefined();
  });
});

describe('Function: signalGroup', () => {
  test('stops a detached process together with its child', async () => {
    // Prepare: a group leader that starts a grandchild and prints its pid.
    const leader = spawn(
      process.execPath,
      [
        '-e',
        "const c = require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }); console.log(c.pid); setInterval(() => {}, 1000);",
      ],
      { detached: true, stdio: ['ignore', 'pipe', 'ignore'] },
    );
    const grandchild = await new Promise<number>((resolve) =>
      leader.stdout?.once('data', (data) => resolve(Number(String(data).trim()))),
    );
    const leaderExit = exited(leader);

    // Act
    signalGroup(leader.pid ?? 0, 'SIGTERM');
    await leaderExit;

    // Assess
    await expect.poll(() => isProcessAlive(grandchild), { timeout: 3000 }).toBe(false);
  });
});
