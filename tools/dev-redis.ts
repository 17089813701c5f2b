// Finds a Redis to talk to for demos and local runs, or starts a throw-away one:
//   1. REDIS_URL when it is set and answers a PING
//   2. otherwise (no REDIS_URL) the probe URL, 127.0.0.1:6379 by default, when it answers
//   3. otherwise a `redis-server` from PATH on a free port, without persistence, in a temp dir,
//      stopped by stop() (and killed when the process exits, should stop() never run)
// When none of these works it throws EMQNOSERVER saying how to install redis-server.
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Redis } from 'ioredis';
import { EchoMQError } from '../src/core/errors.js';

export interface FindOrStartOptions {
  /** The Redis to use when it answers. Default: the REDIS_URL environment variable. */
  url?: string;
  /** Where to look for a Redis when no `url` is given. Default: DEMO_PROBE_URL, then redis://127.0.0.1:6379. */
  probeUrl?: string;
  /** The directories searched for `redis-server`, joined by the platform delimiter. Default: PATH. */
  path?: string;
  /** How long a probe waits for a PING reply, in ms. Default 500. */
  probeTimeoutMs?: number;
  /** How long a started redis-server may take to answer, in ms. Default 5000. */
  startTimeoutMs?: number;
}

export interface DevRedis {
  /** The URL to connect to. */
  url: string;
  /** Stops the redis-server this call started; does nothing for a Redis that was found. */
  stop(): Promise<void>;
  /** True when this call started a throw-away redis-server. */
  started: boolean;
  /** Why a throw-away server was started although a URL was given (that URL did not answer). */
  note?: string;
}

const INSTALL_HINT = 'install it with: apt-get install redis-server (or set REDIS_URL)';

/** Uses REDIS_URL or a local Redis when one answers; else starts a throw-away redis-server. */
export async function findOrStartRedis(opts: FindOrStartOptions = {}): Promise<DevRedis> {
  const given = opts.url ?? (process.env.REDIS_URL || undefined);
  const target = given ?? (opts.probeUrl || process.env.DEMO_PROBE_URL || 'redis://127.0.0.1:6379');
  const probe = await ping(target, opts.probeTimeoutMs ?? 500);
  if (probe === true) return { url: target, stop: async () => {}, started: false };

  const binary = findOnPath('redis-server', opts.path ?? process.env.PATH ?? '');
  if (!binary) {
    throw new EchoMQError(
      'EMQNOSERVER',
      `no Redis answered at ${redact(target)} and no redis-server was found on PATH; ${INSTALL_HINT}`,
    );
  }
  const server = await startServer(binary, opts.startTimeoutMs ?? 5000);
  if (given) server.note = `REDIS_URL ${redact(given)} did not answer (${probe}); started a throw-away one`;
  return server;
}

// ── probing ─────────────────────────────────────────────────────────────────────

/** True when the server answers PING within `timeoutMs`; else why not. */
async function ping(url: string, timeoutMs: number): Promise<true | string> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // The failure is the answer (ioredis would log it otherwise); the socket error says more
  // (ECONNREFUSED, ENOTFOUND) than the "Connection is closed." that connect() rejects with.
  let cause: unknown;
  client.on('error', (err) => {
    cause ??= err;
  });
  try {
    await client.connect();
    await client.ping();
    return true;
  } catch (err) {
    const why = cause ?? err;
    return why instanceof Error ? why.message : String(why);
  } finally {
    client.disconnect();
  }
}

/** The password in a URL is nobody's business in an error message. */
function redact(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}

function findOnPath(name: string, path: string): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

// ── a throw-away server ─────────────────────────────────────────────────────────

/** A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function startServer(binary: string, timeoutMs: number): Promise<DevRedis> {
  let lastOutput = '';
  // A free port can be taken between finding it and binding it: try a few.
  for (let tries = 0; tries < 3; tries++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'echomq-dev-redis-'));
    const child = spawn(
      binary,
      ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'],
      // Its own process group: a Ctrl-C in the terminal reaches the demo, which closes its
      // connections first and then stops the server, instead of killing both at once.
      { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    let output = '';
    const collect = (d: Buffer) => {
      output = (output + d.toString()).slice(-4000);
    };
    child.on('error', (err) => collect(Buffer.from(err.message))); // e.g. EACCES: not runnable
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    // Neither the server nor its pipes keep this process alive; the exit hook kills it.
    child.unref();
    (child.stdout as Socket | null)?.unref();
    (child.stderr as Socket | null)?.unref();
    const killOnExit = () => {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    };
    process.on('exit', killOnExit);

    const url = `redis://127.0.0.1:${port}`;
    if (await becomesReady(child, url, timeoutMs)) {
      return { url, started: true, stop: () => stopServer(child, dir, killOnExit) };
    }
    await stopServer(child, dir, killOnExit);
    lastOutput = output.trim();
  }
  throw new EchoMQError(
    'EMQNOSERVER',
    `${binary} did not start (3 tries): ${lastOutput || 'no output'}; or set REDIS_URL to a running Redis`,
  );
}

async function becomesReady(child: ChildProcess, url: string, timeoutMs: number): Promise<boolean> {
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  child.once('error', () => {
    exited = true;
  });
  if (child.exitCode !== null || child.signalCode !== null) return false;
  const deadline = performance.now() + timeoutMs;
  while (!exited && performance.now() < deadline) {
    if ((await ping(url, 200)) === true) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return false;
}

async function stopServer(child: ChildProcess, dir: string, killOnExit: () => void): Promise<void> {
  process.off('exit', killOnExit);
  // No pid: it never started (the spawn failed), so there is nothing to wait for.
  if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => child.kill('SIGKILL'), 2000);
      child.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      child.kill('SIGTERM');
    });
  }
  rmSync(dir, { recursive: true, force: true });
}
