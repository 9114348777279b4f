import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  ENVELOPE_ID,
  ENVELOPE_SHAPE,
  ENVELOPE_VERSION,
  isValidTraceparent,
  makeEnvelope,
  parseEnvelope,
} from '../../../../shared/core/contract/envelope.ts';
import { InvalidEnvelopeError } from '../../../../shared/errors.ts';

// The envelope's checks were a zod schema; they are plain code now (no schema library in the worker's
// cold start). The schema stays here as the reference: every body below must get the same envelope or
// the same dead-letter reason from both.
const reference = z
  .object({
    v: z.literal(ENVELOPE_VERSION),
    id: z
      .string()
      .regex(ENVELOPE_ID, 'id must be 1-128 printable ASCII characters, no space at the start or end'),
    dedupKey: z
      .string()
      .regex(
        /^[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?$/,
        'dedupKey must be 1-256 printable characters',
      ),
    type: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[A-Za-z0-9._:-]{1,128}$/, 'type must be letters, digits and . _ : -'),
    createdAt: z.iso.datetime({ offset: true }),
    payload: z.unknown().optional(),
    payloadRef: z
      .object({
        bucket: z
          .string()
          .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'payloadRef.bucket must be an S3 bucket name'),
        key: z.string().min(1).max(1024),
        bytes: z.number().int().nonnegative(),
        sha256: z.string().regex(/^[0-9a-f]{64}$/, 'payloadRef.sha256 must be 64 lower-case hex digits'),
      })
      .optional(),
  })
  .refine((e) => 'payload' in e !== (e.payloadRef !== undefined), {
    message: 'an envelope carries payload, or payloadRef in its place (a claim check), not both or neither',
    path: ['payload'],
  });

/** What parseEnvelope gave before: the schema's first issue, its path and message. */
function referenceOutcome(body: string): string {
  const raw = JSON.parse(body) as Record<string, unknown>;
  const parsed = reference.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const where = first?.path.length ? first.path.join('.') : 'body';
    return `bad-schema: invalid leaseq envelope: ${where}: ${first?.message ?? 'invalid'}; expected ${ENVELOPE_SHAPE}`;
  }
  return JSON.stringify(isValidTraceparent(raw.trace) ? { ...parsed.data, trace: raw.trace } : parsed.data);
}

function outcome(body: string): string {
  try {
    return JSON.stringify(parseEnvelope(body));
  } catch (error) {
    if (!(error instanceof InvalidEnvelopeError)) throw error;
    return `${error.problem}: ${error.message}`;
  }
}

const SHA = 'a'.repeat(64);
const REF = { bucket: 'big-bodies', key: 'k/1', bytes: 10, sha256: SHA };
const VALUES: unknown[] = [
  undefined,
  null,
  0,
  -1,
  1.5,
  1e21,
  -1e21,
  -(2 ** 53),
  2 ** 53,
  2 ** 53 - 1,
  true,
  [],
  ['a'],
  {},
  { a: 1 },
  '',
  ' ',
  'a',
  'a b',
  ' a',
  'a ',
  'x'.repeat(128),
  'x'.repeat(129),
  'x'.repeat(256),
  'x'.repeat(257),
  'x'.repeat(1024),
  'x'.repeat(1025),
  'ledger.credit',
  'a/b',
  'tab\there',
  'é',
  // Lengths count characters (code points), not UTF-16 units: 65 and 600 characters of two units each.
  '\u{1F642}'.repeat(65),
  '\u{1F642}'.repeat(600),
  'x'.repeat(1023) + '\u{1F642}',
  '\u{1F642}'.repeat(1025),
  'big-bodies',
  'Big-Bodies',
  'ab',
  SHA,
  SHA.toUpperCase(),
  '2026-12-02T10:00:00Z',
];
const DATES = [
  '2026-12-02T10:00:00Z',
  '2026-12-02T10:00:00.123Z',
  '2026-12-02T10:00:00.1234567+05:30',
  '2026-12-02T10:00:00-23:59',
  '2026-12-02T10:00:00+24:00',
  '2026-12-02T10:00:00+05:60',
  '2026-12-02T10:00:00+0530',
  '2026-12-02T10:00Z',
  '2026-12-02T10:00:00',
  '2026-12-02T10:00:00z',
  '2026-12-02t10:00:00Z',
  '2026-12-02 10:00:00Z',
  '2026-12-02T24:00:00Z',
  '2026-12-02T23:59:59Z',
  '2026-12-02T23:59:60Z',
  '2026-12-02T23:60:00Z',
  '2026-12-02T10:00:00.Z',
  '2026-00-10T10:00:00Z',
  '2026-13-10T10:00:00Z',
  '2026-01-00T10:00:00Z',
  '2026-01-31T10:00:00Z',
  '2026-01-32T10:00:00Z',
  '2026-04-30T10:00:00Z',
  '2026-04-31T10:00:00Z',
  '2026-11-31T10:00:00Z',
  '2026-12-31T10:00:00Z',
  '2026-02-28T10:00:00Z',
  '2026-02-29T10:00:00Z',
  '2024-02-29T10:00:00Z',
  '2100-02-29T10:00:00Z',
  '2000-02-29T10:00:00Z',
  '1900-02-29T10:00:00Z',
  '0000-02-29T10:00:00Z',
  '0004-02-29T10:00:00Z',
  '1996-02-29T10:00:00Z',
  '1800-02-29T10:00:00Z',
  '1600-02-29T10:00:00Z',
  '2026-02-30T10:00:00Z',
  '12026-12-02T10:00:00Z',
  '226-12-02T10:00:00Z',
  '2026-1-02T10:00:00Z',
  '2026-12-02T10:00:00Z\n',
  '２０２６-12-02T10:00:00Z',
  'yesterday',
  '',
];

