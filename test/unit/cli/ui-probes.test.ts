/**
 * A review's probes of the inspector's gate, as any local process sends them (HTTP to 127.0.0.1 with the
 * Host, Origin and Cookie it chooses): the one-use link under a race, the exchange's redirect, every
 * action without the session, with a foreign origin or a sibling name, the trace token's forms, and
 * --read-only's actions reaching no store. The store is a socket that never answers and counts
 * connections: a request the inspector sends it shows as one.
 */
import { request } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKEN_COOKIE, TRACE_TOKEN_HEADER } from '../../../cli/ui/guard.ts';
import { type RunningUi, startUi } from '../../../cli/ui/server.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';

const sockets: Socket[] = [];
let connections = 0;
const store = createServer((socket) => {
  connections += 1;
  sockets.push(socket);
});
let aws: ReturnType<typeof createAwsClients>;
const token = 'probe-ticket-0123456789';
const traceToken = 'probe-trace-token-0123';
const servers: RunningUi[] = [];
/** The header's target line: it names the AWS account. */
const ACCOUNT_LINE = 'AWS account 123456789012, region eu-west-1 (--aws)';
const logs: string[] = [];

async function start(readOnly: boolean): Promise<RunningUi> {
  const server = await startUi(
    {
      target: {
        clients: aws,
        names: {
          queueUrl: 'http://q/jobs',
          dlqUrl: 'http://q/dlq',
          jobsTable: 'jobs',
          leasesTable: 'leases',
        },
      } as never,
      targetLine: ACCOUNT_LINE,
      token,
      traceToken,
      spans: new SpanBuffer(10),
      timeoutMs: 200,
      actionTimeoutMs: 200,
      readOnly,
      log: (line) => logs.push(line),
    },
    0,
  );
  servers.push(server);
  return server;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function call(
  server: RunningUi,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: server.port,
        path,
        method: options.method ?? 'GET',
        headers: { host: `${server.host}:${server.port}`, ...options.headers },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const cookieFrom = (answer: Answer) =>
  ([answer.headers['set-cookie'] ?? []].flat()[0] ?? '').split(';')[0] ?? '';
const form = { 'content-type': 'application/x-www-form-urlencoded' };
const ACTIONS = ['/dlq/purge', '/dlq/redrive', '/jobs/k/cancel', '/jobs/k/fix'];

let ui: RunningUi;
let readOnly: RunningUi;

beforeAll(async () => {
  await new Promise<void>((resolve) => store.listen(0, '127.0.0.1', resolve));
  aws = createAwsClients({
    endpoint: `http://127.0.0.1:${(store.address() as { port: number }).port}`,
    region: 'us-east-1',
    maxAttempts: 1,
    requestTimeoutMs: 30_000,
  });
  ui = await start(false);
  readOnly = await start(true);
});
afterAll(async () => {
  for (const server of servers) await server.close();
  destroyAwsClients(aws);
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => store.close(resolve));
});

describe('inspector probes', () => {
  it('trades the link once under a race: of 20 exchanges at once, one gets a session', async () => {
    const fresh = await start(false);
    const answers = await Promise.all(Array.from({ length: 20 }, () => call(fresh, `/?token=${token}`)));
    const traded = answers.filter((a) => a.headers['set-cookie']);
    expect(traded.length).toBe(1);
    expect(answers.filter((a) => a.status === 403).length).toBe(19);
    // The session is not the ticket, and the ticket is no cookie.
    const cookie = cookieFrom(traded[0] as Answer);
    expect(cookie).not.toContain(token);
    expect((await call(fresh, '/jobs', { headers: { cookie: `${TOKEN_COOKIE}=${token}` } })).status).toBe(
      403,
    );
  });

  it('redirects the exchange to its own origin whatever the request target holds', async () => {
    const targets = [
      '//evil.example/',
      '/\\evil.example/',
      '/%2F%2Fevil.example/',
      '/%5Cevil.example/',
      '/..//evil.example/',
      '/./%2e%2e//evil.example/',
      '/@evil.example/',
      '/%40evil.example',
      '///\\\\evil.example',
      '/%0d%0aSet-Cookie:%20x=1',
      'http://evil.example/',
      '/jobs?next=http://evil.example/&x=%0d%0a',
    ];
    const own = `http://${ui.host}:${ui.port}/`;
    for (const target of targets) {
      const sep = target.includes('?') ? '&' : '?';
      const fresh = await start(false);
      const answer = await call(fresh, `${target}${sep}token=${token}`);
      const location = String(answer.headers.location ?? '');
      // A raw backslash is no valid request target: Node's parser answers 400 before the inspector.
      if (target.includes('\\')) {
        expect([400, 303], target).toContain(answer.status);
        if (answer.status === 400) continue;
      }
      expect(answer.status, target).toBe(303);
      expect(location.startsWith(`http://${fresh.host}:${fresh.port}/`), `${target} -> ${location}`).toBe(
        true,
      );
      expect(new URL(location).host, target).toBe(`${fresh.host}:${fresh.port}`);
      expect(location, target).not.toContain('token=');
      expect(Object.keys(answer.headers).filter((h) => h === 'set-cookie').length).toBe(1);
      expect(own).not.toBe(location);
    }
  });

  it('refuses every action without the session, with the ticket in the URL, or with a foreign or sibling Origin (with the session too)', async () => {
    const fresh = await start(false);
    const cookie = cookieFrom(await call(fresh, `/?token=${token}`));
    const next = /for another browser: \S+\?token=(\S+)/.exec(logs.at(-1) ?? '')?.[1] ?? '';
    expect(next).not.toBe('');
    const origins = [
      'null',
      `http://127.0.0.1:${fresh.port}`,
      `http://localhost:${fresh.port}`,
      `http://evil.leaseq.localhost:${fresh.port}`,
      `http://${fresh.host}:${fresh.port + 1}`,
      `https://${fresh.host}:${fresh.port}`,
      'http://evil.example',
    ];
    const before = connections;
    for (const path of ACTIONS) {
      const body = 'confirmed=yes&reason=max-attempts';
      // No session, no Origin (curl, another process).
      expect((await call(fresh, path, { method: 'POST', headers: form, body })).status, path).toBe(403);
      // The live ticket in a POST's URL is not traded.
      const withTicket = await call(fresh, `${path}?token=${next}`, { method: 'POST', headers: form, body });
      expect(withTicket.status, path).toBe(403);
      for (const origin of origins) {
        const answer = await call(fresh, path, {
          method: 'POST',
          headers: { ...form, cookie, origin },
          body,
        });
        expect(answer.status, `${path} ${origin}`).toBe(403);
      }
    }
    expect(connections - before).toBe(0);
    // The ticket a POST carried is still the live one.
    expect((await call(fresh, `/?token=${next}`)).headers['set-cookie']).toBeDefined();
  });

  it('answers pages on its own name and port only: sibling names, case, a trailing dot, no port or the loopback are refused', async () => {
    const fresh = await start(false);
    const cookie = cookieFrom(await call(fresh, `/?token=${token}`));
    const [label] = fresh.host.split('.');
    const hosts = [
      `evil.leaseq.localhost:${fresh.port}`,
      `${fresh.host}.:${fresh.port}`,
      `${label}.leaseq.localhost:${fresh.port}`,
      `${fresh.host}`,
      `${fresh.host}:${fresh.port + 1}`,
      `x.${fresh.host}:${fresh.port}`,
      `127.0.0.1:${fresh.port}`,
      `[::1]:${fresh.port}`,
      `localhost:${fresh.port}`,
      `${label?.replace('leaseq-', '')}.localhost:${fresh.port}`,
    ];
    for (const host of hosts) {
      const page = await call(fresh, '/dlq', { headers: { host, cookie } });
      expect(page.status, host).toBe(403);
      expect(page.body, host).not.toContain(label);
      const traded = await call(fresh, `/?token=${token}`, { headers: { host } });
      expect(traded.headers['set-cookie'], host).toBeUndefined();
    }
    // Upper case is the same name (a browser lowers it).
    const upper = await call(fresh, '/', {
      headers: { host: `${fresh.host.toUpperCase()}:${fresh.port}`, cookie },
    });
    expect(upper.status).not.toBe(403);
  });

  it('says nothing of its target to a request it refuses (a DNS-rebinding page reads a refusal, same-origin to it)', async () => {
    const fresh = await start(false);
    const refusals = [
      await call(fresh, '/', { headers: { host: `evil.example:${fresh.port}` } }),
      await call(fresh, '/', { headers: { host: `127.0.0.1:${fresh.port}` } }),
      await call(fresh, '/jobs'),
      await call(fresh, '/v1/traces', {
        method: 'POST',
        headers: { host: `127.0.0.1:${fresh.port}` },
        body: '{}',
      }),
    ];
    for (const answer of refusals) {
      expect([401, 403]).toContain(answer.status);
      expect(answer.body).not.toContain('123456789012');
    }
    // A page of the session shows it.
    const cookie = cookieFrom(await call(fresh, `/?token=${token}`));
    expect((await call(fresh, '/jobs', { headers: { cookie } })).body).toContain(ACCOUNT_LINE);
  });

  it('takes spans only with the exact trace token in its header, on its name or 127.0.0.1, never on a sibling name', async () => {
    const body = JSON.stringify({ resourceSpans: [] });
    const json = { 'content-type': 'application/json' };
    const post = (headers: Record<string, string>, path = '/v1/traces') =>
      call(ui, path, { method: 'POST', headers: { ...json, ...headers }, body });
    const loopback = { host: `127.0.0.1:${ui.port}` };
    expect((await post({ ...loopback, [TRACE_TOKEN_HEADER]: traceToken })).status).toBe(200);
    for (const wrong of [
      traceToken.slice(0, -1),
      `${traceToken}x`,
      traceToken.toUpperCase(),
      `${traceToken},${traceToken}`,
      token,
    ])
      expect((await post({ ...loopback, [TRACE_TOKEN_HEADER]: wrong })).status, wrong).toBe(401);
    expect((await post(loopback, `/v1/traces?${TRACE_TOKEN_HEADER}=${traceToken}`)).status).toBe(401);
    expect((await post({ ...loopback, cookie: `${TRACE_TOKEN_HEADER}=${traceToken}` })).status).toBe(401);
    for (const host of [
      `evil.leaseq.localhost:${ui.port}`,
      `localhost:${ui.port}`,
      `evil.example:${ui.port}`,
    ])
      expect((await post({ host, [TRACE_TOKEN_HEADER]: traceToken })).status, host).toBe(403);
    // A browser page's request names its own Origin: refused before the token.
    const fromPage = await post({
      ...loopback,
      origin: 'http://evil.example',
      [TRACE_TOKEN_HEADER]: traceToken,
    });
    expect(fromPage.status).toBe(403);
    // The trace token opens no page.
    const page = await call(ui, '/', { headers: { ...loopback, [TRACE_TOKEN_HEADER]: traceToken } });
    expect(page.status).toBe(403);
    const named = await call(ui, '/', { headers: { [TRACE_TOKEN_HEADER]: traceToken } });
    expect(named.status).toBe(403);
  });

  it('--read-only: every action with the session and a confirmation is refused and reaches no store', async () => {
    const cookie = cookieFrom(await call(readOnly, `/?token=${token}`));
    const origin = `http://${readOnly.host}:${readOnly.port}`;
    const before = connections;
    for (const path of [...ACTIONS, '/dlq/letters/m-1', '/dlq/letters/m-1?show=body']) {
      const method = path.startsWith('/dlq/letters') ? 'GET' : 'POST';
      for (const body of ['confirmed=yes&letter=m-1', 'confirmed=yes&reason=max-attempts', '']) {
        const answer = await call(
          readOnly,
          path,
          method === 'GET' ? { headers: { cookie } } : { method, headers: { ...form, cookie, origin }, body },
        );
        expect(answer.status, `${method} ${path} ${body}`).toBe(403);
      }
    }
    expect(connections - before).toBe(0);
    // The count sees a store call: the same purge's confirmation on a writable inspector reads the depth.
    const writable = cookieFrom(await call(ui, `/?token=${token}`));
    const own = `http://${ui.host}:${ui.port}`;
    await call(ui, '/dlq/purge', {
      method: 'POST',
      headers: { ...form, cookie: writable, origin: own },
      body: '',
    });
    expect(connections - before).toBeGreaterThan(0);
  });
});
