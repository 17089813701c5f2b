// The Go runtime and the TypeScript runtime sharing queues on a real local Redis Cluster (3
// primaries): Go through its own slot router (runtimes/go/cluster.go, seeded with one node's
// URL), TypeScript through an ioredis Cluster client. Queues in different slots, on different
// primaries, each fed by producers of both runtimes and served by consumers of both at once:
// every job completes exactly once (none lost, none twice), retries counted whoever retried.
// Without Go, or when no local cluster can start, the file skips, saying so.
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { JobView } from '../../src/core/types.js';
import { EchoMQ } from '../../src/queue/echomq.js';
import { keySlot } from '../../src/wire/slot.js';
import { clusterForFile, type RedisCluster } from '../support/redis-cluster.js';
import { poll, within } from '../support/wait.js';
import { GoConsumer, goRun, haveGo, useGoBuild } from './go-runtime.js';

const found = haveGo ? await clusterForFile({ replicas: 0 }) : { cluster: undefined };
const env = found as { cluster: RedisCluster };

interface Work {
  n: number;
  fail?: number;
  sleepMs?: number;
}

/** Per queue, from each producer: 30 jobs, a third in a lane, every fifth failing its first attempt. */
function mix(offset: number): { data: Work; group?: string; backoff: { kind: 'fixed'; ms: number } }[] {
  return Array.from({ length: 30 }, (_, i) => ({
    data: { n: offset + i, sleepMs: i % 3, ...(i % 5 === 0 ? { fail: 1 } : {}) },
    ...(i % 3 === 0 ? { group: 'lane' } : {}),
    backoff: { kind: 'fixed' as const, ms: 20 },
  }));
}

describe.skipIf(!haveGo || !found.cluster)('the Go and TypeScript runtimes on one Redis Cluster', () => {
  const emqGo = useGoBuild();

  it('queues on several primaries, produced and consumed by both runtimes: every job completes once', async () => {
    const seed = `redis://127.0.0.1:${env.cluster.nodes[0]!.port}`;
    const client = new Cluster(env.cluster.startupNodes);
    const mq = await EchoMQ.connect({ redis: client });
    const run = Math.random().toString(36).slice(2, 8);
    const names = Array.from({ length: 4 }, (_, i) => `gocl-${run}-${i}`);
    const goConsumers: GoConsumer[] = [];
    const tsConsumers: { close(o: { timeoutMs: number }): Promise<void> }[] = [];
    try {
      // The queues' slots are served by more than one primary.
      const ranges = (await client.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
      const ownerOf = (slot: number) => ranges.find(([lo, hi]) => slot >= lo && slot <= hi)![2][1];
      expect(new Set(names.map((n) => ownerOf(keySlot(`emq:{${n}}:`)))).size).toBeGreaterThanOrEqual(2);

      const tsRan = new Map<string, number>();
      for (const name of names) {
        const go = new GoConsumer(emqGo.bin, seed, name, 4);
        goConsumers.push(go);
        await within(go.ready.promise, 20_000, `the Go consumer of ${name} to start`);
        const ts = mq.queue<Work>(name).consume(
          async (job) => {
            if (job.data.sleepMs) await new Promise((r) => setTimeout(r, job.data.sleepMs));
            if (job.attempts <= (job.data.fail ?? 0))
              throw new Error(`ts: attempt ${job.attempts} fails on purpose`);
            return { by: 'ts', attempt: job.attempts };
          },
          { concurrency: 4, beatMs: 200 },
        );
        ts.on('completed', (job) => tsRan.set(job.id, (tsRan.get(job.id) ?? 0) + 1));
        tsConsumers.push(ts);
      }

      const ids = new Map<string, string[]>();
      for (const [i, name] of names.entries()) {
        const q = mq.queue<Work>(name);
        const tsIds: string[] = [];
        for (const s of mix(i * 1000)) {
          tsIds.push((await q.enqueue(s.data, { group: s.group, backoff: s.backoff, attempts: 3 })).id);
        }
        const goWire = mix(i * 1000 + 500).map((s) => ({ ...s, attempts: 3 }));
        const goReply = JSON.parse(
          await goRun(emqGo.bin, ['produce', '--url', seed, '--queue', name], JSON.stringify(goWire)),
        ) as { id: string; status: string }[];
        expect(goReply.map((r) => r.status)).toEqual(goWire.map(() => 'enqueued'));
        ids.set(name, [...tsIds, ...goReply.map((r) => r.id)]);
      }

      for (const name of names) {
        await poll(
          () => mq.queue(name).counts(),
          (c) => c.completed === 60,
          `every job of ${name} to complete`,
          30_000,
        );
      }
      // Each job completed once, by one runtime: the Go consumers' lines and the TypeScript
      // consumers' events together name every job exactly once. A runtime reports a completion
      // after Redis stored it, so the counts can be reached before the last report comes in.
      const every = [...ids.values()].flat();
      const goRan = new Map<string, number>();
      const ran = () => {
        goRan.clear();
        for (const go of goConsumers)
          for (const l of go.of('completed')) goRan.set(l.id!, (goRan.get(l.id!) ?? 0) + 1);
        return every.map((id) => (goRan.get(id) ?? 0) + (tsRan.get(id) ?? 0));
      };
      await poll(
        async () => ran(),
        (counts) => counts.every((n) => n > 0),
        'both runtimes to report every completion',
        10_000,
      );
      const notOnce = every.filter((id) => (goRan.get(id) ?? 0) + (tsRan.get(id) ?? 0) !== 1);
      expect(notOnce.map((id) => [id, goRan.get(id) ?? 0, tsRan.get(id) ?? 0])).toEqual([]);
      for (const go of goConsumers) expect(go.of('lost')).toEqual([]);
      expect(goRan.size + tsRan.size).toBe(every.length);
      expect(goRan.size).toBeGreaterThan(0);
      expect(tsRan.size).toBeGreaterThan(0);
      for (const [i, name] of names.entries()) {
        const rows = (await Promise.all(
          ids.get(name)!.map((id) => mq.queue<Work>(name).get(id)),
        )) as JobView[];
        expect(rows.map((r) => r.state)).toEqual(rows.map(() => 'completed'));
        const retried = rows.filter((r) => (r.data as Work).fail === 1).map((r) => r.attempts);
        expect(retried, `queue ${i}`).toEqual(retried.map(() => 2));
      }
    } finally {
      await Promise.all(tsConsumers.map((c) => c.close({ timeoutMs: 5000 })));
      for (const go of goConsumers) await go.close();
      await mq.close();
      client.disconnect();
    }
  }, 120_000);
});
