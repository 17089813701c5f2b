// The memory engine's door: what the connector calls for a `memory://` URL. Options that only
// mean something on a Redis server are refused here, loudly, rather than silently ignored.
import type { Redis, RedisOptions } from 'ioredis';
import { EchoMQError } from '../../core/errors.js';
import { memoryClient } from './connection.js';
import { MemoryEngine } from './engine.js';

export { type EngineClock, MemoryClock, REDIS_CLOCK } from './clock.js';
export { MemoryEngine } from './engine.js';

/** Redis options that have no meaning in one process, with why. */
const REDIS_ONLY: Record<string, string> = {
  tls: 'TLS protects a network connection, and a memory engine has none',
  sentinels: 'Sentinel fails over between servers, and a memory engine is no server',
  natMap: 'a NAT map translates server addresses, and a memory engine has none',
  host: 'a memory engine lives in this process, not at a host',
  port: 'a memory engine lives in this process, not on a port',
  path: 'a memory engine lives in this process, not on a socket path',
  password: 'a memory engine has no users to authenticate',
  username: 'a memory engine has no users to authenticate',
};

export function isMemoryUrl(url: string | undefined): url is string {
  return url?.startsWith('memory:') === true;
}

/** Opens an ioredis client on the memory engine `url` names, refusing Redis-only options. */
export function openMemory(
  url: string,
  options: { redisOptions?: RedisOptions; [other: string]: unknown },
): { client: Redis; engine: MemoryEngine } {
  for (const [name, why] of Object.entries(REDIS_ONLY)) {
    if ((options.redisOptions as Record<string, unknown> | undefined)?.[name] !== undefined) {
      throw new EchoMQError(
        'EMQINPUT',
        `redisOptions.${name} cannot be used with ${url}: ${why}; drop it, or connect to a Redis URL`,
      );
    }
  }
  for (const name of ['cluster', 'clusterNodes', 'tls']) {
    if (options[name] !== undefined && options[name] !== false) {
      throw new EchoMQError(
        'EMQINPUT',
        `${name} cannot be used with ${url}: a memory engine is one engine in this process, without ` +
          'Cluster or TLS; drop the option, or connect to a Redis URL',
      );
    }
  }
  const engine = MemoryEngine.forUrl(url);
  const { db: _db, ...rest } = options.redisOptions ?? {};
  return { client: memoryClient(engine, rest), engine };
}
