import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { createUiApp, type UiConfig } from './app.ts';
import { newUiHost } from './guard.ts';

/** The address the inspector is reached on: the machine's loopback, never a network interface. */
export const UI_HOST = '127.0.0.1';

/**
 * The IPv6 loopback, held on the same port: browsers resolve `*.localhost` to `::1` before `127.0.0.1`
 * and connect to the first that answers, so a server another user put on `[::1]:<port>` would receive
 * the printed link (its token and the host name) and every request after it.
 */
export const UI_HOST_V6 = '::1';

/** Errors of a `::1` bind that mean the machine has no IPv6 loopback (then no one can listen there). */
const NO_IPV6 = new Set(['EADDRNOTAVAIL', 'EAFNOSUPPORT']);

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const failed = (error: Error) => reject(error);
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve(server.address() as AddressInfo);
    });
  });
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    // Open keep-alive connections (a browser tab) would hold close() until they time out.
    server.closeAllConnections?.();
    server.close(() => resolve());
  });

/**
 * Listens on 127.0.0.1:`port` and [::1] at the same port (`port` 0: one free on both, a few tries).
 * @throws the bind error (`code` EADDRINUSE, `address` the one taken) when either is in use.
 */
async function listenOnLoopbacks(
  make: () => Server,
  port: number,
): Promise<{ servers: Server[]; info: AddressInfo }> {
  for (let attempt = 1; ; attempt++) {
    const v4 = make();
    const info = await listen(v4, port, UI_HOST);
    const v6 = make();
    try {
      await listen(v6, info.port, UI_HOST_V6);
      return { servers: [v4, v6], info };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      if (NO_IPV6.has(code)) return { servers: [v4], info };
      await closeServer(v4);
      if (port !== 0 || code !== 'EADDRINUSE' || attempt >= 5) throw error;
    }
  }
}

export interface RunningUi {
  /** `http://leaseq-<random>.localhost:<port>/`: the pages answer on this host name only. */
  readonly origin: string;
  /** `leaseq-<random>.localhost`, new each start. */
  readonly host: string;
  readonly port: number;
  /** The URL to open: the origin with `?token=` (used once: session.ts). */
  readonly url: string;
  /** Where workers send spans: `http://127.0.0.1:<port>` (their resolver may not know `*.localhost`). */
  readonly tracesEndpoint: string;
  /** The address the printed endpoints name (127.0.0.1); [::1] at the same port is held too. */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * Starts the inspector on 127.0.0.1:`port` (0: any free port) and [::1] at the same port, answering
 * pages on a host name of its own (`config.host`, else a new random one).
 */
export async function startUi(
  config: Omit<UiConfig, 'port' | 'host'> & { readonly host?: string },
  port: number,
): Promise<RunningUi> {
  let bound = port;
  const host = config.host ?? newUiHost();
  const app = createUiApp({ ...config, host, port: () => bound });
  const { servers, info } = await listenOnLoopbacks(
    () => createAdaptorServer({ fetch: app.fetch }) as Server,
    port,
  );
  bound = info.port;
  const origin = `http://${host}:${bound}/`;
  return {
    origin,
    host,
    port: bound,
    url: `${origin}?token=${config.token}`,
    tracesEndpoint: `http://${UI_HOST}:${bound}`,
    address: info.address,
    close: async () => {
      await Promise.all(servers.map(closeServer));
    },
  };
}
