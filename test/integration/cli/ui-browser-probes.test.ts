/**
 * A review's probes of the inspector's actions in real Chromium, with the worst case granted: the page
 * that attacks knows the inspector's host name. Its form posts (direct, or through a 307 that keeps the
 * method and body), from another site and from a sibling `*.leaseq.localhost` name (same-site: the
 * SameSite=Strict cookie goes along), and a link opened from outside (Sec-Fetch-Site none) that
 * redirects to an action, must reach no store. The store is a socket that never answers and counts
 * connections; the inspector's own form, the control, reaches it.
 */
import { execFileSync } from 'node:child_process';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
let ui: RunningUi;
let browser: Browser;
let attacker: Server;
let attackerPort = 0;
const seen: { path: string; cookie?: string }[] = [];
const token = 'browser-probe-ticket-0123456789';
const logs: string[] = [];
/** The link not used yet: the first, or the next one the inspector logged after a trade. */
const latestLink = () => [...logs.join('\n').matchAll(/for another browser: (\S+)/g)].at(-1)?.[1] ?? ui.url;

/** The attacker's pages: an auto-submitted form to `target`, and a 307 to it. */
function attackerPage(path: string, target: string): string {
  if (path.startsWith('/form'))
    return `<form id="f" method="post" action="${target}"><input name="confirmed" value="yes"></form><script>document.getElementById('f').submit()</script>`;
  return `<p>${path}</p>`;
}

beforeAll(async () => {
  await new Promise<void>((resolve) => store.listen(0, '127.0.0.1', resolve));
  aws = createAwsClients({
    endpoint: `http://127.0.0.1:${(store.address() as { port: number }).port}`,
    region: 'us-east-1',
    maxAttempts: 1,
    requestTimeoutMs: 30_000,
  });
  ui = await startUi(
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
      targetLine: 'probe',
      token,
      traceToken: 'trace',
      spans: new SpanBuffer(10),
      timeoutMs: 200,
      actionTimeoutMs: 200,
      readOnly: false,
      log: (line) => logs.push(line),
    },
    0,
  );
  const inspector = `http://${ui.host}:${ui.port}`;
  attacker = createHttpServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    seen.push({ path: url.pathname, ...(req.headers.cookie ? { cookie: req.headers.cookie } : {}) });
    const action = url.searchParams.get('action') ?? '/dlq/purge';
    if (url.pathname === '/307') {
      res.writeHead(307, { location: `${inspector}${action}` });
      return res.end();
    }
    if (url.pathname === '/302') {
      res.writeHead(302, { location: `${inspector}${action}` });
      return res.end();
    }
    const target =
      url.pathname === '/form-via-307'
        ? `/307?action=${encodeURIComponent(action)}`
        : `${inspector}${action}`;
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(attackerPage('/form', target));
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerPort = (attacker.address() as { port: number }).port;
  const path = process.env.CHROMIUM_PATH ?? execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  browser = await chromium.launch({ executablePath: path, args: ['--no-sandbox'] });
});
afterAll(async () => {
  await browser?.close();
  await ui?.close();
  await new Promise((resolve) => attacker?.close(resolve));
  destroyAwsClients(aws);
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => store.close(resolve));
});

