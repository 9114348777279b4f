// A message of another payload under its job's key (docs/protocol.md, "A duplicate with another payload"):
// the hash a message's checked payload gets, and what a refusal whose item holds another hash does, as
// decisions/payload-hash.ts decides it: dead-letter the message `payload-mismatch` (a `mismatch` event
// on the job it was not), hide it until the job under the key ends (`new-job`), or hand it back to the
// leased claim that starts the key's new life.
import { PayloadMismatchError } from '../../errors.ts';
import type { JobItem } from '../contract/job-item.ts';
import {
  decideMismatch,
  type MismatchDecision,
  PAYLOAD_MISMATCH,
  PayloadMismatch,
  payloadHash,
} from '../decisions/payload-hash.ts';
import type { AnyJobDefinition } from '../model/job-definition.ts';
import { MetricName } from '../observe/metric-names.ts';
import { byType, type Job } from './attempt.ts';
import { letterRefusedJob } from './dead-letterer.ts';
import { noteMismatch } from './history.ts';
import { resendAtReceives } from './limit-bounce.ts';
import type { RecordAction } from './outcome.ts';
import type { Settings } from './settings.ts';

/** The hash of a checked payload as its type defines it; none for a `copy` type (nothing compared). */
export function hashOfPayload(definition: AnyJobDefinition, payload: unknown): string | undefined {
  if (definition.onPayloadMismatch === PayloadMismatch.Copy) return undefined;
  return payloadHash(payload, definition.payloadHash);
}

/** What `existing` (a refusal's item, of the job's type) makes of the job's payload; undefined: no mismatch. */
export function mismatchOf(s: Settings, job: Job, existing: JobItem): MismatchDecision | undefined {
  const policy = s.registry.get(job.envelope.type)?.onPayloadMismatch;
  return decideMismatch(existing, job.payloadHash, policy, s.now(), {
    ...job.message.identity,
    minWaitMs: s.leaseMs,
  });
}

/** Acts on a mismatch `decision` over `existing`, and names the outcome. */
export async function actOnMismatch(
  s: Settings,
  job: Job,
  existing: JobItem,
  decision: MismatchDecision,
): Promise<RecordAction> {
  const { envelope, message, log } = job;
  const hashes = { jobHash: decision.hashes.job, messageHash: decision.hashes.message };
  switch (decision.kind) {
    case 'letter': {
      s.metrics.count(MetricName.PayloadMismatch, 1, byType(envelope));
      log.warn(
        'a message with another payload under a job of its type: dead-lettering it, the job untouched',
        {
          status: existing.status,
          ...hashes,
        },
      );
      await noteMismatch(
        s.store,
        existing,
        {
          e: 'mismatch',
          at: s.now(),
          messageId: message.record.messageId,
          hash: decision.hashes.job,
          got: decision.hashes.message,
        },
        log,
      );
      const error = new PayloadMismatchError(decision.hashes.job, decision.hashes.message);
      return (await letterRefusedJob(s, job, PAYLOAD_MISMATCH, error, { payloadHashes: decision.hashes }))
        .action;
    }
    case 'wait': {
      // onPayloadMismatch 'new-job': the job under the key is not over; this message is its successor,
      // kept until it is. Each time back is a receive and no attempt: near the redrive count a standard
      // queue's message is re-sent (as our own early message is, refusal.ts), else SQS would move it.
      const seconds = Math.ceil(decision.hideForMs / 1000) + 1;
      log.info(
        'a message with another payload waits for the job under its key to end (onPayloadMismatch new-job)',
        {
          status: existing.status,
          hideSeconds: seconds,
          ...hashes,
        },
      );
      s.metrics.count(MetricName.HandBack);
      const resend = !message.fifo && message.receives >= resendAtReceives(false, s.maxReceiveCount);
      if (resend && (await message.resend(seconds))) return 'own-message-early';
      await message.giveBack(seconds, 'waits for the job under its key to end');
      return 'own-message-early';
    }
    case 'new-life':
      // Found by a read or a fast commit: the leased claim (on the message's next receive) renews the key.
      s.metrics.count(MetricName.HandBack);
      await message.giveBack(1, 'a new job of its key: its leased claim renews the key');
      return 'contended';
  }
}
