// JobProducer's send (job-producer.ts) after every job was checked: each job's PRODUCER span, the claim
// check of bodies over the limit (large-payloads.ts), then SQS batches of 10 (send-messages.ts), and
// what became of each job.
import type { SQSClient } from '@aws-sdk/client-sqs';
import { ROOT_CONTEXT, type Span } from '@opentelemetry/api';
import type { JobEnvelope } from '../core/contract/envelope.ts';
import { contextFromTraceparent, leaseqTracer, recordFailure, SpanKind } from '../core/observe/spans.ts';
import type { ClaimCheck } from './large-payloads.ts';
import { type OutgoingMessage, type SendFailure, sendMessages } from './send-messages.ts';

/** A job SQS accepted. */
export interface SentJob {
  readonly dedupKey: string;
  readonly id: string;
  readonly messageId: string;
  readonly traceparent: string;
}

/** A job SQS did not accept after the retries. */
export interface FailedJob {
  readonly dedupKey: string;
  readonly id: string;
  readonly code: string;
  readonly message: string;
  /**
   * What to set when the failure is the sender's setup (no credentials, an endpoint host that does not
   * resolve): sending again without it fails the same way.
   */
  readonly setup?: string;
}

/** What {@link JobProducer.sendBatch} did, job by job. */
export interface SendJobsResult {
  readonly sent: readonly SentJob[];
  readonly failed: readonly FailedJob[];
}

/**
 * The PRODUCER span of a job of `type` (a no-op without an OpenTelemetry SDK), a child of `hook` (the
 * traceparent() option's answer) when it gave one, else of the active context. Undefined when `hook` is a
 * value that is not a version-00 traceparent: it cannot parent a span, and the envelope takes it as it is
 * (the job is refused when it is not a W3C traceparent at all).
 */
export function producerSpan(type: string, hook: string | undefined): Span | undefined {
  const parent = hook === undefined ? undefined : contextFromTraceparent(hook);
  if (parent === ROOT_CONTEXT) return undefined;
  return leaseqTracer().startSpan(
    `leaseq.send ${type}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': 'aws_sqs',
        'messaging.operation.type': 'send',
        'leaseq.job.type': type,
      },
    },
    parent,
  );
}

/** Ends `span` (if any) with `error` recorded on it. */
export function endFailed(span: Span | undefined, error: unknown): void {
  if (span) recordFailure(span, error);
  span?.end();
}

/** Where and how {@link sendEnvelopes} sends. */
export interface SendTarget {
  readonly client: SQSClient;
  readonly queueUrl: string;
  readonly concurrency: number;
  readonly claimCheck: ClaimCheck | undefined;
  readonly maxBodyBytes: number | undefined;
}

/**
 * Sends checked envelopes (job i: `envelopes[i]`, its chosen FIFO group `groups[i]`, its span `spans[i]`,
 * ended with the job's fate) and reports each one's fate; a job whose payload the claim check could not
 * store is failed, not sent. Never throws for what SQS refused.
 */
export async function sendEnvelopes(
  to: SendTarget,
  envelopes: readonly JobEnvelope[],
  groups: readonly (string | undefined)[],
  spans: readonly (Span | undefined)[],
): Promise<SendJobsResult> {
  const sent: SentJob[] = [];
  const failed: FailedJob[] = [];
  const spanOf = new Map(envelopes.map((e, i) => [e, spans[i]]));
  let toSend: readonly (JobEnvelope | undefined)[] = envelopes;
  if (to.claimCheck) {
    const checked = await to.claimCheck.apply(envelopes, to.maxBodyBytes);
    toSend = envelopes.map((e, i) => {
      const outcome = checked[i];
      if (outcome?.status === 'fulfilled') {
        spanOf.set(outcome.value, spans[i]);
        return outcome.value;
      }
      const error = outcome?.reason;
      failed.push({
        dedupKey: e.dedupKey,
        id: e.id,
        code: error instanceof Error ? error.name : 'Error',
        message: `payload not stored in the large-payload bucket: ${error instanceof Error ? error.message : String(error)}`,
      });
      endFailed(spans[i], error);
      return undefined;
    });
  }
  const byMessage = new Map<OutgoingMessage, JobEnvelope>();
  const messages = toSend.flatMap((envelope, i) => {
    if (!envelope) return [];
    const groupId = groups[i];
    const message: OutgoingMessage = {
      body: JSON.stringify(envelope),
      dedupKey: envelope.dedupKey,
      ...(groupId === undefined ? {} : { groupId }),
    };
    byMessage.set(message, envelope);
    return [message];
  });
  await sendMessages(to.client, to.queueUrl, messages, {
    concurrency: to.concurrency,
    onSent: (message, messageId) => {
      const e = byMessage.get(message);
      if (!e) return;
      sent.push({ dedupKey: e.dedupKey, id: e.id, messageId, traceparent: e.trace ?? '' });
      const span = spanOf.get(e);
      span?.setAttribute('messaging.message.id', messageId);
      span?.end();
    },
    onFailed: (message, failure: SendFailure) => {
      const e = byMessage.get(message);
      if (!e) return;
      failed.push({
        dedupKey: e.dedupKey,
        id: e.id,
        code: failure.code,
        message: failure.message,
        ...(failure.setup ? { setup: failure.setup } : {}),
      });
      endFailed(spanOf.get(e), new Error(`${failure.code}: ${failure.message}`));
    },
  });
  return { sent, failed };
}
