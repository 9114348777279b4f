// Security issue, item 2: a producer must not be able to write escape sequences into an operator's
// terminal. Hostile letters go into the DLQ and a hostile job item into the jobs table; `dlq list`,
// `dlq show` and `inspect` run as real subprocesses, and the exact bytes they print are checked.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadLetterAttributes } from '../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { DeadLetter, DeadLetterSummary } from '../../../shared/ops/dlq-letters.ts';
import type { InspectReport } from '../../../shared/ops/inspect.ts';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';
import { asciiJson, C1_AND_BIDI, CLEAR_SCREEN, RETITLE, rawControls } from '../../support/hostile-text.ts';

const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));
const HOSTILE = `${RETITLE}${CLEAR_SCREEN} ${C1_AND_BIDI}`;
/** What SQS lets into a body or attribute raw: no C0 but tab, CR and LF. */
const SQS_HOSTILE = `${C1_AND_BIDI}\r\u009b1A\u009b2K`;

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('clihost');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

interface ByteRun {
  readonly code: number;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
}

/** Runs the CLI like run-cli.ts, but keeps stdout and stderr as the bytes written. */
function leaseqBytes(args: readonly string[]): Promise<ByteRun> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, AWS_ENDPOINT_URL: testEndpoint() };
  delete childEnv.LEASEQ_PREFIX;
  delete childEnv.LEASEQ_DEBUG;
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args, '--prefix', prefix],
      { env: childEnv, timeout: 60_000, encoding: 'buffer', maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error && typeof error.code === 'number' ? error.code : error ? 1 : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

/**
 * The characters of `bytes` a terminal would act on: any C0 byte but newline, DEL, and (decoded as strict
 * UTF-8, so an invalid byte fails the test too) C1, U+2028/2029 and the bidi controls.
 */
function unsafeBytes(bytes: Buffer): string[] {
  const c0 = [...bytes].filter((b) => (b < 0x20 && b !== 0x0a) || b === 0x7f);
  const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  return [...c0.map((b) => `byte 0x${b.toString(16)}`), ...rawControls(text)];
}

/** Runs a command that must succeed; checks every byte on stdout and stderr; returns stdout as text. */
async function safeRun(args: readonly string[]): Promise<string> {
  const run = await leaseqBytes(args);
  expect({ args, stderr: unsafeBytes(run.stderr) }).toEqual({ args, stderr: [] });
  expect(run.code, run.stderr.toString('utf8')).toBe(0);
  expect({ args, stdout: unsafeBytes(run.stdout) }).toEqual({ args, stdout: [] });
  return run.stdout.toString('utf8');
}

async function putLetter(body: string, attributes?: Parameters<typeof deadLetterAttributes>[0]) {
  const out = await env.clients.sqs.send(
    new SendMessageCommand({
      QueueUrl: env.dlqUrl,
      MessageBody: body,
      ...(attributes ? { MessageAttributes: deadLetterAttributes(attributes) } : {}),
    }),
  );
  return out.MessageId ?? '';
}

describe('Command: leaseq dlq list / dlq show / inspect against hostile producer text', () => {
  it('print no ESC, BEL, other C0, DEL, C1 or bidi byte, in text and --json modes', async () => {
    // Prepare: (1) a pure-ASCII JSON body whose dedupKey, type and payload turn into escape sequences
    // once parsed; (2) a body that is not JSON, with raw ESC bytes; (3) a letter whose leaseq error
    // attributes carry escapes, and its job item with the same text in lastError and result.
    const asciiBody = asciiJson({
      v: 1,
      id: 'i-1',
      dedupKey: RETITLE,
      type: CLEAR_SCREEN,
      createdAt: new Date().toISOString(),
      payload: { note: HOSTILE, [C1_AND_BIDI]: RETITLE },
    });
    expect(asciiBody).toMatch(/^[\x20-\x7e]+$/);
    const jsonId = await putLetter(asciiBody);
    // AWS SQS (and this emulator) refuse C0 other than tab, CR and LF in bodies and attributes, so raw
    // ESC/BEL cannot reach the DLQ that way; raw C1 (U+009B is CSI: `\u009b2J` clears the screen on a
    // terminal that honours 8-bit controls), DEL, CR and bidi controls can. An emulator that takes raw
    // ESC gets one more letter to print safely.
    const escId = await putLetter(`not json ${HOSTILE}`).catch((error: Error) => {
      expect(error.message).toMatch(/characters outside the allowed set/);
      return undefined;
    });
    const rawBody = `not json ${SQS_HOSTILE}\nsecond line`;
    const rawId = await putLetter(rawBody);
    const key = uniqueName('hostile');
    const attrId = await putLetter(
      JSON.stringify({ v: 1, id: 'i-3', dedupKey: key, type: 'ledger.credit', payload: {} }),
      {
        reason: 'permanent-error',
        errorClass: `Boom${SQS_HOSTILE}`,
        errorMessage: `failed: ${SQS_HOSTILE}`,
        attempts: 1,
        dedupKey: key,
        worker: `w-1${C1_AND_BIDI}`,
        messageId: 'orig-3',
        type: 'ledger.credit',
      },
    );
    const now = Date.now();
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: {
          dedupKey: key,
          status: JobStatus.Dead,
          owner: `w-1${RETITLE}`,
          leaseUntil: now,
          token: 1,
          attempts: 1,
          version: 3,
          messageId: 'orig-3',
          type: 'ledger.credit',
          lastError: `failed: ${HOSTILE}`,
          lastErrorClass: `Boom${RETITLE}`,
          result: { note: HOSTILE },
          checkpoint: { step: CLEAR_SCREEN, done: [RETITLE], data: { x: C1_AND_BIDI }, at: now },
          createdAt: new Date(now).toISOString(),
          updatedAt: now,
        },
      }),
    );

    // Act + Assess: dlq list, text and JSON.
    const table = await safeRun(['dlq', 'list', '--letters']);
    expect(table).toContain('(unreadable)');
    expect(table).toContain('Boom\\u009b2J\\u007f \\u202eevil\\u202c');
    const listed = JSON.parse(await safeRun(['dlq', 'list', '--letters', '--json'])) as DeadLetterSummary[];
    const byId = new Map(listed.map((l) => [l.messageId, l]));
    expect(listed).toHaveLength(escId ? 4 : 3);
    expect(byId.get(jsonId)).not.toHaveProperty('dedupKey');
    expect(byId.get(jsonId)?.unreadable).toEqual(['dedupKey', 'type']);
    expect(byId.get(attrId)).toMatchObject({ dedupKey: key, errorMessage: `failed: ${SQS_HOSTILE}` });

    // dlq show of each letter, text and JSON: the JSON still carries the exact text, escaped.
    for (const id of [jsonId, rawId, attrId, ...(escId ? [escId] : [])]) {
      const view = await safeRun(['dlq', 'show', id]);
      expect(view).toContain('message id:');
      const letter = JSON.parse(await safeRun(['dlq', 'show', id, '--json'])) as DeadLetter;
      expect(letter.messageId).toBe(id);
    }
    expect(await safeRun(['dlq', 'show', rawId])).toContain(
      'not json \\u009b2J\\u007f \\u202eevil\\u202c \\u2066iso\\u2069 \\u2028sep\\u000d\\u009b1A\\u009b2K\nsecond line',
    );
    const raw = JSON.parse(await safeRun(['dlq', 'show', rawId, '--json'])) as DeadLetter;
    expect(raw.body).toBe(rawBody);

    // inspect, text and JSON.
    const inspected = await safeRun(['inspect', key]);
    expect(inspected).toMatch(/^last error: +Boom\\u001b\]0;pwned\\u0007.*: failed: \\u001b/m);
    const report = JSON.parse(await safeRun(['inspect', key, '--json'])) as InspectReport;
    expect(report.job.lastError).toBe(`failed: ${HOSTILE}`);
  }, 240_000);
});
