import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileBodyPath } from '../../../../shared/core/contract/body-path.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import {
  compilePlainBodies,
  isEnvelopeShaped,
  type PlainBodies,
  readJobBody,
} from '../../../../shared/core/contract/plain-body.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { ConfigError, InvalidEnvelopeError } from '../../../../shared/errors.ts';
import { defineJob, defineJobs } from '../../../../shared/jobs/define-job.ts';
import { editedBody } from '../../../../shared/ops/dlq-redrive-edit.ts';
import { showLetterPayload } from '../../../../shared/ops/payload-view.ts';

const TYPES = ['order.placed', 'refund.issued'];
const known = (type: string) => TYPES.includes(type);
const message = { messageId: '6f1c2e9a-0000-4000-8000-000000000001', sentAt: Date.UTC(2026, 11, 3, 12) };

function read(config: PlainBodies, body: unknown) {
  const plain = compilePlainBodies(config, TYPES);
  return readJobBody(
    typeof body === 'string' ? body : JSON.stringify(body),
    { isKnownType: known, plain },
    message,
  );
}

function refusal(config: PlainBodies, body: unknown): { problem: string; message: string } {
  try {
    read(config, body);
  } catch (error) {
    if (error instanceof InvalidEnvelopeError) return { problem: error.problem, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

const snsOf = (inner: unknown) => ({
  Type: 'Notification',
  MessageId: 'a1b2c3d4-0000-4000-8000-00000000000a',
  TopicArn: 'arn:aws:sns:eu-west-1:111122223333:orders',
  Message: JSON.stringify(inner),
  Timestamp: '2026-12-03T12:00:00.000Z',
});
const eventOf = (detailType: string, detail: unknown) => ({
  version: '0',
  id: 'e7d1a6c0-0000-4000-8000-0000000000e1',
  'detail-type': detailType,
  source: 'shop.orders',
  account: '111122223333',
  time: '2026-12-03T12:00:00Z',
  region: 'eu-west-1',
  resources: [],
  detail,
});
const s3Record = (key: string, sequencer: string) => ({
  eventVersion: '2.1',
  eventSource: 'aws:s3',
  eventName: 'ObjectCreated:Put',
  s3: { bucket: { name: 'uploads' }, object: { key, size: 10, sequencer } },
});

describe('Function: compileBodyPath', () => {
  it('reads fields, quoted fields and indexes as JMESPath does', () => {
    const doc = { order: { id: 'o-1', lines: [{ sku: 'a' }, { sku: 'b' }] }, 'detail-type': 'X', 'a.b': 1 };
    expect(compileBodyPath('order.id').read(doc)).toBe('o-1');
    expect(compileBodyPath('order.lines[1].sku').read(doc)).toBe('b');
    expect(compileBodyPath('order.lines[-1].sku').read(doc)).toBe('b');
    expect(compileBodyPath('"detail-type"').read(doc)).toBe('X');
    expect(compileBodyPath('"a.b"').read(doc)).toBe(1);
    expect(compileBodyPath('[0].id').read([{ id: 7 }])).toBe(7);
  });

  it('selects nothing where JMESPath gives null', () => {
    const doc = { order: { id: null, lines: 'not an array' }, list: [1] };
    for (const path of [
      'order.id',
      'order.missing',
      'order.lines[0]',
      'list.length',
      'list[5]',
      'order.id.x',
    ]) {
      expect(compileBodyPath(path).read(doc), path).toBeUndefined();
    }
    // Own fields only: a prototype's are not the body's.
    expect(compileBodyPath('constructor').read({})).toBeUndefined();
  });

  it('refuses what the subset does not take, naming the place', () => {
    for (const path of [
      '',
      'order.',
      '.id',
      'a..b',
      'order[*].id',
      'length(items)',
      'a || b',
      "'lit'",
      '"open',
    ]) {
      expect(() => compileBodyPath(path), path).toThrow(/expected .* at character \d+/);
    }
  });
});

describe('Function: readJobBody with plain bodies', () => {
  it('reads type, key and payload by paths from a producer own JSON', () => {
    const job = read(
      { type: 'order.placed', key: 'order.id', payload: 'order' },
      { order: { id: 'o-1', total: 3 } },
    );
    expect(job).toEqual({
      v: 1,
      id: message.messageId,
      dedupKey: 'o-1',
      type: 'order.placed',
      createdAt: '2026-12-03T12:00:00.000Z',
      payload: { id: 'o-1', total: 3 },
    });
  });

  it('takes the whole body as payload by default, a number key as its text, and functions', () => {
    const job = read(
      { type: { path: 'kind' }, key: (d) => `n-${(d as { n: number }).n}` },
      { kind: 'refund.issued', n: 4 },
    );
    expect(job).toMatchObject({
      type: 'refund.issued',
      dedupKey: 'n-4',
      payload: { kind: 'refund.issued', n: 4 },
    });
    expect(read({ type: 'order.placed', key: 'id' }, { id: 42 }).dedupKey).toBe('42');
  });

  it('refuses a number key JSON.parse cannot hold exactly, rather than give two orders one key', () => {
    // 2^53 + 1 parses as 2^53: as keys, two orders would be one job and the second dropped as a copy.
    const config: PlainBodies = { type: 'order.placed', key: 'id' };
    expect(read(config, '{"id": 9007199254740991}').dedupKey).toBe('9007199254740991');
    for (const body of ['{"id": 9007199254740993}', '{"id": 0.30000000000000001}', '{"id": 1e21}']) {
      const refused = refusal(config, body);
      expect(refused.problem).toBe('plain-key');
      expect(refused.message).toContain('send it as a string');
    }
  });

  it('keys each type by its own path', () => {
    const config: PlainBodies = {
      type: { path: 'kind' },
      key: { 'order.placed': 'order.id', 'refund.issued': 'refund.id' },
    };
    expect(read(config, { kind: 'refund.issued', refund: { id: 'r-9' } }).dedupKey).toBe('r-9');
    expect(read(config, { kind: 'order.placed', order: { id: 'o-9' } }).dedupKey).toBe('o-9');
  });

  it('still reads an envelope on the same queue by its shape', () => {
    const envelope = makeEnvelope({ id: 'e-1', dedupKey: 'k-1', type: 'order.placed', payload: { a: 1 } });
    const job = read({ type: 'refund.issued', key: 'order.id' }, envelope);
    expect(job).toMatchObject({ dedupKey: 'k-1', type: 'order.placed', payload: { a: 1 } });
    // Of the envelope's shape but broken: a refused envelope, not a plain body.
    expect(refusal({ type: 'order.placed', key: 'dedupKey' }, { ...envelope, dedupKey: '' }).problem).toBe(
      'bad-schema',
    );
    expect(isEnvelopeShaped({ v: 1, order: {} })).toBe(false);
  });

  it('refuses a body it cannot read, with the reason and no body text', () => {
    const config: PlainBodies = { type: 'order.placed', key: 'order.id' };
    expect(refusal(config, '{oops').problem).toBe('not-json');
    const missing = refusal(config, { order: { number: 'secret-1' } });
    expect(missing).toEqual({
      problem: 'plain-key',
      message: 'plain body: the key path order.id selects nothing',
    });
    expect(refusal(config, { order: { id: { nested: true } } }).message).toContain(
      'selects object, expected a string',
    );
    const bad = refusal(config, { order: { id: 'zq\tzq' } });
    expect(bad.problem).toBe('plain-key');
    expect(bad.message).not.toContain('zq');
    expect(refusal(config, { order: { id: 'k'.repeat(257) } }).problem).toBe('plain-key');
    expect(refusal({ type: { path: 'kind' }, key: 'id' }, { id: 'x' })).toEqual({
      problem: 'plain-type',
      message: 'plain body: the type path kind selects nothing, expected a job type',
    });
    expect(refusal({ type: { path: 'kind' }, key: 'id' }, { id: 'x', kind: 'no.such' }).problem).toBe(
      'unknown-type',
    );
    const forged = refusal({ type: { path: 'kind' }, key: 'id' }, { id: 'x', kind: 'a\nforged log line' });
    expect(forged.problem).toBe('plain-type');
    expect(forged.message).not.toContain('forged');
    const threw = refusal(
      {
        type: 'order.placed',
        key: () => {
          throw new Error('no id');
        },
      },
      {},
    );
    expect(threw).toEqual({ problem: 'plain-key', message: 'plain body: the key function threw: no id' });
  });
});

describe('Function: readJobBody with unwrap', () => {
  it('sns: reads the notification Message, keeps the SNS MessageId as id', () => {
    const job = read(
      { unwrap: 'sns', type: 'order.placed', key: 'order.id' },
      snsOf({ order: { id: 'o-2' } }),
    );
    expect(job).toMatchObject({
      id: 'a1b2c3d4-0000-4000-8000-00000000000a',
      dedupKey: 'o-2',
      payload: { order: { id: 'o-2' } },
    });
    expect(
      refusal({ unwrap: 'sns', type: 'order.placed', key: 'order.id' }, { order: { id: 'raw' } }).problem,
    ).toBe('plain-shape');
    expect(
      refusal({ unwrap: 'sns', type: 'order.placed', key: 'x' }, { ...snsOf(1), Message: 'text' }).message,
    ).toContain('Message is not JSON');
  });

  it('eventbridge: reads detail, types by detail-type, keys by the event id unless told', () => {
    const types: Record<string, string> = { OrderPlaced: 'order.placed' };
    const config: PlainBodies = {
      unwrap: 'eventbridge',
      type: (_detail, { wrapper }) => types[(wrapper as { 'detail-type': string })['detail-type']] ?? '',
    };
    const job = read(config, eventOf('OrderPlaced', { orderId: 'o-3' }));
    expect(job).toMatchObject({
      type: 'order.placed',
      dedupKey: 'e7d1a6c0-0000-4000-8000-0000000000e1',
      payload: { orderId: 'o-3' },
    });
    expect(read({ ...config, key: 'orderId' }, eventOf('OrderPlaced', { orderId: 'o-3' })).dedupKey).toBe(
      'o-3',
    );
    expect(refusal(config, eventOf('Other', {})).problem).toBe('plain-type');
    expect(refusal(config, { detail: {} }).problem).toBe('plain-shape');
  });

  it('s3: one record is one job keyed by bucket, object key and sequencer; several records are refused', () => {
    const config: PlainBodies = { unwrap: 's3', type: 'order.placed' };
    const job = read(config, { Records: [s3Record('in/a.csv', '0055AED6DCD90281E5')] });
    expect(job.dedupKey).toBe('s3:uploads/in/a.csv@0055AED6DCD90281E5');
    expect(job.payload).toMatchObject({ eventName: 'ObjectCreated:Put' });
    const two = refusal(config, { Records: [s3Record('a', '1'), s3Record('b', '2')] });
    expect(two).toEqual({
      problem: 'plain-shape',
      message:
        'plain body: the S3 notification holds 2 records; leaseq runs one job per message (unwrap: s3)',
    });
    expect(refusal(config, { Service: 'Amazon S3', Event: 's3:TestEvent' }).message).toContain('test event');
  });

  it('s3: an object key too long for a dedup key is keyed by its hash, one job per object event', () => {
    // S3 takes object keys up to 1024 bytes (URL-encoded in the notification): a valid upload of a long
    // name must still be a job, and two such objects must not share a key.
    const config: PlainBodies = { unwrap: 's3', type: 'order.placed' };
    const long = (tail: string) => `${'deep/'.repeat(60)}${tail}.csv`;
    const a = read(config, { Records: [s3Record(long('a'), '0055AED6DCD90281E5')] });
    const b = read(config, { Records: [s3Record(long('b'), '0055AED6DCD90281E5')] });
    const again = read(config, { Records: [s3Record(long('a'), '0055AED6DCD90281E5')] });
    expect(a.dedupKey).toMatch(/^s3:uploads\/#[A-Za-z0-9_-]{43}@0055AED6DCD90281E5$/);
    expect(b.dedupKey).not.toBe(a.dedupKey);
    expect(again.dedupKey).toBe(a.dedupKey);
  });
});

describe('Function: readJobBody with a list of carriers', () => {
  it('takes each body off by the carrier whose shape it has, and refuses a body of none', () => {
    const config: PlainBodies = {
      unwrap: ['sns', 'eventbridge'],
      type: 'order.placed',
      key: (d, { carrier }) => `${carrier}:${(d as { orderId: string }).orderId}`,
    };
    expect(read(config, snsOf({ orderId: 'o-1' })).dedupKey).toBe('sns:o-1');
    expect(read(config, eventOf('OrderPlaced', { orderId: 'o-1' })).dedupKey).toBe('eventbridge:o-1');
    expect(refusal(config, { orderId: 'o-1' })).toEqual({
      problem: 'plain-shape',
      message:
        'plain body: expected an SNS notification {Type: "Notification", Message} or an EventBridge event {source, detail-type, detail} (unwrap: sns, eventbridge)',
    });
  });
});

describe('Function: defineJobs with plainBodies', () => {
  const job = (type: string) => defineJob({ type, payload: z.object({}).loose(), async run() {} });

  it('checks the config when the set is built', () => {
    const jobs = [job('order.placed')];
    expect(() => defineJobs(jobs, { plainBodies: { type: 'nope', key: 'id' } })).toThrow(ConfigError);
    expect(() => defineJobs(jobs, { plainBodies: { type: 'order.placed' } })).toThrow(/key is required/);
    expect(() => defineJobs(jobs, { plainBodies: { type: 'order.placed', key: 'a[*]' } })).toThrow(
      'plainBodies.key: path "a[*]": expected',
    );
    expect(() =>
      defineJobs(jobs, { plainBodies: { type: 'order.placed', key: 'id', unwrap: 'kinesis' as 'sns' } }),
    ).toThrow(/unwrap must be one of sns, eventbridge, s3/);
    expect(() => defineJobs(jobs, { plainBodies: { type: { path: 'k' }, key: { other: 'id' } } })).toThrow(
      /names "other", not a job type/,
    );
    expect(defineJobs(jobs, { plainBodies: { type: 'order.placed', key: 'id' } }).plainBodies).toBeDefined();
    expect(defineJobs(jobs).plainBodies).toBeUndefined();
  });

  it('keeps plainBodies through a registry of another installed copy of leaseq', () => {
    // Prepare: what JobRegistry.from sees of a registry made by another copy: its methods and fields only.
    const own = defineJobs([job('order.placed')], { plainBodies: { type: 'order.placed', key: 'order.id' } });
    const foreign = {
      types: () => own.types(),
      get: (t: string) => own.get(t),
      plainBodies: own.plainBodies,
    };

    // Act
    const registry = JobRegistry.from(foreign);

    // Assess: the copy reads plain bodies by the same rules.
    const plain = registry.plainBodies;
    expect(plain).toBeDefined();
    const body = JSON.stringify({ order: { id: 'o-7' } });
    expect(readJobBody(body, { isKnownType: (t) => registry.has(t), plain }, message).dedupKey).toBe('o-7');
  });
});

describe('Function: editedBody of a plain letter', () => {
  it('sends an envelope of the letter key and type with the operator payload', () => {
    const body = editedBody(JSON.stringify({ order: { id: 'o-1' } }), { fixed: true }, undefined, {
      dedupKey: 'o-1',
      type: 'order.placed',
      messageId: message.messageId,
    });
    expect(JSON.parse(body)).toMatchObject({
      v: 1,
      id: message.messageId,
      dedupKey: 'o-1',
      type: 'order.placed',
      payload: { fixed: true },
    });
    // Without the key and type in its attributes, a plain letter cannot be edited.
    expect(() => editedBody('{"order":{}}', {}, undefined, {})).toThrow(/name no dedup key and type/);
  });
});

describe('Function: showLetterPayload of a plain letter', () => {
  it('shows the payload the worker read from the body, given the job module plain bodies', async () => {
    const plain = compilePlainBodies({ type: 'order.placed', key: 'order.id', payload: 'order' }, TYPES);
    const body = JSON.stringify({ event: 'OrderPlaced', order: { id: 'o-1', total: 3 } });

    const shown = await showLetterPayload(body, { plain });

    expect(shown).toMatchObject({ source: 'inline', value: { id: 'o-1', total: 3 } });
    // Without them the page says the body is not an envelope, as before.
    expect(await showLetterPayload(body)).toHaveProperty('problem');
  });
});
