import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { S3PayloadStore } from '../../shared/core/adapters/s3-payload-store.ts';
import { operationalSmells, poolMetricsDir, poolsOf, readPoolMetrics } from '../../shared/ops/smells.ts';
import { checkActor, resolveActor } from '../actor.ts';
import { jobModuleOption, loadCliJobs } from '../job-module.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';
import { newToken, TRACE_TOKEN_HEADER } from '../ui/guard.ts';
import { loadRedactHook } from '../ui/job-hooks.ts';
import { startUi, UI_HOST, UI_HOST_V6 } from '../ui/server.ts';
import { SpanBuffer } from '../ui/spans.ts';

interface UiFlags extends TargetFlags {
  readonly port: number;
  readonly readOnly?: boolean;
  readonly maxSpans: number;
  readonly jobModule?: string;
  readonly payloadBucket?: string;
  readonly actor?: string;
}

/** The default port: free on most machines, easy to type. */
export const DEFAULT_UI_PORT = 8686;

function portArg(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65_535)
    throw new InvalidArgumentError('expected a port 0-65535 (0: any free port)');
  return n;
}

function countArg(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1) throw new InvalidArgumentError('expected a positive whole number');
  return n;
}

/** Adds `leaseq ui`. */
export function register(program: Command): void {
  targetOptions(
    jobModuleOption(program.command('ui'))
      .description(
        `a local web inspector on ${UI_HOST} only: queue and DLQ depth over time, live and stuck leases, problem jobs, ` +
          "one job's timeline and traces, the DLQ with redrive and purge (behind the printed token and a confirmation). " +
          'Pages answer on a host name of its own (leaseq-<random>.localhost) and the printed link works once. ' +
          'Also takes OTLP/HTTP JSON traces at /v1/traces with the printed OTEL_EXPORTER_OTLP_HEADERS. Ctrl-C stops it',
      )
      .option('--port <port>', `port on ${UI_HOST} (0: any free port)`, portArg, DEFAULT_UI_PORT)
      .option('--read-only', 'no actions: redrive and purge are off')
      .option('--max-spans <n>', 'spans kept in memory (the oldest go first)', countArg, 5000)
      .option(
        '--payload-bucket <name>',
        'the bucket of claim-checked payloads (stack output PayloadBucketName): an offloaded payload is shown from it',
      )
      .option(
        '--actor <name>',
        "who acts, in the history of the page's cancels and redrives (default: the STS caller on AWS, else user@host)",
      ),
  ).action(async (flags: UiFlags) => {
    if (flags.actor !== undefined) checkActor(flags.actor);
    // The job module: the schema an edited payload is checked against, and the redaction hook (redactError).
    // One found by the environment or package.json that fails to load only turns editing off: the
    // inspector reads without it.
    let jobs: Awaited<ReturnType<typeof loadCliJobs>>;
    let redact: Awaited<ReturnType<typeof loadRedactHook>>;
    try {
      jobs = await loadCliJobs(flags.jobModule);
      redact = jobs ? await loadRedactHook(jobs.path) : undefined;
    } catch (error) {
      if (flags.jobModule !== undefined) throw error;
      jobs = undefined;
      redact = undefined;
      process.stderr.write(
        `leaseq ui: ${error instanceof Error ? error.message : String(error)}; payload editing is off\n`,
      );
    }
    const target = await resolveTarget(flags);
    const actor = await resolveActor(flags.actor, target);
    const payloadStore = flags.payloadBucket
      ? new S3PayloadStore({
          bucket: flags.payloadBucket,
          config: { region: target.region, ...(target.endpoint ? { endpoint: target.endpoint } : {}) },
        })
      : undefined;
    const token = newToken();
    const traceToken = newToken();
    const ui = await startUi(
      {
        target,
        targetLine: target.line.replace(/^target: /, ''),
        token,
        traceToken,
        readOnly: flags.readOnly === true,
        ...(jobs ? { jobs } : {}),
        ...(redact ? { redact } : {}),
        ...(payloadStore ? { payloadStore } : {}),
        actor,
        spans: new SpanBuffer(flags.maxSpans),
        localWorkers: () =>
          operationalSmells(
            poolsOf(readPoolMetrics(poolMetricsDir()), {
              endpoint: target.endpoint ?? null,
              queueArn: target.names.queueArn,
            }),
          )?.starvation.jobsPerWorker,
        log: (line) => process.stderr.write(`leaseq ui: ${line}\n`),
      },
      flags.port,
    ).catch((error: unknown) => {
      target.close();
      if (error instanceof Error && 'code' in error && error.code === 'EADDRINUSE') {
        // A plain Error: runCli prints an action's error in one line, but takes a CommanderError
        // (InvalidArgumentError is one) as already printed and says nothing.
        // [::1] too: a browser tries it first for *.localhost, so whoever holds it would get the link.
        const on = 'address' in error && error.address === UI_HOST_V6 ? `[${UI_HOST_V6}]` : UI_HOST;
        throw new Error(`port ${flags.port} on ${on} is in use: pass --port <other> (0: any)`);
      }
      throw error;
    });
    // stdout carries only the URL (a script reads it); notes go to stderr.
    process.stdout.write(`${ui.url}\n`);
    process.stderr.write(
      `leaseq ui: listening on ${ui.address}:${ui.port} and [${UI_HOST_V6}]:${ui.port}${flags.readOnly ? ' (read-only)' : ''}, pages on ${ui.host}:${ui.port}; Ctrl-C stops it\n` +
        `leaseq ui: traces: OTEL_EXPORTER_OTLP_ENDPOINT=${ui.tracesEndpoint} OTEL_EXPORTER_OTLP_HEADERS=${TRACE_TOKEN_HEADER}=${traceToken}\n`,
    );
    await new Promise<void>((resolve) => {
      const stop = () => {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        resolve();
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
    await ui.close();
    target.close();
  });
}
