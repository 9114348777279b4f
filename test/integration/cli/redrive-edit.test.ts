import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import { problemShard } from '../../../shared/core/contract/job-history.ts';
import type { JobItem } from '../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { leaseq } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

// The deployment's job module, with mail.send's schema: an edited payload is checked against it. It lives
// under .leaseq/ so it resolves zod and leaseq as project code does.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const moduleDir = join(ROOT, '.leaseq', 'tmp', uniqueName('editjobs'));
const jobModule = join(moduleDir, 'jobs.ts');

beforeAll(async () => {
  env = await coreEnv('cliedit');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  mkdirSync(moduleDir, { recursive: true });
  writeFileSync(
    jobModule,
    `import { z } from 'zod';
import { defineJob, defineJobs } from ${JSON.stringify(join(ROOT, 'shared', 'index.ts'))};

export default defineJobs([
  defineJob({
    type: 'mail.send',
    payload: z.object({ to: z.string().email(), subject: z.string().min(1) }),
    run: async () => ({ result: { sent: true } }),
  }),
]);
`,
  );
});
afterAll(() => {
  env?.close();
  rmSync(moduleDir, { recursive: true, force: true });
});

/** A DEAD job item and its dead letter (the envelope with the bad payload). */
async function deadJob(dedupKey: string): Promise<string> {
  const now = Date.now();
  await env.clients.doc.send(
    new PutCommand({
      TableName: env.jobsTable,
      Item: {
        dedupKey,
        status: JobStatus.Dead,
        type: 'mail.send',
        token: 3,
        attempts: 3,
        version: 7,
        leaseUntil: now - 60_000,
        messageId: 'm-1',
        lastErrorClass: 'ValidationError',
        lastError: 'to: not an address',
        deadAt: now - 60_000,
      },
    }),
  );
  const body = JSON.stringify(
    makeEnvelope({ id: 'id-1', dedupKey, type: 'mail.send', payload: { to: 'nobody', subject: 'hi' } }),
  );
  const sent = await env.clients.sqs.send(
    new SendMessageCommand({ QueueUrl: env.dlqUrl, MessageBody: body }),
  );
  return sent.MessageId ?? '';
}

function payloadFile(text: string): string {
  const file = join(tmpdir(), `${uniqueName('payload')}.json`);
  writeFileSync(file, text);
  return file;
}

describe('Command: leaseq dlq redrive --payload-file', () => {
  it('sends the job again under its key and type with the corrected payload, and records who and which letter', async () => {
    const dedupKey = uniqueName('mail');
    const letterId = await deadJob(dedupKey);
    const file = payloadFile(JSON.stringify({ to: 'ana@example.com', subject: 'hi' }));

    const run = await leaseq([
      'dlq',
      'redrive',
      '--prefix',
      prefix,
      '--dedup-key',
      dedupKey,
      '--payload-file',
      file,
      '--job-module',
      jobModule,
      '--yes',
      '--json',
    ]);

    expect(run.code, run.stderr).toBe(0);
    const received = await env.clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: env.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2 }),
    );
    const bodies = (received.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}'));
    expect(bodies).toContainEqual(
      expect.objectContaining({
        id: 'id-1',
        dedupKey,
        type: 'mail.send',
        payload: { to: 'ana@example.com', subject: 'hi' },
      }),
    );
    const item = (await env.clients.doc.send(new GetCommand({ TableName: env.jobsTable, Key: { dedupKey } })))
      .Item as JobItem;
    expect(item.status).toBe(JobStatus.RetryWait);
    expect(item.attempts).toBe(0);
    expect(item.history?.at(-1)).toEqual({
      e: 'redrive',
      at: expect.any(Number),
      by: expect.stringMatching(/^.+@.+$/),
      letter: letterId,
      edited: true,
    });
    expect(item.problemShard).toBe(problemShard(dedupKey));
    expect(item.problemAt).toBe(item.history?.at(-1)?.at);
  });

  it.each([
    ['not JSON', '{to:', /is not JSON/],
    [
      'over the body limit',
      JSON.stringify({ blob: 'x'.repeat(1_020_000) }),
      /above the \d+ byte body limit; nothing was sent/,
    ],
  ])('refuses a payload file that is %s, and changes nothing', async (_what, text, message) => {
    const dedupKey = uniqueName('mail');
    await deadJob(dedupKey);

    const run = await leaseq([
      'dlq',
      'redrive',
      '--prefix',
      prefix,
      '--dedup-key',
      dedupKey,
      '--payload-file',
      payloadFile(text),
      '--job-module',
      jobModule,
      '--yes',
    ]);

    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    const item = (await env.clients.doc.send(new GetCommand({ TableName: env.jobsTable, Key: { dedupKey } })))
      .Item as JobItem;
    expect(item.status).toBe(JobStatus.Dead);
    expect(item.history).toBeUndefined();
  });

  it.each([
    [
      "that its job type's schema refuses, naming the field",
      jobModule,
      JSON.stringify({ to: 'nobody', subject: 'hi' }),
      /^leaseq: the corrected payload does not fit job type mail\.send: payload\.to: [^\n]+; nothing was changed$/m,
    ],
    [
      'of a type the job module does not define',
      'examples/ledger/jobs.ts',
      JSON.stringify({ to: 'ana@example.com', subject: 'hi' }),
      /^leaseq: the corrected payload does not fit job type mail\.send: the job module [^\n]*jobs\.ts defines no job type mail\.send \(pass the deployment's --job-module\); nothing was changed$/m,
    ],
  ])('refuses a payload %s, in one line, before anything changes', async (_what, module, text, message) => {
    // Prepare
    const dedupKey = uniqueName('mail');
    await deadJob(dedupKey);

    // Act
    const run = await leaseq([
      'dlq',
      'redrive',
      '--prefix',
      prefix,
      '--dedup-key',
      dedupKey,
      '--payload-file',
      payloadFile(text),
      '--job-module',
      module,
      '--yes',
    ]);

    // Assess: the refusal in one line (after the target and the confirmation), non-zero; the item and the letter as they were, nothing sent.
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(message);
    const item = (await env.clients.doc.send(new GetCommand({ TableName: env.jobsTable, Key: { dedupKey } })))
      .Item as JobItem;
    expect(item.status).toBe(JobStatus.Dead);
    expect(item.history).toBeUndefined();
    const sent = await env.clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: env.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    expect((sent.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}').dedupKey)).not.toContain(dedupKey);
  });
});
