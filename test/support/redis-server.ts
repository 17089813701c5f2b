// A throw-away redis-server per test file: free port, own temp dir, killed on stop.
// Tests may also stop/restart it to prove recovery; nothing here touches :6379.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../tools/dev-redis.js';

export { freePort };

export interface RedisServerOptions {
  /** Extra `--flag value` pairs for redis-server, e.g. ['--appendonly', 'yes']. */
  args?: string[];
  /** Extra environment for the process (e.g. an LD_PRELOAD, test/support/clock-shim.ts). */
  env?: Record<string, string>;
}

// Servers this process started die with it, even when a test file ends without its
// afterAll (a timeout, a crash): no redis-server outlives the test run.
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export class RedisServer {
  readonly dir: string;
  private child: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    private readonly args: string[],
    private readonly env: Record<string, string> = {},
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'echomq-redis-'));
  }

  static async start(opts: RedisServerOptions = {}): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), opts.args ?? [], opts.env);
    await server.boot();
    return server;
  }

  /** Whether the process is up (not killed, or started again since). */
  get running(): boolean {
    const child = this.child;
    return child !== null && child.exitCode === null && child.signalCode === null;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** A plain ioredis client on this server, for assertions on raw keys. */
  client(): Redis {
    return new Redis(this.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  }

  private async boot(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--dir',
        this.dir,
        '--save',
        '',
        '--appendonly',
        'no',
        ...this.args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...this.env } },
    );
    this.child = child;
    running.add(child);
    child.once('exit', () => running.delete(child));
    let output = '';
    child.stdout?.on('data', (d) => {
      output += d;
    });
    child.stderr?.on('data', (d) => {
      output += d;
    });
    const ready = await new Promise<boolean>((resolve) => {
      const done = (ok: boolean) => {
        clearInterval(poll);
        resolve(ok);
      };
      child.once('exit', () => done(false));
      child.once('error', () => done(false));
      const poll = setInterval(() => {
        if (output.includes('Ready to accept connections')) done(true);
      }, 10);
    });
    if (!ready) {
      throw new Error(
        `redis-server did not start on port ${this.port}: ${output.trim() || 'is it installed? apt-get install redis-server'}`,
      );
    }
  }

  /** SIGKILL the server (a crash) and wait until the process is gone. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill(signal);
    });
    this.child = null;
  }

  /** SIGSTOP the server (a pause: it keeps its sockets, answers nothing) until `resume`. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** Start again on the same port and directory (data survives only with persistence flags). */
  async restart(): Promise<void> {
    await this.kill();
    await this.boot();
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
