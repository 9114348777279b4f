import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

/** The Toxiproxy release the harness builds and drives (`@latest` resolves to an old one). */
export const TOXIPROXY_VERSION = 'v2.12.0';
const TOXIPROXY_PACKAGE = 'github.com/Shopify/toxiproxy/v2/cmd/server';

/** One toxic as Toxiproxy's HTTP API takes it. */
export interface Toxic {
  readonly name: string;
  readonly type: 'latency' | 'timeout' | 'reset_peer' | 'limit_data' | 'bandwidth' | 'slow_close';
  /** `downstream`: answers from the store; `upstream`: requests to it. */
  readonly stream: 'upstream' | 'downstream';
  readonly toxicity?: number;
  readonly attributes: Readonly<Record<string, number>>;
}

/** Where the Toxiproxy server binary is built: `<stateDir>/toxiproxy-<version>/server`. */
export function toxiproxyPath(stateDir: string): string {
  return join(stateDir, `toxiproxy-${TOXIPROXY_VERSION}`, 'server');
}

/** The `go install` that builds the binary into `GOBIN` (the directory of {@link toxiproxyPath}). */
export function toxiproxyInstall(stateDir: string): {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
} {
  const dir = dirname(toxiproxyPath(stateDir));
  mkdirSync(dir, { recursive: true });
  return {
    command: 'go',
    args: ['install', `${TOXIPROXY_PACKAGE}@${TOXIPROXY_VERSION}`],
    env: { ...process.env, GOBIN: dir },
  };
}

/**
 * The Toxiproxy server binary, built once with the Go toolchain into `<stateDir>/toxiproxy-<version>/`.
 * Returns undefined (with the reason logged) when it cannot be built, so the harness runs without it.
 */
export function toxiproxyBinary(stateDir: string, log: (line: string) => void): string | undefined {
  const binary = toxiproxyPath(stateDir);
  if (existsSync(binary)) return binary;
  log(`building toxiproxy ${TOXIPROXY_VERSION} with go install (first use, about 30 s)`);
  const install = toxiproxyInstall(stateDir);
  const built = spawnSync(install.command, install.args, {
    env: install.env,
    encoding: 'utf8',
    timeout: 300_000,
  });
  if (built.status !== 0 || !existsSync(binary)) {
    const why = built.error?.message ?? built.stderr.trim().split('\n').slice(-2).join(' ');
    log(`could not build toxiproxy (${why}); network faults fall back to SDK middleware only`);
    return undefined;
  }
  return binary;
}

/** A free TCP port on 127.0.0.1 (asks the kernel for one, then lets it go). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A Toxiproxy server on 127.0.0.1 with one proxy in front of the store endpoint: the workers talk to
 * `endpoint`, everyone else to the store directly. Toxics are added and removed through its HTTP API.
 */
export class ToxiproxyFront {
  readonly endpoint: string;
  readonly #api: string;
  readonly #child: ChildProcess;
  readonly #proxy = 'store';

  private constructor(child: ChildProcess, api: string, endpoint: string) {
    this.#child = child;
    this.#api = api;
    this.endpoint = endpoint;
  }

  /** Starts the server and creates the proxy to `upstream` (an http://host:port URL). */
  static async start(binary: string, upstream: string, logFile: string): Promise<ToxiproxyFront> {
    const [apiPort, listenPort] = [await freePort(), await freePort()];
    const fd = openSync(logFile, 'a');
    const child = spawn(binary, ['-host', '127.0.0.1', '-port', String(apiPort)], {
      stdio: ['ignore', fd, fd],
      // Its default level traces every connection; the harness opens thousands.
      env: { ...process.env, LOG_LEVEL: 'info' },
    });
    // Never leave the proxy behind, whatever ends this process.
    process.once('exit', () => child.kill('SIGKILL'));
    const api = `http://127.0.0.1:${apiPort}`;
    const front = new ToxiproxyFront(child, api, `http://127.0.0.1:${listenPort}`);
    for (let i = 0; ; i++) {
      try {
        await front.#call('GET', '/version');
        break;
      } catch (error) {
        if (i >= 50 || child.exitCode !== null) throw new Error(`toxiproxy did not start: ${String(error)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const target = new URL(upstream);
    await front.#call('POST', '/proxies', {
      name: front.#proxy,
      listen: `127.0.0.1:${listenPort}`,
      upstream: `${target.hostname}:${target.port || '80'}`,
      enabled: true,
    });
    return front;
  }

  async add(toxic: Toxic): Promise<void> {
    await this.#call('POST', `/proxies/${this.#proxy}/toxics`, { toxicity: 1, ...toxic });
  }

  async remove(name: string): Promise<void> {
    await this.#call('DELETE', `/proxies/${this.#proxy}/toxics/${name}`);
  }

  /** Removes every toxic (the end of the chaos, or a cleanup after an error). */
  async clear(): Promise<void> {
    const toxics = (await this.#call('GET', `/proxies/${this.#proxy}/toxics`)) as { name: string }[];
    for (const t of toxics) await this.remove(t.name);
  }

  stop(): void {
    this.#child.kill('SIGTERM');
  }

  async #call(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await fetch(`${this.#api}${path}`, {
      method,
      ...(body === undefined
        ? {}
        : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
      signal: AbortSignal.timeout(5000),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`toxiproxy ${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }
}
