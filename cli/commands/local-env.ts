/**
 * `leaseq local env`: what another tool (the AWS CLI, boto3, an SDK, `curl --aws-sigv4`) needs to call the
 * embedded emulator, which serves only requests signed with the credential of its start.
 */
import type { Command } from 'commander';
import { awsConfigFromEnv } from '../../shared/aws/clients.ts';
import { type LocalEmulatorAccess, localEmulatorAccess } from '../../shared/local/emulator.ts';

/** The variables to export, in the order they are printed. */
export function accessVariables(access: LocalEmulatorAccess, region: string): Record<string, string> {
  return {
    AWS_ENDPOINT_URL: access.endpoint,
    AWS_ACCESS_KEY_ID: access.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: access.credentials.secretAccessKey,
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
  };
}

/**
 * The lines `eval "$(leaseq local env)"` runs. A session token or profile of the shell would go with
 * the emulator's keys (or win over them), so they are unset first. The values are letters, digits,
 * `-`, `_`, `:`, `/` and `.` only: no quoting needed.
 */
export function shellLines(variables: Record<string, string>): string {
  const exports = Object.entries(variables).map(([name, value]) => `${name}=${value}`);
  return `unset AWS_SESSION_TOKEN AWS_PROFILE\nexport ${exports.join(' ')}`;
}

export function registerLocalEnv(local: Command): void {
  local
    .command('env')
    .description(
      'print the endpoint and credential of the running emulator for other tools: eval "$(leaseq local env)" (AWS CLI, boto3, SDKs)',
    )
    .option('--json', 'print them as JSON')
    .action((flags: { json?: boolean }) => {
      const access = localEmulatorAccess();
      const region = awsConfigFromEnv().region;
      const variables = accessVariables(access, region);
      if (flags.json) {
        process.stdout.write(
          `${JSON.stringify({ endpoint: access.endpoint, region, ...access.credentials, env: variables })}\n`,
        );
        return;
      }
      process.stdout.write(`${shellLines(variables)}\n`);
      if (process.stdout.isTTY) {
        process.stderr.write(
          'leaseq: the credential changes at every start of the emulator: run this again after `leaseq local up` starts it\n',
        );
      }
    });
}
