// Connecting as production does: TLS (`rediss://`) with a throw-away CA, a least-privilege ACL
// user limited to `~emq:*` and the commands EchoMQ needs, a selected database (`/3`), and the
// warning when Redis may evict keys (maxmemory-policy other than noeviction).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { coreFlow } from '../support/core-flow.js';
import { freePort, RedisServer } from '../support/redis-server.js';

/**
 * The commands EchoMQ's runtime needs (queues, consumers, events, recurrence, flows), those run
 * inside its scripts included: Redis checks ACLs for script calls too. Kept in step with the
 * guide's "Running with least privilege" (docs/guide/scaling-out.md) and protocol/SPEC.md (section 18).
 */
const LEAST_PRIVILEGE_COMMANDS = [
  // the connection: ioredis's ready check (INFO), SELECT for /<db> URLs
  'ping',
  'info',
  'select',
  // scripts (EVAL only when a server lacks a script: NOSCRIPT)
  'evalsha',
  'eval',
  // reads the runtime makes itself
  'xread',
  'xrevrange',
  'hget',
  'hgetall',
  'hmget',
  'smembers',
  'sadd',
  'zcard',
  'zcount',
  'zrange',
  'zrangebyscore',
  'get',
  'set',
  'del',
  // inside the scripts
  'time',
  'exists',
  'hset',
  'hdel',
  'hincrby',
  'hkeys',
  'pexpire',
  'pttl',
  'sismember',
  'srem',
  'xadd',
  'zadd',
  'zpopmin',
  'zrem',
  'zremrangebyscore',
  'zscore',
  'zmscore', // the idempotency window (enqueue, schedule, flow_add)
  // job logs (ctx.log, queue.logs)
  'rpush',
  'ltrim',
  'lrange',
  'llen',
  // claim keeps active a skiplist (protocol/lib/claim.lua); without it, the plain ZADD
  'object|encoding',
];
// Optional: +client|id +client|unblock let a consumer end a timed blocking read on time (without
// them it wakes on the server's tick, about 100 ms late); +config|get lets connect() check
// maxmemory-policy; +scan lets obliterate walk the queue's keys. CLIENT UNBLOCK can unblock any client: grant it where that is acceptable.

const admin: { server?: RedisServer; raw?: Redis } = {};

beforeAll(async () => {
  admin.server = await RedisServer.start();
  admin.raw = admin.server.client();
  await admin.raw.acl(
    'SETUSER',
    'emq',
    'reset',
    'on',
    '>s3cret-pass',
    '~emq:*',
    'resetchannels',
    ...LEAST_PRIVILEGE_COMMANDS.map((c) => `+${c}`),
  );
});

