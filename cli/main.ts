import { Command } from 'commander';
import * as cancel from './commands/cancel.ts';
import * as dlq from './commands/dlq.ts';
import * as inspect from './commands/inspect.ts';
import * as jobs from './commands/jobs.ts';
import * as leases from './commands/leases.ts';
import * as local from './commands/local.ts';
import * as send from './commands/send.ts';
import * as start from './commands/start.ts';
import * as status from './commands/status.ts';
import * as ui from './commands/ui.ts';
import * as workers from './commands/workers.ts';
import { type CommandModule, runCli } from './errors.ts';
import { exitCleanlyOnClosedStdout } from './format.ts';
import { packageVersion } from './version.ts';

/**
 * Command modules, each exporting `register(program)`. To add one: import it and list it here.
 */
const modules: readonly CommandModule[] = [
  local,
  start,
  workers,
  send,
  status,
  inspect,
  jobs,
  leases,
  dlq,
  cancel,
  ui,
];

// The project supports Node >= 20 (package.json engines); the SDK's multi-line notice about its own
// future Node 22 requirement would precede every command's output.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const program = new Command('leaseq')
  .description('Exactly-once-in-effect job processing on Amazon SQS + DynamoDB')
  .version(packageVersion(), '-V, --version', 'print the leaseq version')
  .showHelpAfterError(false);
for (const module of modules) module.register(program);

exitCleanlyOnClosedStdout();
process.exitCode = await runCli(program, process.argv);