function bodies(): string[] {
  const base = makeEnvelope({ id: 'e-1', dedupKey: 'k-1', type: 'ledger.credit', payload: { n: 1 } });
  const out: unknown[] = [base];
  const { payload: _p, ...withoutPayload } = base;
  for (const field of ['id', 'dedupKey', 'type', 'createdAt', 'payload', 'payloadRef'] as const) {
    for (const value of VALUES) {
      out.push({ ...base, [field]: value });
      out.push({ ...withoutPayload, payloadRef: REF, [field]: value });
    }
    const { [field]: _gone, ...without } = base as unknown as Record<string, unknown>;
    out.push(without);
  }
  for (const createdAt of DATES) out.push({ ...base, createdAt });
  for (const field of ['bucket', 'key', 'bytes', 'sha256'] as const) {
    for (const value of VALUES) out.push({ ...withoutPayload, payloadRef: { ...REF, [field]: value } });
    const { [field]: _gone, ...without } = REF;
    out.push({ ...withoutPayload, payloadRef: without });
  }
  out.push({ ...withoutPayload, payloadRef: { ...REF, extra: 1 }, extra: 2 });
  out.push({ ...base, trace: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', other: 'x' });
  // Two fields wrong at once: the first in envelope order names the reason.
  for (const a of VALUES.slice(0, 12)) {
    for (const b of VALUES.slice(0, 12)) {
      out.push({ ...base, type: a, createdAt: b });
      out.push({ ...base, id: a, payloadRef: b });
      out.push({ ...withoutPayload, dedupKey: a, payloadRef: { ...REF, bytes: b } });
    }
  }
  // Keys JSON.parse makes own properties that an object literal cannot: __proto__, and a repeated key.
  const raw = [
    '{"v":1,"id":"a","dedupKey":"k","type":"t","createdAt":"2026-12-02T10:00:00Z","__proto__":{"payload":1}}',
    '{"v":1,"id":"a","dedupKey":"k","type":"t","createdAt":"2026-12-02T10:00:00Z","__proto__":null,"payload":1}',
    '{"v":1,"id":"a","dedupKey":"k","type":"t","createdAt":"2026-12-02T10:00:00Z","payload":1,"payload":2}',
    `{"v":1,"id":"a","dedupKey":"k","type":"t","createdAt":"2026-12-02T10:00:00Z","payloadRef":{"__proto__":${JSON.stringify(REF)}}}`,
  ];
  return [...out.map((b) => JSON.stringify(b)), ...raw];
}

describe('Function: parseEnvelope (against the zod schema it replaced)', () => {
  it('gives every body the same envelope, or the same dead-letter reason, as the schema did', () => {
    const all = bodies();
    expect(all.length).toBeGreaterThan(800);
    const differ = all.filter((body) => outcome(body) !== referenceOutcome(body));
    expect(differ.map((body) => ({ body, now: outcome(body), was: referenceOutcome(body) }))).toEqual([]);
  });
});
