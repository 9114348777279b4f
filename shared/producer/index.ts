// `leaseq/producer`: send jobs to a leaseq queue without writing envelopes by hand.

// For senders of their own on a FIFO queue: the group leaseq gives a job, and SQS's rule for group ids.
export { groupIdForKey, isValidGroupId } from '../aws/message-group.ts';
export type { CancelResult } from '../core/contract/job-store.ts';
// The untyped producer's job set (`new JobProducer<AnyJobDefinition>({ jobs })`: checked at run time only).
export type { AnyJobDefinition } from '../core/model/job-definition.ts';
// The producer for the local deployment, found as the CLI finds it (the embedded emulator's state file).
export { type LocalJobProducerOptions, localJobProducer } from '../local/local-producer.ts';
export { InvalidJobError, JobProducer, newTraceparent, SendJobsError, sendJobs } from './job-producer.ts';
export type { LargePayloadsOptions } from './large-payloads.ts';
export type {
  CancelOptions,
  JobInput,
  JobInputOf,
  JobProducerOptions,
  JobsOf,
  JobTypeOf,
} from './producer-options.ts';
export type { FailedJob, SendJobsResult, SentJob } from './send-batch.ts';
