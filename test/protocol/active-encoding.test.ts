// The active set's encoding (protocol/lib/claim.lua, SPEC 19.5): a claim of several jobs turns a
// listpack-encoded (or absent) `active` into a skiplist, so a lease's insert and removal stop
// scanning the whole set, with a placeholder member that no reader ever sees; a claim of one job
// leaves it as it is, and a user whose ACL lacks object|encoding claims as before.
import { describe, expect } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { queueTest, useRedisServer } from '../support/harness.js';

const env = useRedisServer();
const it = queueTest<{ n: number }, void>(env, 'enc');

describe('the active set', () => {
  it('is a skiplist after a claim of several jobs, holding exactly their ids at their lease deadlines', async ({
    q,
    raw,
    key,
  }) => {
    for (let n = 0; n < 5; n++) await q.enqueue({ n });
    const jobs = await q.claim(5, { leaseMs: 60_000 });
    expect(await raw.object('ENCODING', key('active'))).toBe('skiplist');
    const members = await raw.zrange(key('active'), 0, -1, 'WITHSCORES');
    const ids = members.filter((_, i) => i % 2 === 0);
    expect(ids.sort()).toEqual(jobs.map((j) => j.id).sort());
    const [now] = await raw.time();
    for (let i = 1; i < members.length; i += 2) {
      const deadline = Number(members[i]);
      expect(deadline).toBeGreaterThan(Number(now) * 1000 + 50_000); // now + 60 s, not the placeholder's 0
    }
    for (const job of jobs) await job.complete();
    expect(await raw.exists(key('active'))).toBe(0);
  });

  it('stays a listpack for a claim of one job (no extra call), and turns at the next claim of several', async ({
    q,
    raw,
    key,
  }) => {
    for (let n = 0; n < 4; n++) await q.enqueue({ n });
    const [first] = await q.claim(1, { leaseMs: 60_000 });
    expect(await raw.object('ENCODING', key('active'))).toBe('listpack');
    const lease = await raw.zscore(key('active'), first!.id);
    const rest = await q.claim(3, { leaseMs: 60_000 });
    expect(rest).toHaveLength(3);
    expect(await raw.object('ENCODING', key('active'))).toBe('skiplist');
    expect(await raw.zcard(key('active'))).toBe(4);
    expect(await raw.zscore(key('active'), first!.id)).toBe(lease); // the earlier lease unchanged
  });

  it('claims as before for a user whose ACL lacks object|encoding (active stays a listpack)', async ({
    q,
    raw,
    key,
  }) => {
    await raw.acl('SETUSER', 'noobject', 'reset', 'on', '>pw-noobject', '~emq:*', '+@all', '-object');
    const mq = await EchoMQ.connect({ url: `redis://noobject:pw-noobject@127.0.0.1:${env.server.port}` });
    try {
      const limited = mq.queue<{ n: number }, void>(q.name);
      for (let n = 0; n < 3; n++) await limited.enqueue({ n });
      const jobs = await limited.claim(3);
      expect(jobs).toHaveLength(3);
      expect(await raw.object('ENCODING', key('active'))).toBe('listpack');
      for (const job of jobs) await job.complete();
      expect(await q.counts()).toMatchObject({ completed: 3, active: 0 });
    } finally {
      await mq.close();
    }
  });
});
