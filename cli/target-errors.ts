/**
 * What a command says when its target cannot be reached or the stack outputs it was given name no
 * target it can use: one line on what happened, with the advice for that case only (no credentials
 * advice for a network failure, no `local up` for an endpoint the shell chose).
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { QueueDoesNotExist } from '@aws-sdk/client-sqs';
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { endpointText } from '../shared/aws/endpoint-text.ts';
import { ConfigError } from '../shared/errors.ts';
import { credentialSource } from './remote-endpoint.ts';

/** A problem the user fixes with a flag or a command; printed as one line. */
export class TargetError extends ConfigError {
  constructor(message: string) {
    super(message);
    this.name = 'TargetError';
  }
}

/** Where the requests went (`http://127.0.0.1:4566`, `AWS (eu-west-1)`) and what to do when it is down. */
export interface Place {
  readonly name: string;
  readonly advice: string;
}

/** The advice for a target that does not answer, by what chose it (`TargetChoice.why`). */
export function placeFor(endpoint: string, why: string): Place {
  const where = endpointText(endpoint);
  if (why === 'AWS_ENDPOINT_URL') {
    return {
      name: where,
      advice:
        'AWS_ENDPOINT_URL names it: start what should answer there, or unset AWS_ENDPOINT_URL to use the embedded emulator (`npx leaseq local up`)',
    };
  }
  if (why === '--endpoint')
    return { name: where, advice: 'start what should answer there, or check --endpoint' };
  if (why.startsWith('running')) {
    return { name: where, advice: 'the embedded emulator stopped meanwhile: `npx leaseq local status`' };
  }
  return { name: where, advice: 'check the network (or the proxy) to AWS' };
}

const NETWORK_CODES = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_NONAME',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENETDOWN',
]);

/** True when the request never got an HTTP answer: no route, no name, refused, or timed out. */
export function isNetworkFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if ((error as { $response?: unknown }).$response !== undefined) return false;
  const code = 'code' in error ? String(error.code) : '';
  return (
    NETWORK_CODES.has(code) ||
    error.name === 'TimeoutError' ||
    /getaddrinfo|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|socket hang up/.test(
      error.message,
    )
  );
}

/** SQS's answer for a queue that is not there (the JSON and the query protocol name it differently). */
export function isMissingQueue(error: unknown): boolean {
  return (
    error instanceof QueueDoesNotExist || (error instanceof Error && error.name.includes('NonExistentQueue'))
  );
}

function detailOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The caller's account on AWS (STS GetCallerIdentity): who the command acts as. */
export async function callerAccount(region: string, env: NodeJS.ProcessEnv): Promise<string> {
  const sts = new STSClient({
    region,
    maxAttempts: 2,
    requestHandler: new NodeHttpHandler({
      connectionTimeout: 3000,
      requestTimeout: 5000,
      throwOnRequestTimeout: true,
    }),
  });
  try {
    const out = await sts.send(new GetCallerIdentityCommand({}));
    if (!out.Account) throw new Error('no account in the answer');
    return out.Account;
  } catch (error) {
    if (isNetworkFailure(error)) {
      throw new TargetError(
        `cannot reach AWS STS in ${region} (${detailOf(error)}): no network, a proxy or firewall in the way, or no such region; the credentials were not checked`,
      );
    }
    throw new TargetError(
      `cannot tell which AWS account this is (STS GetCallerIdentity: ${detailOf(error)}); check the credentials (${credentialSource(env)})`,
    );
  } finally {
    sts.destroy();
  }
}

/**
 * A host name that does not resolve is reported as such, before the SDK would report something else
 * first (missing credentials for a non-local endpoint).
 */
export async function assertHostResolves(endpoint: string): Promise<void> {
  const host = new URL(endpoint).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) || host === 'localhost') return;
  try {
    await lookup(host);
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? String(error.code) : '';
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') {
      throw new TargetError(
        `cannot reach ${endpointText(endpoint)}: the host ${host} does not resolve; check --endpoint or AWS_ENDPOINT_URL`,
      );
    }
  }
}

export function unreachable(error: unknown, where: Place): Error {
  if (error instanceof TargetError) return error;
  // The SDK got an answer it could not read as SQS: a web server, a proxy, another service's port.
  const response = (error as { $response?: { statusCode?: number } } | null)?.$response;
  if (
    response?.statusCode !== undefined &&
    error instanceof Error &&
    /Deserialization|not valid JSON|Unexpected token/.test(error.message)
  ) {
    return new TargetError(
      `${where.name} answered, but not like SQS (HTTP ${response.statusCode}); is it the right port? (the embedded emulator: \`npx leaseq local status\`)`,
    );
  }
  return new TargetError(`cannot reach ${where.name} (${detailOf(error)}); ${where.advice}`);
}

/** Accounts emulators use (moto's is also the one AWS's documentation shows): no real deployment's. */
export const EMULATOR_ACCOUNTS = new Set(['000000000000', '123456789012']);

/**
 * Why stack outputs (`--outputs <file>`, jobs queue `queueUrl`) choose no target when neither an
 * endpoint nor AWS was chosen and the embedded emulator is `running` or not; `undefined` when the
 * running emulator is theirs to use.
 */
export function outputsWithoutTarget(file: string, queueUrl: string, running: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(queueUrl);
  } catch {
    return undefined;
  }
  const account = /^\/(\d{12})\//.exec(url.pathname)?.[1];
  if (/\.amazonaws\.com(\.cn)?$/.test(url.hostname) && account && EMULATOR_ACCOUNTS.has(account)) {
    return `--outputs ${file} names queues of account ${account} on an AWS host, an example or emulator account and no real one, nor the embedded emulator's: pass --endpoint <url> of the emulator that wrote it, or use the outputs of a real deploy`;
  }
  if (!running && /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])$/.test(url.hostname)) {
    return `--outputs ${file} names queues on ${url.origin}, where nothing runs (no embedded emulator started): start it with \`npx leaseq local up\`, or pass --endpoint <url> of the emulator that wrote it`;
  }
  return undefined;
}
