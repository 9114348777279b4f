import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, test } from 'vitest';
import { InvalidPortError } from '../../../shared/local/emulator-errors.ts';
import { isPortFree, parsePort, probeHttp } from '../../../shared/local/net.ts';
import { close, freePort, listen, portOf } from './fixtures.ts';

describe('Function: parsePort', () => {
  test.each([
    ['4566', 4566],
    [' 4567 ', 4567],
    [1, 1],
    ['65535', 65_535],
  ])('accepts %j', (value, expected) => {
    expect(parsePort(value, '--port')).toBe(expected);
  });

  test.each([[undefined], ['']])('treats %j as not given', (value) => {
    expect(parsePort(value, '--port')).toBeUndefined();
  });

  test.each([['0'], ['65536'], ['abc'], ['45.6'], ['-1'], ['4566x']])(
    'rejects %j with the value and the source',
    (value) => {
      expect(() => parsePort(value, 'LEASEQ_EMULATOR_PORT')).toThrow(InvalidPortError);
      expect(() => parsePort(value, 'LEASEQ_EMULATOR_PORT')).toThrow(
        `invalid port "${value}" from LEASEQ_EMULATOR_PORT: expected an integer from 1 to 65535`,
      );
    },
  );
});

describe('Function: isPortFree', () => {
  const servers: Array<{ close: (cb: () => void) => unknown }> = [];
  afterEach(async () => {
    await Promise.all(
      servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
  });

  test('is true for a port nothing listens on', async () => {
    expect(await isPortFree(await freePort())).toBe(true);
  });

  test('is false while a socket listens on 127.0.0.1 at that port', async () => {
    // Prepare
    const server = await listen(0);
    servers.push(server);

    // Act + Assess
    expect(await isPortFree(portOf(server))).toBe(false);
  });

  test('is false while a socket listens on all interfaces (0.0.0.0) at that port', async () => {
    const server = await listen(0, '0.0.0.0');
    servers.push(server);
    expect(await isPortFree(portOf(server))).toBe(false);
  });

  test('is true again once that socket is closed', async () => {
    const server = await listen(0);
    const port = portOf(server);
    await close(server);
    expect(await isPortFree(port)).toBe(true);
  });
});

describe('Function: probeHttp', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  function httpServer(handler: Parameters<typeof createServer>[1]): Promise<number> {
    return new Promise((resolve) => {
      server = createServer(handler);
      server.listen(0, '127.0.0.1', () => {
        const address = server?.address();
        resolve(typeof address === 'object' && address ? address.port : 0);
      });
    });
  }

  test('counts any HTTP status as an answer', async () => {
    const port = await httpServer((_req, res) => {
      res.writeHead(403).end('denied');
    });
    expect(await probeHttp(`http://127.0.0.1:${port}`, 2000)).toEqual({ ok: true, status: 403 });
  });

  test('reports a closed port as connection refused, at once', async () => {
    const port = await freePort();
    const started = Date.now();
    expect(await probeHttp(`http://127.0.0.1:${port}`, 3000)).toEqual({
      ok: false,
      reason: 'connection refused',
    });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  test('gives up on a server that never answers after the timeout', async () => {
    const port = await httpServer(() => {
      // Never respond.
    });
    const started = Date.now();
    const result = await probeHttp(`http://127.0.0.1:${port}`, 500);
    expect(result).toEqual({ ok: false, reason: 'no answer within 0.5 s' });
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
