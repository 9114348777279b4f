/** What an endpoint that is not on this machine receives when leaseq signs with the operator's keys. */
import { isLocalEndpoint } from '../shared/aws/clients.ts';

/** Where the AWS credentials come from, as a person reads it (no secret in it). */
export function credentialSource(env: NodeJS.ProcessEnv): string {
  if (env.AWS_PROFILE?.trim()) return `AWS_PROFILE=${env.AWS_PROFILE.trim()}`;
  if (env.AWS_ACCESS_KEY_ID?.trim()) return 'AWS_ACCESS_KEY_ID';
  return 'the default credentials';
}

/**
 * The warning for an endpoint that is not on this machine, reached with the operator's own credentials:
 * every signed request hands it the access key id (and any session token). `undefined` for a local
 * endpoint, for AWS itself, and when the keys are the emulators' `test` ones.
 */
export function remoteEndpointWarning(
  endpoint: string | undefined,
  env: NodeJS.ProcessEnv,
): string | undefined {
  if (endpoint === undefined || isLocalEndpoint(endpoint)) return undefined;
  if (env.AWS_ACCESS_KEY_ID?.trim() === 'test') return undefined;
  return `warning: ${endpoint} is not on this machine, and requests to it are signed with your AWS credentials (${credentialSource(env)}): it receives your access key id and any session token; use keys meant for it (AWS_ACCESS_KEY_ID=test for an emulator)`;
}
