// A throw-away local Redis Cluster: 3 masters (no replicas) on free loopback ports, each in its
// own temp dir, joined with `redis-cli --cluster create`. Nothing here touches :6379.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, type Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { freePort, RedisServer } from './redis-server.js';

const run = promisify(execFile);

export class RedisCluster {
  private constructor(readonly nodes: RedisServer[]) {}

  /** Starts `masters` cluster-enabled servers and joins them; resolves once every node says ok. */
  static async start(masters = 3): Promise<RedisCluster> {
    const nodes: RedisServer[] = [];
    try {
      for (let i = 0; i < masters; i++) {
        // The bus port is set explicitly: the default (port + 10000) may be past 65535 or taken.
        const bus = await freePort();
        nodes.push(
          await RedisServer.start({
            args: [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              'nodes.conf',
              '--cluster-port',
              String(bus),
              '--cluster-node-timeout',
              '5000',
            ],
          }),
        );
      }
      const cluster = new RedisCluster(nodes);
      await run(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...nodes.map((n) => `127.0.0.1:${n.port}`),
          '--cluster-replicas',
          '0',
          '--cluster-yes',
        ],
        { timeout: 30_000 },
      );
      await cluster.waitUntilOk();
      return cluster;
    } catch (err) {
      await Promise.all(nodes.map((n) => n.stop()));
      throw err;
    }
  }

  /** The seed nodes for `new Cluster(...)`. */
  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  /** A cluster client on these nodes (the caller closes it). */
  client(): Cluster {
    return new Cluster(this.startupNodes, { redisOptions: { maxRetriesPerRequest: 3 } });
  }

  /** Polls CLUSTER INFO on every node until each reports `cluster_state:ok` and knows every node. */
  private async waitUntilOk(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const clients = this.nodes.map((n) => n.client());
    try {
      for (;;) {
        const states = await Promise.all(
          clients.map(async (c: Redis) => {
            const info = (await c.cluster('INFO')) as string;
            const known = /cluster_known_nodes:(\d+)/.exec(info)?.[1];
            return info.includes('cluster_state:ok') && Number(known) === this.nodes.length;
          }),
        );
        if (states.every(Boolean)) return;
        if (Date.now() > deadline) throw new Error('the local Redis Cluster did not reach cluster_state:ok');
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      for (const c of clients) c.disconnect();
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

/**
 * Starts a local cluster of `masters` before the file's tests and stops it after: the file reads
 * it as `env.cluster` (no module-level binding assigned in a hook).
 */
export function useRedisCluster(masters = 3): { readonly cluster: RedisCluster } {
  const holder = {} as { cluster: RedisCluster };
  beforeAll(async () => {
    holder.cluster = await RedisCluster.start(masters);
  }, 60_000);
  afterAll(async () => {
    await holder.cluster?.stop();
  });
  return holder;
}
