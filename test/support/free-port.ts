import { createServer } from 'node:net';

/** Below Linux's ephemeral range (32768-60999), from which outbound connections take their local ports. */
const LOW = 20_000;
const HIGH = 32_000;

/**
 * A loopback port nothing listens on right now, for a server a test starts later (often twice, around a
 * stop). Chosen below the ephemeral range: a port the kernel hands out (`listen(0)`) can be taken by any
 * outbound connection of the test files running beside this one before the server binds it again.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (await canListen(port, host)) return port;
  }
  throw new Error(`no free port between ${LOW} and ${HIGH} after 50 tries`);
}

function canListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}
