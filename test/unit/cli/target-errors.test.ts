import { describe, expect, it } from 'vitest';
import { isNetworkFailure, placeFor, unreachable } from '../../../cli/target-errors.ts';

// A request that got no HTTP answer is a network failure (no credentials advice); the advice for a target
// that does not answer follows what chose it.

function codeError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('Logic: target errors', () => {
  it('tells a request that got no answer from one that got a refusal', () => {
    expect(
      isNetworkFailure(codeError('EAI_AGAIN', 'getaddrinfo EAI_AGAIN sts.us-east-1.amazonaws.com')),
    ).toBe(true);
    expect(isNetworkFailure(codeError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9'))).toBe(true);
    expect(isNetworkFailure(Object.assign(new Error('timed out'), { name: 'TimeoutError' }))).toBe(true);
    const refused = Object.assign(new Error('The security token included in the request is invalid.'), {
      name: 'InvalidClientTokenId',
      $response: { statusCode: 403 },
    });
    expect(isNetworkFailure(refused)).toBe(false);
    expect(isNetworkFailure('not an error')).toBe(false);
  });

  it('gives the advice for what chose the target', () => {
    const down = codeError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:4599');
    expect(unreachable(down, placeFor('http://127.0.0.1:4599', 'AWS_ENDPOINT_URL')).message).toBe(
      'cannot reach http://127.0.0.1:4599 (Error: connect ECONNREFUSED 127.0.0.1:4599); AWS_ENDPOINT_URL names it: start what should answer there, or unset AWS_ENDPOINT_URL to use the embedded emulator (`npx leaseq local up`)',
    );
    expect(unreachable(down, placeFor('http://127.0.0.1:4599', '--endpoint')).message).toMatch(
      /; start what should answer there, or check --endpoint$/,
    );
    expect(
      unreachable(down, placeFor('http://127.0.0.1:4566', 'running, pid 1, started by leaseq')).message,
    ).toMatch(/; the embedded emulator stopped meanwhile/);
  });
});
