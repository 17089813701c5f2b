// The memory engine's door: what the connector calls for a `memory://` URL. Options that only
// mean something on a Redis server are refused here, loudly, rather than silently ignored.
import type { Redis, RedisOptions } from 'ioredis';
import { EchoMQError } from '../../core/errors.js';
import { memoryClient } from './connection.js';
import { MemoryEngine } from './engine.js';

export { type EngineClock, MemoryClock, REDIS_CLOCK } from './clock.js';
export { MemoryEngine } from './engine.js';

/**
 * Options that only a Redis deployment gives a meaning, with why: connect options, and ioredis
 * options under redisOptions (`redisOptions.<name>`).
 */
const REDIS_ONLY: Record<string, string> = {
  redis:
    'a client you own (a Redis or a Cluster) talks to its own servers, and the URL names a memory engine',
  module: 'the native module loads into a redis-server, and a memory engine runs the scripts themselves',
  'redisOptions.tls': 'TLS protects a network connection, and a memory engine has none',
  'redisOptions.sentinels': 'Sentinel fails over between servers, and a memory engine is no server',
  'redisOptions.name': 'it names a Sentinel master group, and a memory engine has no Sentinel',
  'redisOptions.natMap': 'a NAT map translates server addresses, and a memory engine has none',
  'redisOptions.host': 'a memory engine lives in this process, not at a host',
  'redisOptions.port': 'a memory engine lives in this process, not on a port',
  'redisOptions.path': 'a memory engine lives in this process, not on a socket path',
  'redisOptions.password': 'a memory engine has no users to authenticate',
  'redisOptions.username': 'a memory engine has no users to authenticate',
};

export function isMemoryUrl(url: string | undefined): url is string {
  return url?.startsWith('memory:') === true;
}

/** Opens an ioredis client on the memory engine `url` names, refusing Redis-only options. */
export function openMemory(
  url: string,
  options: { redisOptions?: RedisOptions; [other: string]: unknown },
): { client: Redis; engine: MemoryEngine } {
  const redisOptions = (options.redisOptions ?? {}) as Record<string, unknown>;
  for (const [option, why] of Object.entries(REDIS_ONLY)) {
    const [from, name] = option.startsWith('redisOptions.')
      ? [redisOptions, option.slice(13)]
      : [options, option];
    const value = from[name];
    // module 'auto' and 'off' mean "the scripts" here, which is what the engine runs.
    if (value === undefined || value === false || (name === 'module' && value !== 'require')) continue;
    throw new EchoMQError(
      'EMQINPUT',
      `${name === 'module' ? "module: 'require'" : option} cannot be used with ${url}: ${why}; drop it, ` +
        'or connect to a Redis URL',
    );
  }
  const engine = MemoryEngine.forUrl(url);
  const { db: _db, ...rest } = options.redisOptions ?? {};
  return { client: memoryClient(engine, rest), engine };
}
