// The dashboard against a real redis-server: over HTTP (auth, read-only, CSRF, escaping,
// binding, mounting under a base path, the shared event readers), and in headless Chromium
// (overview, a dead job, retry, and the job completing live on the page over SSE).
// Tests wait on events and bounded polls of observable state; none sleeps to "let it run".
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { describe, expect, vi } from 'vitest';
import { DASHBOARD_JS } from '../../src/dashboard/assets.js';
import { type DashboardOptions, dashboardHandler, startDashboard } from '../../src/dashboard/index.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { useRedisServer } from '../support/harness.js';
import { freePort, RedisServer } from '../support/redis-server.js';
import {
  CHROMIUM,
  collectProblems,
  csrfOf,
  dashboardTest,
  form,
  HAS_CHROMIUM,
  scrollWidth,
} from './fixture.js';

const env = useRedisServer();
const it = dashboardTest(env, 'dash');

// ── helpers ─────────────────────────────────────────────────────────────────────

/** Reads a server-sent event stream until `until` matches the text read so far. */
async function readStream(res: Response, until: (text: string) => boolean): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!until(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  reader.releaseLock();
  return text;
}

/** Clients blocked in XREAD (with no consumer running: the dashboard's event readers). */
async function eventReaders(raw: Redis): Promise<number> {
  const list = (await raw.client('LIST')) as string;
  return list.split('\n').filter((l) => l.includes('cmd=xread')).length;
}

// ── over HTTP ───────────────────────────────────────────────────────────────────

