import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { type WorkerInfo, WorkerPool } from '../../../shared/runner/worker-pool.ts';

// A crash loop (a worker that dies at once, replaced again and again) must not cost the parent anything
// per dead worker: no file descriptor (the open-file limit ends the command), no entry kept forever.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function openFds(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return undefined;
  }
}

function crashingPool(options: { count?: number; keepDead?: number } = {}): WorkerPool {
  const root = mkdtempSync(join(tmpdir(), 'leaseq-pool-'));
  dirs.push(root);
  // A job module that does not exist: the worker dies at once, after its log was opened.
  return new WorkerPool({
    count: options.count ?? 1,
    ...(options.keepDead !== undefined ? { keepDead: options.keepDead } : {}),
    env: {},
    jobsModule: join(root, 'missing-jobs.ts'),
    logDir: join(root, 'logs'),
  });
}

describe('Class: WorkerPool', () => {
  describe('Method: spawn', () => {
    // One crash loop (five deaths) for both checks: each worker takes seconds to load on a shared machine.
    test('closes what it opened for a dead worker and keeps a bounded number of them', async () => {
      // Prepare
      const pool = crashingPool({ keepDead: 2 });
      await pool.start();
      await new Promise((resolve) => setTimeout(resolve, 50));
      const before = openFds();

      // Act: four more deaths, two at a time.
      for (let i = 0; i < 2; i++) await Promise.all([pool.spawn(), pool.spawn()]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const after = openFds();
      await pool.stop(1000);

      // Assess: no descriptor per dead worker (Linux, where /proc lists them) ...
      if (before !== undefined && after !== undefined) {
        expect(after - before, `descriptors open: ${before} before, ${after} after 4 dead workers`).toBe(0);
      }
      // ... and the latest two dead workers listed, the three before them folded into the totals.
      expect(pool.started).toBe(5);
      expect([...pool.workers.keys()]).toEqual(['w4', 'w5']);
      expect(pool.retired.workers).toBe(3);
      expect(pool.alive).toBe(0);
    }, 60_000);

    test('a worker that cannot be started is an exit the pool reports, not an uncaught exception', async () => {
      // Prepare: the worker's log path is taken by a folder, so opening it fails as EMFILE would.
      const pool = crashingPool();
      await pool.start();
      const logDir =
        pool.workers
          .values()
          .next()
          .value?.logFile.replace(/[^/]+$/, '') ?? '';
      mkdirSync(join(logDir, 'w2.log'));
      const errors: string[] = [];
      const exits: WorkerInfo[] = [];
      pool.on('error', (id, message) => errors.push(`${id}: ${message}`));
      pool.on('exit', (info) => exits.push(info));

      // Act
      const exited = new Promise((resolve) => pool.once('exit', resolve));
      const info = await pool.spawn();
      await exited;
      await pool.stop(1000);

      // Assess
      expect(info).toMatchObject({ id: 'w2', alive: false, ready: false, pid: undefined });
      expect(exits.map((w) => w.id)).toEqual(['w2']);
      expect(errors).toEqual([expect.stringMatching(/^w2: could not start the worker: .*EISDIR/)]);
    }, 60_000);
  });
});
