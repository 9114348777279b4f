// What `leaseq local` prints for people: the provision, up, down and status summaries (pure text).
import { relative } from 'node:path';
import { endpointText } from '../../shared/aws/endpoint-text.ts';
import type { EmulatorHandle, EmulatorStatus, StopResult } from '../../shared/local/emulator.ts';
import type { EmulatorServices } from '../../shared/local/emulator-config.ts';
import type { ProvisionResult } from '../../shared/local/provision.ts';

export function describeProvision(result: ProvisionResult, endpoint: string, jobModule?: string): string {
  const lines = [...result.queues, ...result.tables].map(
    (r) => `${r.action.padEnd(8)} ${'url' in r ? 'queue' : 'table'} ${r.name}`,
  );
  const module = jobModule ? ` --job-module ${jobModule}` : '';
  lines.push(
    `prefix ${result.prefix} at ${endpointText(endpoint)}: \`leaseq workers --prefix ${result.prefix}${module}\` runs your jobs`,
  );
  for (const note of result.notes) lines.push(`note: ${note}`);
  return lines.join('\n');
}

/** What the emulator serves, for people. */
function servicesLine(services: EmulatorServices | undefined): string {
  return services === 'queues-and-tables'
    ? 'queues and tables only (SQS, DynamoDB, STS); `leaseq local up --all-services` adds functions and stacks'
    : 'every service, functions and stacks included';
}

export function shortPath(path: string | undefined): string {
  if (!path) return '';
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

function seconds(ms: number | undefined): string {
  return ms === undefined ? '?' : `${(ms / 1000).toFixed(1)} s`;
}

export function describeUp(handle: EmulatorHandle): string {
  if (handle.mode === 'external') {
    return `AWS_ENDPOINT_URL is set: using ${endpointText(handle.endpoint)} (it answers); leaseq started nothing`;
  }
  const name = `${handle.emulator} ${handle.version}`;
  if (handle.restarted) {
    return `${name} restarted at ${handle.endpoint} (pid ${handle.pid}); its queues and tables are gone\nserves: ${servicesLine(handle.services)}`;
  }
  if (!handle.started) {
    return `${name} already running at ${handle.endpoint} (pid ${handle.pid})\nserves: ${servicesLine(handle.services)}`;
  }
  return [
    `${name} started at ${handle.endpoint} (pid ${handle.pid}, answered after ${seconds(handle.startupMs)})`,
    `serves: ${servicesLine(handle.services)}`,
    `logs: ${shortPath(handle.logFile)}; stop it with: leaseq local down`,
    'other tools (AWS CLI, boto3, SDKs): eval "$(leaseq local env)"; it serves only requests signed with its credential',
  ].join('\n');
}

export function describeDown(result: StopResult): string {
  if (!result.stopped) return 'no embedded emulator is running; nothing to stop';
  const how = result.killed ? 'killed (it ignored SIGTERM)' : 'stopped';
  return `emulator ${how} (pid ${result.pid}, port ${result.port})`;
}

export function describeStatus(status: EmulatorStatus): string {
  if (status.mode === 'external') {
    const state = status.answering ? 'answering' : `not answering (${status.reason})`;
    return `endpoint: ${endpointText(status.endpoint)} (AWS_ENDPOINT_URL; leaseq does not manage it)\nstate:    ${state}`;
  }
  if (!status.running) {
    return `emulator: ${status.emulator} ${status.version} is not running; \`leaseq local up\` starts it on ${status.endpoint}`;
  }
  const lines = [
    `emulator: ${status.emulator} ${status.version} (embedded)`,
    `endpoint: ${endpointText(status.endpoint)}`,
    `state:    ${status.answering ? 'answering' : `running but not answering (${status.reason})`}, pid ${status.pid}, since ${status.startedAt} (answered after ${seconds(status.startupMs)})`,
  ];
  lines.push(`serves:   ${servicesLine(status.services)}`);
  if (status.rssBytes !== undefined)
    lines.push(`memory:   ${(status.rssBytes / 1024 / 1024).toFixed(1)} MiB RSS`);
  lines.push(`log:      ${shortPath(status.logFile)}`);
  return lines.join('\n');
}
