import { request } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { problemText } from '../../../cli/ui/data.ts';
import { TOKEN_COOKIE, TRACE_TOKEN_HEADER } from '../../../cli/ui/guard.ts';
import { type RunningUi, startUi } from '../../../cli/ui/server.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';

// A store that accepts connections and never answers: the inspector must still answer, with a banner.
const sockets: Socket[] = [];
const silent = createServer((socket) => sockets.push(socket));
const clients = () => {
  const address = silent.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return createAwsClients({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    maxAttempts: 1,
    requestTimeoutMs: 30_000,
  });
};
const token = 'test-token';
const traceToken = 'trace-token';
const spans = new SpanBuffer(10);
let ui: RunningUi;
let readOnly: RunningUi;
let aws: ReturnType<typeof createAwsClients>;
let config: Parameters<typeof startUi>[0];
/** Each server's session cookie (`name=value`), from trading its printed link. */
const sessions = new Map<RunningUi, string>();
const servers: RunningUi[] = [];
const newLinks: string[] = [];

beforeAll(async () => {
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  aws = clients();
  const names = {
    queueUrl: 'http://q/jobs',
    dlqUrl: 'http://q/dlq',
    jobsTable: 'jobs',
    leasesTable: 'leases',
  };
  config = {
    target: { clients: aws, names },
    targetLine: 'test',
    token,
    traceToken,
    spans,
    timeoutMs: 300,
    readOnly: false,
    log: (line) => newLinks.push(line),
  };
  ui = await start();
  readOnly = await start({ readOnly: true });
  for (const server of [ui, readOnly]) sessions.set(server, await trade(server));
});
afterAll(async () => {
  for (const server of servers) await server.close();
  destroyAwsClients(aws);
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function start(overrides: Partial<Parameters<typeof startUi>[0]> = {}, port = 0): Promise<RunningUi> {
  const server = await startUi({ ...config, ...overrides }, port);
  servers.push(server);
  return server;
}

/** The Host a browser sends to `server`: its printed link's. */
const hostOf = (server: RunningUi) => new URL(server.url).host;

/** Trades the printed link for a session, as a browser's first visit does: the cookie it set. */
async function trade(server: RunningUi): Promise<string> {
  const answer = await call(server, new URL(server.url).pathname + new URL(server.url).search, {
    cookie: false,
  });
  const set = [answer.headers['set-cookie'] ?? []].flat()[0] ?? '';
  return set.split(';')[0] ?? '';
}

/** One HTTP request with full control of Host, Origin and Cookie (fetch would set Host itself). */
function call(
  server: RunningUi,
  path: string,
  options: {
    method?: string;
    host?: string;
    headers?: Record<string, string>;
    body?: string;
    /** false: none; a string: that Cookie header; default: the server's session. */
    cookie?: boolean | string;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: server.port,
        path,
        method: options.method ?? 'GET',
        headers: {
          host: options.host ?? hostOf(server),
          ...(options.cookie === false
            ? {}
            : { cookie: typeof options.cookie === 'string' ? options.cookie : (sessions.get(server) ?? '') }),
          ...options.headers,
        },
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

describe('leaseq ui server', () => {
  it('listens on 127.0.0.1 only, its pages on a host name of its own under .localhost, new each start', () => {
    expect(ui.address).toBe('127.0.0.1');
    expect(ui.url).toMatch(
      new RegExp(`^http://leaseq-[0-9a-f]{24}\\.localhost:${ui.port}/\\?token=${token}$`),
    );
    expect(new URL(readOnly.url).hostname).not.toBe(new URL(ui.url).hostname);
  });

  it('holds [::1] at its port too (a browser tries ::1 first for *.localhost), and will not start when another process holds it', async () => {
    // Before: a server on [::1]:<port> received the printed link and every request of the browser.
    const probe = createServer();
    const taken = await new Promise<string>((resolve) => {
      probe.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      probe.listen(ui.port, '::1', () => resolve('listening'));
    });
    if (taken === 'listening') await new Promise((resolve) => probe.close(resolve));
    expect(taken).toBe('EADDRINUSE');
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '::1', resolve));
    const port = (squatter.address() as { port: number }).port;
    try {
      await expect(start({}, port)).rejects.toMatchObject({ code: 'EADDRINUSE', address: '::1' });
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it('answers every page within its bounds with a banner when the store does not answer', async () => {
    for (const path of ['/', '/jobs', '/jobs/some-key', '/api/overview']) {
      const started = Date.now();
      const answer = await call(ui, path);
      expect(answer.status, path).toBe(200);
      expect(answer.body, path).toMatch(/(DynamoDB|SQS) not answering: .* took longer than 300 ms/);
      expect(answer.body, path).not.toMatch(/\n\s+at /);
      expect(Date.now() - started, path).toBeLessThan(3000);
    }
    const overview = await call(ui, '/');
    expect(overview.body).toContain(
      'DynamoDB not answering: sample of the jobs table (one Scan page of 200 items) took longer than 300 ms',
    );
    expect(overview.body).toContain(
      'SQS not answering: jobs queue depth (GetQueueAttributes) took longer than 300 ms',
    );
    expect(overview.body).toContain('<h1>Overview</h1>');
  });

  it('refuses without the token (403), with a foreign Host or Origin, and does no action then', async () => {
    expect((await call(ui, '/', { cookie: false })).status).toBe(403);
    expect((await call(ui, '/?token=wrong', { cookie: false })).status).toBe(403);
    const action = await call(ui, '/dlq/purge', {
      method: 'POST',
      cookie: false,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'confirmed=yes',
    });
    expect(action.status).toBe(403);
    expect((await call(ui, '/', { host: `evil.example:${ui.port}` })).status).toBe(403);
    // The loopback's own names too: the session is the host name's, and pages answer on it only.
    expect((await call(ui, '/')).status).toBe(200);
    for (const host of [`127.0.0.1:${ui.port}`, `localhost:${ui.port}`, `x${hostOf(ui)}`, hostOf(readOnly)]) {
      const refused = await call(ui, '/', { host });
      expect(refused.status, host).toBe(403);
      // The refusal does not tell the host name: knowing it, a server on another port could get the cookie.
      expect(refused.body).not.toContain(new URL(ui.url).hostname);
    }
    expect((await call(ui, '/', { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    const redrive = await call(ui, '/dlq/redrive', {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: 'reason=max-attempts&confirmed=yes',
    });
    expect(redrive.status).toBe(403);
  });

  it('trades the printed link once for an HttpOnly SameSite=Strict session cookie of the host name; the link then is spent', async () => {
    // A browser keeps the link in its history: once used, it must open nothing.
    const fresh = await start();
    const origin = new URL(fresh.url).origin;
    const answer = await call(fresh, `/jobs?token=${token}&status=DEAD`, { cookie: false });
    expect(answer.status).toBe(303);
    expect(answer.headers.location).toBe(`${origin}/jobs?status=DEAD`);
    const set = [answer.headers['set-cookie'] ?? []].flat();
    expect(set).toEqual([
      expect.stringMatching(
        new RegExp(`^${TOKEN_COOKIE}=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=/$`),
      ),
    ]);
    expect(set[0]).not.toContain(token);
    expect(answer.headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
    const cookie = set[0]?.split(';')[0] ?? '';
    expect((await call(fresh, '/', { cookie })).status).toBe(200);
    // The same link again, from a browser without the session: refused.
    const again = await call(fresh, `/?token=${token}`, { cookie: false });
    expect(again.status).toBe(403);
    expect(again.body).toContain('this link was used already');
    // The terminal got the next link, for another browser; it too works once.
    const next = newLinks
      .map((l) => /for another browser: (\S+)/.exec(l)?.[1])
      .filter((u) => u?.startsWith(origin))
      .at(-1);
    expect(next).toMatch(/\?token=[A-Za-z0-9_-]{43}$/);
    const url = new URL(next ?? '');
    expect((await call(fresh, `${url.pathname}${url.search}`, { cookie: false })).status).toBe(303);
    expect((await call(fresh, `${url.pathname}${url.search}`, { cookie: false })).status).toBe(403);
  });

  it('redirects the exchange to its own paths only, whatever the path holds', async () => {
    // A link `http://<inspector>//evil.example/?token=...` must not send the browser to evil.example.
    const origin = new URL(ui.url).origin;
    for (const path of [
      '//evil.example/',
      '///evil.example/',
      '/\\evil.example',
      '/\\/evil.example/',
      '//evil.example/%2F..',
      '/%2F%2Fevil.example',
      '/%5C%5Cevil.example',
      'https://evil.example/',
      '//evil.example:80@evil.example/',
    ]) {
      const answer = await call(ui, `${path}?token=${token}`);
      // Node's parser refuses a raw backslash (400); a browser sends it as `/` (the `//` cases).
      if (answer.status === 400 && path.includes('\\')) continue;
      expect(answer.status, path).toBe(303);
      const location = new URL(String(answer.headers.location), origin);
      expect(location.origin, `${path} -> ${answer.headers.location}`).toBe(origin);
    }
  });

  it('asks for a confirmation before an action, and has no actions in read-only mode', async () => {
    const form = { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    const ask = await call(ui, '/dlq/purge', { ...form, body: '' });
    expect(ask.status).toBe(200);
    expect(ask.body).toContain('Confirm purge');
    const refused = await call(readOnly, '/dlq/purge', { ...form, body: 'confirmed=yes' });
    expect(refused.status).toBe(403);
    expect((await call(readOnly, '/dlq/redrive', { ...form, body: 'reason=x&confirmed=yes' })).status).toBe(
      403,
    );
  });

  it('takes OTLP JSON traces only with the trace token, refuses protobuf and bad bodies', async () => {
    const body = JSON.stringify({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: 'a'.repeat(32),
                  spanId: 'b'.repeat(16),
                  name: 'x',
                  startTimeUnixNano: '1',
                  endTimeUnixNano: '2',
                },
              ],
            },
          ],
        },
      ],
    });
    // Any local process can post to the port: without the token its spans are refused and not kept.
    const plain = { 'content-type': 'application/json' };
    for (const headers of [plain, { ...plain, [TRACE_TOKEN_HEADER]: 'wrong' }]) {
      const refused = await call(ui, '/v1/traces', { method: 'POST', cookie: false, headers, body });
      expect(refused.status).toBe(401);
    }
    expect(spans.received).toBe(0);
    const json = { ...plain, [TRACE_TOKEN_HEADER]: traceToken };
    // On the printed endpoint (127.0.0.1: a worker's resolver may not know *.localhost) and its own name.
    for (const host of [`127.0.0.1:${ui.port}`, hostOf(ui)]) {
      const taken = await call(ui, '/v1/traces', {
        method: 'POST',
        cookie: false,
        host,
        headers: json,
        body,
      });
      expect(taken.status, host).toBe(200);
    }
    expect(spans.received).toBe(2);
    expect(ui.tracesEndpoint).toBe(`http://127.0.0.1:${ui.port}`);
    const proto = await call(ui, '/v1/traces', {
      method: 'POST',
      cookie: false,
      headers: { 'content-type': 'application/x-protobuf', [TRACE_TOKEN_HEADER]: traceToken },
      body: 'x',
    });
    expect(proto.status).toBe(415);
    expect(proto.body).toContain('OTEL_EXPORTER_OTLP_PROTOCOL=http/json');
    expect(
      (await call(ui, '/v1/traces', { method: 'POST', cookie: false, headers: json, body: '{"a":1}' }))
        .status,
    ).toBe(400);
    expect(
      (
        await call(ui, '/v1/traces', {
          method: 'POST',
          cookie: false,
          host: 'evil.example',
          headers: json,
          body,
        })
      ).status,
    ).toBe(403);
  });

  it('says why a store call failed with controls and bidi overrides escaped, in the banner and the JSON the chart shows', () => {
    // The chart's script writes /api/overview's problems with textContent: no markup, but U+202E would
    // still turn the line around, so the text is escaped where it is made.
    const text = problemText('SQS', 'DLQ depth', new Error('queue x\u202eeulav\u2066 \u001b[2J'), 300);
    expect(text).toBe('SQS not answering: DLQ depth failed (Error: queue x\\u202eeulav\\u2066 \\u001b[2J)');
  });

  it("offers and keeps the problem jobs' 'stuck' status filter", async () => {
    const answer = await call(ui, '/jobs?status=stuck');
    expect(answer.body).toContain('<option value="stuck" selected>');
  });
});
