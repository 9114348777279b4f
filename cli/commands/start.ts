import { join } from 'node:path';
import { type Command, Option } from 'commander';
import {
  type DemoNames,
  type DemoProgress,
  type DemoResult,
  NOT_A_JOB,
  runDemo,
} from '../../examples/ledger/demo/run-demo.ts';
import {
  type AwsClients,
  awsConfigFromEnv,
  createAwsClients,
  destroyAwsClients,
} from '../../shared/aws/clients.ts';
import { endpointText } from '../../shared/aws/endpoint-text.ts';
import { deployLocal } from '../../shared/local/deploy.ts';
import { localCloudFormation } from '../../shared/local/deploy-env.ts';
import {
  type EmulatorHandle,
  ensureEmulator,
  holdEmulator,
  stopEmulator,
} from '../../shared/local/emulator.ts';
import { provisionLocal } from '../../shared/local/provision.ts';
import { fractionArg, integerArg } from '../format.ts';
import { safeJson, safeLines, safeText } from '../safe-text.ts';
import { serviceEndpointLines } from '../service-endpoints.ts';

interface StartFlags {
  readonly jobs: number;
  readonly workers: number;
  readonly accounts: number;
  readonly duplicates: number;
  readonly flaky: number;
  readonly slow: number;
  readonly poison: number;
  readonly crashes: number;
  readonly leaseMs: number;
  readonly timeout: number;
  readonly prefix?: string;
  readonly runtime: 'local' | 'lambda';
  readonly json?: boolean;
}

export function register(program: Command): void {
  program
    .command('start')
    .description(
      'the main demo: start the embedded emulator, provision the stack, run local workers on a mixed workload ' +
        '(duplicates, flaky, slow, crashing and poison jobs) and verify every effect happened exactly once',
    )
    .option('--jobs <n>', 'unique jobs to send', integerArg(1, 100_000), 2000)
    .option('--workers <n>', 'worker processes', integerArg(1, 16), 3)
    .option('--accounts <n>', 'ledger accounts', integerArg(2, 1000), 20)
    .option('--duplicates <rate>', 'share of jobs sent twice', fractionArg, 0.2)
    .option('--flaky <rate>', 'share of jobs failing 1-2 times first', fractionArg, 0.05)
    .option('--slow <n>', 'jobs that outlive their lease (heartbeat keeps them)', integerArg(0, 1000), 5)
    .option(
      '--poison <n>',
      'jobs that always fail (dead-lettered), plus one non-JSON body',
      integerArg(0, 1000),
      4,
    )
    .option('--crashes <n>', 'transfers whose worker dies between debit and credit', integerArg(0, 100), 2)
    .option('--lease-ms <ms>', 'job lease of the demo workers', integerArg(1000, 600_000), 3000)
    .option('--timeout <s>', 'give up after this many seconds', integerArg(10, 86_400), 900)
    .option('--prefix <prefix>', 'resource name prefix (default: leaseq-local)')
    .addOption(
      new Option(
        '--runtime <runtime>',
        'who runs the jobs: local worker processes, or the stack deployed to the emulator (leaseq local deploy --stage demo) fired by its event source mapping',
      )
        .choices(['local', 'lambda'])
        .default('local'),
    )
    .option('--json', 'print the summary as JSON')
    .action(async (flags: StartFlags) => {
      process.exitCode = await start(flags);
    });
}

