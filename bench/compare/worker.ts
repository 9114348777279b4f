// Entry point of one benchmark worker process (forked by fleet.ts). It serves one run after another;
// in each, one poller receives a batch of up to 10, runs the consumer's batch handler (its records in
// parallel) under a Lambda-shaped context with a real deadline, and deletes what succeeded
// (shared/runner/poll.ts, as the local runner does). A handler that throws leaves its whole batch in the
// queue, as Lambda's event source mapping does. Every batch is reported to the parent over IPC.
import type { SQSRecord } from 'aws-lambda';
import { createAwsClients, destroyAwsClients } from '../../shared/aws/clients.ts';
import { RequestCounter } from '../../shared/aws/request-counter.ts';
import { localContext } from '../../shared/runner/local-context.ts';
import { pollOnce } from '../../shared/runner/poll.ts';
import { CapacityMeter } from './capacity.ts';
import { createConsumer } from './consumers.ts';
import { attachLatency, latencyModel } from './latency-model.ts';
import { EffectProbe } from './probe.ts';
import {
  type RunAssignment,
  WORKER_ID_ENV,
  type WorkerCommand,
  type WorkerReport,
  type WorkerState,
} from './protocol.ts';

const id = process.env[WORKER_ID_ENV] ?? `w-${process.pid}`;

function send(report: WorkerReport): Promise<void> {
  return new Promise((resolve) => {
    if (!process.connected || !process.send) return resolve();
    process.send(report, () => resolve());
  });
}

/** Serves one run until `stop` aborts: fresh clients, meters and consumer, dropped at the end. */
async function serve(run: RunAssignment, stop: AbortSignal): Promise<void> {
  const clients = createAwsClients({ endpoint: run.endpoint, region: run.region });
  const requests = new RequestCounter().attach(clients);
  const capacity = new CapacityMeter().attach(clients);
  // Every call waits its AWS latency before it is sent (the effect probe's time includes it).
  const latency = run.latency ? attachLatency(clients, latencyModel(run.latency)) : undefined;
  const counts = {
    batches: 0,
    received: 0,
    failed: 0,
    batchErrors: 0,
    pollErrors: 0,
    deleteFailed: 0,
    handlerMs: 0,
    billedMs: 0,
  };
  let stats = (): Record<string, number> => ({});
  const state = (): WorkerState => ({
    requests: requests.snapshot(),
    capacity: capacity.snapshot(),
    stats: stats(),
    ...counts,
    ...(latency ? { latency: { ...latency } } : {}),
  });
  const probe = new EffectProbe({
    countersTable: run.names.countersTable,
    killKeys: run.killKeys,
    markerDir: run.markerDir,
    worker: id,
    lastWords: state,
  }).attach(clients);
  const consumer = createConsumer(
    run.consumer,
    { clients, names: run.names, worker: id },
    run.shape,
    run.limits,
  );
  stats = () => consumer.stats();
  await send({ type: 'started', id, run: run.run });

  while (!stop.aborted) {
    let records: SQSRecord[] = [];
    const failedIds = new Set<string>();
    let finished: string[] = [];
    let finishedKeys: (string | undefined)[] = [];
    try {
      const result = await pollOnce({
        sqs: clients.sqs,
        queueUrl: run.names.queueUrl,
        queueArn: run.queueArn,
        region: run.region,
        maxMessages: 10,
        waitSeconds: 1,
        visibilitySeconds: run.visibilitySeconds,
        abortSignal: stop,
        handle: async (batch) => {
          records = batch;
          // The handler's own time is what Lambda bills (the event source's receive and delete are not).
          const t0 = performance.now();
          try {
            const response = await consumer.handle(batch, localContext(id, run.timeoutMs));
            for (const failure of response.batchItemFailures) failedIds.add(failure.itemIdentifier);
            return response;
          } finally {
            const ms = performance.now() - t0;
            counts.handlerMs += ms;
            counts.billedMs += Math.ceil(ms);
          }
        },
      });
      if (result.received === 0) continue;
      counts.batches += 1;
      counts.received += result.received;
      counts.failed += result.failed;
      counts.deleteFailed += result.deleteFailed;
      const deleted = records.filter((r) => !failedIds.has(r.messageId));
      finished = deleted.map((r) => r.messageId);
      finishedKeys = deleted.map((r) => keyOf(r.body));
    } catch {
      if (records.length === 0) {
        if (stop.aborted) break;
        counts.pollErrors += 1;
        await new Promise((resolve) => setTimeout(resolve, 250));
        continue;
      }
      counts.batches += 1;
      counts.received += records.length;
      counts.batchErrors += 1;
    }
    void send({
      type: 'batch',
      id,
      run: run.run,
      finished,
      finishedKeys,
      effects: probe.drain(),
      state: state(),
    });
  }
  await send({ type: 'done', id, run: run.run, finished: [], effects: probe.drain(), state: state() });
  destroyAwsClients(clients);
}

/** The job key of a message body; undefined when it has none (never fails a batch). */
function keyOf(body: string): string | undefined {
  try {
    const key = (JSON.parse(body) as { dedupKey?: unknown }).dedupKey;
    return typeof key === 'string' ? key : undefined;
  } catch {
    return undefined;
  }
}

let current: { run: string; stop: AbortController; served: Promise<void> } | undefined;

process.on('message', (command: WorkerCommand) => {
  if (command.type === 'run') {
    const stop = new AbortController();
    const previous = current?.served ?? Promise.resolve();
    const served = previous.then(() =>
      serve(command.assignment, stop.signal).catch((error: unknown) => {
        process.stderr.write(
          `bench worker: run failed: ${error instanceof Error ? error.message : String(error)}\n`,
        );
        process.exit(1);
      }),
    );
    current = { run: command.assignment.run, stop, served };
  } else if (command.type === 'stop' && current?.run === command.run) {
    current.stop.abort();
  }
});
// The parent going away ends the process (after the batch in flight would only leak it).
process.on('disconnect', () => process.exit(0));
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    current?.stop.abort();
    void (current?.served ?? Promise.resolve()).then(() => process.exit(0));
  });
}
void send({ type: 'ready', id });
