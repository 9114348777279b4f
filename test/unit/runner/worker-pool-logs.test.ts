import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { WorkerPool } from '../../../shared/runner/worker-pool.ts';

// Worker logs (`.leaseq/logs/...`) hold error text: failed jobs' messages and stack traces. Other local
// users must not read them.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function mode(path: string): number {
  return statSync(path).mode & 0o777;
}

describe('Class: WorkerPool logs', () => {
  test('creates the log folder 0700 and each worker log 0600, and narrows ones left 0755 / 0644', async () => {
    // Prepare
    const root = mkdtempSync(join(tmpdir(), 'leaseq-logs-'));
    dirs.push(root);
    const logDir = join(root, '.leaseq', 'logs', 'workers-x');
    mkdirSync(logDir, { recursive: true, mode: 0o755 });
    writeFileSync(join(logDir, 'w1.log'), 'old error text\n', { mode: 0o644 });
    const fresh = join(root, 'fresh', 'logs');
    // A job module that does not exist: the worker dies at once, after its log was opened.
    const options = { count: 1, env: {}, jobsModule: join(root, 'missing-jobs.ts') };

    // Act
    const old = new WorkerPool({ ...options, logDir });
    await old.start();
    await old.stop(1000);
    const created = new WorkerPool({ ...options, logDir: fresh, idPrefix: 'n' });
    await created.start();
    await created.stop(1000);

    // Assess
    expect(mode(logDir).toString(8)).toBe('700');
    expect(mode(join(logDir, 'w1.log')).toString(8)).toBe('600');
    expect(mode(fresh).toString(8)).toBe('700');
    expect(mode(join(fresh, 'n1.log')).toString(8)).toBe('600');
  });

  test('writes its target endpoint into the metrics file without the password written into it', async () => {
    // Prepare
    const root = mkdtempSync(join(tmpdir(), 'leaseq-metrics-'));
    dirs.push(root);
    const metricsFile = join(root, 'metrics', 'workers-1.json');
    const pool = new WorkerPool({
      count: 1,
      env: {},
      jobsModule: join(root, 'missing-jobs.ts'),
      logDir: join(root, 'logs'),
      metricsFile,
      metricsTarget: { endpoint: 'http://ops:s3cr3t@127.0.0.1:4566', queueArn: 'arn:aws:sqs:us-east-1:0:q' },
    });

    // Act: the pool writes the file every 2 s while it runs
    await pool.start();
    let written = '';
    for (let waited = 0; written === '' && waited < 5000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      written = (() => {
        try {
          return readFileSync(metricsFile, 'utf8');
        } catch {
          return '';
        }
      })();
    }
    await pool.stop(1000);

    // Assess
    expect(written).not.toContain('s3cr3t');
    expect(JSON.parse(written).target).toEqual({
      endpoint: 'http://***@127.0.0.1:4566',
      queueArn: 'arn:aws:sqs:us-east-1:0:q',
    });
  });
});