afterAll(async () => {
  await admin.raw?.quit();
  await admin.server?.stop();
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a least-privilege ACL user', () => {
  it('is documented with the same command list in the guide (docs/guide/scaling-out.md) and protocol/SPEC.md', () => {
    for (const doc of ['docs/guide/scaling-out.md', 'protocol/SPEC.md']) {
      const text = readFileSync(new URL(`../../${doc}`, import.meta.url), 'utf8');
      const acl = /ACL SETUSER echomq ([^`]*?)\n```/.exec(text)?.[1];
      expect(acl, `${doc} has no ACL SETUSER echomq block`).toBeDefined();
      const granted = acl!
        .split(/\s+/)
        .filter((w) => w.startsWith('+'))
        .map((w) => w.slice(1));
      expect(granted.sort(), doc).toEqual([...LEAST_PRIVILEGE_COMMANDS].sort());
    }
  });

  it('runs the whole core flow with only ~emq:* keys and the listed commands', async () => {
    const url = `redis://emq:s3cret-pass@127.0.0.1:${admin.server!.port}`;
    const mq = await EchoMQ.connect({ url });
    try {
      await coreFlow(mq, 'acl-core');
      // The idempotency window: a retention-trimmed job's id is read back from ids:ended.
      const q = mq.queue<number, number>('acl-ids');
      await q.configure({ retention: { completed: { count: 0 } } });
      const { id } = await q.enqueue(1, { id: 'JOBacl-1' });
      const consumer = q.consume((job) => job.data);
      await q.waitFor(id, { timeoutMs: 10_000 }).catch(() => {}); // its row is trimmed as it completes
      await consumer.close();
      expect(await q.enqueue(1, { id })).toMatchObject({ status: 'duplicate' });
      // Nothing outside the grant: other keys, admin commands.
      const c = mq.connector.client;
      await expect(c.get('other:key')).rejects.toThrow(/NOPERM/);
      await expect(c.flushall()).rejects.toThrow(/NOPERM/);
      await expect(c.keys('*')).rejects.toThrow(/NOPERM/);
    } finally {
      await mq.close();
    }
    // The registry of queue names is one key under emq: too.
    expect(await admin.raw!.smembers('emq:queues')).toContain('acl-core');
  }, 60_000);

  it('with a selected database (redis://user:pass@host:port/3), keys land in db 3 only', async () => {
    const url = `redis://emq:s3cret-pass@127.0.0.1:${admin.server!.port}/3`;
    const mq = await EchoMQ.connect({ url });
    try {
      await coreFlow(mq, 'db3-core');
    } finally {
      await mq.close();
    }
    const db3 = admin.server!.client();
    try {
      await db3.select(3);
      expect(await db3.exists('emq:{db3-core}:meta')).toBe(1);
      expect(await db3.smembers('emq:queues')).toEqual(['db3-core']);
    } finally {
      await db3.quit();
    }
    expect(await admin.raw!.exists('emq:{db3-core}:meta')).toBe(0);
  }, 60_000);

  it('refuses to connect when the user may not SELECT the database (ioredis would go on in db 0)', async () => {
    await admin.raw!.acl('SETUSER', 'nosel', 'reset', 'on', '>p', '~emq:*', '+ping', '+info', '+evalsha');
    const url = `redis://nosel:p@127.0.0.1:${admin.server!.port}/4`;
    await expect(EchoMQ.connect({ url, redisOptions: { maxRetriesPerRequest: 1 } })).rejects.toThrow(
      /cannot select database 4: NOPERM.*\+select/,
    );
  });
});

describe('the maxmemory-policy warning at connect', () => {
  async function connectWarnings(url: string): Promise<string[]> {
    const spy = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const mq = await EchoMQ.connect({ url });
    await mq.close();
    const out = spy.mock.calls
      .filter(([, opts]) => (opts as { code?: string } | undefined)?.code === 'EMQEVICTION')
      .map(([message]) => String(message));
    spy.mockRestore();
    return out;
  }

  it('warns when Redis may evict keys, and says why and what to do', async () => {
    await admin.raw!.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const [warning, ...more] = await connectWarnings(admin.server!.url);
      expect(more).toEqual([]);
      expect(warning).toMatch(/maxmemory-policy is allkeys-lru/);
      expect(warning).toMatch(/lost job/);
      expect(warning).toMatch(/noeviction/);
      // A user that may not run CONFIG is not checked, and connects all the same.
      expect(await connectWarnings(`redis://emq:s3cret-pass@127.0.0.1:${admin.server!.port}`)).toEqual([]);
    } finally {
      await admin.raw!.config('SET', 'maxmemory-policy', 'noeviction');
    }
    expect(await connectWarnings(admin.server!.url)).toEqual([]);
  });
});

describe('TLS (rediss://)', () => {
  const tls: { server?: RedisServer; port?: number; ca?: Buffer; dir?: string; why?: string } = {};

  beforeAll(async () => {
    tls.dir = mkdtempSync(join(tmpdir(), 'echomq-tls-'));
    const at = (f: string) => join(tls.dir!, f);
    try {
      const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
      const run = (args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
      run([
        'req',
        '-x509',
        ...ec,
        '-keyout',
        at('ca.key'),
        '-out',
        at('ca.crt'),
        '-days',
        '2',
        '-subj',
        '/CN=echomq-test-ca',
      ]);
      run(['req', ...ec, '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1']);
      writeFileSync(at('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
      run([
        'x509',
        '-req',
        '-in',
        at('server.csr'),
        '-CA',
        at('ca.crt'),
        '-CAkey',
        at('ca.key'),
        '-CAcreateserial',
        '-out',
        at('server.crt'),
        '-days',
        '2',
        '-extfile',
        at('ext.cnf'),
      ]);
    } catch (err) {
      tls.why = `openssl could not make a test CA (${(err as Error).message.split('\n')[0]})`;
      return;
    }
    tls.ca = readFileSync(at('ca.crt'));
    tls.port = await freePort();
    try {
      tls.server = await RedisServer.start({
        args: [
          '--tls-port',
          String(tls.port),
          '--tls-cert-file',
          at('server.crt'),
          '--tls-key-file',
          at('server.key'),
          '--tls-ca-cert-file',
          at('ca.crt'),
          '--tls-auth-clients',
          'no',
        ],
      });
    } catch (err) {
      tls.why = `this redis-server cannot serve TLS (built without it?): ${(err as Error).message.slice(0, 300)}`;
    }
  });

  afterAll(async () => {
    await tls.server?.stop();
    if (tls.dir) rmSync(tls.dir, { recursive: true, force: true });
  });

  it('runs the core flow over TLS, verifying the server against the CA', async (ctx) => {
    if (!tls.server) {
      console.warn(`skipping the TLS test: ${tls.why}`);
      ctx.skip(tls.why);
      return;
    }
    const mq = await EchoMQ.connect({
      url: `rediss://127.0.0.1:${tls.port}`,
      redisOptions: { tls: { ca: tls.ca!, servername: 'localhost' } },
    });
    try {
      await coreFlow(mq, 'tls-core');
      const stream = (mq.connector.client as unknown as { stream: { encrypted?: boolean } }).stream;
      expect(stream.encrypted).toBe(true);
    } finally {
      await mq.close();
    }
  }, 60_000);
});
