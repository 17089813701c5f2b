// Every Redis command the memory engine answers, in one table at the bottom of this file: the
// commands the protocol scripts call, the ones the runtime, CLI, dashboard and tests send, and
// the few ioredis sends on connect. Each follows Redis 7's semantics and error wording; a
// command not listed answers as Redis does for an unknown one. The commands themselves live in
// commands/, one file per data type (keys, strings, hashes, sets, sorted sets, lists, streams),
// beside the argument parsing they share (commands/parse.ts).

import {
  Blocked,
  type Command,
  type CommandContext,
  type Run,
  type ServerCommands,
} from './commands/context.js';
import * as hashes from './commands/hashes.js';
import * as keys from './commands/keys.js';
import * as lists from './commands/lists.js';
import { integer, upper } from './commands/parse.js';
import * as sets from './commands/sets.js';
import * as zsets from './commands/sorted-sets.js';
import * as streams from './commands/streams.js';
import * as strings from './commands/strings.js';
import { CommandError } from './keyspace.js';
import { OK, type Reply, RespError, Status } from './resp.js';

export { integer } from './commands/parse.js';
export { Blocked, type CommandContext, type ServerCommands };

// ── the table ────────────────────────────────────────────────────────────────

function time(ctx: CommandContext): Reply {
  const us = ctx.nowUs();
  return [String(Math.floor(us / 1_000_000)), String(us % 1_000_000)];
}

const z = (byScore: boolean, rev: boolean, allowByScore: boolean): Run => {
  return (ctx, [key, from, to, ...opts]) =>
    zsets.zrangeGeneric(ctx, key!, from!, to!, opts, { byScore, rev, allowByScore });
};

/**
 * The commands EchoMQ uses, and nothing else: the scripts' (protocol/scripts/*.lua), the
 * runtime's, the CLI's, the dashboard's and the tests' raw reads. MULTI, EXEC, DISCARD, WATCH and
 * QUIT are the engine's own (they act on the connection), see engine.ts.
 */
