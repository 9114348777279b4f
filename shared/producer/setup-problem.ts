/**
 * Failures of a send that come from the sender's own setup, not from SQS: no credentials, or an
 * endpoint host that does not exist. Both get the one line that says what to set. Only the host is
 * final (`isFinalSetup`): "no credentials" is also what the SDK's chain says when the instance
 * metadata service or container credentials endpoint is briefly unavailable, and a later try passes.
 */

/** The SDK's error when no provider of its chain found credentials. */
const NO_CREDENTIALS = 'CredentialsProviderError';

/**
 * The name of a Node system error (`ENOTFOUND`, `ECONNREFUSED`), else the error's own name: the SDK
 * passes network errors through as a plain `Error` whose name says nothing.
 */
export function failureCode(error: unknown): string {
  if (!(error instanceof Error)) return 'Error';
  const code = (error as { code?: unknown }).code;
  return error.name === 'Error' && typeof code === 'string' && /^E[A-Z_]+$/.test(code) ? code : error.name;
}

/**
 * What the sender must set for `error` to go away, in one line; `undefined` when the failure is not one
 * of setup (a throttled or failing SQS, a timeout, a refused connection: a later try may pass).
 */
export function setupProblem(error: unknown): string | undefined {
  const code = failureCode(error);
  if (code === NO_CREDENTIALS) {
    return (
      'no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; ' +
      'for the local emulator use localJobProducer() or its queue URL on 127.0.0.1, which need none'
    );
  }
  // ENOTFOUND is the name server saying the host does not exist; EAI_AGAIN (no answer yet) may pass.
  if (code === 'ENOTFOUND') {
    const host = (error as { hostname?: unknown }).hostname;
    const name = typeof host === 'string' && host ? host : 'the endpoint host';
    return (
      `${name} does not resolve: set AWS_ENDPOINT_URL to the endpoint that serves the queue ` +
      '(for the local emulator use localJobProducer()), or AWS_REGION to the queue region'
    );
  }
  return undefined;
}

/** Whether a failure with this code fails the same way on every retry until the sender changes something. */
export function isFinalSetup(code: string): boolean {
  return code === 'ENOTFOUND';
}
