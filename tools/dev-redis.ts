// Finds what demos and local runs talk to:
//   1. REDIS_URL when it is set; when it does not answer a PING that is an error (EMQNOSERVER,
//      naming the URL without its password and the cause): a Redis was asked for by name
//   2. otherwise the probe URL, 127.0.0.1:6379 by default, when it answers
//   3. otherwise the in-process memory engine (memory://), with a one-line note saying so: no
//      redis-server needed, nothing kept
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { EchoMQError } from '../src/core/errors.js';

export interface FindRedisOptions {
  /** The Redis to use; it must answer. Default: the REDIS_URL environment variable. */
  url?: string;
  /** Where to look for a Redis when no `url` is given. Default: DEMO_PROBE_URL, then redis://127.0.0.1:6379. */
  probeUrl?: string;
  /** How long a probe waits for a PING reply, in ms. Default 500. */
  probeTimeoutMs?: number;
}

export interface DevRedis {
  /** The URL to connect to: a Redis that answered, or `memory://`. */
  url: string;
  /** One line saying what was found, for the log. */
  note: string;
}

/** REDIS_URL (which must answer), else a Redis at the probe URL, else the memory engine. */
export async function findRedis(opts: FindRedisOptions = {}): Promise<DevRedis> {
  const given = opts.url ?? (process.env.REDIS_URL || undefined);
  const timeoutMs = opts.probeTimeoutMs ?? 500;
  if (given) {
    const answer = await ping(given, timeoutMs);
    if (answer !== true) {
      throw new EchoMQError(
        'EMQNOSERVER',
        `REDIS_URL ${redact(given)} did not answer: ${answer}; start that Redis, or unset REDIS_URL ` +
          'to run on the in-process memory engine',
      );
    }
    return { url: given, note: `using ${redact(given)}` };
  }
  const probe = opts.probeUrl || process.env.DEMO_PROBE_URL || 'redis://127.0.0.1:6379';
  if ((await ping(probe, timeoutMs)) === true) return { url: probe, note: `using ${redact(probe)}` };
  return {
    url: 'memory://',
    note: `no REDIS_URL and no Redis at ${redact(probe)}: running on the in-process memory engine (memory://, nothing is kept)`,
  };
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

/** The password in a URL is nobody's business in a message: `redis://user:***@host`. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

// ── ports ───────────────────────────────────────────────────────────────────────

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
