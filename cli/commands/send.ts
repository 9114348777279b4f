import { readFileSync } from 'node:fs';
import { SingleBar } from 'cli-progress';
import { type Command, InvalidArgumentError } from 'commander';
import {
  GENERATED_TYPES,
  type GeneratedType,
  generateJobs,
  newRunId,
  type OutgoingMessage,
} from '../../examples/ledger/generate.ts';
import { groupIdProblem } from '../../shared/aws/message-group.ts';
import { isFifoQueue } from '../../shared/aws/queue-url.ts';
import {
  checkMaxBodyBytes,
  DEFAULT_MAX_BODY_BYTES,
  type JobEnvelope,
  SQS_MAX_MESSAGE_BYTES,
  SQS_MIN_MESSAGE_BYTES,
} from '../../shared/core/contract/envelope.ts';
import type { JobRegistry } from '../../shared/core/model/registry.ts';
import { payloadProblem } from '../../shared/core/model/standard-schema.ts';
import { parseJobFile } from '../../shared/ops/job-file.ts';
import { type SendProgress, type SendReport, sendMessages } from '../../shared/producer/send-messages.ts';
import { WORKER_ENV } from '../../shared/resources.ts';
import {
  fractionArg,
  integerArg,
  listArg,
  note,
  print,
  printJson,
  rateArg,
  renderFields,
} from '../format.ts';
import { jobModuleOption, loadCliJobs } from '../job-module.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';

interface SendFlags extends TargetFlags {
  readonly count?: number;
  readonly duplicates?: number;
  readonly types?: GeneratedType[];
  readonly accounts?: number;
  readonly file?: string;
  readonly rate?: number;
  readonly runId?: string;
  readonly concurrency?: number;
  readonly json?: boolean;
  readonly jobModule?: string;
  readonly groupId?: string;
  readonly maxBodyBytes?: number;
}

/** What `leaseq send` plans before it connects: the messages and how they were made. */
export interface SendPlan {
  readonly source: 'generated' | 'file';
  readonly runId: string;
  /** Distinct dedup keys. */
  readonly jobs: number;
  readonly messages: readonly OutgoingMessage[];
  readonly accounts?: readonly string[];
}

/**
 * Reads and validates a jobs file (JSON array or NDJSON); nothing is sent when any entry is bad. With the
 * job module's `jobs`, every type must be one of them and every payload must pass its schema.
 */
export function planFromFile(
  file: string,
  runId: string,
  registry?: JobRegistry,
  maxBodyBytes?: number,
): SendPlan {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? String(error.code) : '';
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : String(error);
    throw new Error(`cannot read jobs file ${file}: ${why}`);
  }
  let jobs: JobEnvelope[];
  try {
    jobs = parseJobFile(text, {
      runId,
      ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }),
      ...(registry
        ? {
            isKnownType: (type: string) => registry.has(type),
            checkPayload: (type: string, payload: unknown) => {
              const schema = registry.get(type)?.payload;
              // The file reports "payload of <type>: <path>: <problem>".
              return schema ? payloadProblem(schema, payload)?.replace(/^payload\./, '') : undefined;
            },
          }
        : {}),
    });
  } catch (error) {
    throw new Error(`${file}: ${error instanceof Error ? error.message : String(error)}; nothing was sent`);
  }
  const seen = new Set<string>();
  const messages = jobs.map((job): OutgoingMessage => {
    const duplicate = seen.has(job.dedupKey);
    seen.add(job.dedupKey);
    return { body: JSON.stringify(job), dedupKey: job.dedupKey, ...(duplicate ? { duplicate } : {}) };
  });
  return { source: 'file', runId, jobs: seen.size, messages };
}

function plan(flags: SendFlags, jobs: JobRegistry | undefined): SendPlan {
  const runId = flags.runId ?? newRunId();
  if (flags.file) {
    if (flags.count !== undefined || flags.duplicates !== undefined || flags.types || flags.accounts) {
      throw new Error(
        '--file sends the jobs in the file: leave out --count, --duplicates, --types and --accounts',
      );
    }
    return planFromFile(flags.file, runId, jobs, bodyLimit(flags));
  }
  const missing = GENERATED_TYPES.filter((type) => jobs && !jobs.has(type));
  if (missing.length > 0) {
    throw new Error(
      `generated jobs are the ledger example's (${GENERATED_TYPES.join(', ')}), which your job module does not define: send your own jobs with --file`,
    );
  }
  const types = flags.types ?? [...GENERATED_TYPES];
  const accounts = flags.accounts ?? 10;
  if (types.includes('ledger.transfer') && accounts < 2) {
    throw new Error('--accounts must be at least 2 when sending ledger.transfer jobs');
  }
  const generated = generateJobs({
    count: flags.count ?? 10,
    duplicateRate: flags.duplicates ?? 0,
    types,
    accounts,
    runId,
  });
  return {
    source: 'generated',
    runId,
    jobs: generated.jobs.length,
    messages: generated.messages,
    accounts: generated.accounts,
  };
}

/** `--max-body-bytes`, else LEASEQ_MAX_BODY_BYTES (as the workers read it), else the default. */
function bodyLimit(flags: SendFlags): number | undefined {
  if (flags.maxBodyBytes !== undefined) return flags.maxBodyBytes;
  const fromEnv = process.env[WORKER_ENV.maxBodyBytes];
  if (fromEnv === undefined || fromEnv === '') return undefined;
  return checkMaxBodyBytes(Number(fromEnv), WORKER_ENV.maxBodyBytes);
}

