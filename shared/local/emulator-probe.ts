/**
 * Health probing: whether an AWS endpoint answers. The embedded emulator counts as up only once both
 * services leaseq uses answer a real call; an external endpoint only needs to answer HTTP, since leaseq
 * neither starts nor knows it.
 */
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListQueuesCommand } from '@aws-sdk/client-sqs';
import { createAwsClients, destroyAwsClients } from '../aws/clients.ts';
import type { LocalCredential } from '../aws/local-credential.ts';
import { EndpointUnreachableError } from './emulator-errors.ts';
import { probeHttp } from './net.ts';
import { sleep } from './process.ts';

/**
 * Polls the endpoint with the cheapest calls leaseq needs from both services until both answer,
 * `isGone()` reports the process gone, or the deadline passes.
 */
export async function waitUntilAnswering(
  endpoint: string,
  deadline: number,
  isGone: () => string | undefined,
  credentials?: LocalCredential,
): Promise<'ready' | 'exited' | 'timeout'> {
  const clients = createAwsClients({
    ...(credentials ? { credentials } : {}),
    endpoint,
    region: 'us-east-1',
    maxAttempts: 1,
    connectTimeoutMs: 1000,
    requestTimeoutMs: 5000,
  });
  try {
    for (;;) {
      if (isGone() !== undefined) return 'exited';
      try {
        await clients.ddb.send(new ListTablesCommand({ Limit: 1 }));
        await clients.sqs.send(new ListQueuesCommand({ MaxResults: 1 }));
        return 'ready';
      } catch {
        // Not up yet.
      }
      if (Date.now() >= deadline) return 'timeout';
      await sleep(100);
    }
  } finally {
    destroyAwsClients(clients);
  }
}

/**
 * Checks that an explicit endpoint answers HTTP within `timeoutMs`.
 * @throws EndpointUnreachableError
 */
export async function checkEndpoint(endpoint: string, timeoutMs = 3000): Promise<void> {
  const probe = await probeHttp(endpoint, timeoutMs);
  if (!probe.ok) throw new EndpointUnreachableError(endpoint, probe.reason);
}
