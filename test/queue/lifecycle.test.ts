// The connection's lifecycle as a user meets it: mq.close() with consumers still open hands
// their jobs back and lets the process exit, acknowledgements that cannot be stored are retried
// on one timer (never a timer per failed call), a Redis that does not answer fails connect()
// fast naming the URL (password hidden) and the cause, and bad arguments to consume() are
// refused at the call.
import { createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterEach, describe, expect } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { freePort } from '../support/redis-server.js';
import { runProcess } from '../support/run-process.js';
import { poll } from '../support/wait.js';

const env = useRedisServer();
const it = queueTest(env, 'life');

async function refusal(p: Promise<unknown>): Promise<EchoMQError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EchoMQError);
  return err as EchoMQError;
}

describe('mq.close() with consumers open', () => {
  it('closes them first: a running job is handed back (pending, no attempt spent), nothing retries after', async ({
    mq,
    q,
    raw,
  }) => {
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const errors: unknown[] = [];
    const c = q.consume(
      async (_job, ctx) => {
        started();
        await new Promise((r) => ctx.signal.addEventListener('abort', r));
      },
      { beatMs: 50 },
    );
    c.on('error', (e) => errors.push(e));
    const closed = new Promise<void>((r) => c.once('closed', () => r()));
    const { id } = await q.enqueue({ n: 1 });
    await running;
    await mq.close({ timeoutMs: 50 });
    await closed;
    expect(await raw.hget(q.keys.job(id), 'state')).toBe('pending');
    expect(await raw.hget(q.keys.job(id), 'attempts')).toBe('0');
    // It left the consumer list as it closed.
    expect(await raw.zcard(q.keys.key('consumers'))).toBe(0);
    await new Promise((r) => setTimeout(r, 300));
    expect(errors).toEqual([]);
  });

  it('a process that closes the connection but not its consumer (nor awaits it) exits by itself', async ({
    q,
  }) => {
    const program = `
      import { EchoMQ } from './src/index.ts';
      const mq = await EchoMQ.connect({ url: process.env.URL });
      const q = mq.queue(process.env.QUEUE);
      const c = q.consume(async () => { await new Promise((r) => setTimeout(r, 200)); return 'ok'; }, { beatMs: 50 });
      let errors = 0;
      c.on('error', () => { errors += 1; });
      const { id } = await q.enqueue({});
      await new Promise((r) => setTimeout(r, 100));
      void c.close();
      await mq.close();
      const row = await (await EchoMQ.connect({ url: process.env.URL })).queue(process.env.QUEUE).get(id);
      console.log(JSON.stringify({ state: row.state, errors }));
      process.exitCode = 0;
      setTimeout(() => process.exit(0), 0).unref();
    `;
    const run = await runProcess(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', program],
      20_000,
      { ...process.env, URL: env.server.url, QUEUE: `${q.name}-exit` },
    );
    expect(run.signal).toBeNull(); // not killed by the timeout: it ended
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { state: string; errors: number };
    expect(out).toEqual({ state: 'completed', errors: 0 });
  });

  it('calls after close() say what happened and what to do', async ({ mq, q }) => {
    await mq.close();
    const err = await refusal(q.enqueue({}));
    expect(err.code).toBe('EMQCLOSED');
    expect(err.message).toMatch(/was closed \(mq\.close\(\)\)/);
  });
});

describe('acknowledgements that cannot be stored', () => {
  it('are retried on one timer: calls grow linearly while the connection is down, and all land after', async ({
    q,
  }) => {
    // A connection of the test's own that fails calls at once while down (no offline queue):
    // the failures come back within a tick, which is what made retry timers multiply.
    const client = new Redis(env.server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    await new Promise((r) => client.once('ready', r));
    const own = await EchoMQ.connect({ redis: client });
    const oq = own.queue(`${q.name}-acks`);
    const names: string[] = [];
    own.connector.observe((name) => names.push(name));
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const c = oq.consume(
      async () => {
        await gate;
        return 'done';
      },
      { concurrency: 8, beatMs: 50 },
    );
    for (let i = 0; i < 8; i++) await oq.enqueue({ i });
    await poll(async () => c.running === 8, Boolean, 'eight jobs running', 10_000);
    client.disconnect();
    names.length = 0;
    release();
    await new Promise((r) => setTimeout(r, 1000));
    const completes = names.filter((n) => n === 'complete').length;
    // Two parts of four, one retry every 100 ms: about 20 calls a second. Timers that multiply
    // (one per failed part, each re-sending everything) double every 100 ms: past 1,000.
    expect(completes).toBeGreaterThan(0);
    expect(completes).toBeLessThanOrEqual(40);
    await client.connect();
    await poll(async () => (await oq.counts()).completed === 8, Boolean, 'every ack landed', 10_000);
    await own.close();
    await client.quit();
  });
});

describe('a Redis that does not answer', () => {
  const sockets = new Set<Socket>();
  let silent: Server | undefined;
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => (silent ? silent.close(r) : r(undefined)));
    silent = undefined;
  });

  it('refused: connect() fails at once naming the URL without its password, and ECONNREFUSED', async () => {
    const port = await freePort();
    const url = `redis://app:s3cret@127.0.0.1:${port}/2`;
    const started = performance.now();
    const err = await refusal(EchoMQ.connect({ url }));
    expect(performance.now() - started).toBeLessThan(4000); // well before the 5 s default timeout
    expect(err.code).toBe('EMQNOSERVER');
    expect(err.message).toContain(`redis://app:***@127.0.0.1:${port}/2`);
    expect(err.message).not.toContain('s3cret');
    expect(err.message).toContain('ECONNREFUSED');
  });

  it('a wrong password: connect() fails at once with the refusal of the server', async () => {
    const started = performance.now();
    const err = await refusal(
      EchoMQ.connect({ url: env.server.url.replace('redis://', 'redis://nobody:wrong@') }),
    );
    expect(performance.now() - started).toBeLessThan(4000);
    expect(err.code).toBe('EMQNOSERVER');
    expect(err.message).toContain(':***@');
    expect(err.message).toMatch(/AUTH|WRONGPASS|password/);
  });

  it('an unknown host: the cause is the resolver error', async () => {
    const err = await refusal(
      EchoMQ.connect({ url: 'redis://no-such-host.invalid:6390', connectTimeoutMs: 3000 }),
    );
    expect(err.code).toBe('EMQNOSERVER');
    expect(err.message).toContain('redis://no-such-host.invalid:6390');
    expect(err.message).toMatch(/ENOTFOUND|EAI_AGAIN|no answer in 3000 ms/);
  });

  it('a server that accepts and never answers: connectTimeoutMs bounds the wait and is named', async () => {
    silent = createServer((s) => {
      sockets.add(s);
    });
    await new Promise<void>((r) => silent?.listen(0, '127.0.0.1', r));
    const port = (silent.address() as { port: number }).port;
    const err = await refusal(EchoMQ.connect({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 300 }));
    expect(err.code).toBe('EMQNOSERVER');
    expect(err.message).toContain(`redis://127.0.0.1:${port}`);
    expect(err.message).toContain('no answer in 300 ms');
  });

  it('a call while the server is gone fails with EMQNOSERVER naming the server, not the retry count', async () => {
    const port = await freePort();
    const { RedisServer } = await import('../support/redis-server.js');
    const server = await RedisServer.start();
    const own = await EchoMQ.connect({ url: server.url, redisOptions: { maxRetriesPerRequest: 1 } });
    try {
      await server.stop();
      const err = await refusal(own.queue(`gone-${port}`).enqueue({}));
      expect(err.code).toBe('EMQNOSERVER');
      expect(err.message).toContain(server.url);
      expect(err.message).not.toContain('which is 20');
    } finally {
      await own.close();
    }
  });
});

