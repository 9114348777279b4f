// `leaseq/producer`: send jobs to a leaseq queue without writing envelopes by hand.
export {
  type FailedJob,
  InvalidJobError,
  type JobInput,
  JobProducer,
  type JobProducerOptions,
  newTraceparent,
  SendJobsError,
  type SendJobsResult,
  type SentJob,
  sendJobs,
} from './job-producer.ts';
