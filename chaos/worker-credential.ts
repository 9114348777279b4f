import { type LocalCredential, ownCredentialFor } from '../shared/aws/local-credential.ts';

/**
 * The credential the chaos workers sign with. They reach the store through Toxiproxy, on another port,
 * where the clients would not find the emulator's credential by its port: they get it in their
 * environment. That is the embedded emulator's of this start, or, when AWS_ENDPOINT_URL names leaseq's
 * emulator of this state directory (an "external" one to this run), the one stored for its port.
 */
export function workerCredential(
  emulator: { readonly endpoint: string; readonly credentials?: LocalCredential },
  env: NodeJS.ProcessEnv = process.env,
): LocalCredential | undefined {
  return emulator.credentials ?? ownCredentialFor(emulator.endpoint, env);
}
