import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { boundedSignal } from '../../../../shared/core/leases/timeout-signal.ts';
import { StoreUnavailableError } from '../../../../shared/errors.ts';

// A store that accepts connections and never answers (a black hole): the real SDK would wait 10 s per
// attempt, three attempts. A bounded call must give up when its signal fires, retries included.

let server: Server;
let endpoint: string;
const sockets = new Set<Socket>();

beforeAll(async () => {
  server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no address');
  endpoint = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('DynamoDbJobStore: calls bounded by a signal', () => {
  it('abandons a claim and a renewal against a store that never answers when the signal fires', async () => {
    const clients = createAwsClients({
      endpoint,
      region: 'us-east-1',
      requestTimeoutMs: 10_000,
      maxAttempts: 3,
    });
    const store = new DynamoDbJobStore({ client: clients.doc, tableName: 'jobs' });
    try {
      const started = Date.now();
      const bound = boundedSignal(300, 'test budget');
      const claim = store.claim(
        {
          dedupKey: 'k',
          owner: 'w',
          messageId: 'm',
          type: 't',
          createdAt: new Date().toISOString(),
          leaseMs: 3000,
          now: Date.now(),
        },
        { signal: bound.signal },
      );
      await expect(claim).rejects.toBeInstanceOf(StoreUnavailableError);
      const claimMs = Date.now() - started;

      const lease = {
        dedupKey: 'k',
        owner: 'w',
        token: 1,
        attempts: 1,
        messageId: 'm',
        version: 1,
        leaseUntil: 0,
      };
      const renewStarted = Date.now();
      const renewBound = boundedSignal(300, 'test budget');
      await expect(store.renew(lease, 3000, Date.now(), { signal: renewBound.signal })).rejects.toThrow(
        /timed out after 300 ms/,
      );
      const renewMs = Date.now() - renewStarted;
      // Far below one SDK attempt (10 s): the abort stopped the request and its retries.
      expect(claimMs).toBeLessThan(3000);
      expect(renewMs).toBeLessThan(3000);
      expect(lease.leaseUntil).toBe(0);
    } finally {
      destroyAwsClients(clients);
    }
  });
});