async function start(flags: StartFlags): Promise<number> {
  // Lines can quote workers' and jobs' text: escaped (safe-text.ts), like every line the CLI prints.
  const say = (line: string) => process.stderr.write(`leaseq: ${safeLines(line)}\n`);
  // `--runtime lambda` deploys the stack: functions and stacks too; local workers need queues and tables.
  const emulator = await ensureEmulator({
    log: say,
    services: flags.runtime === 'lambda' ? 'all' : 'queues-and-tables',
  });
  say(
    `${emulator.mode === 'external' ? 'using' : emulator.started ? 'started' : 'reusing'} ${endpointText(emulator.endpoint)}`,
  );
  // A service on an endpoint of its own (AWS_ENDPOINT_URL_SQS, ...): one line per service.
  for (const line of serviceEndpointLines(emulator.endpoint, process.env, 'the emulator')) say(line);
  // Held while the demo runs, so a deploy does not restart the emulator under it.
  process.once('exit', await holdEmulator());
  const clients = createAwsClients({ ...awsConfigFromEnv(), endpoint: emulator.endpoint });
  const stop = new AbortController();
  // While the progress bar is drawn, lines go through it, or its next redraw would overwrite them.
  let bar: ReturnType<typeof progressBar> | undefined;
  const notify = (line: string) => (bar ? bar.log(`leaseq: ${safeLines(line)}\n`) : say(line));
  const onSignal = () => {
    if (stop.signal.aborted) return;
    notify('stopping: draining workers (Ctrl-C again is not needed)');
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const names =
      flags.runtime === 'lambda'
        ? await deployDemo(flags, emulator, clients, say)
        : await provision(flags, clients, say);
    bar = process.stderr.isTTY && !flags.json ? progressBar() : undefined;
    let lastLine = 0;
    const result = await runDemo({
      clients,
      endpoint: emulator.endpoint,
      names,
      runtime: flags.runtime,
      mix: {
        jobs: flags.jobs,
        accounts: flags.accounts,
        duplicateRate: flags.duplicates,
        flakyRate: flags.flaky,
        slow: flags.slow,
        slowMs: flags.leaseMs * 2,
        poison: flags.poison,
        crashes: flags.crashes,
        // In the deployed function, a crash before the first heartbeat would hide the message for 6 x
        // the function timeout; past one beat it is back within a lease.
        ...(flags.runtime === 'lambda' ? { crashAfterMs: Math.ceil(flags.leaseMs / 2) } : {}),
      },
      workers: flags.workers,
      leaseMs: flags.leaseMs,
      timeoutMs: flags.timeout * 1000,
      logDir: join(process.cwd(), '.leaseq', 'logs'),
      signal: stop.signal,
      onEvent: (line) => (bar ? bar.log(`${safeLines(line)}\n`) : say(line)),
      onProgress: (p) => {
        if (bar) return bar.update(p);
        // Without a terminal: one plain line every 5 s.
        if (Date.now() - lastLine < 5000) return;
        lastLine = Date.now();
        say(progressLine(p));
      },
    });
    bar?.stop();
    bar = undefined;
    if (flags.json) process.stdout.write(`${safeJson(result, 2)}\n`);
    else process.stdout.write(safeLines(summary(result, emulator.endpoint, flags.prefix)));
    if (stop.signal.aborted && emulator.started) {
      await stopEmulator();
      say('stopped the emulator this run started');
    }
    return result.aborted ? 130 : result.verified ? 0 : 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    destroyAwsClients(clients);
  }
}

/** Local workers: the stack's queues and tables, provisioned from its template. */
async function provision(
  flags: StartFlags,
  clients: AwsClients,
  say: (line: string) => void,
): Promise<DemoNames> {
  const provisioned = await provisionLocal({ clients, ...(flags.prefix ? { prefix: flags.prefix } : {}) });
  say(
    `provisioned queues ${provisioned.queues.map((q) => q.name).join(', ')}; tables ${provisioned.tables.map((t) => t.name).join(', ')} ` +
      `(${provisioned.queues.length + provisioned.tables.length} resources, ${Math.round(provisioned.elapsedMs)} ms)`,
  );
  const o = provisioned.outputs;
  return {
    queueUrl: o.JobsQueueUrl,
    dlqUrl: o.DlqUrl,
    jobsTable: o.JobsTableName,
    leasesTable: o.LeasesTableName,
    ledgerTable: provisioned.appTables.ledger ?? '',
  };
}

