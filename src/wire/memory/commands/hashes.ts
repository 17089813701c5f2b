// Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HDEL, HGETALL, HINCRBY, HINCRBYFLOAT.

import { CommandError } from '../keyspace.js';
import { OK, type Reply } from '../resp.js';
import type { CommandContext } from './context.js';
import { float, integer } from './parse.js';

export function hset(ctx: CommandContext, [key, ...pairs]: string[]): Reply {
  if (pairs.length === 0 || pairs.length % 2 !== 0) {
    throw new CommandError("ERR wrong number of arguments for 'hset' command");
  }
  const h = ctx.db.write(key!, 'hash');
  let added = 0;
  for (let i = 0; i < pairs.length; i += 2) {
    if (!h.has(pairs[i]!)) added += 1;
    h.set(pairs[i]!, pairs[i + 1]!);
  }
  return added;
}

export function hmset(ctx: CommandContext, args: string[]): Reply {
  if (args.length % 2 !== 1) throw new CommandError("ERR wrong number of arguments for 'hmset' command");
  hset(ctx, args);
  return OK;
}

export function hsetnx(ctx: CommandContext, [key, field, value]: string[]): Reply {
  const h = ctx.db.write(key!, 'hash');
  if (h.has(field!)) return 0;
  h.set(field!, value!);
  return 1;
}

export function hget(ctx: CommandContext, [key, field]: string[]): Reply {
  return ctx.db.read(key!, 'hash')?.get(field!) ?? null;
}

export function hmget(ctx: CommandContext, [key, ...fields]: string[]): Reply {
  const h = ctx.db.read(key!, 'hash');
  return fields.map((f) => h?.get(f) ?? null);
}

export function hdel(ctx: CommandContext, [key, ...fields]: string[]): Reply {
  const h = ctx.db.read(key!, 'hash');
  if (!h) return 0;
  let n = 0;
  for (const f of fields) if (h.delete(f)) n += 1;
  ctx.db.dropIfEmpty(key!, h);
  return n;
}

export function hgetall(ctx: CommandContext, [key]: string[]): Reply {
  const out: string[] = [];
  for (const [f, v] of ctx.db.read(key!, 'hash') ?? []) out.push(f, v);
  return out;
}

export function hincrby(ctx: CommandContext, [key, field, by]: string[]): Reply {
  const delta = integer(by);
  const h = ctx.db.write(key!, 'hash');
  const current = h.get(field!);
  const n = current === undefined ? 0 : integer(current, 'ERR hash value is not an integer');
  const next = n + delta;
  if (!Number.isSafeInteger(next)) throw new CommandError('ERR increment or decrement would overflow');
  h.set(field!, String(next));
  return next;
}

export function hincrbyfloat(ctx: CommandContext, [key, field, by]: string[]): Reply {
  const delta = float(by);
  const h = ctx.db.write(key!, 'hash');
  const current = h.get(field!);
  const n = current === undefined ? 0 : float(current, 'ERR hash value is not a float');
  const next = n + delta;
  if (!Number.isFinite(next)) throw new CommandError('ERR increment would produce NaN or Infinity');
  h.set(field!, String(next));
  return String(next);
}
