// Entry point of one local worker process (spawned by WorkerPool). It builds the handler the Lambda
// builds (createWorkerHandler with the job module named by LEASEQ_JOBS_MODULE), runs it under the local
// event-source loop, and reports its counters to the parent over IPC. SIGTERM/SIGINT drain: no new polls, the batch in flight finishes or is given back.
import { awsConfigFromEnv, createAwsClients, destroyAwsClients } from '../aws/clients.ts';
import { visibilityForLease } from '../core/decisions/lease-timing.ts';
import { InMemoryMetrics } from '../core/observe/metrics.ts';
import { ConfigError } from '../errors.ts';
import { JOBS_MODULE_ENV, loadJobModule } from '../jobs/job-module.ts';
import { DEFAULT_WORKER_TIMEOUT_SECONDS } from '../resources.ts';
import { workerConfigFromEnv } from '../worker/config.ts';
import { createWorkerHandler } from '../worker/handler.ts';
import { queueArnFromUrl } from './sqs-records.ts';
import { INVOCATION_TIMEOUT_ENV, type WorkerMessage } from './worker-ipc.ts';
import { runWorkerLoop } from './worker-loop.ts';

async function main(): Promise<void> {
  const config = workerConfigFromEnv();
  const worker = config.workerId ?? `local-${process.pid}`;
  const stop = new AbortController();
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => stop.abort());
  process.on('disconnect', () => stop.abort());

  const clients = createAwsClients(awsConfigFromEnv());
  const region = await clients.sqs.config.region();
  // From the URL, not a GetQueueAttributes call: a worker started during a store or network fault must
  // not die before its first poll (the pool would restart it in a tight loop).
  const queueArn = queueArnFromUrl(config.queueUrl, region);
  const modulePath = process.env[JOBS_MODULE_ENV];
  if (!modulePath) throw new ConfigError(`${JOBS_MODULE_ENV} is not set: the worker has no jobs to run`);
  const jobs = await loadJobModule(modulePath);
  const metrics = new InMemoryMetrics();
  const handler = createWorkerHandler({ jobs, config, clients, worker, metrics });
  const send = (message: WorkerMessage) => {
    if (process.connected) process.send?.(message);
  };
  const report = () => send({ type: 'metrics', worker, ...metrics.snapshot() });
  const timer = setInterval(report, 250);
  send({ type: 'ready', worker });

  await runWorkerLoop({
    sqs: clients.sqs,
    queueUrl: config.queueUrl,
    queueArn,
    region,
    handler,
    functionName: worker,
    timeoutMs: Number(process.env[INVOCATION_TIMEOUT_ENV] ?? DEFAULT_WORKER_TIMEOUT_SECONDS * 1000),
    // No more records than run at once: a record received without a lane may be handed back unstarted
    // when the deadline nears, a receive that is no attempt (issue 23). The Lambda event source cannot be
    // told so; the construct raises its redrive count instead.
    batchSize: Math.min(Number(process.env.LEASEQ_BATCH_SIZE ?? 10), config.concurrency),
    receiveVisibilitySeconds: visibilityForLease(config.leaseMs),
    signal: stop.signal,
    onError: (error) =>
      send({ type: 'error', worker, message: error instanceof Error ? error.message : String(error) }),
  });
  clearInterval(timer);
  report();
  destroyAwsClients(clients);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`worker failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
