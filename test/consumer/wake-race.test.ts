// A wake the beat has read must not be lost to a claim reply that it overtook. The consumer's
// claim replies come on its main connection and its wake reads on a connection of its own, so
// a short claim that ran on the server *before* a wake can reach the consumer *after* it. The
// test makes that order happen (a proxy holds the main connection's replies) instead of
// hoping for it, with a beat too long to hide a lost wake.

import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { deferred, poll, within } from '../support/wait.js';

const env = useRedisServer();
const test = queueTest(env, 'wakerace');

/** XREAD calls the server has run, and the clients blocked now. */
async function blockedReads(raw: Redis): Promise<{ reads: number; blocked: number }> {
  const stats = await raw.info('commandstats');
  const clients = await raw.info('clients');
  return {
    reads: Number(/cmdstat_xread:calls=(\d+)/.exec(stats)?.[1] ?? 0),
    blocked: Number(/blocked_clients:(\d+)/.exec(clients)?.[1] ?? 0),
  };
}

test('a short claim overtaken by a wake the beat read claims again, not waiting for the beat', async ({
  q,
  raw,
  key,
  queueName,
  defer,
}) => {
  const proxy = await TcpProxy.start(env.server.port);
  defer(() => proxy.stop());
  const viaProxy = await EchoMQ.connect({ url: `redis://127.0.0.1:${proxy.port}` });
  defer(() => viaProxy.close());
  const main = proxy.connections - 1; // the connection EchoMQ.connect made: claims reply on it

  const gateA = deferred();
  const started: string[] = [];
  const startedB = deferred();
  const consumer = viaProxy.queue<{ n: string }>(queueName).consume(
    async (job) => {
      started.push(job.data.n);
      if (job.data.n === 'A') await gateA.promise;
      else if (job.data.n === 'B') startedB.resolve();
    },
    { concurrency: 1, beatMs: 60_000, leaseMs: 60_000 },
  );
  defer(() => consumer.close({ timeoutMs: 1000 }));
  defer(() => proxy.release(main)); // first: a failed step must not leave replies held

  // A first job loads the scripts on the consumer's connection (a first EVALSHA's NOSCRIPT
  // reply would be held below, and the script never sent).
  await q.enqueue({ n: 'warm' });
  await poll(
    () => raw.zcard(key('completed')),
    (n) => n === 1,
    'the warm-up job to complete',
  );
  started.length = 0;

  // A runs and fills the only slot; the beat blocks on the wake stream.
  const a = await q.enqueue({ n: 'A' });
  await poll(
    () => started.length,
    (n) => n === 1,
    'A to start',
  );
  await poll(
    () => blockedReads(raw),
    (s) => s.blocked === 1,
    'the beat to block on the wake stream',
  );

  // A's completion claims for the slot it frees; the claim runs (nothing is waiting: short) but
  // its reply is held, so the slot stays reserved.
  proxy.hold(main);
  gateA.resolve();
  await poll(
    () => raw.hget(key(`job:${a.id}`), 'state'),
    (s) => s === 'completed',
    'A stored completed',
  );

  // B arrives into an empty queue: its wake ends the beat's read. With the slot reserved the
  // beat claims nothing and blocks again, after B's wake.
  const before = await blockedReads(raw);
  await q.enqueue({ n: 'B' });
  await poll(
    () => blockedReads(raw),
    (s) => s.reads >= before.reads + 1 && s.blocked === 1,
    'the beat to read B wake and block again',
  );
  expect(started).toEqual(['A']);

  // Now the short reply (older than B's wake) arrives. B must still start, long before a beat.
  proxy.release(main);
  await within(startedB.promise, 10_000, 'B to start before the 60 s beat');
  expect(started).toEqual(['A', 'B']);
});