/** `--runtime lambda`: the real stack deployed to the emulator (stage demo), with the demo's test hooks. */
async function deployDemo(
  flags: StartFlags,
  emulator: EmulatorHandle,
  clients: AwsClients,
  say: (line: string) => void,
): Promise<DemoNames> {
  const stackName = 'leaseq-demo';
  const cloudFormation = await localCloudFormation(
    emulator.endpoint,
    await clients.sqs.config.region(),
    emulator.credentials,
  );
  try {
    const outputsFile = join(process.cwd(), '.leaseq', 'demo-outputs.json');
    const result = await deployLocal({
      ...(emulator.credentials ? { credentials: emulator.credentials } : {}),
      ...(emulator.stateDir ? { lockDir: emulator.stateDir } : {}),
      endpoint: emulator.endpoint,
      region: await clients.sqs.config.region(),
      projectDir: process.cwd(),
      stacks: [stackName],
      context: {
        stage: 'demo',
        testHooks: 'true',
        leaseMs: String(flags.leaseMs),
        maxAttempts: '5',
        workerTimeoutSeconds: String(Math.max(15, Math.ceil((flags.leaseMs * 2) / 1000) + 10)),
        maxConcurrency: String(Math.max(2, flags.workers)),
      },
      outputsFile,
      cdkOut: join('.leaseq', 'cdk.out'),
      cloudFormation,
      dynamodb: clients.ddb,
      log: (line) => (line.startsWith('  ') ? undefined : say(line)),
    });
    say(
      `deployed ${stackName} in ${result.seconds.toFixed(1)} s: its function runs the jobs (outputs in ${outputsFile})`,
    );
    const o = result.stacks.find((s) => s.stackName === stackName)?.outputs ?? {};
    return {
      queueUrl: o.JobsQueueUrl ?? '',
      dlqUrl: o.DlqUrl ?? '',
      jobsTable: o.JobsTableName ?? '',
      leasesTable: o.LeasesTableName ?? '',
      ledgerTable: o.LedgerTableName ?? '',
    };
  } finally {
    cloudFormation.destroy();
  }
}

function progressLine(p: DemoProgress): string {
  if (p.runtime === 'lambda') {
    return `sent ${p.sent}/${p.total} messages | done ${p.done}/${p.expected} jobs | DLQ ${p.dead} | deployed function`;
  }
  return (
    `sent ${p.sent}/${p.total} messages | done ${p.done}/${p.expected} jobs | dup skipped ${p.duplicatesSkipped} | ` +
    `retries ${p.retries} | takeovers ${p.leasesTakenOver} | DLQ ${p.dead} | workers ${p.workersAlive}` +
    (p.workerRestarts ? ` (${p.workerRestarts} replaced)` : '')
  );
}

/**
 * The live progress line of the demo on a terminal: one line, cut to the terminal's width so it never
 * wraps, redrawn in place. Other lines go through `log`, which prints them above it. (A progress bar
 * library that saves and restores the cursor misplaces the summary once lines were printed in between.)
 */
function progressBar(stream: NodeJS.WriteStream = process.stderr): {
  update(p: DemoProgress): void;
  log(line: string): void;
  stop(): void;
} {
  let current = '';
  const draw = () => {
    const width = Math.max(20, (stream.columns ?? 80) - 1);
    stream.write(`\r\x1b[2K${current.slice(0, width)}`);
  };
  stream.write('\x1b[?25l'); // hide the cursor while the line moves
  return {
    update(p) {
      const finished = p.done + p.dead;
      const ratio = p.expected > 0 ? Math.min(1, finished / p.expected) : 0;
      const filled = Math.round(ratio * 24);
      current = ` ${'\u2588'.repeat(filled)}${'\u2591'.repeat(24 - filled)} ${Math.floor(ratio * 100)}% | ${progressLine(p)}`;
      draw();
    },
    log(line) {
      stream.write(`\r\x1b[2K${line.endsWith('\n') ? line : `${line}\n`}`);
      if (current) draw();
    },
    stop() {
      stream.write('\r\x1b[2K\x1b[?25h');
      current = '';
    },
  };
}

