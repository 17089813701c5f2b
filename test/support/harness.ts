// Per-file test wiring: one redis-server for the file, a fresh EchoMQ per test.
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, it } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import type { ConnectOptions } from '../../src/wire/connector.js';
import { MemoryServer, onMemory } from './memory-server.js';
import { Consumers } from './observe.js';
import { RedisServer, type RedisServerOptions } from './redis-server.js';

export { onMemory };

/**
 * `it` for a test only a real redis-server can run (another process, a server restart): on the
 * memory engine it is skipped, with `why` in its name. `test` is the file's own `it` when it has
 * one (a queueTest), so the test still receives its fixtures.
 */
export function redisOnly(why: string): typeof it;
export function redisOnly<T extends { skip: (...args: never[]) => unknown }>(why: string, test: T): T;
export function redisOnly(why: string, test: { skip: (...args: never[]) => unknown } = it): unknown {
  if (!onMemory) return test;
  const skip = (name: string, ...rest: unknown[]) =>
    (test.skip as (...args: unknown[]) => unknown)(`${name} (redis-server only: ${why})`, ...rest);
  return skip;
}

/**
 * Starts a redis-server before the file's tests and stops it after; in the `memory` project
 * (ECHOMQ_TEST_ENGINE=memory) a memory engine of the file's own instead, with the same surface.
 */
export function useRedisServer(opts: RedisServerOptions = {}): { readonly server: RedisServer } {
  const holder = {} as { server: RedisServer };
  beforeAll(async () => {
    holder.server = onMemory
      ? ((await MemoryServer.start()) as unknown as RedisServer)
      : await RedisServer.start(opts);
  });
  afterAll(async () => {
    await holder.server?.stop();
  });
  return holder;
}

let counter = 0;
/** A queue name no other test in this file uses, so tests need no flush between them. */
export function uniqueQueue(prefix = 'q'): string {
  counter += 1;
  return `${prefix}${counter}-${process.pid}`;
}

/** What each test of a file gets from `useQueue`. */
export interface QueueFixture<D = unknown, R = unknown> {
  /** An EchoMQ connected to the file's server. */
  mq: EchoMQ;
  /** A plain ioredis client on the same server, for assertions on raw keys. */
  raw: Redis;
  /** A queue name no other test uses, and its queue on `mq`. */
  name: string;
  q: Queue<D, R>;
  /** The queue's key prefix, `emq:{<name>}:`. */
  P: string;
  /** One of the queue's keys, `emq:{<name>}:<suffix>` (another queue's with `queue`). */
  key(suffix: string, queue?: string): string;
}

/**
 * connect's options a file's queues are opened with: `{ protocolVersion: 1 }` for a file about
 * version 1's rules, now that new queues start at 2.
 */
export type QueueConnectOptions = Pick<ConnectOptions, 'protocolVersion'>;

/** A queue's key as keyspace.ts writes it, `emq:{<queue>}:<suffix>`, for reading raw keys. */
export function queueKey(queue: string, suffix: string): string {
  return `emq:{${queue}}:${suffix}`;
}

/** A test's own queue on the file's server: a fresh EchoMQ, raw client and queue name. */
async function openQueue<D, R>(
  env: { readonly server: RedisServer },
  prefix: string,
  connect: QueueConnectOptions = {},
): Promise<QueueFixture<D, R>> {
  const mq = await EchoMQ.connect({ ...connect, url: env.server.url });
  const raw = env.server.client();
  const name = uniqueQueue(prefix);
  const q = mq.queue<D, R>(name);
  return { mq, raw, name, q, P: q.keys.prefix, key: (suffix, queue = name) => queueKey(queue, suffix) };
}

