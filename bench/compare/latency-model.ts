/**
 * The latency model: what each AWS call of a worker waits on AWS, drawn per call from a log-normal
 * distribution fitted to a p50 and a p99, and added by SDK middleware in front of the emulator (whose own
 * time, about 0.5-1 ms a call, comes on top for every consumer alike). The same middleware on every
 * consumer's clients. Figures and their sources: bench/README.md, "The latency model". They are
 * assumptions, not measurements of this machine.
 */
import type { InitializeMiddleware, MiddlewareStack } from '@smithy/types';
import type { AwsClients } from '../../shared/aws/clients.ts';

/** A p50 and p99 in ms. */
export interface Percentiles {
  readonly p50: number;
  readonly p99: number;
}

/** Which variant of the model a scenario runs. */
export type LatencyVariant = 'aws' | 'tx2x' | 'tx3x';

/** The operations the model knows. */
export interface LatencyModel {
  readonly variant: LatencyVariant;
  /** PutItem, UpdateItem, DeleteItem. */
  readonly write: Percentiles;
  /** GetItem (strongly consistent; eventually consistent reads are not cheaper in time here). */
  readonly read: Percentiles;
  /** TransactWriteItems of `n` items. */
  transaction(n: number): Percentiles;
  /** Any SQS call (ReceiveMessage with messages, DeleteMessageBatch, ChangeMessageVisibility, SendMessage). */
  readonly sqs: Percentiles;
}

/** Single-item write from a Lambda in the table's region (the published figure). */
const WRITE: Percentiles = { p50: 7.6, p99: 16.2 };
/** 5-item TransactWriteItems (the published figure). */
const TX5: Percentiles = { p50: 25.3, p99: 92.5 };
/** Assumed: a strongly consistent GetItem a little below a write (no replication wait). */
const READ: Percentiles = { p50: 5.0, p99: 12.0 };
/** Assumed: an SQS API call from a Lambda in region. */
const SQS: Percentiles = { p50: 10.0, p99: 30.0 };

/** A transaction of `n` items: 1 item is a write, 5 the published figure, linear between (and beyond). */
function interpolated(n: number): Percentiles {
  const step = (a: number, b: number) => a + ((b - a) * (Math.max(1, n) - 1)) / 4;
  return { p50: step(WRITE.p50, TX5.p50), p99: step(WRITE.p99, TX5.p99) };
}

/** The model of one variant: `aws` as above; `tx2x`/`tx3x` make a 2-item transaction 2x/3x a write. */
export function latencyModel(variant: LatencyVariant): LatencyModel {
  if (variant === 'aws') return { variant, write: WRITE, read: READ, sqs: SQS, transaction: interpolated };
  const factor = variant === 'tx2x' ? 2 : 3;
  // n items scale from the 2-item point as the interpolation does (per extra item, the same slope).
  const slope = { p50: (TX5.p50 - WRITE.p50) / 4, p99: (TX5.p99 - WRITE.p99) / 4 };
  return {
    variant,
    write: WRITE,
    read: READ,
    sqs: SQS,
    transaction: (n) => ({
      p50: factor * WRITE.p50 + slope.p50 * (Math.max(2, n) - 2),
      p99: factor * WRITE.p99 + slope.p99 * (Math.max(2, n) - 2),
    }),
  };
}

/** z of the 99th percentile of a standard normal. */
const Z99 = 2.3263;

/** One draw from the log-normal with this p50 and p99. `random` is uniform in [0, 1). */
export function draw(p: Percentiles, random: () => number = Math.random): number {
  const sigma = Math.log(p.p99 / p.p50) / Z99;
  // Box-Muller.
  const u = 1 - random();
  const v = random();
  const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  return p.p50 * Math.exp(sigma * z);
}