export const COMMANDS: Record<string, Command> = {
  // keys
  DEL: { arity: -2, run: keys.del },
  UNLINK: { arity: -2, run: keys.del },
  EXISTS: { arity: -2, run: keys.exists },
  TYPE: { arity: 2, run: keys.type },
  OBJECT: { arity: -2, run: keys.object },
  KEYS: { arity: 2, run: keys.keys },
  SCAN: { arity: -2, run: keys.scan },
  EXPIRE: { arity: -3, run: (c, [k, s, ...f]) => keys.expireAt(c, k!, c.nowMs() + integer(s) * 1000, f) },
  PEXPIRE: { arity: -3, run: (c, [k, ms, ...f]) => keys.expireAt(c, k!, c.nowMs() + integer(ms), f) },
  PEXPIREAT: { arity: -3, run: (c, [k, at, ...f]) => keys.expireAt(c, k!, integer(at), f) },
  TTL: { arity: 2, run: (c, [k]) => keys.ttl(c, k!, 1000) },
  PTTL: { arity: 2, run: (c, [k]) => keys.ttl(c, k!, 1) },
  PERSIST: { arity: 2, run: keys.persist },
  RENAME: { arity: 3, run: keys.rename },
  DBSIZE: { arity: 1, run: (c) => c.db.keys().length },
  FLUSHDB: {
    arity: -1,
    run: (c) => {
      c.db.flush();
      return OK;
    },
  },
  // strings
  GET: { arity: 2, run: strings.get },
  SET: { arity: -3, run: strings.set },
  MGET: { arity: -2, run: strings.mget },
  INCR: { arity: 2, run: (c, [k]) => strings.incrBy(c, k!, 1) },
  INCRBY: { arity: 3, run: (c, [k, by]) => strings.incrBy(c, k!, integer(by)) },
  DECR: { arity: 2, run: (c, [k]) => strings.incrBy(c, k!, -1) },
  // hashes
  HSET: { arity: -4, run: hashes.hset },
  HMSET: { arity: -4, run: hashes.hmset },
  HSETNX: { arity: 4, run: hashes.hsetnx },
  HGET: { arity: 3, run: hashes.hget },
  HMGET: { arity: -3, run: hashes.hmget },
  HDEL: { arity: -3, run: hashes.hdel },
  HGETALL: { arity: 2, run: hashes.hgetall },
  HKEYS: { arity: 2, run: (c, [k]) => [...(c.db.read(k!, 'hash')?.keys() ?? [])] },
  HVALS: { arity: 2, run: (c, [k]) => [...(c.db.read(k!, 'hash')?.values() ?? [])] },
  HLEN: { arity: 2, run: (c, [k]) => c.db.read(k!, 'hash')?.size ?? 0 },
  HEXISTS: { arity: 3, run: (c, [k, f]) => (c.db.read(k!, 'hash')?.has(f!) ? 1 : 0) },
  HINCRBY: { arity: 4, run: hashes.hincrby },
  HINCRBYFLOAT: { arity: 4, run: hashes.hincrbyfloat },
  // sets
  SADD: { arity: -3, run: sets.sadd },
  SREM: { arity: -3, run: sets.srem },
  SISMEMBER: { arity: 3, run: (c, [k, m]) => (c.db.read(k!, 'set')?.has(m!) ? 1 : 0) },
  SMEMBERS: { arity: 2, run: (c, [k]) => [...(c.db.read(k!, 'set') ?? [])] },
  SCARD: { arity: 2, run: (c, [k]) => c.db.read(k!, 'set')?.size ?? 0 },
  // sorted sets
  ZADD: { arity: -4, run: zsets.zadd },
  ZINCRBY: { arity: 4, run: zsets.zincrby },
  ZREM: { arity: -3, run: zsets.zrem },
  ZSCORE: { arity: 3, run: zsets.zscore },
  ZMSCORE: { arity: -3, run: zsets.zmscore },
  ZCARD: { arity: 2, run: (c, [k]) => c.db.read(k!, 'zset')?.size ?? 0 },
  ZCOUNT: { arity: 4, run: zsets.zcount },
  ZRANK: { arity: 3, run: (c, a) => zsets.zrank(c, a, false) },
  ZREVRANK: { arity: 3, run: (c, a) => zsets.zrank(c, a, true) },
  ZRANGE: { arity: -4, run: z(false, false, true) },
  ZREVRANGE: { arity: -4, run: z(false, true, false) },
  ZRANGEBYSCORE: { arity: -4, run: z(true, false, false) },
  ZREVRANGEBYSCORE: {
    arity: -4,
    run: (c, [k, max, min, ...o]) => z(true, true, false)(c, [k!, min!, max!, ...o]),
  },
  ZPOPMIN: { arity: -2, run: (c, a) => zsets.zpop(c, a, false) },
  ZPOPMAX: { arity: -2, run: (c, a) => zsets.zpop(c, a, true) },
  ZREMRANGEBYSCORE: { arity: 4, run: zsets.zremrangebyscore },
  ZREMRANGEBYRANK: { arity: 4, run: zsets.zremrangebyrank },
  // lists
  RPUSH: { arity: -3, run: lists.rpush },
  LLEN: { arity: 2, run: (c, [k]) => c.db.read(k!, 'list')?.length ?? 0 },
  LRANGE: { arity: 4, run: lists.lrange },
  LTRIM: { arity: 4, run: lists.ltrim },
  // streams
  XADD: { arity: -5, run: streams.xadd },
  XLEN: { arity: 2, run: (c, [k]) => c.db.read(k!, 'stream')?.length ?? 0 },
  XRANGE: { arity: -4, run: (c, a) => streams.xrange(c, a, false) },
  XREVRANGE: { arity: -4, run: (c, a) => streams.xrange(c, a, true) },
  XREAD: { arity: -4, run: streams.xread },
  XTRIM: { arity: -4, run: streams.xtrim },
  XDEL: { arity: -3, run: streams.xdel },
  // scripts
  EVAL: { arity: -3, run: (c, [body, ...a]) => c.server.eval(c, body!, a) },
  EVALSHA: { arity: -3, run: (c, [sha, ...a]) => c.server.evalsha(c, sha!, a) },
  SCRIPT: { arity: -2, run: (c, a) => c.server.script(c, a) },
  // server and connection
  PING: { arity: -1, run: (_c, [msg]) => (msg === undefined ? new Status('PONG') : msg) },
  ECHO: { arity: 2, run: (_c, [msg]) => msg! },
  TIME: { arity: 1, run: time },
  INFO: { arity: -1, run: (c) => c.server.info() },
  CLIENT: { arity: -2, run: (c, a) => c.server.client(c, a) },
  SELECT: { arity: 2, run: (c, [i]) => c.server.select(c, integer(i)) },
  FLUSHALL: { arity: -1, run: (c) => c.server.flushall() },
  // No replicas and no persistence: WAIT answers at once that no replica has the writes.
  WAIT: { arity: 3, run: () => 0 },
  CONFIG: {
    arity: -2,
    run: (_c, [sub, name]) => {
      if (upper(sub) === 'GET') return name === 'maxmemory-policy' ? [name, 'noeviction'] : [];
      if (upper(sub) === 'SET') return OK;
      if (upper(sub) === 'RESETSTAT') return OK; // no statistics kept: nothing to reset
      throw new CommandError(`ERR unknown subcommand '${sub}'. Try CONFIG HELP.`);
    },
  },
};

/** Runs one command against `ctx`; an error reply for an unknown command or a wrong arity. */
export function runCommand(ctx: CommandContext, argv: string[]): Reply | Blocked {
  const name = upper(argv[0]);
  const cmd = COMMANDS[name];
  if (!cmd) {
    const shown = argv
      .slice(1, 20)
      .map((a) => `'${a.slice(0, 128)}'`)
      .join(' ');
    return new RespError(`ERR unknown command '${argv[0]}', with args beginning with: ${shown}`);
  }
  if (cmd.arity >= 0 ? argv.length !== cmd.arity : argv.length < -cmd.arity) {
    return new RespError(`ERR wrong number of arguments for '${argv[0]!.toLowerCase()}' command`);
  }
  try {
    return cmd.run(ctx, argv.slice(1));
  } catch (err) {
    if (err instanceof CommandError) return err.reply;
    throw err;
  }
}