/** What each test of a `queueTest` gets, made for it alone and closed after it. */
export interface QueueTestContext<D = unknown, R = unknown> extends QueueFixture<D, R> {
  /**
   * Runs `fn` after the test and before its connections close, latest first: the consumers,
   * readers and extra connections a test opens.
   */
  defer(fn: () => unknown): void;
  /** Consumers the test starts (push them): closed after it, { timeoutMs: 0 }, before the connections. */
  consumers: Consumer<D, R>[];
  /** Other things the test opens (EchoMQ connections, event readers): closed after it. */
  others: { close(): Promise<unknown> }[];
  /** Consumers on connections of their own (pool.start(name, handler)): all closed after the test. */
  pool: Consumers;
}

/**
 * `it` whose tests receive their own queue (vitest test.extend): `async ({ q, raw, key }) =>`
 * (and `queueName: name` for the name).
 * Each test gets its own EchoMQ, raw client and queue name, closed after it, so no file keeps
 * them in module-level `let`s. `.extend` it further for a file's own fixtures.
 */
export function queueTest<D = unknown, R = unknown>(
  env: { readonly server: RedisServer },
  prefix: string,
  connect: QueueConnectOptions = {},
) {
  // The queue's name is the fixture `queueName` (a test context cannot have its own `name`).
  return it.extend<
    Omit<QueueTestContext<D, R>, 'name'> & {
      queueName: string;
      opened: Omit<QueueTestContext<D, R>, 'consumers' | 'others' | 'pool'>;
    }
  >({
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
    opened: async ({}, use) => {
      const f = await openQueue<D, R>(env, prefix, connect);
      const deferred: (() => unknown)[] = [];
      try {
        await use({ ...f, defer: (fn) => void deferred.push(fn) });
      } finally {
        for (const fn of deferred.reverse()) await fn();
        await f.mq.close();
        await f.raw.quit();
      }
    },
    mq: async ({ opened }, use) => use(opened.mq),
    raw: async ({ opened }, use) => use(opened.raw),
    queueName: async ({ opened }, use) => use(opened.name),
    q: async ({ opened }, use) => use(opened.q),
    P: async ({ opened }, use) => use(opened.P),
    key: async ({ opened }, use) => use(opened.key),
    defer: async ({ opened }, use) => use(opened.defer),
    consumers: async ({ opened }, use) => {
      const list: Consumer<D, R>[] = [];
      opened.defer(() => Promise.all(list.splice(0).map((c) => c.close({ timeoutMs: 0 }))));
      await use(list);
    },
    pool: async ({ opened }, use) => {
      const pool = new Consumers(() => env.server.url);
      opened.defer(() => pool.closeAll());
      await use(pool);
    },
    others: async ({ opened }, use) => {
      const list: { close(): Promise<unknown> }[] = [];
      opened.defer(() => Promise.all(list.splice(0).map((o) => o.close())));
      await use(list);
    },
  });
}

/**
 * Before each test: an EchoMQ on the file's server, a raw client and a queue named `<prefix>…`
 * that no other test uses, handed to `use` (which assigns them to the file's variables). After
 * each test: `cleanup` (the file's own consumers, readers, connections), then both closed.
 * New files use queueTest instead (no module-level bindings).
 */
export function useQueue<D = unknown, R = unknown>(
  env: { readonly server: RedisServer },
  prefix: string,
  use: (f: QueueFixture<D, R>) => void,
  cleanup?: () => unknown,
): void {
  let current: QueueFixture<D, R> | undefined;
  beforeEach(async () => {
    current = await openQueue<D, R>(env, prefix);
    use(current);
  });
  afterEach(async () => {
    await cleanup?.();
    await current?.mq.close();
    await current?.raw.quit();
    current = undefined;
  });
}

/**
 * One fixture per helper of `helpers` (a test names the ones it uses: `async ({ claim, events })`),
 * each taken from the fixture `h`, the file's helpers made over that test's queue.
 */
export function helperFixtures<H extends object>(names: readonly (keyof H & string)[]) {
  const out: Record<string, (ctx: { h: H }, use: (v: unknown) => Promise<void>) => Promise<void>> = {};
  for (const name of names) out[name] = async ({ h }, use) => use(h[name]);
  return out as unknown as {
    [K in keyof H]: (ctx: { h: H }, use: (v: H[K]) => Promise<void>) => Promise<void>;
  };
}
