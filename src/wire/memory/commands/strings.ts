// String commands: GET, SET (with its options), MGET, INCR/INCRBY/DECR.

import { CommandError } from '../keyspace.js';
import { OK, type Reply } from '../resp.js';
import type { CommandContext } from './context.js';
import { integer, SYNTAX, upper } from './parse.js';

export function get(ctx: CommandContext, [key]: string[]): Reply {
  return ctx.db.read(key!, 'string') ?? null;
}

export function set(ctx: CommandContext, [key, value, ...opts]: string[]): Reply {
  let nx = false;
  let xx = false;
  let getOld = false;
  let keepTtl = false;
  let at: number | undefined;
  for (let i = 0; i < opts.length; i++) {
    const o = upper(opts[i]);
    if (o === 'NX') nx = true;
    else if (o === 'XX') xx = true;
    else if (o === 'GET') getOld = true;
    else if (o === 'KEEPTTL') keepTtl = true;
    else if (o === 'EX' || o === 'PX' || o === 'EXAT' || o === 'PXAT') {
      const n = integer(opts[++i]);
      if (n <= 0) throw new CommandError("ERR invalid expire time in 'set' command");
      at = o === 'EX' ? ctx.nowMs() + n * 1000 : o === 'PX' ? ctx.nowMs() + n : o === 'EXAT' ? n * 1000 : n;
    } else throw new CommandError(SYNTAX);
  }
  if (nx && xx) throw new CommandError(SYNTAX);
  const old = getOld ? ctx.db.read(key!, 'string') : undefined;
  const present = ctx.db.has(key!);
  if ((nx && present) || (xx && !present)) return getOld ? (old ?? null) : null;
  ctx.db.setString(key!, value!, keepTtl);
  if (at !== undefined) ctx.db.expires.set(key!, at);
  return getOld ? (old ?? null) : OK;
}

export function mget(ctx: CommandContext, args: string[]): Reply {
  return args.map((k) => {
    const v = ctx.db.get(k);
    return typeof v === 'string' ? v : null;
  });
}

export function incrBy(ctx: CommandContext, key: string, by: number): Reply {
  const current = ctx.db.read(key, 'string');
  const n = current === undefined ? 0 : integer(current);
  const next = n + by;
  if (!Number.isSafeInteger(next)) throw new CommandError('ERR increment or decrement would overflow');
  ctx.db.setString(key, String(next), true);
  return next;
}