describe('options given as undefined (an unset environment variable)', () => {
  it('mean the default: url falls back to REDIS_URL, connect and queue limits to their defaults', async () => {
    const saved = process.env.REDIS_URL;
    process.env.REDIS_URL = env.server.url;
    const own = await EchoMQ.connect({
      url: undefined,
      connectTimeoutMs: undefined,
      module: undefined,
      redisOptions: undefined,
      durability: undefined,
      defaultAttempts: 5,
      maxPayloadBytes: undefined,
    }).finally(() => {
      if (saved === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = saved;
    });
    try {
      // The connection's defaultAttempts stays when a queue's own is undefined.
      const q = own.queue(`undefined-opts-${process.pid}`, {
        defaultAttempts: undefined,
        maxPayloadBytes: undefined,
      });
      const { id } = await q.enqueue({ n: 1 });
      expect((await q.get(id))?.maxAttempts).toBe(5);
      expect(q.maxPayloadBytes).toBe(512 * 1024);
    } finally {
      await own.close();
    }
  });
});

describe('consume() arguments', () => {
  it('unknown options are refused for consume() and mq.queue(), naming the known ones', ({
    mq,
    q,
    consumers,
  }) => {
    const refused = (call: () => unknown): string => {
      try {
        call();
      } catch (e) {
        expect((e as EchoMQError).code).toBe('EMQINPUT');
        return (e as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refused(() => q.consume(async () => {}, { concurency: 5 } as never))).toMatch(
      /unknown consume option "concurency"; known: concurrency, leaseMs/,
    );
    expect(refused(() => mq.queue('typo-q', { defaultAttempt: 5 } as never))).toMatch(
      /unknown queue option "defaultAttempt"; known: defaultAttempts, maxPayloadBytes/,
    );
    expect(consumers).toHaveLength(0);
  });

  it('a handler that is not a function is refused at the call', ({ q, consumers }) => {
    for (const bad of [undefined, null, 'send-email', { run() {} }]) {
      let err: unknown;
      try {
        q.consume(bad as never);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(EchoMQError);
      expect((err as EchoMQError).code).toBe('EMQINPUT');
      expect((err as EchoMQError).message).toMatch(/handler function/);
    }
    expect(consumers).toHaveLength(0);
  });

  it('a handler that throws a non-Error keeps what was thrown: a string as it is, an object as JSON (bounded)', async ({
    q,
    consumers,
  }) => {
    const thrown: unknown[] = ['plain text', { code: 'E42', retryable: false }, { big: 'x'.repeat(5000) }];
    const c = q.consume(
      async (job) => {
        throw thrown[(job.data as { i: number }).i];
      },
      { beatMs: 50, maxErrorBytes: 200 },
    );
    consumers.push(c);
    const ids: string[] = [];
    for (let i = 0; i < thrown.length; i++) ids.push((await q.enqueue({ i }, { attempts: 1 })).id);
    await poll(async () => (await q.counts()).dead === 3, Boolean, 'three dead', 10_000);
    const messages = await Promise.all(ids.map(async (id) => (await q.get(id))?.error?.message ?? ''));
    expect(messages[0]).toBe('plain text');
    expect(messages[1]).toBe('a non-Error was thrown: {"code":"E42","retryable":false}');
    expect(messages[2]!.startsWith('a non-Error was thrown: {"big":"xxx')).toBe(true);
    expect(Buffer.byteLength(messages[2]!)).toBeLessThanOrEqual(200 + 3);
  });
});
