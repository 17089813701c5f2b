// Redis Sentinel for the failover tests: Debian's redis-sentinel when installed, else the same
// binary as `redis-server --sentinel` (Sentinel is a mode of redis-server); each process with
// its own config file in a temp dir (Sentinel rewrites it), killed on stop.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './redis-server.js';
import { poll } from './wait.js';

const has = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;

/** How Sentinel is started here, or why it cannot be. */
export const sentinelBinary: { command: string; args: string[] } | { missing: string } = has('redis-sentinel')
  ? { command: 'redis-sentinel', args: [] }
  : has('redis-server')
    ? { command: 'redis-server', args: ['--sentinel'] }
    : { missing: 'SKIPPED: no redis-sentinel (apt-get install -y redis-sentinel)' };

export const MASTER = 'emq';

export class Sentinels {
  private constructor(
    readonly ports: number[],
    private readonly children: ChildProcess[],
    private readonly dir: string,
  ) {}

  /** `n` Sentinels watching the primary on `primaryPort` (quorum a majority), ready to fail over. */
  static async start(n: number, primaryPort: number, replicas: number): Promise<Sentinels> {
    if ('missing' in sentinelBinary) throw new Error(sentinelBinary.missing);
    const dir = mkdtempSync(join(tmpdir(), 'echomq-sentinel-'));
    const ports: number[] = [];
    const children: ChildProcess[] = [];
    for (let i = 0; i < n; i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${MASTER} 127.0.0.1 ${primaryPort} ${Math.floor(n / 2) + 1}`,
          `sentinel down-after-milliseconds ${MASTER} 1000`,
          `sentinel failover-timeout ${MASTER} 10000`,
          `sentinel parallel-syncs ${MASTER} 1`,
          '',
        ].join('\n'),
      );
      const child = spawn(sentinelBinary.command, [conf, ...sentinelBinary.args], { stdio: 'ignore' });
      process.once('exit', () => child.kill('SIGKILL'));
      ports.push(port);
      children.push(child);
    }
    const sentinels = new Sentinels(ports, children, dir);
    // Ready when every Sentinel knows the replicas and the other Sentinels (to reach a quorum).
    for (const port of ports) {
      const c = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
      try {
        await poll(
          async () => {
            const rs = (await c.call('SENTINEL', 'REPLICAS', MASTER).catch(() => [])) as unknown[];
            const ss = (await c.call('SENTINEL', 'SENTINELS', MASTER).catch(() => [])) as unknown[];
            return rs.length >= replicas && ss.length >= n - 1;
          },
          Boolean,
          'the Sentinels to know the replicas and each other',
          30_000,
        );
      } finally {
        c.disconnect();
      }
    }
    return sentinels;
  }

  /** ioredis options that reach the primary through these Sentinels. */
  get redisOptions() {
    return { sentinels: this.ports.map((port) => ({ host: '127.0.0.1', port })), name: MASTER };
  }

  /** The port of the primary the Sentinels name now. */
  async primaryPort(): Promise<number> {
    const c = new Redis(this.ports[0]!, '127.0.0.1', { maxRetriesPerRequest: 1 });
    try {
      const addr = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER)) as string[];
      return Number(addr[1]);
    } finally {
      c.disconnect();
    }
  }

  stop(): void {
    for (const child of this.children) child.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
