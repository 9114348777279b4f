// A purge of one letter touches that letter (the redrive's skips say "this letter stays (purge it)"): the
// DLQ's other letters, each the only record of its dead job's message, stay.
import { randomUUID } from 'node:crypto';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import { type CoreEnv, coreEnv, receiveAll } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { leaseq, leaseqJson } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('purgeone');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

/** A letter of a job under `key` put into the DLQ; its message id. */
async function letter(key: string): Promise<string> {
  const body = JSON.stringify(
    makeEnvelope({ id: randomUUID(), dedupKey: key, type: 'test.purge', payload: { key } }),
  );
  const out = await env.clients.sqs.send(new SendMessageCommand({ QueueUrl: env.dlqUrl, MessageBody: body }));
  return out.MessageId ?? '';
}

describe('Command: leaseq dlq purge --message-id', () => {
  it('deletes the named letter only, and says which named letter it did not find', async () => {
    // Prepare: a stale letter and a letter of another dead job.
    const stale = await letter(uniqueName('stale'));
    const other = await letter(uniqueName('other'));

    // Act
    const report = await leaseqJson<{ deleted: number; notFound?: string[] }>([
      'dlq',
      'purge',
      '--message-id',
      stale,
      '--prefix',
      prefix,
      '--yes',
    ]);

    // Assess: the other letter stays; a second purge of the same id finds nothing and says so.
    expect(report).toMatchObject({ deleted: 1 });
    const left = (await receiveAll(env, env.dlqUrl, 0)).map((m) => m.MessageId);
    expect(left).toContain(other);
    expect(left).not.toContain(stale);
    const again = await leaseq(['dlq', 'purge', '--message-id', stale, '--prefix', prefix, '--yes']);
    expect(again.stdout).toContain(`deleted 0 letters; not found: ${stale}`);
  }, 60_000);
});
