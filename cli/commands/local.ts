import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type Command, InvalidArgumentError } from 'commander';
import {
  awsConfigFromEnv,
  createAwsClients,
  destroyAwsClients,
  isLocalEndpoint,
} from '../../shared/aws/clients.ts';
import { endpointText } from '../../shared/aws/endpoint-text.ts';
import { ANY_CREDENTIAL } from '../../shared/aws/local-credential.ts';
import { deployLocal, destroyLocal } from '../../shared/local/deploy.ts';
import { LOCAL_ACCOUNT, localCloudFormation } from '../../shared/local/deploy-env.ts';
import { emulatorStacks } from '../../shared/local/deployed-stacks.ts';
import { emulatorStatus, ensureEmulator, stopEmulator } from '../../shared/local/emulator.ts';
import { DeployError, EmulatorError } from '../../shared/local/emulator-errors.ts';
import { parsePort } from '../../shared/local/net.ts';
import { provisionLocal } from '../../shared/local/provision.ts';
import { isInstalled, missingPackage } from '../../shared/optional-package.ts';
import { confirmChange } from '../confirm.ts';
import { jobModuleOption, requireCliJobs } from '../job-module.ts';
import { safeLines } from '../safe-text.ts';
import { describeDown, describeProvision, describeStatus, describeUp, shortPath } from './local-describe.ts';
import { registerLocalEnv } from './local-env.ts';

/** `leaseq local status` exits with this when nothing answers (the LSB "not running" code). */
export const EXIT_NOT_RUNNING = 3;

interface ProvisionFlags {
  readonly jobModule?: string;
  readonly prefix?: string;
  readonly fifo?: boolean;
  readonly json?: boolean;
}

interface UpFlags {
  readonly port?: number;
  readonly json?: boolean;
  readonly allServices?: boolean;
}

function portArgument(value: string): number {
  try {
    const port = parsePort(value, '--port');
    if (port === undefined) throw new InvalidArgumentError('expected an integer from 1 to 65535');
    return port;
  } catch (error) {
    if (error instanceof EmulatorError) throw new InvalidArgumentError('expected an integer from 1 to 65535');
    throw error;
  }
}

/** Escaped like every CLI line (safe-text.ts); compact JSON has no raw newline, so it passes unchanged. */
function print(text: string): void {
  process.stdout.write(`${safeLines(text)}\n`);
}

/** Progress goes to stderr so `--json` output on stdout stays parseable. */
function progress(line: string): void {
  process.stderr.write(`leaseq: ${safeLines(line)}\n`);
}

interface DeployFlags {
  readonly stack: string[];
  readonly stage?: string;
  readonly context: Record<string, string>;
  readonly outputsFile: string;
  readonly output: string;
  readonly json?: boolean;
}

function collectStack(value: string, previous: string[]): string[] {
  if (value.trim() === '') throw new InvalidArgumentError('expected a stack name');
  return [...previous, value];
}

/** `--stage` is context for the app (the reference app names its stack `leaseq-<stage>`). */
function appContext(flags: Pick<DeployFlags, 'stage' | 'context'>): Record<string, string> {
  return { ...(flags.stage === undefined ? {} : { stage: flags.stage }), ...flags.context };
}

/** The stacks of a deploy or destroy, as people read them. */
function stacksLine(stacks: readonly string[]): string {
  return stacks.length > 0 ? stacks.join(', ') : 'every stack of the app';
}

function collectContext(value: string, previous: Record<string, string>): Record<string, string> {
  const at = value.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError('expected key=value');
  return { ...previous, [value.slice(0, at)]: value.slice(at + 1) };
}

