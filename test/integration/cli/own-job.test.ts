import { execFile, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destroyAwsClients } from '../../../shared/aws/clients.ts';
import { testClients, testEndpoint, uniqueName } from '../../support/env.ts';
import { leaseq } from './run-cli.ts';

// A team's own job, added the way docs/jobs.md shows: one new file (the job) plus its registration in
// the job module. The files live under .leaseq/ so they resolve zod and leaseq like project code does.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'leaseq.mjs');
const dir = join(ROOT, '.leaseq', 'tmp', uniqueName('ownjob'));
const jobModule = join(dir, 'jobs.ts');
const clients = testClients();
const prefix = uniqueName('own');
const leaseqSource = join(ROOT, 'shared', 'index.ts');
const run = promisify(execFile);

beforeAll(() => {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'email-send.ts'),
    `import { z } from 'zod';
import { defineJob, defineTable } from ${JSON.stringify(leaseqSource)};

export const emailLog = defineTable('emailLog', { partitionKey: 'id' });

export const sendEmail = defineJob({
  type: 'email.send',
  payload: z.object({ to: z.string().email(), subject: z.string().min(1) }),
  tables: { emailLog },
  async run(ctx, p) {
    const delivery = await ctx.step('deliver', async () => ({ data: 'sent-' + ctx.idempotencyKey('deliver') }));
    return { effects: [ctx.tables.emailLog.put({ id: ctx.dedupKey, to: p.to, subject: p.subject, delivery, attempt: ctx.attempt })] };
  },
});
`,
  );
  writeFileSync(
    jobModule,
    `import { defineJobs } from ${JSON.stringify(leaseqSource)};
import { sendEmail } from './email-send.ts';

export default defineJobs([sendEmail]);
`,
  );
});
afterAll(() => {
  destroyAwsClients(clients);
  rmSync(dir, { recursive: true, force: true });
});

/** `leaseq workers` on this job module and prefix, its stderr collected. */
function startWorkers(args: readonly string[]) {
  const workers = spawn(
    process.execPath,
    [BIN, 'workers', '--job-module', jobModule, '--prefix', prefix, ...args],
    {
      cwd: ROOT,
      env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint() },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let text = '';
  workers.stderr.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => workers.on('exit', (code) => resolve(code)));
  return { workers, stderr: () => text, exited };
}

async function emailRows(table: string): Promise<Record<string, unknown>[]> {
  const out = await clients.doc.send(new ScanCommand({ TableName: table, ConsistentRead: true }));
  return (out.Items ?? []).sort((a, b) => String(a.id).localeCompare(String(b.id)));
}

