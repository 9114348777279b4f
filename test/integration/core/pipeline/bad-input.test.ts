import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  queueCounts,
  receiveAll,
  sendRaw,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('badinput');
});
afterAll(() => env?.close());

// A body limit of this worker below the default (1 MiB less the 32 KiB letter reserve), to test the edge cheaply.
const MAX_BODY = 64 * 1024;

type Expected = `invalid-${string}` | 'completed';

describe('Bad input corpus', () => {
  it('dead-letters every kind of bad body with its reason, runs the valid edge cases, and keeps going', async () => {
    // Prepare: one valid envelope to mutate, and what each body must end as.
    const account = uniqueName('acct');
    const valid = (over: Record<string, unknown> = {}, payload: unknown = { account, amount: 1 }) =>
      JSON.stringify({
        ...makeEnvelope({ id: uniqueName('m'), dedupKey: uniqueName('k'), type: 'test.credit', payload }),
        ...over,
      });
    const nested = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    const corpus: [string, string, Expected][] = [
      ['not JSON', '{oops', 'invalid-not-json'],
      ['only whitespace', '   ', 'invalid-not-json'],
      ['a JSON number', '42', 'invalid-bad-schema'],
      ['a JSON array', '[1,2]', 'invalid-bad-schema'],
      ['JSON null', 'null', 'invalid-bad-schema'],
      ['an object that is not an envelope', JSON.stringify({ orderId: 1 }), 'invalid-bad-schema'],
      ['an unknown version', valid({ v: 2 }), 'invalid-unknown-version'],
      ['the version as a string', valid({ v: '1' }), 'invalid-unknown-version'],
      ['no dedupKey', valid({ dedupKey: undefined }), 'invalid-bad-schema'],
      ['an empty dedupKey', valid({ dedupKey: '' }), 'invalid-bad-schema'],
      ['a 257-character dedupKey', valid({ dedupKey: 'k'.repeat(257) }), 'invalid-bad-schema'],
      ['a dedupKey that is a number', valid({ dedupKey: 123 }), 'invalid-bad-schema'],
      ['a dedupKey with a tab', valid({ dedupKey: 'a\tb' }), 'invalid-bad-schema'],
      ['createdAt without a zone', valid({ createdAt: '2026-12-01T10:00:00' }), 'invalid-bad-schema'],
      ['an id with a line break', valid({ id: 'm-1\nforged log line' }), 'invalid-bad-schema'],
      ['an id of 129 characters', valid({ id: 'i'.repeat(129) }), 'invalid-bad-schema'],
      ['an unknown type', valid({ type: 'no.such.job' }), 'invalid-unknown-type'],
      ['no payload (a required envelope field)', valid({ payload: undefined }), 'invalid-bad-schema'],
      ['a payload of the wrong types', valid({}, { account, amount: '7' }), 'invalid-bad-payload'],
      ['a fractional amount', valid({}, { account, amount: 1.5 }), 'invalid-bad-payload'],
      // Spliced in as text: JSON.stringify itself cannot go 5000 levels deep.
      ['a deeply nested payload', valid({}, 'NESTED').replace('"NESTED"', nested), 'invalid-bad-payload'],
      [
        'a body over the limit',
        valid({}, { account, amount: 1, pad: 'x'.repeat(MAX_BODY) }),
        'invalid-too-large',
      ],
      // Valid edge cases (decided and documented in docs/envelope.md): unknown top-level fields are
      // ignored (forward compatible), a bad trace is dropped, and a body just under the limit runs.
      ['unknown top-level fields', valid({ extra: { any: 'thing' } }), 'completed'],
      // A malformed trace is dropped, the job runs (version ff and an all-zero trace id are invalid).
      ['a malformed trace', valid({ trace: 'not-a-traceparent' }), 'completed'],
      [
        'a version-ff trace',
        valid({ trace: 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }),
        'completed',
      ],
      [
        'an all-zero trace id',
        valid({ trace: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' }),
        'completed',
      ],
      [
        'a body just under the limit',
        valid({}, { account, amount: 1, pad: 'x'.repeat(MAX_BODY - 400) }),
        'completed',
      ],
    ];
    expect(corpus.length).toBeGreaterThanOrEqual(20);
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry, { maxBodyBytes: MAX_BODY });
    const ids = new Map<string, [string, Expected]>();
    for (const [name, body, expected] of corpus) ids.set(await sendRaw(env, body), [name, expected]);

    // Act: the worker drains the queue (bad bodies share batches with the good ones).
    const drained = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight + c.delayed === 0;
      },
      60_000,
      0,
    );

    // Assess: each bad body is in the DLQ, unchanged, with the reason its kind must get.
    expect(drained).toBe(true);
    const letters = await receiveAll(env, env.dlqUrl, 30, 2);
    const got = new Map(
      letters.map((m) => {
        const attributes = readDeadLetterAttributes(m.MessageAttributes);
        return [attributes.originalMessageId ?? '', { reason: attributes.reason, body: m.Body }] as const;
      }),
    );
    for (const [id, [name, expected]] of ids) {
      if (expected === 'completed') {
        expect(got.has(id), `${name} must not be dead-lettered`).toBe(false);
      } else {
        expect(got.get(id)?.reason, name).toBe(expected);
      }
    }
    const bodies = new Map(corpus.map(([, body]) => [body, true]));
    for (const { body } of got.values()) expect(bodies.has(body ?? '')).toBe(true);
    // The five valid edge cases ran (1 each), and the worker is still taking jobs.
    expect((await getBalance(env, account))?.balance).toBe(5);
    expect(worker.metrics.get('JobSucceeded')).toBe(5);
    const next = uniqueName('after');
    await sendRaw(
      env,
      JSON.stringify(
        makeEnvelope({ id: 'n', dedupKey: next, type: 'test.credit', payload: { account, amount: 3 } }),
      ),
    );
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect((await worker.store.get(next))?.status).toBe(JobStatus.Completed);
  }, 180_000);
});
