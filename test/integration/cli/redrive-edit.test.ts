import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

beforeAll(async () => {
  env = await coreEnv('cliedit');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

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
});
