// A failover with replication lag, on real processes: a primary, a replica that replicates through
// a TCP proxy (test/support/tcp-proxy.ts), and 3 Sentinels. The link is cut, writes go on for a
// while on the primary alone, then the primary is killed and Sentinel promotes the replica. Proven:
// EchoMQ follows the failover (ioredis Sentinel options through connect's redisOptions); a job
// claimed on the old primary only and claimed again on the promoted replica gets a larger token, so
// the superseded worker's result is refused; without durability acknowledged enqueues are lost (the
// window docs/reference/reliability.md documents); with durability { replicas: 1 } none is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { RedisServer } from '../support/redis-server.js';
import { Sentinels, sentinelBinary } from '../support/sentinel.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { pause, poll } from '../support/wait.js';

const missing = 'missing' in sentinelBinary ? sentinelBinary.missing : undefined;

describe.skipIf(missing !== undefined)(
  `a Sentinel failover with replication lag${missing ? ` (${missing})` : ''}`,
  () => {
    let primary: RedisServer;
    let replica: RedisServer;
    let proxy: TcpProxy;
    let sentinels: Sentinels;

    beforeAll(async () => {
      primary = await RedisServer.start();
      proxy = await TcpProxy.start(primary.port);
      replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(proxy.port)] });
      const r = replica.client();
      await poll(
        () => r.info('replication'),
        (i) => i.includes('master_link_status:up'),
        'the replica in sync',
        20_000,
      );
      await r.quit();
      sentinels = await Sentinels.start(3, primary.port, 1);
    }, 60_000);

    afterAll(async () => {
      sentinels?.stop();
      await proxy?.stop();
      await primary?.stop();
      await replica?.stop();
    });

    it('fences the superseded worker, loses acknowledged enqueues without durability and none with it', async () => {
      const plain = await EchoMQ.connect({ redisOptions: sentinels.redisOptions });
      const durable = await EchoMQ.connect({
        redisOptions: sentinels.redisOptions,
        durability: { replicas: 1, timeoutMs: 200 },
      });
      try {
        const off = plain.queue('lag-off');
        const on = durable.queue('lag-on');
        const fenced = plain.queue('fenced');
        // Replicated before the cut: the job the two workers will fight over.
        const job = await fenced.enqueue({ x: 1 }, { durability: { replicas: 1, timeoutMs: 5000 } });

        await proxy.cut();
        // The old primary's claim, never replicated: a worker that will be superseded.
        const [first] = (await fenced.run('claim', [fenced.keys.prefix, 1, 60_000])) as unknown[][];
        const oldToken = String(first![1]);

        // Writes for a while on the primary alone.
        const acked = { off: [] as string[], on: [] as string[] };
        let refused = 0;
        const end = Date.now() + 1500;
        const producer = async (q: typeof off, into: string[]) => {
          while (Date.now() < end) {
            const batch = await Promise.allSettled(Array.from({ length: 20 }, () => q.enqueue({})));
            for (const r of batch) {
              if (r.status === 'fulfilled') into.push(r.value.id);
              else if (r.reason instanceof EchoMQError && r.reason.code === 'EMQDURABILITY') refused += 1;
              else throw r.reason;
            }
          }
        };
        await Promise.all([producer(off, acked.off), producer(on, acked.on)]);

        await primary.kill();
        await poll(
          () => sentinels.primaryPort(),
          (p) => p === replica.port,
          'Sentinel to promote the replica',
          30_000,
        );
        // Both connections follow: the next call lands on the promoted replica.
        await poll(
          () =>
            off.counts().then(
              () => true,
              () => false,
            ),
          Boolean,
          'EchoMQ to reach the new primary',
          30_000,
        );
        const raw = replica.client();
        const present = async (q: typeof off, ids: string[]) => {
          const p = raw.pipeline();
          for (const id of ids) p.exists(q.keys.key('job', id));
          return ((await p.exec()) ?? []).filter(([, n]) => n === 1).length;
        };
        const lostOff = acked.off.length - (await present(off, acked.off));
        const lostOn = acked.on.length - (await present(on, acked.on));
        console.log(
          `failover with 1.5 s of lag: durability off ${acked.off.length} acknowledged, ${lostOff} lost; ` +
            `durability on ${acked.on.length} acknowledged, ${lostOn} lost, ${refused} refused with EMQDURABILITY`,
        );
        expect(lostOff).toBeGreaterThan(0);
        expect(lostOn).toBe(0);
        expect(refused).toBeGreaterThan(0);

        // The promoted replica never saw the old claim: claimed again, the job gets a larger token.
        const [again] = (await fenced.run('claim', [fenced.keys.prefix, 1, 60_000])) as unknown[][];
        expect(again![0]).toBe(job.id);
        const newToken = String(again![1]);
        expect(BigInt(newToken) > BigInt(oldToken)).toBe(true);
        const complete = (token: string) =>
          fenced.run('complete', [fenced.keys.prefix, 60_000, 0, job.id, token, '"r"']) as Promise<unknown[]>;
        expect((await complete(oldToken))[0]).toEqual(['EMQLEASE']); // the superseded result: refused
        expect((await complete(newToken))[0]).toEqual(['OK']);
        await raw.quit();
      } finally {
        await plain.close();
        await durable.close();
      }
      await pause(0);
    }, 120_000);
  },
);
