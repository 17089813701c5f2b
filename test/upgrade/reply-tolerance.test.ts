// The evolution rule (SPEC 22.1), held by the TypeScript runtime: it runs here against scripts
// of a later feature level that append entries to every tuple-shaped reply, and against rows,
// meta, heartbeat info and events that carry fields it does not know, events of names it does
// not know and wake entries of kinds it does not know. Every job still reaches its end once,
// retries and delays included, and every read (get, the Inspector, the events reader, hello's
// greeting) carries on. The sweeps' replies are the ones the native module's commands give
// (SPEC 26), read by the same decoders, so the module's callers are held to the rule here too.
import { describe, expect } from 'vitest';
import type { QueueEvent } from '../../src/core/types.js';
import { Inspector } from '../../src/inspect/inspector.js';
import { PROTOCOL_VERSION } from '../../src/wire/keyspace.js';
import { greetingOf } from '../../src/wire/queue-wire.js';
import { loadScripts, parseScript } from '../../src/wire/scripts.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { poll } from '../support/wait.js';

/**
 * The tuple-shaped replies and how many entries each has today (SPEC 19): a later level may only
 * append after these. claim's and complete's last one (timeouts) is optional today; by rule 1 a
 * level that appends after it writes it, empty.
 */
const TUPLES: Record<string, number> = {
  claim: 6,
  complete: 7,
  promote: 4,
  heartbeat: 2,
  hello: 3,
  migrate: 2,
  pump: 3,
  drain: 2,
  obliterate: 2,
  sweep_stalled: 2,
  addJobScheduler: 3,
  updateJobScheduler: 3,
};

/** The script as a later level might write it: its reply padded to today's shape, then more. */
function laterLevel(body: string, entries: number): string {
  const shebang = body.startsWith('#!') ? body.slice(0, body.indexOf('\n') + 1) : '';
  return `${shebang}local reply = (function()\n${body.slice(shebang.length)}\nend)()
if type(reply) == 'table' and reply.err == nil and reply.ok == nil then
  for i = #reply + 1, ${entries} do reply[i] = {} end
  reply[#reply + 1] = 'an entry of a later level'
  reply[#reply + 1] = 9
  reply[#reply + 1] = { 'nested', 1 }
end
return reply
`;
}

const scripts = loadScripts();
for (const [name, entries] of Object.entries(TUPLES)) {
  scripts.set(name, parseScript(name, laterLevel(scripts.get(name)!.body, entries)));
}

const env = useRedisServer();
const it = queueTest<{ n: number; fails?: number }, number>(env, 'tolerate');

describe('the TypeScript runtime reads by the evolution rule', () => {
  it('reads a greeting with entries after the ones it knows, and a level-1 integer reply', () => {
    expect(greetingOf([2, 5, ['emq.promote'], 'later', [1, 2]])).toEqual({
      version: 2,
      level: 5,
      features: ['emq.promote'],
    });
    expect(greetingOf(1)).toEqual({ version: 1, level: 1, features: [] });
  });

  it('runs every job to its end against later-level replies, unknown fields, events and wake kinds', async ({
    q,
    mq,
    raw,
    key,
    consumers,
    others,
  }) => {
    // Fields a later level writes on meta and on the rows, before this runtime reads them.
    await raw.hset(key('meta'), 'a_later_setting', 'x');
    await q.pause();
    const ids: string[] = [];
    for (let n = 0; n < 60; n++) {
      const opts = n % 5 === 0 ? { timeoutMs: 60_000 } : {};
      ids.push((await q.enqueue({ n, fails: n % 4 === 0 ? 1 : 0 }, opts)).id);
    }
    for (let n = 60; n < 70; n++) ids.push((await q.enqueueIn({ n }, 50)).id);
    for (const id of ids) await raw.hset(key(`job:${id}`), 'a_later_field', 'y', 'another', '{"z":1}');
    const seen: QueueEvent[] = [];
    const events = q.events({ from: '0' });
    others.push(events);
    events.on('event', (e: QueueEvent) => seen.push(e));
    // An event of a name it does not know, a known one with fields it does not know, a wake of
    // an unknown kind, a consumer's info with fields it does not know.
    await raw.xadd(key('events'), '*', 'event', 'teleported', 'id', ids[1]!, 'where', 'mars');
    await raw.xadd(key('events'), '*', 'event', 'waiting', 'id', ids[2]!, 'a_later_field', '1');
    await raw.xadd(key('wake'), '*', 'k', 'z');
    const beat = await q.run('heartbeat', [
      q.keys.prefix,
      'later-runtime',
      JSON.stringify({ host: 'h', pid: 1, beatMs: 1000, protocols: [1, 2, 3], mood: 'ok' }),
    ]);
    // The scripts here are a later level's: their replies carry entries after today's.
    expect(beat).toEqual([
      expect.any(Number),
      expect.any(Number),
      'an entry of a later level',
      9,
      ['nested', 1],
    ]);

    const runs = new Map<number, number>();
    const c = q.consume(
      async (job) => {
        runs.set(job.data.n, (runs.get(job.data.n) ?? 0) + 1);
        if (job.attempts <= (job.data.fails ?? 0)) throw new Error('once more');
        return job.data.n;
      },
      { concurrency: 8, beatMs: 100, backoff: { kind: 'fixed', ms: 1 } },
    );
    consumers.push(c);
    await q.resume();
    const views = await poll(
      async () => Promise.all(ids.map((id) => q.get(id))),
      (vs) => vs.every((v) => v?.state === 'completed'),
      'every job completed',
      60_000,
    );
    for (const [i, v] of views.entries()) {
      expect(v!.result).toBe(i);
      expect(runs.get(i)).toBe(i < 60 && i % 4 === 0 ? 2 : 1);
      expect(v!.maxAttempts).toBe(3);
    }
    // The reads carry on past what they do not know.
    const inspector = new Inspector(mq);
    const detail = await inspector.job(q.name, ids[4]!);
    expect(detail!.state).toBe('completed');
    expect(detail!.runs.length).toBeGreaterThanOrEqual(2);
    const listed = await inspector.consumers(q.name);
    expect(listed.find((x) => x.id === 'later-runtime')!.protocols).toEqual([1, 2, 3]);
    expect((await q.counts()).completed).toBe(70);
    await poll(
      () => seen.filter((e) => e.event === 'completed').length,
      (n) => n === 70,
      'the events reader saw every completion',
      30_000,
    );
    expect(seen.find((e) => e.event === ('teleported' as QueueEvent['event']))?.fields).toEqual({
      where: 'mars',
    });
    // hello answered with entries after the three it knows: the greeting holds those three.
    expect(q.wire.greeting).toMatchObject({ version: Number(PROTOCOL_VERSION), level: 2 });
    expect(await q.drain()).toBe(0);
  });
});