function groupIdArg(value: string): string {
  const problem = groupIdProblem(value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
}

function runIdArg(value: string): string {
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(value)) {
    throw new InvalidArgumentError('expected 1-64 characters of letters, digits and . _ : -');
  }
  return value;
}

/** A progress bar on stderr when it is a terminal; otherwise nothing (logs stay clean). */
function progressBar(total: number): { update(p: SendProgress): void; stop(): void } {
  if (!process.stderr.isTTY) return { update: () => {}, stop: () => {} };
  const bar = new SingleBar({
    stream: process.stderr,
    format: 'sending |{bar}| {value}/{total} messages, {failed} failed',
    hideCursor: true,
    clearOnComplete: true,
  });
  bar.start(total, 0, { failed: 0 });
  return {
    update: (p) => bar.update(p.sent + p.failed, { failed: p.failed }),
    stop: () => bar.stop(),
  };
}

/** The human summary of a send. */
export function describeSend(planned: SendPlan, report: SendReport, queueUrl: string): string {
  return renderFields([
    ['queue', queueUrl],
    ['run id', planned.runId],
    ['jobs', `${planned.jobs} distinct dedup keys (${planned.source})`],
    ['sent', `${report.sent} messages, ${report.duplicates} of them duplicates`],
    ['failed', String(report.failed)],
    ['accounts', planned.accounts ? `${planned.accounts.length} (${planned.accounts[0]} ...)` : undefined],
  ]);
}

/** Adds `leaseq send`. */
export function register(program: Command): void {
  targetOptions(
    jobModuleOption(program.command('send'))
      .description(
        'send the jobs in a file (types and payloads checked against your job module), or generated ledger example jobs with optional duplicate sends',
      )
      .option('--count <n>', 'distinct jobs to generate (default 10)', integerArg(1, 1_000_000))
      .option(
        '--duplicates <rate>',
        'share of the jobs sent twice, 0..1 (e.g. 0.2 sends 20% of them a second time; default 0)',
        fractionArg,
      )
      .option(
        '--types <list>',
        `job types to mix (default ${GENERATED_TYPES.join(',')})`,
        listArg(GENERATED_TYPES),
      )
      .option('--accounts <n>', 'accounts the generated jobs use (default 10)', integerArg(1, 100_000))
      .option(
        '--run-id <id>',
        'dedup keys are <run-id>-000001...; reuse a run id to resend the very same jobs (pure duplicates)',
        runIdArg,
      )
      .option(
        '--file <path>',
        'send jobs from a JSON array or NDJSON file: full envelopes, or {type, payload, dedupKey?} objects',
      )
      .option(
        '--group-id <id>',
        "FIFO queues: send every job in this message group, so they run one at a time in file order (default: each job in its dedup key's group)",
        groupIdArg,
      )
      .option(
        '--max-body-bytes <n>',
        `largest body sent, the jobs queue's MaximumMessageSize (default: ${WORKER_ENV.maxBodyBytes}, else ${DEFAULT_MAX_BODY_BYTES})`,
        integerArg(SQS_MIN_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES),
      )
      .option('--rate <rate>', 'at most this many messages per second (50, 50/s, 600/min)', rateArg)
      .option('--concurrency <n>', 'SendMessageBatch calls in flight (default 8)', integerArg(1, 64))
      .option('--json', 'print the result as JSON on stdout'),
  ).action(async (flags: SendFlags) => {
    const found = await loadCliJobs(flags.jobModule);
    if (!found && flags.file)
      note('no job module found: job types and payloads are not checked before sending');
    const planned = plan(flags, found?.jobs);
    const target = await resolveTarget(flags);
    try {
      const { groupId } = flags;
      if (groupId !== undefined && !isFifoQueue(target.names.queueUrl))
        note(
          `--group-id applies to FIFO queues; ${target.names.queueUrl} is a standard queue, so no group is sent`,
        );
      const messages =
        groupId === undefined ? planned.messages : planned.messages.map((m) => ({ ...m, groupId }));
      const bar = progressBar(messages.length);
      let report: SendReport;
      try {
        report = await sendMessages(target.clients.sqs, target.names.queueUrl, messages, {
          ...(flags.rate === undefined ? {} : { ratePerSecond: flags.rate }),
          ...(flags.concurrency === undefined ? {} : { concurrency: flags.concurrency }),
          onProgress: bar.update,
        });
      } finally {
        bar.stop();
      }
      if (flags.json) {
        printJson({
          queueUrl: target.names.queueUrl,
          runId: planned.runId,
          source: planned.source,
          jobs: planned.jobs,
          planned: planned.messages.length,
          ...report,
          ...(planned.accounts ? { accounts: planned.accounts } : {}),
        });
      } else {
        print(describeSend(planned, report, target.names.queueUrl));
      }
      if (report.failed > 0) {
        const first = report.failures[0];
        note(
          `${report.failed} messages were not sent${first ? ` (first: ${first.code}: ${first.message})` : ''}`,
        );
        process.exitCode = 1;
      }
    } finally {
      target.close();
    }
  });
}
