// A throw-away local Redis Cluster on free loopback ports, each node in its own temp dir, joined
// with `redis-cli --cluster create`: by default 3 primaries and 1 replica each (3 + 3), so a test
// can kill a primary and see its replica promoted. Nothing here touches :6379.
//
// With `replicationProxies`, every node announces the port of a TCP proxy in front of it
// (cluster-announce-port): a replica reaches its primary through the proxy, so `cutReplication`
// can stall a shard's replication as a network partition would, while clients reach every node
// directly through the ioredis `natMap` that `clusterOptions()` carries.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions, Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { freePort, RedisServer } from './redis-server.js';
import { TcpProxy } from './tcp-proxy.js';

const run = promisify(execFile);

export interface RedisClusterOptions {
  /** Primaries, each serving a third (or so) of the slots; default 3. */
  masters?: number;
  /** Replicas per primary; default 1. */
  replicas?: number;
  /**
   * cluster-node-timeout, ms: how long a silent primary is PFAIL before its replica is promoted.
   * Default 2000 — short for a test, long enough that a loaded 2-core machine does not fail over
   * a busy node by mistake.
   */
  nodeTimeoutMs?: number;
  /** Put a TCP proxy in front of each node's client port, for cutReplication(). */
  replicationProxies?: boolean;
  /**
   * redis-server arguments that load a module on every node, e.g. the native module with its
   * timers on: `loadModuleArgs({ timers: 'on' })` (test/support/native-module.ts). Default none.
   */
  loadModule?: string[];
}

interface NodeRow {
  id: string;
  port: number;
  role: 'master' | 'slave';
  masterId: string | undefined;
  failed: boolean;
}

export class RedisCluster {
  private constructor(
    /** Every node, primaries first (redis-cli makes the first `masters` given the primaries). */
    readonly nodes: RedisServer[],
    private readonly proxies: Map<number, TcpProxy>,
  ) {}