describe('dashboard over HTTP', () => {
  it('binds 127.0.0.1 by default and serves the overview with security headers', async ({
    queueName: name,
    q,
    dashboard,
  }) => {
    await q.enqueue({ n: 1 });
    const d = await dashboard();
    const addr = d.server.address();
    expect(typeof addr === 'object' && addr?.address).toBe('127.0.0.1');
    expect(d.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const res = await fetch(d.url);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    const html = await res.text();
    expect(html).toContain(`data-queue="${name}"`);
    expect(html).toContain('<svg class="chart"');
    expect(html).not.toMatch(/<script>|<style>|style="/); // nothing inline for the CSP to allow

    // Another interface of this machine does not reach it.
    const other = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    if (other) {
      const port = (addr as { port: number }).port;
      const refused = await new Promise<string>((resolve) => {
        const s = connect(port, other.address);
        s.on('connect', () => {
          s.destroy();
          resolve('connected');
        });
        s.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
      });
      expect(refused).toBe('ECONNREFUSED');
    }
  });

  it('never opens without a usable credential: no auth, an undefined, empty or short bearer or password', async ({
    mq,
  }) => {
    const unset = process.env.ECHOMQ_TEST_UNSET_TOKEN; // undefined: the variable a user forgot
    const refusals: [options: Record<string, unknown>, named: RegExp][] = [
      [{}, /auth is required/],
      [{ auth: undefined }, /auth is required/],
      [{ auth: { bearer: unset } }, /auth\.bearer is undefined \(an unset environment variable\?\)/],
      [{ auth: { bearer: '' } }, /auth\.bearer is empty/],
      [
        { auth: { bearer: 'short-token' } },
        /auth\.bearer is 11 characters: it must be a random token of at least 16/,
      ],
      [{ auth: {} }, /auth names no credential/],
      [{ auth: { basic: { user: 'ops', password: unset } } }, /auth\.basic\.password is undefined/],
      [{ auth: { basic: { user: '', password: 'a-long-password' } } }, /auth\.basic\.user is empty/],
      [{ auth: { basic: { user: 'ops', password: 'short' } } }, /auth\.basic\.password is 5 characters/],
      // A usable basic credential does not cover a bearer that came out undefined.
      [
        { auth: { basic: { user: 'ops', password: 'a-long-password' }, bearer: unset } },
        /auth\.bearer is undefined/,
      ],
      [{ auth: { token: 'x'.repeat(32) } }, /unknown dashboard auth option "token"/],
      [{ auth: null }, /auth must be an object or false/],
      [{ auth: false, readonly: true }, /unknown dashboard option "readonly"/],
    ];
    for (const [options, named] of refusals) {
      const port = await freePort();
      const started = startDashboard({ mq, port, ...options } as unknown as DashboardOptions);
      await expect(started, JSON.stringify(options)).rejects.toThrow(named);
      await expect(started).rejects.toMatchObject({ code: 'EMQINPUT' });
      // Nothing listens: a request to the port it was given is refused, never answered 200.
      const reached = await fetch(`http://127.0.0.1:${port}/`).then(
        (res) => res.status,
        (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? err.message,
      );
      expect(reached, JSON.stringify(options)).toBe('ECONNREFUSED');
      expect(() => dashboardHandler({ mq, ...options } as unknown as DashboardOptions)).toThrow(named);
    }
    // The secret itself is never in the message.
    await expect(startDashboard({ mq, port: 0, auth: { bearer: 'hunter2-secret' } })).rejects.toThrow(
      /^(?!.*hunter2)/,
    );
  });

  it('serves without credentials only when told auth: false', async ({ dashboard }) => {
    const d = await dashboard({ auth: false });
    expect((await fetch(`${d.url}api/overview`)).status).toBe(200);
  });

  it('answers 401 without the basic credentials, and 200 with them', async ({ dashboard }) => {
    const d = await dashboard({ auth: { basic: { user: 'admin', password: 's3cret pass' } } });
    const none = await fetch(d.url);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
    const wrong = await fetch(d.url, {
      headers: { authorization: `Basic ${Buffer.from('admin:nope').toString('base64')}` },
    });
    expect(wrong.status).toBe(401);
    const right = await fetch(d.url, {
      headers: { authorization: `Basic ${Buffer.from('admin:s3cret pass').toString('base64')}` },
    });
    expect(right.status).toBe(200);
    // Everything is behind it: the JSON API and the metrics too.
    expect((await fetch(`${d.url}api/overview`)).status).toBe(401);
    expect((await fetch(`${d.url}metrics`)).status).toBe(401);
  });

  it('answers 401 without the bearer token, and 200 with it', async ({ dashboard }) => {
    const token = 'tok_0123456789abcdef0123';
    const d = await dashboard({ auth: { bearer: token } });
    expect((await fetch(d.url)).status).toBe(401);
    expect(
      (await fetch(d.url, { headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status,
    ).toBe(401);
    const res = await fetch(`${d.url}api/overview`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { queues: unknown[] }).queues).toBeInstanceOf(Array);
  });

  it("a flow parent's page lists its children, each linking to its own page, and a child's names its parent", async ({
    mq,
    queueName: name,
    dashboard,
  }) => {
    const other = `${name}-mail`;
    const flow = await mq.flow({
      queue: name,
      data: {},
      children: [
        { queue: name, data: {} },
        { queue: other, data: {} },
      ],
    });
    const [a, b] = flow.children;
    const d = await dashboard();
    const page = await (await fetch(`${d.url}queues/${name}/jobs/${flow.id}`)).text();
    expect(page).toContain('id="job-flow-children"');
    expect(page).toContain(`/queues/${name}/jobs/${a!.id}"`);
    expect(page).toContain(`/queues/${other}/jobs/${b!.id}"`);
    const child = await (await fetch(`${d.url}queues/${other}/jobs/${b!.id}`)).text();
    expect(child).toContain(`parent: <a class="mono" href="/queues/${name}/jobs/${flow.id}"`);
  });

  it('in read-only mode shows no action and answers every POST with 403', async ({
    queueName: name,
    q,
    dashboard,
    deadJob,
  }) => {
    const id = await deadJob({ n: 1 });
    const d = await dashboard({ readOnly: true });
    const page = await (await fetch(`${d.url}queues/${name}/jobs/${id}`)).text();
    expect(page).toContain('read-only');
    expect(page).not.toContain('<form');
    expect(page).not.toContain('csrf-token');
    const list = await (await fetch(`${d.url}queues/${name}?state=dead`)).text();
    expect(list).toContain(id);
    expect(list).not.toContain('method="post"'); // the tag filter (a GET form) stays
    const res = await fetch(`${d.url}queues/${name}/jobs/${id}/retry`, form({ _csrf: 'x', return: '/' }));
    expect(res.status).toBe(403);
    expect((await q.get(id))?.state).toBe('dead');
  });

  it('refuses an action without the CSRF token, with a wrong one, or from another origin', async ({
    queueName: name,
    q,
    dashboard,
    deadJob,
  }) => {
    const id = await deadJob({ n: 1 });
    const d = await dashboard();
    const token = await csrfOf(d.url);
    const action = `${d.url}queues/${name}/jobs/${id}/retry`;
    expect((await fetch(action, form({ return: '/' }))).status).toBe(403);
    expect((await fetch(action, form({ _csrf: 'wrong', return: '/' }))).status).toBe(403);
    const json = await fetch(action, { method: 'POST', headers: { accept: 'application/json' } });
    expect(json.status).toBe(403);
    expect(await json.json()).toEqual({ error: 'missing or wrong CSRF token' });
    const foreign = await fetch(action, {
      method: 'POST',
      headers: { 'x-csrf-token': token, origin: 'http://evil.example' },
    });
    expect(foreign.status).toBe(403);
    expect((await q.get(id))?.state).toBe('dead');
  });

  it('retries a dead job through a form post with the token (303 back) and through JSON', async ({
    queueName: name,
    q,
    dashboard,
    deadJob,
  }) => {
    const a = await deadJob({ n: 1 });
    const b = await deadJob({ n: 2 });
    const d = await dashboard();
    const token = await csrfOf(d.url);
    const page = `/queues/${name}/jobs/${a}`;
    const res = await fetch(`${d.url}queues/${name}/jobs/${a}/retry`, form({ _csrf: token, return: page }));
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(page);
    expect((await q.get(a))?.state).toBe('pending');
    // A verb's refusal is its status (a dead job cannot be cancelled: EMQSTATE).
    expect((await fetch(`${d.url}queues/${name}/jobs/${b}/cancel`, form({ _csrf: token }))).status).toBe(409);
    // An off-site return address is not followed.
    const off = await fetch(
      `${d.url}queues/${name}/pause`,
      form({ _csrf: token, return: '//evil.example/' }),
    );
    expect(off.status).toBe(303);
    expect(off.headers.get('location')).toBe('/');
    expect(await q.isPaused()).toBe(true);
    const json = await fetch(`${d.url}queues/${name}/retry-all`, {
      method: 'POST',
      headers: { 'x-csrf-token': token, origin: d.url.slice(0, -1) },
    });
    expect(json.status).toBe(200);
    // Retry all runs as a task: the POST answers at once, the task says how far it got.
    const { result } = (await json.json()) as { result: { task: { id: string; label: string } } };
    expect(result.task.label).toBe('retry dead jobs');
    await expect
      .poll(async () => (await (await fetch(`${d.url}api/tasks/${result.task.id}`)).json()) as object)
      .toMatchObject({ state: 'done', done: 1, total: 1, result: 1 });
    expect((await q.get(b))?.state).toBe('pending');
    const removed = await fetch(`${d.url}queues/${name}/jobs/${b}/remove`, {
      method: 'POST',
      headers: { 'x-csrf-token': token },
    });
    expect(await removed.json()).toEqual({ ok: true, result: true });
    expect(await q.get(b)).toBeNull();
  });

  it("promotes a scheduled job from its page, and shows a job's log lines", async ({
    queueName: name,
    q,
    dashboard,
    consumers,
  }) => {
    const later = await q.enqueueIn({ n: 1 }, 3_600_000);
    const d = await dashboard();
    const page = await (await fetch(`${d.url}queues/${name}/jobs/${later.id}`)).text();
    expect(page).toContain(`/jobs/${later.id}/promote`);
    const token = await csrfOf(d.url);
    const res = await fetch(`${d.url}queues/${name}/jobs/${later.id}/promote`, form({ _csrf: token }));
    expect(res.status).toBe(303);
    expect((await q.get(later.id))?.state).toBe('pending');
    // A pending job cannot be promoted: the verb's EMQSTATE is a 409.
    expect(
      (await fetch(`${d.url}queues/${name}/jobs/${later.id}/promote`, form({ _csrf: token }))).status,
    ).toBe(409);
    const c = q.consume(
      (_job, ctx) => {
        ctx.log('fetched <b>3</b> rows');
        ctx.log('done');
      },
      { concurrency: 2, beatMs: 200 },
    );
    consumers.push(c);
    await q.waitFor(later.id, { timeoutMs: 10_000 });
    await c.close();
    const html = await (await fetch(`${d.url}queues/${name}/jobs/${later.id}`)).text();
    expect(html).toContain('<pre id="job-logs">fetched &lt;b&gt;3&lt;/b&gt; rows\ndone</pre>');
    const api = await (await fetch(`${d.url}api/queues/${name}/jobs/${later.id}`)).json();
    expect(api).toMatchObject({ logs: ['fetched <b>3</b> rows', 'done'], logCount: 2 });
    // Tags: shown on the job page, and the queue page filters by ?tag=.
    const tagged = await q.enqueue({ n: 2 }, { tags: ['vip'] });
    await q.enqueue({ n: 3 });
    const list = await (await fetch(`${d.url}api/queues/${name}/jobs?state=pending&tag=vip`)).json();
    expect(list).toMatchObject({ total: 1, jobs: [{ id: tagged.id, tags: ['vip'] }] });
    const queuePage = await (await fetch(`${d.url}queues/${name}?state=pending&tag=vip`)).text();
    expect(queuePage).toContain('pending tagged vip');
    expect(queuePage).toContain('data-tag="vip"');
  });

  it('shows a dead consumer, an expired lease and the oldest wait, and recovers the job from the queue page', async ({
    raw,
    queueName: name,
    q,
    dashboard,
    defer,
  }) => {
    // A consumer that never extends its 300 ms lease and recovers nothing: its job's lease expires.
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const c = q.consume(
      async () => {
        started();
        await new Promise(() => {});
      },
      { leaseMs: 300, extendMs: 600_000, recovery: 'off', beatMs: 100 },
    );
    defer(() => c.close({ timeoutMs: 0 }));
    const { id } = await q.enqueue({ n: 1 });
    await running;
    await q.lanes.pause('tenant-a'); // its job waits
    await q.enqueue({ n: 2 }, { group: 'tenant-a' });
    // And one that was killed: its last beat a minute ago.
    const [s, us] = await raw.time();
    const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
    await raw.zadd(q.keys.key('consumers'), now - 60_000, 'gone:1:dead');
    await raw.hset(
      q.keys.key('consumers:info'),
      'gone:1:dead',
      JSON.stringify({ host: 'gone', pid: 1, beatMs: 1000 }),
    );
    await new Promise((r) => setTimeout(r, 400)); // past the 300 ms lease
    const d = await dashboard();
    const html = await (await fetch(`${d.url}queues/${name}?state=active`)).text();
    expect(html).toContain('lease expired');
    expect(html).toMatch(/data-consumer="gone:1:dead" data-alive="false"/);
    expect(html).toMatch(/<span class="badge dead">dead<\/span> no beat for \d+ s \(over 3 beats\)/);
    expect(html).toContain('1 active job(s) are past their lease deadline');
    expect(html).toMatch(/id="oldest-wait">\d+ s</);
    expect(html).toMatch(/data-lane-wait>[\d.]+ m?s</);
    const token = await csrfOf(d.url);
    const res = await fetch(`${d.url}queues/${name}/recover`, {
      method: 'POST',
      headers: { 'x-csrf-token': token },
    });
    // One job returned to pending (this test's consumer, still running, may claim it again).
    expect(await res.json()).toEqual({ ok: true, result: 1 });
    expect(await q.get(id)).not.toBeNull();
  });

  it('escapes a payload, a job name and an error message everywhere', async ({
    queueName: name,
    dashboard,
    deadJob,
  }) => {
    const evil = '<script>alert(1)</script>';
    const id = await deadJob({ html: evil }, { name: evil }, `bad ${evil}`);
    const d = await dashboard();
    for (const path of [`queues/${name}/jobs/${id}`, `queues/${name}?state=dead`]) {
      const html = await (await fetch(d.url + path)).text();
      expect(html).not.toContain(evil);
      expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    }
    // A queue name from the URL that does not exist is escaped in the 404 page too.
    const res = await fetch(`${d.url}queues/${encodeURIComponent(evil)}`);
    expect(res.status).toBe(404);
    expect(await res.text()).not.toContain(evil);
  });

  it('refuses a Host header other than a loopback name (DNS rebinding)', async ({ dashboard }) => {
    const d = await dashboard();
    const port = (d.server.address() as { port: number }).port;
    const status = await new Promise<number>((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => {
        s.write('GET / HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n');
      });
      let text = '';
      s.on('data', (d) => {
        text += d;
      });
      s.on('end', () => resolve(Number(text.split(' ')[1])));
      s.on('error', reject);
    });
    expect(status).toBe(403);
    expect((await fetch(`http://localhost:${port}/`)).status).toBe(200);
  });

  it('mounts under /admin/queues in a plain http server with dashboardHandler', async ({
    mq,
    queueName: name,
    q,
    deadJob,
    defer,
  }) => {
    const id = await deadJob({ n: 1 });
    const handler = dashboardHandler({ mq, basePath: '/admin/queues', auth: false });
    defer(() => handler.close());
    const server: Server = createServer((req, res) =>
      handler(req, res, () => {
        res.statusCode = 404;
        res.end('the app');
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    defer(() => new Promise((resolve) => server.close(resolve)));
    const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

    const app = await fetch(`${origin}/elsewhere`);
    expect(await app.text()).toBe('the app');
    const overview = await fetch(`${origin}/admin/queues`);
    expect(overview.status).toBe(200);
    const html = await overview.text();
    expect(html).toContain(`href="/admin/queues/queues/${name}"`);
    expect(html).toContain('src="/admin/queues/assets/dashboard.js"');
    expect((await fetch(`${origin}/admin/queues/assets/dashboard.css`)).headers.get('content-type')).toMatch(
      /^text\/css/,
    );
    const token = await csrfOf(`${origin}/admin/queues/`);
    const back = `/admin/queues/queues/${name}?state=dead`;
    const res = await fetch(
      `${origin}/admin/queues/queues/${name}/jobs/${id}/retry`,
      form({ _csrf: token, return: back }),
    );
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(back);
    expect((await q.get(id))?.state).toBe('pending');
    expect((await fetch(`${origin}/admin/queues/metrics`)).status).toBe(200);
  });

  it('streams events over SSE with one reader per queue, shared, and closed with the last client', async ({
    raw,
    queueName: name,
    q,
    dashboard,
  }) => {
    await q.enqueue({ n: 0 }); // registers the queue
    const d = await dashboard({ metrics: false });
    const before = await eventReaders(raw);
    const open = () => {
      const ctl = new AbortController();
      return { ctl, res: fetch(`${d.url}api/events?queue=${name}`, { signal: ctl.signal }) };
    };
    const a = open();
    const b = open();
    const ra = await a.res;
    const rb = await b.res;
    expect(ra.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await readStream(ra, (t) => t.includes('event: ready'));
    await readStream(rb, (t) => t.includes('event: ready'));
    await vi.waitFor(async () => expect(await eventReaders(raw)).toBe(before + 1), { timeout: 5000 });
    const { id } = await q.enqueue({ n: 1 }, { name: '<b>x</b>' });
    const text = await readStream(ra, (t) => t.includes(id));
    const line = text.split('\n').find((l) => l.startsWith('data: ') && l.includes(id))!;
    expect(JSON.parse(line.slice(6))).toMatchObject({
      queue: name,
      event: 'added',
      id,
      fields: { name: '<b>x</b>' },
    });
    a.ctl.abort();
    await vi.waitFor(async () => expect(await eventReaders(raw)).toBe(before + 1), { timeout: 5000 });
    b.ctl.abort();
    await vi.waitFor(async () => expect(await eventReaders(raw)).toBe(before), { timeout: 5000 });
    // An unknown queue opens nothing.
    expect((await fetch(`${d.url}api/events?queue=nope-${name}`)).status).toBe(404);
  });

  it('answers 503 naming the server and the cause when Redis does not answer (pages, JSON, /metrics)', async ({
    defer,
  }) => {
    const port = await freePort();
    const d = await startDashboard({ url: `redis://user:hunter2@127.0.0.1:${port}`, port: 0, auth: false });
    defer(() => d.close());
    for (const path of ['', 'api/overview', 'metrics']) {
      const res = await fetch(`${d.url}${path}`);
      const text = await res.text();
      expect(res.status, path).toBe(503);
      expect(text, path).toContain(`redis://user:***@127.0.0.1:${port}`);
      expect(text, path).toContain('ECONNREFUSED');
      expect(text, path).not.toContain('hunter2');
    }
    // Connected first, then the server goes: the same 503, not a raw 500.
    const server = await RedisServer.start();
    const own = await EchoMQ.connect({ url: server.url, redisOptions: { maxRetriesPerRequest: 0 } });
    const d2 = await startDashboard({ mq: own, port: 0, auth: false });
    defer(async () => {
      await d2.close();
      await own.close();
    });
    expect((await fetch(`${d2.url}api/overview`)).status).toBe(200);
    await server.stop();
    for (const path of ['api/overview', 'metrics']) {
      const res = await fetch(`${d2.url}${path}`);
      const text = await res.text();
      expect(res.status, path).toBe(503);
      expect(text, path).toContain(server.url);
    }
  });

  it('serves a page script that parses, and JSON for the pages', async ({
    queueName: name,
    q,
    dashboard,
    deadJob,
  }) => {
    expect(() => new Function(DASHBOARD_JS)).not.toThrow();
    const id = await deadJob({ n: 1 });
    const d = await dashboard();
    const job = (await (await fetch(`${d.url}api/queues/${name}/jobs/${id}`)).json()) as {
      state: string;
      history: { event: string }[];
    };
    expect(job.state).toBe('dead');
    expect(job.history.map((e) => e.event)).toEqual(['added', 'active', 'failed', 'retries_exhausted']);
    const page = (await (await fetch(`${d.url}api/queues/${name}/jobs?state=dead`)).json()) as {
      total: number;
    };
    expect(page.total).toBe(1);
    expect((await fetch(`${d.url}api/queues/${name}/jobs?state=bogus`)).status).toBe(400);
    const svg = await fetch(`${d.url}api/chart.svg?queue=${name}`);
    expect(svg.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    expect(await svg.text()).toMatch(/^<svg class="chart"/);
    await q.schedulers.upsert(
      'nightly-<i>',
      { pattern: '0 3 * * *', tz: 'Europe/Berlin' },
      { name: 'report' },
    );
    await q.repeat.register('heartbeat', 60_000, { ping: true });
    const schedulers = await (await fetch(`${d.url}queues/${name}/schedulers`)).text();
    expect(schedulers).toContain('nightly-&lt;i&gt;');
    expect(schedulers).toContain('cron 0 3 * * * (Europe/Berlin)');
    expect(schedulers).toContain('heartbeat');
    expect(schedulers).toMatch(/<td><time [^>]+>\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ<\/time><\/td>/); // a next run
  });
});

// ── in a browser ────────────────────────────────────────────────────────────────

describe.skipIf(!HAS_CHROMIUM)(
  HAS_CHROMIUM
    ? 'in headless Chromium'
    : `in headless Chromium: SKIPPED, ${CHROMIUM} is missing (install it with apt-get install -y chromium)`,
  () => {
    it('shows the overview, opens a dead job, retries it and sees it complete live over SSE', async ({
      queueName: name,
      q,
      dashboard,
      consumers,
      browser,
      shots,
    }) => {
      let failing = true;
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const c = q.consume(
        async (job) => {
          if (failing) throw new Error('payment gateway timed out');
          if (job.id === id) await gate; // the retried job waits until the page watches it
          return { charged: (job.data as { amount: number }).amount };
        },
        { concurrency: 2, beatMs: 200 },
      );
      consumers.push(c);
      const id = 'JOB-dashboard-charge-42';
      await q.enqueue({ amount: 42 }, { id, name: 'charge', attempts: 1 });
      await new Promise<void>((resolve) => {
        c.on('failed', (job, _e, outcome) => {
          if (job.id === id && outcome === 'dead') resolve();
        });
      });
      failing = false;
      for (let i = 0; i < 3; i++)
        await q.enqueue({ amount: i }, { name: 'charge', group: `tenant-${i % 2}` });

      const d = await dashboard();
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const problems = collectProblems(page);

      // The overview: the queue with its counts and the chart.
      await page.goto(d.url);
      const row = page.locator(`tr[data-queue="${name}"]`);
      await expect.poll(() => row.locator('[data-state="dead"]').textContent()).toBe('1');
      await expect.poll(() => page.locator('svg.chart').count()).toBe(1);
      await page.locator('body[data-live="ready"]').waitFor();

      // The queue's dead letters, then the job.
      await row.locator('a', { hasText: 'dead letters' }).click();
      await page.locator('#jobs tr[data-job]').first().waitFor();
      expect(await page.locator('#jobs tr[data-job]').count()).toBe(1);
      await page.locator(`#jobs a`, { hasText: id }).click();
      await expect.poll(() => page.locator('#job-state').textContent()).toBe('dead');
      expect(await page.locator('#job-error').textContent()).toBe('payment gateway timed out');
      expect(await page.locator('#job-data').textContent()).toContain('"amount": 42');
      expect(await page.locator('#job-history li').count()).toBe(4);

      // Retry: the form posts and comes back to the job, now waiting for or held by the consumer.
      await page.locator('#job-actions button[data-action="retry"]').click();
      await page.waitForURL(`**/queues/${name}/jobs/${id}`);
      await page.locator('body[data-live="ready"]').waitFor();
      expect(['pending', 'active']).toContain(await page.locator('#job-state').textContent());
      await page.evaluate(() => {
        (globalThis as unknown as { stayed: boolean }).stayed = true;
      });

      // The consumer finishes it: the page learns it from the event stream, without a reload.
      release();
      await expect
        .poll(() => page.locator('#job-state').textContent(), { timeout: 10_000 })
        .toBe('completed');
      expect(await page.evaluate(() => (globalThis as unknown as { stayed?: boolean }).stayed)).toBe(true);
      await expect.poll(() => page.locator('#job-result').textContent()).toContain('"charged": 42');
      // A completed job can be run again (retry re-runs it) but no longer cancelled.
      expect(await page.locator('#job-actions form[action$="/retry"]:not([hidden])').count()).toBe(1);
      expect(await page.locator('#job-actions form[action$="/cancel"]:not([hidden])').count()).toBe(0);
      expect(await page.locator('#job-history li').allTextContents()).toEqual(
        expect.arrayContaining([expect.stringContaining('completed')]),
      );

      await page.screenshot({ path: join(shots, 'dashboard.png'), fullPage: true });
      // The queue page too, with its tabs, lanes and consumers.
      await page.goto(`${d.url}queues/${name}?state=completed`);
      await expect.poll(() => page.locator('#jobs tr[data-job]').count()).toBe(4);
      expect(await page.locator('nav.lanes .tab').count()).toBe(2);
      await page.screenshot({ path: join(shots, 'dashboard-queue.png'), fullPage: true });
      await page.goto(d.url);
      await expect.poll(() => row.locator('[data-state="completed"]').textContent()).toBe('4');
      await page.screenshot({ path: join(shots, 'dashboard-overview.png'), fullPage: true });
      expect(problems).toEqual([]);
    }, 120_000); // Chromium's start alone takes seconds on a loaded CI machine

    it('operators: dead consumer, expired lease, oldest wait; fits 390 px; never "live" while Redis is down; polls above 100 queues', async ({
      raw,
      queueName: name,
      dashboard,
      defer,
      browser,
      shots,
    }) => {
      // Its own Redis, to stop it under the page.
      const server = await RedisServer.start();
      const own = await EchoMQ.connect({ url: server.url, redisOptions: { maxRetriesPerRequest: 1 } });
      const oq = own.queue('emails');
      defer(async () => {
        await own.close({ timeoutMs: 0 });
        await server.stop();
      });
      const c = oq.consume(
        async () => {
          await new Promise(() => {});
        },
        { leaseMs: 300, extendMs: 600_000, recovery: 'off', beatMs: 100, concurrency: 1 },
      );
      const { id } = await oq.enqueue({ to: 'ada@example.com', template: 'welcome' }, { name: 'send-email' });
      await oq.lanes.pause('tenant-a');
      await oq.enqueue({ to: 'bob@example.com' }, { name: 'send-email', group: 'tenant-a' });
      const admin = server.client();
      const [sec] = await admin.time();
      await admin.zadd(oq.keys.key('consumers'), Number(sec) * 1000 - 60_000, 'worker-7:4242:dead');
      await admin.hset(
        oq.keys.key('consumers:info'),
        'worker-7:4242:dead',
        JSON.stringify({ host: 'worker-7', pid: 4242, concurrency: 10, running: 3, beatMs: 1000 }),
      );
      await new Promise((r) => setTimeout(r, 400)); // past the 300 ms lease
      const d = await startDashboard({ mq: own, port: 0, auth: false });
      defer(() => d.close());
      for (const [label, viewport] of [
        ['desktop', { width: 1280, height: 900 }],
        ['390', { width: 390, height: 844 }],
      ] as const) {
        const page = await browser.newPage({ viewport });
        await page.goto(`${d.url}queues/emails?state=active`);
        await page.locator('body[data-live="ready"]').waitFor();
        expect(await page.locator('.badge.lease-expired').count()).toBe(1);
        expect(await page.locator('tr[data-consumer="worker-7:4242:dead"] .badge.dead').count()).toBe(1);
        expect(await page.locator('#expired-leases').textContent()).toContain('1 active job(s)');
        expect(await page.locator('#oldest-wait').textContent()).toMatch(/\d+ s/);
        await page.screenshot({ path: join(shots, `operators-queue-${label}.png`), fullPage: true });
        await page.goto(`${d.url}queues/emails/jobs/${id}`);
        await page.locator('#job-state').waitFor();
        expect(await page.locator('#job-lease').textContent()).toContain('expired');
        await page.screenshot({ path: join(shots, `operators-job-${label}.png`), fullPage: true });
        if (label === '390') {
          const width = await page.evaluate(scrollWidth);
          expect(width, 'the job page is no wider than the screen').toBeLessThanOrEqual(390);
        }
        await page.close();
      }

      // Redis goes away under an open page: the badge leaves "live".
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`${d.url}queues/emails`);
      await page.locator('body[data-live="ready"]').waitFor();
      await c.close({ timeoutMs: 0 });
      await server.stop();
      await page.locator('body[data-live="redis-down"]').waitFor({ timeout: 10_000 });
      expect(await page.locator('#live').textContent()).toBe('Redis down');
      await page.screenshot({ path: join(shots, 'operators-redis-down.png'), fullPage: true });
      await page.close();

      // Above 100 queues the overview polls instead of opening one stream for all (was HTTP 400).
      const many = await dashboard();
      const names = Array.from({ length: 120 }, (_, i) => `${name}-t${i}`);
      await raw.sadd('emq:queues', ...names);
      defer(() => raw.srem('emq:queues', ...names));
      const overview = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const problems: string[] = [];
      overview.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      await overview.goto(many.url);
      await overview.locator('body[data-live="polling"]').waitFor();
      expect(await overview.locator('#queues tr[data-queue]').count()).toBeGreaterThan(100);
      expect(problems).toEqual([]);
      await overview.close();
    }, 180_000);
  },
);
