// The reference pipeline's worker Lambda: a thin composition root. Everything (settings, clients, table
// names) is read from the environment the stack sets, once per execution environment; your own
// handler is the same two lines with your job module.
import ledgerJobs from '../examples/ledger/jobs.ts';
import { createWorkerHandler } from '../shared/worker/handler.ts';

/** Handles one SQS batch; records listed in `batchItemFailures` stay in the queue for a retry. */
export const handler = createWorkerHandler({ jobs: ledgerJobs });