/** The closing summary: what ran, the ledger check, the dead letters. */
export function summary(r: DemoResult, endpoint: string, prefix?: string): string {
  const lines: string[] = [];
  const c = r.counters;
  lines.push('');
  const verdict = r.aborted
    ? 'STOPPED before the end (partial results)'
    : r.verified
      ? 'VERIFIED'
      : 'NOT VERIFIED';
  lines.push(`leaseq demo ${r.runId}: ${verdict} in ${(r.elapsedMs / 1000).toFixed(1)} s`);
  lines.push('');
  lines.push(
    `  sent        ${r.workload.messages} messages: ${r.workload.unique} jobs + ${r.workload.duplicates} duplicates ` +
      `(+1 malformed body); ${r.workload.flaky} flaky, ${r.workload.slow} slow, ${r.workload.crashes} crashing, ${r.workload.poison} poison`,
  );
  lines.push(`  completed   ${r.completed} of ${r.workload.unique - r.workload.poison} expected`);
  // The DLQ holds more letters than there are dead jobs: the malformed body's (no job, no item) and a
  // second letter of a death whose worker died while dead-lettering.
  const letters = r.deadLetters.reduce((n, d) => n + d.copies, 0);
  const bodies = r.deadLetters.filter((d) => d.dedupKey === NOT_A_JOB).reduce((n, d) => n + d.copies, 0);
  const held =
    letters === r.deadLettered && bodies === 0
      ? ''
      : `; the DLQ holds ${letters} letters: ${letters - bodies} of those jobs'${bodies ? `, ${bodies} of the malformed body (no job)` : ''}`;
  lines.push(`  dead        ${r.deadLettered} jobs dead-lettered (expected ${r.workload.poison})${held}`);
  if (r.runtime === 'lambda') {
    lines.push(
      '  protocol    (counters stay in the deployed function: see its log group in CloudWatch Logs)',
    );
    lines.push('  workers     the deployed function, fired by its SQS event source mapping');
  } else {
    lines.push(
      `  protocol    ${c.DuplicateSkipped ?? 0} duplicates skipped (${c.CacheHit ?? 0} from the local cache), ` +
        `${c.JobRetried ?? 0} retries, ${c.LeaseExpired ?? 0} expired leases taken over, ${c.OptimisticConflict ?? 0} optimistic conflicts`,
    );
    lines.push(
      `  workers     ${r.perWorker.map((w) => `${w.id}: ${w.succeeded}${w.exit === 'SIGKILL' ? ' (killed)' : ''}`).join(', ')}` +
        (r.workerRestarts ? `; ${r.workerRestarts} replaced after a crash` : ''),
    );
  }
  lines.push('');
  if (r.aborted) {
    // Unfinished jobs make accounts differ from the end state: no verdict rows, only how far it got.
    const unfinished = r.workload.unique - r.completed - r.deadLettered;
    lines.push(
      `  partial run: ${r.completed} jobs completed, ${r.deadLettered} dead-lettered, ${unfinished} not finished yet`,
    );
    lines.push('  (the ledger is checked only when every job has finished)');
  } else {
    const width = Math.max(...r.accounts.map((a) => a.account.length), 7);
    lines.push(`  ${'account'.padEnd(width)}  ${'expected'.padStart(9)}  ${'actual'.padStart(9)}  check`);
    for (const a of r.accounts) {
      lines.push(
        `  ${a.account.padEnd(width)}  ${String(a.expected).padStart(9)}  ${String(a.actual ?? '-').padStart(9)}  ${a.ok ? 'ok' : 'MISMATCH'}`,
      );
    }
    lines.push(
      `  ${'total'.padEnd(width)}  ${String(r.moneyExpected).padStart(9)}  ${String(r.moneyActual).padStart(9)}  ` +
        `${r.moneyExpected === r.moneyActual ? 'money conserved' : 'MONEY MISMATCH'}`,
    );
  }
  lines.push('');
  if (r.deadLetters.length > 0) {
    lines.push(`  dead letters (${letters} in the DLQ, with their reasons):`);
    for (const d of r.deadLetters) {
      lines.push(
        `    ${safeText(d.dedupKey)}  reason=${safeText(d.reason)}  error=${safeText(d.errorClass)}  attempts=${d.attempts}` +
          (d.copies > 1 ? `  (${d.copies} letters: its worker died while dead-lettering)` : '') +
          (d.dedupKey === NOT_A_JOB ? '  (the malformed body: never a job, so no job item)' : ''),
      );
    }
    lines.push('');
  }
  if (r.missing.length > 0 && !r.aborted)
    lines.push(`  not completed: ${r.missing.slice(0, 10).join(', ')}${r.missing.length > 10 ? ' ...' : ''}`);
  if (r.timedOut) lines.push('  timed out before every job finished (raise --timeout)');
  if (r.aborted) {
    lines.push('  stopped: unfinished jobs stay in the queue and run the next time workers start.');
  }
  const p = prefix ? ` --prefix ${prefix}` : '';
  lines.push(
    `  emulator still running at ${endpointText(endpoint)}: try \`npx leaseq status${p}\`, \`npx leaseq dlq list${p}\`;`,
  );
  lines.push('  `npx leaseq local down` stops it.');
  lines.push('');
  return `${lines.join('\n')}\n`;
}
