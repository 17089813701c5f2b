// memory:// as a connection sees it: an engine per `memory://`, one per name for `memory://<name>`,
// and a clear refusal for every option that only a Redis deployment gives a meaning (Cluster,
// TLS, Sentinel, the native module, a client of one's own), so nothing is silently ignored.
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { EchoMQ, type EchoMQOptions } from '../../src/queue/echomq.js';

async function refusal(opts: EchoMQOptions): Promise<{ code: string; message: string }> {
  return EchoMQ.connect(opts).then(
    async (mq) => {
      await mq.close();
      throw new Error(`connected with ${JSON.stringify(Object.keys(opts))}`);
    },
    (err: { code: string; message: string }) => err,
  );
}

describe('memory:// connections', () => {
  it('memory:// is an engine of its own per connect; memory://<name> is shared by every connection naming it', async () => {
    const a = await EchoMQ.connect({ url: 'memory://shared-by-name' });
    const b = await EchoMQ.connect({ url: 'memory://shared-by-name' });
    const c = await EchoMQ.connect({ url: 'memory://' });
    try {
      const { id } = await a.queue('q').enqueue({ n: 1 });
      expect((await b.queue('q').get(id))?.data).toEqual({ n: 1 });
      expect(await c.queue('q').get(id)).toBeNull();
    } finally {
      for (const mq of [a, b, c]) await mq.close();
    }
  });

  it.each<[string, EchoMQOptions, RegExp]>([
    ['TLS', { redisOptions: { tls: {} } }, /redisOptions\.tls cannot be used with memory:\/\/: TLS protects/],
    ['Sentinel', { redisOptions: { sentinels: [{ host: 'h', port: 1 }] } }, /redisOptions\.sentinels cannot/],
    ['a Sentinel master name', { redisOptions: { name: 'mymaster' } }, /redisOptions\.name cannot/],
    ['a host', { redisOptions: { host: '10.0.0.1' } }, /redisOptions\.host cannot/],
    [
      'the native module required',
      { module: 'require' },
      /module: 'require' cannot be used with memory:\/\//,
    ],
    [
      'a client of its own (Cluster or Redis)',
      { redis: new Redis({ lazyConnect: true }) },
      /redis cannot be used/,
    ],
  ])('refuses %s with a clear EMQINPUT, before anything is opened', async (_what, opts, message) => {
    const err = await refusal({ url: 'memory://', ...opts });
    expect(err.code).toBe('EMQINPUT');
    expect(err.message).toMatch(message);
    expect(err.message).toContain('connect to a Redis URL');
  });

  it('accepts module auto and off (the engine runs the scripts), and refuses unknown connect options on any URL', async () => {
    for (const module of ['auto', 'off'] as const)
      await (await EchoMQ.connect({ url: 'memory://', module })).close();
    const err = await refusal({ url: 'memory://', cluster: true } as EchoMQOptions);
    expect(err.message).toMatch(/unknown connect option "cluster"; known: url, redis/);
    expect((await refusal({ url: 'memory://a/b' })).message).toMatch(/memory:\/\/ or memory:\/\/<name>/);
  });
});
