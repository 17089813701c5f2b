// What a job's page explains, as the library records it: which consumer ran each attempt
// (claim's trailing consumer, SPEC 19.5), on the row and on the active events.
import { describe, expect } from 'vitest';
import { eventsOf } from '../src/events/reader.js';
import { queueTest, useRedisServer } from './support/harness.js';

const env = useRedisServer();
const it = queueTest<{ n: number }>(env, 'attempts');

describe('which consumer ran a job', () => {
  it('a consumer’s claim writes its id on the row and on the active event', async ({ q, raw, key }) => {
    const { id } = await q.enqueue({ n: 1 });
    const consumer = q.consume(() => 'ok');
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    expect(await raw.hget(key(`job:${id}`), 'consumer')).toBe(consumer.id);
    const entries = await raw.xrange(key('events'), '-', '+');
    const active = entries.flatMap(([sid, flat]) => eventsOf(sid, flat)).filter((e) => e.event === 'active');
    expect(active.map((e) => [e.id, e.fields.consumer])).toEqual([[id, consumer.id]]);
  });

  it('jobs a completion claims (complete’s claim) record the consumer too', async ({ q, raw, key }) => {
    // One slot and three jobs: the first is claimed by the beat, the next two by the
    // completions before them (complete claims for the slot it frees).
    const ids: string[] = [];
    for (let n = 1; n <= 3; n++) ids.push((await q.enqueue({ n })).id);
    const consumer = q.consume(() => 'ok', { concurrency: 1 });
    try {
      for (const id of ids) await q.waitFor(id, { timeoutMs: 10_000 });
    } finally {
      await consumer.close();
    }
    for (const id of ids) expect(await raw.hget(key(`job:${id}`), 'consumer')).toBe(consumer.id);
  });
});
