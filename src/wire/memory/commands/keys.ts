// Key-space commands: DEL, EXISTS, TYPE, OBJECT ENCODING, KEYS, SCAN, the EXPIRE family, TTL, PERSIST, RENAME.

import { CommandError, kindOf } from '../keyspace.js';
import { OK, type Reply, Status } from '../resp.js';
import type { CommandContext } from './context.js';
import { globToRegExp, integer, SYNTAX, upper } from './parse.js';

export function del(ctx: CommandContext, args: string[]): Reply {
  let n = 0;
  for (const key of args) if (ctx.db.has(key) && ctx.db.delete(key)) n += 1;
  return n;
}

export function exists(ctx: CommandContext, args: string[]): Reply {
  let n = 0;
  for (const key of args) if (ctx.db.has(key)) n += 1;
  return n;
}

export function type(ctx: CommandContext, [key]: string[]): Reply {
  const v = ctx.db.get(key!);
  return new Status(v === undefined ? 'none' : kindOf(v));
}

// The encoding Redis would report for each kind at any size: the engine keeps one form per
// kind, so claim's listpack-to-skiplist step (protocol/lib/claim.lua) never runs here.
const ENCODINGS: Record<ReturnType<typeof kindOf>, string> = {
  string: 'raw',
  hash: 'hashtable',
  set: 'hashtable',
  zset: 'skiplist',
  list: 'quicklist',
  stream: 'stream',
};

/** OBJECT ENCODING key (the one OBJECT subcommand a script calls): nil for a missing key. */
export function object(ctx: CommandContext, [sub, key]: string[]): Reply {
  if (upper(sub) !== 'ENCODING' || key === undefined)
    throw new CommandError(
      `ERR unknown subcommand or wrong number of arguments for '${sub}'. Try OBJECT HELP.`,
    );
  const v = ctx.db.get(key);
  return v === undefined ? null : ENCODINGS[kindOf(v)];
}

export function keys(ctx: CommandContext, [pattern]: string[]): Reply {
  const re = globToRegExp(pattern!);
  return ctx.db.keys().filter((k) => re.test(k));
}

export function scan(ctx: CommandContext, args: string[]): Reply {
  const cursor = integer(args[0], 'ERR invalid cursor');
  let match: RegExp | undefined;
  let count = 10;
  let kind: string | undefined;
  for (let i = 1; i < args.length; i += 2) {
    const opt = upper(args[i]);
    if (i + 1 >= args.length) throw new CommandError(SYNTAX);
    if (opt === 'MATCH') match = globToRegExp(args[i + 1]!);
    else if (opt === 'COUNT') count = integer(args[i + 1]);
    else if (opt === 'TYPE') kind = args[i + 1]!.toLowerCase();
    else throw new CommandError(SYNTAX);
  }
  if (count < 1) throw new CommandError(SYNTAX);
  // The cursor is an offset into the sorted key list: keys that exist throughout are seen once.
  const all = ctx.db.keys().sort();
  const page = all.slice(cursor, cursor + count);
  const next = cursor + count >= all.length ? 0 : cursor + count;
  const out = page.filter((k) => {
    if (match && !match.test(k)) return false;
    const v = ctx.db.get(k);
    return kind === undefined || (v !== undefined && kindOf(v) === kind);
  });
  return [String(next), out];
}

export function expireAt(ctx: CommandContext, key: string, atMs: number, flags: string[]): Reply {
  if (!ctx.db.has(key)) return 0;
  const current = ctx.db.expires.get(key);
  for (const f of flags.map(upper)) {
    if (f === 'NX' && current !== undefined) return 0;
    if (f === 'XX' && current === undefined) return 0;
    if (f === 'GT' && (current === undefined || atMs <= current)) return 0;
    if (f === 'LT' && current !== undefined && atMs >= current) return 0;
    if (!['NX', 'XX', 'GT', 'LT'].includes(f)) throw new CommandError(`ERR Unsupported option ${f}`);
  }
  if (atMs <= ctx.nowMs()) ctx.db.delete(key);
  else ctx.db.expires.set(key, atMs);
  return 1;
}

export function ttl(ctx: CommandContext, key: string, unitMs: number): Reply {
  if (!ctx.db.has(key)) return -2;
  const at = ctx.db.expires.get(key);
  if (at === undefined) return -1;
  return Math.max(0, Math.round((at - ctx.nowMs()) / unitMs));
}

export function persist(ctx: CommandContext, [key]: string[]): Reply {
  return ctx.db.has(key!) && ctx.db.expires.delete(key!) ? 1 : 0;
}

export function rename(ctx: CommandContext, [from, to]: string[]): Reply {
  const v = ctx.db.get(from!);
  if (v === undefined) throw new CommandError('ERR no such key');
  const at = ctx.db.expires.get(from!);
  ctx.db.delete(from!);
  ctx.db.delete(to!);
  ctx.db.data.set(to!, v);
  if (at !== undefined) ctx.db.expires.set(to!, at);
  return OK;
}