/** The emulator (started if needed) and the clients a deploy talks to it with. */
async function deployTarget(purpose: 'deploy' | 'destroy') {
  if (!existsSync(join(process.cwd(), 'cdk.json'))) {
    throw new DeployError(
      `no cdk.json in ${process.cwd()}: run this in the CDK project that defines the stack`,
    );
  }
  // Before the emulator is touched (a restart loses its queues and tables): the client is there.
  if (!isInstalled('@aws-sdk/client-cloudformation')) throw missingPackage('@aws-sdk/client-cloudformation');
  // A deploy needs functions, stacks and buckets: a queues-and-tables emulator is restarted with them.
  // A destroy never restarts one (it would only delete): such an emulator holds no stack.
  const handle = await ensureEmulator({
    log: progress,
    ...(purpose === 'deploy' ? { services: 'all' as const } : {}),
  });
  // The emulator's own keys; an endpoint elsewhere (AWS_ENDPOINT_URL) gets the test keys, never the operator's.
  const own = handle.credentials
    ? { credentials: handle.credentials }
    : isLocalEndpoint(handle.endpoint)
      ? {}
      : { credentials: ANY_CREDENTIAL };
  // Every client on the emulator: a service's own endpoint in the shell (AWS_ENDPOINT_URL_SQS) is not
  // where this deploy goes.
  const config = { ...awsConfigFromEnv(), endpoints: {}, endpoint: handle.endpoint, ...own };
  const clients = createAwsClients(config);
  const cloudFormation = await localCloudFormation(handle.endpoint, config.region, handle.credentials);
  const why = handle.mode === 'external' ? 'AWS_ENDPOINT_URL' : 'the embedded emulator leaseq runs';
  return {
    clients,
    /** The target line: a deploy or destroy acts on the emulator only, in its local account. */
    line: `target: ${isLocalEndpoint(handle.endpoint) ? 'local emulator' : 'endpoint'} ${endpointText(handle.endpoint)}, account ${LOCAL_ACCOUNT}, region ${config.region} (${why})`,
    local: isLocalEndpoint(handle.endpoint),
    /** False for a queues-and-tables emulator: it cannot hold a stack. */
    servesStacks: handle.services !== 'queues-and-tables',
    common: {
      endpoint: handle.endpoint,
      region: config.region,
      projectDir: process.cwd(),
      cloudFormation,
      log: progress,
      ...own,
      ...(handle.stateDir ? { lockDir: handle.stateDir } : {}),
    },
    close: () => {
      cloudFormation.destroy();
      destroyAwsClients(clients);
    },
  };
}

