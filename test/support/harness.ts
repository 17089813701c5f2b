// Per-file test wiring: one redis-server for the file, a fresh EchoMQ per test.
import { afterAll, beforeAll } from 'vitest';
import { RedisServer, type RedisServerOptions } from './redis-server.js';

/** Starts a redis-server before the file's tests and stops it after. */
export function useRedisServer(opts: RedisServerOptions = {}): { readonly server: RedisServer } {
  const holder = {} as { server: RedisServer };
  beforeAll(async () => {
    holder.server = await RedisServer.start(opts);
  });
  afterAll(async () => {
    await holder.server?.stop();
  });
  return holder;
}

let counter = 0;
/** A queue name no other test in this file uses, so tests need no flush between them. */
export function uniqueQueue(prefix = 'q'): string {
  counter += 1;
  return `${prefix}${counter}-${process.pid}`;
}