  /** Starts the nodes and joins them; resolves once every node says ok and every replica is in sync. */
  static async start(opts: RedisClusterOptions = {}): Promise<RedisCluster> {
    const masters = opts.masters ?? 3;
    const replicas = opts.replicas ?? 1;
    const nodes: RedisServer[] = [];
    const proxies = new Map<number, TcpProxy>();
    try {
      for (let i = 0; i < masters * (1 + replicas); i++) {
        // The bus port is set explicitly: the default (port + 10000) may be past 65535 or taken.
        const bus = await freePort();
        const node = await RedisServer.start({
          args: [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            '--cluster-port',
            String(bus),
            '--cluster-node-timeout',
            String(opts.nodeTimeoutMs ?? 2000),
            // A replica whose link was cut (the lag a failover case wants) may still be promoted.
            '--cluster-replica-validity-factor',
            '0',
            // Small: six servers share the machine with other work.
            '--maxmemory',
            '256mb',
            ...(opts.loadModule ?? []),
          ],
        });
        nodes.push(node);
        if (opts.replicationProxies) {
          const proxy = await TcpProxy.start(node.port);
          proxies.set(node.port, proxy);
          const c = node.client();
          await c.config('SET', 'cluster-announce-port', String(proxy.port));
          c.disconnect();
        }
      }
      const cluster = new RedisCluster(nodes, proxies);
      await run(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...nodes.map((n) => `127.0.0.1:${n.port}`),
          '--cluster-replicas',
          String(replicas),
          '--cluster-yes',
        ],
        { timeout: 30_000 },
      );
      await cluster.waitUntilOk();
      return cluster;
    } catch (err) {
      await Promise.all(nodes.map((n) => n.stop()));
      for (const p of proxies.values()) await p.stop();
      throw err;
    }
  }

  /** The seed nodes for `new Cluster(...)`: the nodes still running. */
  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.filter((n) => n.running).map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  /** Options a Cluster client of these nodes needs (the natMap past the replication proxies). */
  clusterOptions(extra: ClusterOptions = {}): ClusterOptions {
    if (this.proxies.size === 0) return extra;
    const natMap: Record<string, { host: string; port: number }> = {};
    for (const [port, proxy] of this.proxies) natMap[`127.0.0.1:${proxy.port}`] = { host: '127.0.0.1', port };
    return { ...extra, natMap };
  }

  /** A cluster client on these nodes (the caller closes it). */
  client(extra: ClusterOptions = {}): Cluster {
    return new Cluster(
      this.startupNodes,
      this.clusterOptions({ redisOptions: { maxRetriesPerRequest: 3 }, ...extra }),
    );
  }

  /** The node (by client port) that announced `port`: itself, or the one behind that proxy. */
  private realPort(port: number): number {
    for (const [real, proxy] of this.proxies) if (proxy.port === port) return real;
    return port;
  }

  /** CLUSTER NODES as one running node sees it. */
  private async table(): Promise<NodeRow[]> {
    const node = this.nodes.find((n) => n.running);
    if (!node) throw new Error('no node of the cluster is running');
    const c = node.client();
    try {
      const text = (await c.cluster('NODES')) as string;
      return text
        .trim()
        .split('\n')
        .map((line) => {
          const [id, addr, flags, master] = line.split(' ');
          const port = this.realPort(Number(/:(\d+)@/.exec(addr!)?.[1]));
          return {
            id: id!,
            port,
            role: flags!.includes('master') ? 'master' : 'slave',
            masterId: master === '-' ? undefined : master,
            failed: /fail/.test(flags!),
          };
        });
    } finally {
      c.disconnect();
    }
  }

  private server(port: number): RedisServer {
    const s = this.nodes.find((n) => n.port === port);
    if (!s) throw new Error(`no node on port ${port}`);
    return s;
  }

  /** The primary serving `slot` now. */
  async primaryOf(slot: number): Promise<RedisServer> {
    const node = this.nodes.find((n) => n.running)!;
    const c = node.client();
    try {
      const ranges = (await c.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
      const r = ranges.find(([lo, hi]) => slot >= lo && slot <= hi);
      if (!r) throw new Error(`slot ${slot} is not served`);
      return this.server(this.realPort(r[2][1]));
    } finally {
      c.disconnect();
    }
  }

  /** The running primaries now. */
  async primaries(): Promise<RedisServer[]> {
    const rows = await this.table();
    return rows.filter((r) => r.role === 'master' && !r.failed).map((r) => this.server(r.port));
  }

  /** The replicas of `primary` now. */
  async replicasOf(primary: RedisServer): Promise<RedisServer[]> {
    const rows = await this.table();
    const id = rows.find((r) => r.port === primary.port)?.id;
    return rows.filter((r) => r.masterId === id && !r.failed).map((r) => this.server(r.port));
  }

  /**
   * Stalls replication into `primary`'s replicas (they reach it through its proxy): their links
   * drop and cannot come back until `healReplication`. Writes it takes meanwhile are on it alone.
   */
  async cutReplication(primary: RedisServer): Promise<void> {
    const proxy = this.proxies.get(primary.port);
    if (!proxy) throw new Error('cutReplication needs a cluster started with replicationProxies');
    await proxy.cut();
  }

  async healReplication(primary: RedisServer): Promise<void> {
    await this.proxies.get(primary.port)?.heal();
  }

  /**
   * SIGKILLs `primary` and resolves once one of its replicas serves its slots and every running
   * node says cluster_state:ok again. Resolves with the promoted replica.
   */
  async failover(primary: RedisServer, timeoutMs = 30_000): Promise<RedisServer> {
    const replicas = await this.replicasOf(primary);
    if (replicas.length === 0) throw new Error(`the primary on ${primary.port} has no replica to promote`);
    await primary.kill();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (const r of replicas) {
        const c = r.client();
        const role = await c.role().catch(() => undefined);
        c.disconnect();
        if (role?.[0] === 'master') {
          await this.waitUntilOk(Math.max(1000, deadline - Date.now()), this.nodes.length - 1);
          return r;
        }
      }
      if (Date.now() > deadline)
        throw new Error(`no replica of ${primary.port} was promoted in ${timeoutMs} ms`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  /**
   * Starts a killed node again on its port and directory: its nodes.conf makes it rejoin, as a
   * replica of the one promoted in its place. Resolves once the cluster is ok and it is in sync.
   */
  async rejoin(node: RedisServer, timeoutMs = 30_000): Promise<void> {
    await node.restart();
    await this.waitUntilOk(timeoutMs);
  }

  /**
   * Polls every running node until each reports `cluster_state:ok` and knows every node, and
   * every replica's link to its primary is up (WAIT would count it, a failover could pick it).
   */
  private async waitUntilOk(timeoutMs = 30_000, known = this.nodes.length): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const clients = this.nodes
      .filter((n) => n.running)
      .map((n) => new Redis(n.port, '127.0.0.1', { maxRetriesPerRequest: 1 }));
    try {
      for (;;) {
        const states = await Promise.all(
          clients.map(async (c) => {
            const info = (await c.cluster('INFO').catch(() => '')) as string;
            const nodes = Number(/cluster_known_nodes:(\d+)/.exec(info)?.[1]);
            const repl = (await c.info('replication').catch(() => '')) as string;
            const linked = !repl.includes('role:slave') || repl.includes('master_link_status:up');
            return info.includes('cluster_state:ok') && nodes >= known && linked;
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
    for (const p of this.proxies.values()) await p.stop();
  }
}

/**
 * Starts a local cluster for the file (top-level await, so a file can skip its suites when none
 * can start: `describe.skipIf(!env.cluster)`) and stops it after the file's tests. A cluster that
 * cannot start (no redis-server or redis-cli, an old Redis) is reported once, with the reason.
 */
export async function clusterForFile(
  opts: RedisClusterOptions = {},
): Promise<{ cluster: RedisCluster | undefined; reason?: string }> {
  try {
    const cluster = await RedisCluster.start(opts);
    afterAll(() => cluster.stop());
    return { cluster };
  } catch (err) {
    const reason = `skipping the Redis Cluster tests: a local cluster could not start (${err instanceof Error ? err.message : String(err)})`;
    console.warn(reason);
    return { cluster: undefined, reason };
  }
}