/** Adds `leaseq local env | up | provision | deploy | destroy | down | status`. */
export function register(program: Command): void {
  const local = program
    .command('local')
    .description('the embedded AWS emulator (SQS + DynamoDB on 127.0.0.1; no Docker, no account)');

  registerLocalEnv(local);

  local
    .command('up')
    .description('install (first use) and start the emulator, or reuse the running one')
    .option('--port <port>', 'port on 127.0.0.1 (default: $LEASEQ_EMULATOR_PORT or 4566)', portArgument)
    .option('--json', 'print the result as JSON')
    .option(
      '--all-services',
      'also serve functions, stacks and buckets (what `local deploy` and the deploy tests need); default: queues and tables only, so nothing can run code through it',
    )
    .action(async (flags: UpFlags) => {
      const handle = await ensureEmulator({
        ...(flags.port === undefined ? {} : { port: flags.port }),
        ...(flags.allServices ? { services: 'all' as const } : {}),
        log: progress,
      });
      // The credential stays out of the output (`leaseq local env` prints it for the tools that need it).
      print(flags.json ? JSON.stringify({ ...handle, credentials: undefined }) : describeUp(handle));
    });

  jobModuleOption(
    local
      .command('provision')
      .description(
        "create the stack's queues and tables for your job module on the emulator (idempotent; starts the emulator if needed)",
      ),
  )
    .option('--prefix <prefix>', 'resource name prefix (default: LEASEQ_PREFIX, else leaseq-local)')
    .option('--fifo', 'FIFO jobs queue and DLQ')
    .option('--json', 'print the result as JSON')
    .action(async (flags: ProvisionFlags) => {
      const { jobs, path } = await requireCliJobs(flags.jobModule);
      const handle = await ensureEmulator({ log: progress });
      const clients = createAwsClients({ ...awsConfigFromEnv(), endpoint: handle.endpoint });
      try {
        const prefix = flags.prefix ?? process.env.LEASEQ_PREFIX;
        const result = await provisionLocal({
          clients,
          ...(prefix ? { prefix } : {}),
          stackProps: { jobs, ...(flags.fifo ? { fifo: true } : {}) },
        });
        print(
          flags.json
            ? JSON.stringify(result)
            : describeProvision(result, handle.endpoint, flags.jobModule ? shortPath(path) : undefined),
        );
      } finally {
        destroyAwsClients(clients);
      }
    });

  local
    .command('deploy')
    .description(
      "cdk bootstrap (first time) + cdk deploy of the CDK app in this directory (cdk.json) to the emulator: every stack, or those named with --stack; closes the emulator's CloudFormation gaps (TTL, PITR) on every table of them and writes the stack outputs every leaseq command accepts (--outputs)",
    )
    .option(
      '--stack <name>',
      'a stack to deploy (stack name or id, as cdk deploy takes it), repeatable; default: every stack of the app',
      collectStack,
      [],
    )
    .option('--stage <stage>', 'passes -c stage=<stage> (the reference app deploys leaseq-<stage>)')
    .option(
      '-c, --context <key=value>',
      'CDK context for the app, repeatable (-c maxAttempts=3)',
      collectContext,
      {},
    )
    .option('--outputs-file <file>', 'where the stack outputs go', '.leaseq/stack-outputs.json')
    .option('--output <dir>', 'cloud assembly directory (cdk --output)', 'cdk.out')
    .option('--json', 'print the result as JSON')
    .action(async (flags: DeployFlags) => {
      const target = await deployTarget('deploy');
      try {
        const result = await deployLocal({
          ...target.common,
          stacks: flags.stack,
          context: appContext(flags),
          outputsFile: flags.outputsFile,
          cdkOut: flags.output,
          dynamodb: target.clients.ddb,
        });
        if (flags.json) print(JSON.stringify({ ...result, outputsFile: flags.outputsFile }));
        else {
          for (const stack of result.stacks) {
            if (result.stacks.length > 1) print(`${stack.stackName}:`);
            const indent = result.stacks.length > 1 ? '  ' : '';
            for (const [key, value] of Object.entries(stack.outputs))
              print(`${indent}${key.padEnd(22)} ${value}`);
          }
          const names = result.stacks.map((s) => s.stackName).join(', ') || 'no stack';
          const withQueue = result.stacks.some((s) => 'JobsQueueUrl' in s.outputs);
          progress(
            `deployed ${names} in ${result.seconds.toFixed(1)} s${result.bootstrapped ? ' (bootstrapped first)' : ''}; outputs in ${flags.outputsFile}${withQueue ? `: \`leaseq status --outputs ${flags.outputsFile}\`` : ''}`,
          );
        }
      } finally {
        target.close();
      }
    });

  local
    .command('destroy')
    .description(
      'cdk destroy of the CDK app in this directory on the emulator (every stack, or those named with --stack), then stop the function processes the emulator leaves running for them and remove their folders',
    )
    .option(
      '--stack <name>',
      'a stack to destroy, repeatable; default: every stack of the app',
      collectStack,
      [],
    )
    .option('--stage <stage>', 'passes -c stage=<stage> (the reference app destroys leaseq-<stage>)')
    .option('-c, --context <key=value>', 'CDK context for the app, repeatable', collectContext, {})
    .option('--output <dir>', 'cloud assembly directory (cdk --output)', 'cdk.out')
    .option('--yes', 'do not ask (scripts, CI); without a terminal a destroy refuses without it')
    .option('--json', 'print the result as JSON')
    .action(async (flags: Omit<DeployFlags, 'outputsFile'> & { yes?: boolean }) => {
      const target = await deployTarget('destroy');
      try {
        progress(target.line);
        const which = stacksLine(flags.stack);
        if (!target.servesStacks) {
          progress(
            `the emulator serves queues and tables only, so it holds no stack: ${which} is not there; nothing destroyed`,
          );
          return;
        }
        // Which stacks are there now, so the question names them (which of them are this app's, only cdk's
        // synth knows; a destroy leaves the others).
        const present = await emulatorStacks(target.common.cloudFormation);
        if (present.length === 0) {
          progress(`no stack on ${endpointText(target.common.endpoint)}: nothing destroyed`);
          return;
        }
        const confirmed = await confirmChange(
          {
            verb: 'destroy',
            // What a person types to confirm off this machine: the names, or `all`.
            name: target.local || flags.stack.length > 0 ? flags.stack.join(' ') || which : 'all',
            what:
              `cdk destroy of ${which} on ${endpointText(target.common.endpoint)} (stacks there now: ${present.join(', ')}): ` +
              'their queues, tables (with their items) and functions',
            local: target.local,
          },
          flags.yes,
        );
        if (!confirmed) {
          process.exitCode = 1;
          return;
        }
        const result = await destroyLocal({
          ...target.common,
          stacks: flags.stack,
          context: appContext(flags),
          cdkOut: flags.output,
        });
        if (flags.json) print(JSON.stringify(result));
        else if (result.destroyed.length > 0)
          progress(`destroyed ${result.destroyed.join(', ')} in ${result.seconds.toFixed(1)} s`);
        else
          progress(`no stack of the app was on ${endpointText(target.common.endpoint)}: nothing destroyed`);
      } finally {
        target.close();
      }
    });

  local
    .command('down')
    .description('stop the emulator that `leaseq local up` started')
    .option('--json', 'print the result as JSON')
    .action(async (flags: { json?: boolean }) => {
      const result = await stopEmulator();
      print(flags.json ? JSON.stringify(result) : describeDown(result));
    });

  local
    .command('status')
    .description(`show the emulator and whether it answers (exit code ${EXIT_NOT_RUNNING} when it does not)`)
    .option(
      '--port <port>',
      'port to report when none is running (default: $LEASEQ_EMULATOR_PORT or 4566)',
      portArgument,
    )
    .option('--json', 'print the result as JSON')
    .action(async (flags: UpFlags) => {
      const status = await emulatorStatus(flags.port === undefined ? {} : { port: flags.port });
      print(flags.json ? JSON.stringify(status) : describeStatus(status));
      if (!status.answering) process.exitCode = EXIT_NOT_RUNNING;
    });
}