describe('inspector actions in Chromium, against a page that knows its host name', () => {
  it("refuses another site's and a sibling name's form posts, direct or through a 307, and a link opened from outside that redirects to an action", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(latestLink());
    await expect(page.locator('h1').textContent()).resolves.toBe('Overview');
    await page.waitForTimeout(300);
    const settled = async () => {
      await page.waitForLoadState('load');
      await page.waitForTimeout(400);
    };
    const before = connections;
    for (const action of ['/dlq/purge', '/dlq/redrive', '/jobs/k/cancel']) {
      const q = `action=${encodeURIComponent(action)}`;
      for (const site of [`127.0.0.1:${attackerPort}`, `evil.leaseq.localhost:${attackerPort}`]) {
        for (const how of ['/form', '/form-via-307']) {
          await page.goto(`http://${site}${how}?${q}`);
          await settled();
          expect(await page.textContent('body'), `${site}${how} ${action}`).toMatch(/403 Forbidden/);
        }
      }
      // A link opened from outside (mail, chat, a terminal: Sec-Fetch-Site none) that redirects: a GET.
      await page.goto(`http://127.0.0.1:${attackerPort}/302?${q}`);
      await settled();
    }
    expect(connections - before).toBe(0);
    // The control: the inspector's own confirmation form does reach the store.
    await page.goto(`http://${ui.host}:${ui.port}/dlq`);
    await page.evaluate(
      "(() => { const f = document.createElement('form'); f.method = 'post'; f.action = '/dlq/purge'; document.body.append(f); f.submit(); })()",
    );
    await settled();
    expect(await page.locator('h1').textContent()).toBe('Purge the DLQ?');
    expect(connections - before).toBeGreaterThan(0);
    // No cookie of the inspector ever reached the attacker's port, on either name.
    expect(seen.filter((s) => s.cookie)).toEqual([]);
    await context.close();
  });

  it('shows a bidi mark (RLM, LRM, ALM) as \\uXXXX: a key ab<RLM>10 - 5 does not read ab5 - 10', async () => {
    // Marks are no overrides, but an RLM (or ALM) before `10 - 5` in a left-to-right line draws `5 - 10`.
    const fresh = await browser.newContext();
    const view = await fresh.newPage();
    await view.goto(latestLink());
    for (const mark of ['\u200f', '\u061c', '\u200e']) {
      const key = `ab${mark}10 - 5`;
      await view.goto(`http://${ui.host}:${ui.port}/jobs/${encodeURIComponent(key)}`);
      // Where the browser draws the 1 and the 5 of the heading.
      const xs = await view.evaluate<[number, number]>(`(() => {
        const text = document.querySelector('h1').firstChild;
        const at = (i) => { const r = document.createRange(); r.setStart(text, i); r.setEnd(text, i + 1); return r.getBoundingClientRect().x; };
        const s = text.textContent;
        return [at(s.indexOf('1')), at(s.lastIndexOf('5'))];
      })()`);
      expect(xs[0], `${JSON.stringify(mark)}: the 1 is drawn after the 5`).toBeLessThan(xs[1]);
      expect(await view.locator('h1').textContent()).toContain(
        `\\u${mark.charCodeAt(0).toString(16).padStart(4, '0')}`,
      );
    }
    await fresh.close();
  });

  it("a page on another *.localhost name, not knowing the inspector's, tosses no cookie onto it (before: every page 431)", async () => {
    // A sibling under the same parent name is the same site: its Domain cookies reach the inspector (a
    // few of 4 KB make every request too large: 431) and its requests carry the SameSite=Strict session.
    // (A name under the inspector's own, `x.<its name>`, is its site: it takes knowing the 96 bits.)
    const siblings = ['evil.leaseq.localhost', 'evil.localhost', 'a.b.localhost'];
    const sibling = createHttpServer((req, res) => {
      const name = (req.headers.host ?? '').split(':')[0] ?? '';
      const domain = name.slice(name.indexOf('.') + 1);
      const big = 'x'.repeat(3500);
      res.writeHead(200, {
        'content-type': 'text/html',
        'set-cookie': [1, 2, 3, 4, 5, 6].map(
          (i) => `junk${i}=${big}; Domain=${domain}; Path=/; Max-Age=3600`,
        ),
      });
      res.end('<p>another local page</p>');
    });
    await new Promise<void>((resolve) => sibling.listen(0, '127.0.0.1', resolve));
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(latestLink());
      const siblingPort = (sibling.address() as { port: number }).port;
      // Once tossed, the junk goes to the siblings too (they answer 431 then): what reached them is enough.
      for (const name of siblings) await page.goto(`http://${name}:${siblingPort}/`).catch(() => undefined);
      const answer = await page.goto(`http://${ui.host}:${ui.port}/jobs`).catch((error: Error) => error);
      const sent = (await context.cookies(`http://${ui.host}:${ui.port}/`)).map(
        (c) => `${c.name} (${c.domain})`,
      );
      expect(answer instanceof Error ? answer.message : answer?.status(), sent.join(', ')).toBe(200);
      expect(sent).toEqual([`leaseq_ui_token (${ui.host})`]);
    } finally {
      await context.close();
      await new Promise((resolve) => sibling.close(resolve));
    }
  });
});
