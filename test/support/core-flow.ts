// The core flow of EchoMQ, run end to end on one connection: what a least-privilege ACL user,
// a TLS connection or a selected database must all support. Throws on the first thing that
// does not work.
import assert from 'node:assert/strict';
import type { EchoMQ } from '../../src/queue/echomq.js';

export async function coreFlow(mq: EchoMQ, name: string): Promise<void> {
  const q = mq.queue<{ n: number; fail?: boolean }, number>(name);
  await q.configure({ eventsMaxLen: 1000, retention: { completed: { count: 100 } } });
  await q.lanes.configure('lane', { concurrency: 1, rateLimit: { max: 100, perMs: 1000 } });
  const events = q.events({ from: '0', blockMs: 200 });
  const seen: string[] = [];
  events.subscribe((e) => seen.push(e.event));
  await events.ready;

  const a = await q.enqueue({ n: 1 });
  await q.enqueue({ n: 2 }, { group: 'lane', priority: 3, dedupe: { key: 'k', mode: 'throttle' } });
  await q.enqueueMany([{ data: { n: 3 } }, { data: { n: 4 }, opts: { group: 'lane' } }]);
  await q.enqueueIn({ n: 5 }, 100);
  const late = await q.enqueueAt({ n: 6 }, Date.now() + 3_600_000);
  assert.equal(await q.cancel(late.id), 'cancelled');
  const dead = await q.enqueue({ n: 7, fail: true }, { attempts: 1 });
  await q.pause();
  await q.resume();
  await q.repeat.register('tick', 3_600_000, { t: 1 });
  await q.schedulers.upsert('nightly', { pattern: '0 3 * * *', tz: 'Europe/Berlin' }, { data: { n: 8 } });
  await mq.flow({ queue: name, data: { n: 9 }, children: [{ queue: name, data: { n: 10 } }] });

  const consumer = q.consume(
    async (job, ctx) => {
      if (job.data.fail) throw new Error('boom');
      await ctx.progress(50);
      await ctx.checkpoint();
      return job.data.n;
    },
    { concurrency: 4, beatMs: 100, extendMs: 50 },
  );
  try {
    assert.equal(await q.waitFor(a.id, { timeoutMs: 10_000 }), 1);
    const deadline = Date.now() + 15_000;
    for (;;) {
      const c = await q.counts();
      if (c.completed >= 7 && c.dead === 1) break;
      if (Date.now() > deadline) throw new Error(`the flow did not finish: ${JSON.stringify(c)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await consumer.close();
  }
  assert.equal((await q.get(dead.id))?.state, 'dead');
  await q.retry(dead.id);
  assert.equal((await q.get(dead.id))?.state, 'pending');
  assert.equal(await q.remove(dead.id), true);
  await q.promote();
  await q.reap();
  await q.sweepStalled();
  await q.clean({ state: 'cancelled' });
  await q.repeat.list();
  await q.repeat.unregister('tick');
  await q.schedulers.list();
  await q.schedulers.remove('nightly');
  await q.lanes.list();
  await q.isPaused();
  await events.close();
  for (const e of ['added', 'delayed', 'active', 'progress', 'completed', 'failed', 'paused', 'resumed']) {
    assert.ok(seen.includes(e), `the events reader saw no ${e} event (saw ${[...new Set(seen)].join(', ')})`);
  }
}