describe('Your own job type', () => {
  it('is one file plus its registration: provisioned, checked by send --file, run by local workers once', async () => {
    // Prepare: the stack for this job module (its emailLog table included).
    const provision = await leaseq(['local', 'provision', '--job-module', jobModule, '--prefix', prefix]);
    expect(provision.code, provision.stderr).toBe(0);
    expect(provision.stdout).toMatch(new RegExp(`created\\s+table ${prefix}-email-log`));
    const table = `${prefix}-email-log`;

    // A payload its schema refuses: nothing is sent, the line is named.
    const bad = join(dir, 'bad.ndjson');
    writeFileSync(
      bad,
      `${JSON.stringify({ type: 'email.send', dedupKey: 'e-bad', payload: { to: 'nobody', subject: 'x' } })}\n`,
    );
    const refused = await leaseq(['send', '--file', bad, '--job-module', jobModule, '--prefix', prefix]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/line 1: payload of email\.send: to: .*nothing was sent/);

    // Two jobs, one of them sent twice.
    const file = join(dir, 'jobs.ndjson');
    const job = (key: string, to: string) =>
      JSON.stringify({ type: 'email.send', dedupKey: key, payload: { to, subject: 'Welcome' } });
    writeFileSync(
      file,
      [
        job('welcome-1', 'a@example.com'),
        job('welcome-2', 'b@example.com'),
        job('welcome-1', 'a@example.com'),
      ].join('\n'),
    );
    const sent = await leaseq([
      'send',
      '--file',
      file,
      '--job-module',
      jobModule,
      '--prefix',
      prefix,
      '--json',
    ]);
    expect(sent.code, sent.stderr).toBe(0);
    expect(JSON.parse(sent.stdout)).toMatchObject({ jobs: 2, sent: 3, duplicates: 1, failed: 0 });

    // Act: local workers on this job module until both rows are there.
    const { workers, stderr: output, exited } = startWorkers(['--count', '2', '--json']);
    let rows: Record<string, unknown>[] = [];
    for (const started = Date.now(); Date.now() - started < 30_000; ) {
      rows = await emailRows(table);
      if (rows.length >= 2) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    await new Promise((r) => setTimeout(r, 1500)); // the duplicate copy is handled too
    workers.kill('SIGTERM');
    await exited;

    // Assess: each job's effect exactly once, from its first attempt.
    const stderr = output();
    expect(stderr).toMatch(/running email\.send/);
    // Worker log lines name the service, the worker and the job (no "service_undefined").
    const logDir = /logs in (\S+);/.exec(stderr)?.[1] ?? '';
    const lines = readdirSync(logDir)
      .filter((f) => f.endsWith('.log'))
      .flatMap((f) => readFileSync(join(logDir, f), 'utf8').split('\n'))
      .filter((l) => l.startsWith('{'));
    const completed = lines.map((l) => JSON.parse(l)).find((l) => l.message === 'job completed');
    expect(completed).toMatchObject({ service: 'leaseq', type: 'email.send' });
    expect(completed.dedupKey).toMatch(/^welcome-/);
    // Worker ids carry host and pid: two pools on one queue never pass for each other.
    expect(completed.worker).toMatch(/^[^\s]+-\d+-w\d+$/);
    expect(await emailRows(table)).toEqual([
      {
        id: 'welcome-1',
        to: 'a@example.com',
        subject: 'Welcome',
        delivery: 'sent-welcome-1#deliver',
        attempt: 1,
      },
      {
        id: 'welcome-2',
        to: 'b@example.com',
        subject: 'Welcome',
        delivery: 'sent-welcome-2#deliver',
        attempt: 1,
      },
    ]);
    const status = await leaseq(['status', '--prefix', prefix, '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ queue: { visible: 0, inFlight: 0 } });
  });

  it('replaces a worker that was SIGKILLed, with its count shown, and still drains to exit 0', async () => {
    // Prepare: one worker (a kill used to leave the command with none and end it).
    // A short lease: a long poll of the killed worker may still take the next message, which then
    // comes back after its visibility (lease + 1 s), as it would from SQS.
    const { workers, stderr, exited } = startWorkers(['--count', '1', '--lease-ms', '3000']);
    const until = async (pattern: RegExp) => {
      for (const started = Date.now(); !pattern.test(stderr()); ) {
        if (Date.now() - started > 20_000) throw new Error(`no ${pattern} in: ${stderr()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    await until(/workers running email\.send/);
    const { stdout: children } = await run('pgrep', ['-P', String(workers.pid), '-f', 'worker-process']);
    const [child] = children.trim().split('\n').map(Number);

    // Act: kill the worker outright, then give the replacement a job.
    process.kill(child ?? 0, 'SIGKILL');
    await until(/exited \(SIGKILL\); starting a replacement in 0\.5 s \(restarts: 1\)/);
    const file = join(dir, 'after-kill.ndjson');
    writeFileSync(
      file,
      JSON.stringify({
        type: 'email.send',
        dedupKey: 'after-kill',
        payload: { to: 'c@example.com', subject: 'Hi' },
      }),
    );
    expect((await leaseq(['send', '--file', file, '--job-module', jobModule, '--prefix', prefix])).code).toBe(
      0,
    );
    let rows: Record<string, unknown>[] = [];
    for (const started = Date.now(); Date.now() - started < 30_000; ) {
      rows = (await emailRows(`${prefix}-email-log`)).filter((r) => r.id === 'after-kill');
      if (rows.length > 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    workers.kill('SIGTERM');

    // Assess
    expect(rows).toHaveLength(1);
    expect(await exited).toBe(0);
  });
});
