import { type SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseEnvelope } from '../../../shared/core/contract/envelope.ts';
import type { AnyJobDefinition } from '../../../shared/core/model/job-definition.ts';
import { defineJob, defineJobs } from '../../../shared/jobs/define-job.ts';
import { InvalidJobError, JobProducer } from '../../../shared/producer/job-producer.ts';

const jobs = defineJobs([
  defineJob({
    type: 'email.send',
    payload: z.object({ to: z.string().email() }),
    run: async () => undefined,
  }),
]);
// Never reached: every case below is refused or built before anything is sent.
const client = new SQSClient({ region: 'us-east-1', endpoint: 'http://127.0.0.1:9' });
// Untyped (checked at run time only): the cases below send what a producer typed by `jobs` would not compile.
const producer = new JobProducer<AnyJobDefinition>({
  queueUrl: 'http://127.0.0.1:9/000000000000/q',
  client,
  jobs,
});

describe('Class: JobProducer', () => {
  describe('Method: envelope', () => {
    it('builds the envelope the worker reads, with a trace context', () => {
      const envelope = producer.envelope({
        type: 'email.send',
        dedupKey: 'welcome-1',
        payload: { to: 'a@b.co' },
      });
      expect(parseEnvelope(JSON.stringify(envelope))).toEqual(envelope);
      expect(envelope).toMatchObject({
        v: 1,
        type: 'email.send',
        dedupKey: 'welcome-1',
        payload: { to: 'a@b.co' },
      });
      expect(envelope.trace).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    });

    it("continues the caller's trace: the job's own, else the producer's hook", () => {
      const trace = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const withHook = new JobProducer({ queueUrl: 'q', client, traceparent: () => trace });
      expect(withHook.envelope({ type: 't', dedupKey: 'k', payload: {} }).trace).toBe(trace);
      const own = '00-11111111111111111111111111111111-2222222222222222-01';
      expect(withHook.envelope({ type: 't', dedupKey: 'k', payload: {}, traceparent: own }).trace).toBe(own);
    });

    it.each([
      ['version ff', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
      ['an all-zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
      ['an all-zero parent id', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
      ['not a traceparent', 'nope'],
    ])("refuses a job's own traceparent with %s before sending (the worker would drop it)", (_what, bad) => {
      expect(() =>
        producer.envelope({ type: 'email.send', dedupKey: 'k', payload: { to: 'a@b.co' }, traceparent: bad }),
      ).toThrow(/job 1 \(k\): traceparent .* is not a W3C traceparent .*nothing was sent/);
      const withHook = new JobProducer({ queueUrl: 'q', client, traceparent: () => bad });
      expect(() => withHook.envelope({ type: 't', dedupKey: 'k', payload: {} })).toThrow(InvalidJobError);
    });

    it('refuses an id the worker would refuse (a line break)', () => {
      expect(() =>
        producer.envelope({ type: 'email.send', dedupKey: 'k', id: 'a\nb', payload: { to: 'a@b.co' } }),
      ).toThrow(/job 1 \(k\): invalid leaseq envelope: id: /);
    });
  });

  describe('body size', () => {
    // SQS takes 1 MiB; the construct's queue 1 MiB less the room a dead letter's reason attributes need.
    it.each([300_000, 900_000])('builds a %i byte payload (under the default limit)', (bytes) => {
      const envelope = producer.envelope({
        type: 'email.send',
        dedupKey: 'k',
        payload: { to: 'a@b.co', pad: 'x'.repeat(bytes) },
      });
      expect(JSON.stringify(envelope).length).toBeGreaterThan(bytes);
    });

    it('refuses a body over its maxBodyBytes with one line naming the size and the limit', async () => {
      const small = new JobProducer<AnyJobDefinition>({
        queueUrl: 'http://127.0.0.1:9/000000000000/q',
        client,
        jobs,
        maxBodyBytes: 10_000,
      });
      const error = await small
        .send({ type: 'email.send', dedupKey: 'k', payload: { to: 'a@b.co', pad: 'x'.repeat(20_000) } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidJobError);
      expect((error as Error).message).toMatch(
        /^job 1 \(k\): body is 20\d{3} bytes, above the 10000 byte limit [^\n]*; nothing was sent$/,
      );
    });

    it("refuses a body over the default limit (the queue's) before sending anything", async () => {
      const error = await producer
        .send({ type: 'email.send', dedupKey: 'big', payload: { to: 'a@b.co', pad: 'x'.repeat(1_100_000) } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidJobError);
      expect((error as Error).message).toMatch(
        /^job 1 \(big\): body is 1100\d{3} bytes, above the 1015808 byte limit [^\n]*; nothing was sent$/,
      );
    });

    it('refuses a maxBodyBytes the queue cannot have', () => {
      for (const bad of [0, 1023, 1_048_577, 1.5]) {
        expect(() => new JobProducer({ queueUrl: 'q', client, maxBodyBytes: bad }), String(bad)).toThrow(
          /maxBodyBytes must be an integer from 1024 to 1048576/,
        );
      }
    });
  });

  describe('Method: send', () => {
    it.each([
      [
        { type: 'email.sned', dedupKey: 'k', payload: { to: 'a@b.co' } },
        /job 1 \(k\): job type email\.sned is not registered; nothing was sent/,
      ],
      [
        { type: 'email.send', dedupKey: 'k', payload: { to: 'nope' } },
        /job 1 \(k\): email\.send payload\.to: .*nothing was sent/,
      ],
      [
        { type: 'email.send', dedupKey: '', payload: { to: 'a@b.co' } },
        /dedupKey must be 1-256 printable characters/,
      ],
    ])('refuses %j before sending anything', async (job, message) => {
      const error = await producer.send(job).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidJobError);
      expect((error as Error).message).toMatch(message);
    });

    it.each([
      ['a space', 'account 7'],
      ['129 characters', 'g'.repeat(129)],
      ['an empty string', ''],
    ])(
      'refuses a chosen FIFO group with %s before sending anything (SQS would refuse it on every resend)',
      async (_what, groupId) => {
        const own = await producer
          .send({ type: 'email.send', dedupKey: 'k', payload: { to: 'a@b.co' }, groupId })
          .catch((e: unknown) => e);
        expect(own).toBeInstanceOf(InvalidJobError);
        expect((own as Error).message).toMatch(
          /job 1 \(k\): group id .* is not a valid SQS MessageGroupId: 1-128 characters of letters, digits and punctuation, no spaces; nothing was sent/,
        );
        const byOption = new JobProducer({
          queueUrl: 'http://127.0.0.1:9/000000000000/q.fifo',
          client,
          groupId: () => groupId,
        });
        await expect(byOption.send({ type: 't', dedupKey: 'k2', payload: {} })).rejects.toThrow(
          /job 1 \(k2\): group id/,
        );
      },
    );
  });

  describe('Method: cancel', () => {
    it('refuses a dedupKey that is not a string (a JS caller) with a clear error, before any write', async () => {
      // Arrange: a document client that records what it is asked to send.
      const sent: unknown[] = [];
      const dynamoDb = { send: async (command: unknown) => sent.push(command) };
      const canceller = new JobProducer({
        queueUrl: 'http://127.0.0.1:9/000000000000/q',
        client,
        jobsTable: 'jobs',
        dynamoDb: dynamoDb as never,
      });

      // Act / Assess: numbers and null stringify to keys the pattern accepts; they must not reach DynamoDB.
      for (const key of [123, null, undefined, { toString: () => 'abc' }]) {
        await expect(canceller.cancel(key as unknown as string)).rejects.toThrow(/not a dedupKey/);
      }
      expect(sent).toEqual([]);
    });
  });

  describe('with an OpenTelemetry SDK registered', () => {
    const CALLER = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const exporter = new InMemorySpanExporter();
    /** An SQS client that accepts every entry and keeps the bodies it was given. */
    const accepting = (bodies: string[]) =>
      ({
        send: async (command: SendMessageBatchCommand) => {
          const entries = command.input.Entries ?? [];
          bodies.push(...entries.map((e) => e.MessageBody ?? ''));
          return { Successful: entries.map((e) => ({ Id: e.Id, MessageId: `m-${e.Id}` })), Failed: [] };
        },
      }) as unknown as SQSClient;

    beforeEach(() => {
      trace.setGlobalTracerProvider(
        new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
      );
    });
    afterEach(() => {
      trace.disable();
      exporter.reset();
    });

    it("continues the traceparent() option's trace: the send span is its child, the envelope names the send span", async () => {
      const bodies: string[] = [];
      const withHook = new JobProducer({
        queueUrl: 'q',
        client: accepting(bodies),
        traceparent: () => CALLER,
      });
      const [sent] = await withHook.send({ type: 't', dedupKey: 'k', payload: {} });
      const [span] = exporter.getFinishedSpans();
      expect(span?.name).toBe('leaseq.send t');
      expect(span?.spanContext().traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
      expect(span?.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
      const expected = `00-4bf92f3577b34da6a3ce929d0e0e4736-${span?.spanContext().spanId}-01`;
      expect(sent?.traceparent).toBe(expected);
      expect(JSON.parse(bodies[0] ?? '{}').trace).toBe(expected);
    });

    it("keeps a job's own traceparent as it is, with no send span", async () => {
      const bodies: string[] = [];
      const withHook = new JobProducer({
        queueUrl: 'q',
        client: accepting(bodies),
        traceparent: () => CALLER,
      });
      const own = '00-11111111111111111111111111111111-2222222222222222-01';
      const [sent] = await withHook.send({ type: 't', dedupKey: 'k', payload: {}, traceparent: own });
      expect(sent?.traceparent).toBe(own);
      expect(exporter.getFinishedSpans()).toEqual([]);
    });

    it('refuses a bad traceparent() value before sending, with no send span left open', async () => {
      const bodies: string[] = [];
      const withHook = new JobProducer({
        queueUrl: 'q',
        client: accepting(bodies),
        traceparent: () => 'nope',
      });
      await expect(withHook.send({ type: 't', dedupKey: 'k', payload: {} })).rejects.toThrow(InvalidJobError);
      expect(bodies).toEqual([]);
    });
  });
});