/** The distribution a call draws from, by service and command (`undefined`: not delayed). */
export function callLatency(
  model: LatencyModel,
  service: 'SQS' | 'DynamoDB',
  command: string,
  input: unknown,
): Percentiles | undefined {
  if (service === 'SQS') return model.sqs;
  switch (command) {
    case 'PutItem':
    case 'UpdateItem':
    case 'DeleteItem':
      return model.write;
    case 'GetItem':
      return model.read;
    case 'TransactWriteItems':
      return model.transaction(((input as { TransactItems?: unknown[] }).TransactItems ?? []).length);
    default:
      return undefined;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Makes every call of `clients` take at least its drawn AWS latency (once per `send`, so SDK retries are
 * not drawn again): the emulator's own time counts as part of it, as the service's work does on AWS, so
 * only an emulator slower than the draw (a loaded machine) adds to the model.
 */
export function attachLatency(clients: AwsClients, model: LatencyModel): LatencyTally {
  const tally: LatencyTally = { calls: 0, overDraw: 0, emulatorMs: 0, drawnMs: 0 };
  add(clients.sqs.middlewareStack, 'SQS', model, tally);
  add(clients.ddb.middlewareStack, 'DynamoDB', model, tally);
  return tally;
}

/** How the emulator's own time compared with the draws: why a consumer stays above its floor. */
export interface LatencyTally {
  /** Delayed calls. */
  calls: number;
  /** Calls whose emulator time alone outlasted their draw (the model then adds nothing). */
  overDraw: number;
  /** The emulator's time, summed, ms. */
  emulatorMs: number;
  /** The draws, summed, ms. */
  drawnMs: number;
}

function add<I extends object, O extends object>(
  stack: MiddlewareStack<I, O>,
  service: 'SQS' | 'DynamoDB',
  model: LatencyModel,
  tally: LatencyTally,
): void {
  const middleware: InitializeMiddleware<I, O> = (next, context) => async (args) => {
    const command = String(context.commandName ?? '').replace(/Command$/, '');
    const p = callLatency(model, service, command, args.input);
    if (!p) return next(args);
    const drawn = draw(p);
    const start = performance.now();
    try {
      return await next(args);
    } finally {
      const took = performance.now() - start;
      tally.calls += 1;
      tally.emulatorMs += took;
      tally.drawnMs += drawn;
      if (took > drawn) tally.overDraw += 1;
      else if (drawn - took >= 1) await sleep(drawn - took);
    }
  };
  stack.add(middleware, { step: 'initialize', name: `benchLatency${service}`, override: true });
}

/** The DynamoDB calls one record of a design makes, in order (each waits for the one before). */
export type Design = readonly ('write' | 'read' | 'tx2')[];

/** Per consumer and job shape: the sequential DynamoDB round trips of a unique job, no duplicates. */
export function designOf(consumer: string, shape: 'effect' | 'no-effect'): Design {
  switch (consumer) {
    case 'bare':
      return ['write'];
    case 'powertools':
      // The in-progress put, the job's effect, the completion update.
      return ['write', 'write', 'write'];
    case 'leased':
      // The claim, then the commit: with an effect one 2-item transaction; without, the job's own
      // (external) effect, here a write, and a single-item completion.
      return shape === 'effect' ? ['write', 'tx2'] : ['write', 'write', 'write'];
    default:
      return shape === 'effect' ? ['tx2'] : ['write', 'write'];
  }
}

/**
 * The most jobs per second one worker slot (one Lambda instance: one batch at a time, its records in
 * parallel) can do under the model: `batch` records per batch, a batch lasting as long as its slowest
 * record's sequential calls. Monte Carlo over `samples` batches (deterministic seed).
 */
export function floorJobsPerSlot(model: LatencyModel, design: Design, batch: number, samples = 4000): number {
  let seed = 12345;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const of = (step: Design[number]) =>
    step === 'write' ? model.write : step === 'read' ? model.read : model.transaction(2);
  const records = Math.max(1, Math.round(batch));
  let total = 0;
  for (let i = 0; i < samples; i++) {
    let slowest = 0;
    for (let r = 0; r < records; r++) {
      let t = 0;
      for (const step of design) t += draw(of(step), random);
      slowest = Math.max(slowest, t);
    }
    total += slowest;
  }
  return (records * 1000) / (total / samples);
}
