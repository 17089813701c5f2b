// Every Redis command the memory engine answers, in one table at the bottom of this file: the
// commands the protocol scripts call, the ones the runtime, CLI, dashboard and tests send, and
// the few ioredis sends on connect. Each follows Redis 7's semantics and error wording; a
// command not listed answers as Redis does for an unknown one.
import type { Database } from './keyspace.js';
import { CommandError, kindOf, WRONGTYPE } from './keyspace.js';
import { OK, type Reply, RespError, Status } from './resp.js';
import type { Bound, SortedSet } from './sorted-set.js';
import { compareIds, formatId, type StreamEntry, type StreamId } from './stream.js';

/** What a command sees of the engine around it. */
export interface CommandContext {
  readonly db: Database;
  readonly inScript: boolean;
  nowMs(): number;
  nowUs(): number;
  /** A write to `key` that blocked readers may be waiting for. */
  signal(key: string): void;
  /** The engine-level commands (scripts, clients, databases): see engine.ts. */
  readonly server: ServerCommands;
}

/** The commands that need more than one database: implemented by the engine. */
export interface ServerCommands {
  eval(ctx: CommandContext, body: string, args: string[]): Reply;
  evalsha(ctx: CommandContext, sha: string, args: string[]): Reply;
  script(ctx: CommandContext, args: string[]): Reply;
  client(ctx: CommandContext, args: string[]): Reply;
  select(ctx: CommandContext, index: number): Reply;
  flushall(): Reply;
  info(): Reply;
}

/** A blocking read that found nothing yet: the engine parks it until `retry` answers or time runs out. */
export class Blocked {
  constructor(
    readonly keys: string[],
    readonly timeoutMs: number,
    readonly retry: () => Reply | undefined,
  ) {}
}

type Run = (ctx: CommandContext, args: string[]) => Reply | Blocked;

interface Command {
  /** Redis's arity: the exact count of words with the name when >= 0, the least count when < 0. */
  arity: number;
  run: Run;
}

// ── argument parsing ─────────────────────────────────────────────────────────

const NOT_INTEGER = 'ERR value is not an integer or out of range';
const NOT_FLOAT = 'ERR value is not a valid float';
const SYNTAX = 'ERR syntax error';

export function integer(s: string | undefined, message = NOT_INTEGER): number {
  if (s === undefined || !/^-?\d{1,19}$/.test(s)) throw new CommandError(message);
  const n = Number(s);
  if (!Number.isSafeInteger(n)) throw new CommandError(message);
  return n;
}

function float(s: string | undefined, message = NOT_FLOAT): number {
  if (s === undefined) throw new CommandError(message);
  const t = s.toLowerCase();
  if (t === 'inf' || t === '+inf' || t === 'infinity' || t === '+infinity') return Number.POSITIVE_INFINITY;
  if (t === '-inf' || t === '-infinity') return Number.NEGATIVE_INFINITY;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/.test(t)) throw new CommandError(message);
  return Number(t);
}

function scoreBound(s: string): Bound {
  const exclusive = s.startsWith('(');
  return { value: float(exclusive ? s.slice(1) : s, 'ERR min or max is not a float'), exclusive };
}

/** A score as Redis writes it in a reply. */
export function formatScore(n: number): string {
  if (n === Number.POSITIVE_INFINITY) return 'inf';
  if (n === Number.NEGATIVE_INFINITY) return '-inf';
  return String(n);
}

function upper(s: string | undefined): string {
  return (s ?? '').toUpperCase();
}

/** Redis's glob (KEYS, SCAN MATCH): *, ?, [set], [^set], \x. */
function globToRegExp(pattern: string): RegExp {
  let re = '^';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '[\\s\\S]*';
    else if (c === '?') re += '[\\s\\S]';
    else if (c === '\\' && i + 1 < pattern.length) re += `\\${pattern[++i]}`;
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end < 0) re += '\\[';
      else {
        let set = pattern.slice(i + 1, end).replace(/\\/g, '\\\\');
        if (set.startsWith('^')) set = `^${set.slice(1)}`;
        re += `[${set}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\]\\/-]/g, '\\$&');
  }
  return new RegExp(`${re}$`);
}

// ── keys ─────────────────────────────────────────────────────────────────────

function del(ctx: CommandContext, args: string[]): Reply {
  let n = 0;
  for (const key of args) if (ctx.db.has(key) && ctx.db.delete(key)) n += 1;
  return n;
}

function exists(ctx: CommandContext, args: string[]): Reply {
  let n = 0;
  for (const key of args) if (ctx.db.has(key)) n += 1;
  return n;
}

function type(ctx: CommandContext, [key]: string[]): Reply {
  const v = ctx.db.get(key!);
  return new Status(v === undefined ? 'none' : kindOf(v));
}

function keys(ctx: CommandContext, [pattern]: string[]): Reply {
  const re = globToRegExp(pattern!);
  return ctx.db.keys().filter((k) => re.test(k));
}

function scan(ctx: CommandContext, args: string[]): Reply {
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

function expireAt(ctx: CommandContext, key: string, atMs: number, flags: string[]): Reply {
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

function ttl(ctx: CommandContext, key: string, unitMs: number): Reply {
  if (!ctx.db.has(key)) return -2;
  const at = ctx.db.expires.get(key);
  if (at === undefined) return -1;
  return Math.max(0, Math.round((at - ctx.nowMs()) / unitMs));
}

function persist(ctx: CommandContext, [key]: string[]): Reply {
  return ctx.db.has(key!) && ctx.db.expires.delete(key!) ? 1 : 0;
}

function rename(ctx: CommandContext, [from, to]: string[]): Reply {
  const v = ctx.db.get(from!);
  if (v === undefined) throw new CommandError('ERR no such key');
  const at = ctx.db.expires.get(from!);
  ctx.db.delete(from!);
  ctx.db.delete(to!);
  ctx.db.data.set(to!, v);
  if (at !== undefined) ctx.db.expires.set(to!, at);
  return OK;
}

// ── strings ──────────────────────────────────────────────────────────────────

function get(ctx: CommandContext, [key]: string[]): Reply {
  return ctx.db.read(key!, 'string') ?? null;
}

function set(ctx: CommandContext, [key, value, ...opts]: string[]): Reply {
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

function mget(ctx: CommandContext, args: string[]): Reply {
  return args.map((k) => {
    const v = ctx.db.get(k);
    return typeof v === 'string' ? v : null;
  });
}

function incrBy(ctx: CommandContext, key: string, by: number): Reply {
  const current = ctx.db.read(key, 'string');
  const n = current === undefined ? 0 : integer(current);
  const next = n + by;
  if (!Number.isSafeInteger(next)) throw new CommandError('ERR increment or decrement would overflow');
  ctx.db.setString(key, String(next), true);
  return next;
}

// ── hashes ───────────────────────────────────────────────────────────────────

function hset(ctx: CommandContext, [key, ...pairs]: string[]): Reply {
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

function hmset(ctx: CommandContext, args: string[]): Reply {
  if (args.length % 2 !== 1) throw new CommandError("ERR wrong number of arguments for 'hmset' command");
  hset(ctx, args);
  return OK;
}

function hsetnx(ctx: CommandContext, [key, field, value]: string[]): Reply {
  const h = ctx.db.write(key!, 'hash');
  if (h.has(field!)) return 0;
  h.set(field!, value!);
  return 1;
}

function hget(ctx: CommandContext, [key, field]: string[]): Reply {
  return ctx.db.read(key!, 'hash')?.get(field!) ?? null;
}

function hmget(ctx: CommandContext, [key, ...fields]: string[]): Reply {
  const h = ctx.db.read(key!, 'hash');
  return fields.map((f) => h?.get(f) ?? null);
}

function hdel(ctx: CommandContext, [key, ...fields]: string[]): Reply {
  const h = ctx.db.read(key!, 'hash');
  if (!h) return 0;
  let n = 0;
  for (const f of fields) if (h.delete(f)) n += 1;
  ctx.db.dropIfEmpty(key!, h);
  return n;
}

function hgetall(ctx: CommandContext, [key]: string[]): Reply {
  const out: string[] = [];
  for (const [f, v] of ctx.db.read(key!, 'hash') ?? []) out.push(f, v);
  return out;
}

function hincrby(ctx: CommandContext, [key, field, by]: string[]): Reply {
  const delta = integer(by);
  const h = ctx.db.write(key!, 'hash');
  const current = h.get(field!);
  const n = current === undefined ? 0 : integer(current, 'ERR hash value is not an integer');
  const next = n + delta;
  if (!Number.isSafeInteger(next)) throw new CommandError('ERR increment or decrement would overflow');
  h.set(field!, String(next));
  return next;
}

function hincrbyfloat(ctx: CommandContext, [key, field, by]: string[]): Reply {
  const delta = float(by);
  const h = ctx.db.write(key!, 'hash');
  const current = h.get(field!);
  const n = current === undefined ? 0 : float(current, 'ERR hash value is not a float');
  const next = n + delta;
  if (!Number.isFinite(next)) throw new CommandError('ERR increment would produce NaN or Infinity');
  h.set(field!, String(next));
  return String(next);
}

// ── sets ─────────────────────────────────────────────────────────────────────

function sadd(ctx: CommandContext, [key, ...members]: string[]): Reply {
  const s = ctx.db.write(key!, 'set');
  let n = 0;
  for (const m of members) {
    if (!s.has(m)) {
      s.add(m);
      n += 1;
    }
  }
  return n;
}

function srem(ctx: CommandContext, [key, ...members]: string[]): Reply {
  const s = ctx.db.read(key!, 'set');
  if (!s) return 0;
  let n = 0;
  for (const m of members) if (s.delete(m)) n += 1;
  ctx.db.dropIfEmpty(key!, s);
  return n;
}

// ── sorted sets ──────────────────────────────────────────────────────────────

function zadd(ctx: CommandContext, [key, ...rest]: string[]): Reply {
  const flags = new Set<string>();
  let i = 0;
  while (i < rest.length && ['NX', 'XX', 'GT', 'LT', 'CH', 'INCR'].includes(upper(rest[i]))) {
    flags.add(upper(rest[i]));
    i += 1;
  }
  const pairs = rest.slice(i);
  if (pairs.length === 0 || pairs.length % 2 !== 0) throw new CommandError(SYNTAX);
  if (flags.has('NX') && flags.has('XX')) {
    throw new CommandError('ERR XX and NX options at the same time are not compatible');
  }
  if ((flags.has('GT') && flags.has('LT')) || (flags.has('NX') && (flags.has('GT') || flags.has('LT')))) {
    throw new CommandError('ERR GT, LT, and/or NX options at the same time are not compatible');
  }
  if (flags.has('INCR') && pairs.length !== 2) {
    throw new CommandError('ERR INCR option supports a single increment-element pair');
  }
  const scores = [];
  for (let j = 0; j < pairs.length; j += 2) scores.push(float(pairs[j]));
  const existing = ctx.db.read(key!, 'zset');
  if (!existing && flags.has('XX')) return flags.has('INCR') ? null : 0;
  const z = existing ?? ctx.db.write(key!, 'zset');
  let added = 0;
  let changed = 0;
  let last: number | null = null;
  for (let j = 0; j < pairs.length; j += 2) {
    const member = pairs[j + 1]!;
    const old = z.score(member);
    let score = scores[j / 2]!;
    if (flags.has('INCR')) score += old ?? 0;
    if (Number.isNaN(score)) throw new CommandError('ERR resulting score is not a number (NaN)');
    if (old === undefined ? flags.has('XX') : flags.has('NX')) continue;
    if (old !== undefined && ((flags.has('GT') && score <= old) || (flags.has('LT') && score >= old)))
      continue;
    if (old === undefined) added += 1;
    else if (old !== score) changed += 1;
    z.set(member, score);
    last = score;
  }
  ctx.db.dropIfEmpty(key!, z);
  if (flags.has('INCR')) return last === null ? null : formatScore(last);
  return flags.has('CH') ? added + changed : added;
}

function zincrby(ctx: CommandContext, [key, by, member]: string[]): Reply {
  return zadd(ctx, [key!, 'INCR', by!, member!]);
}

function zrem(ctx: CommandContext, [key, ...members]: string[]): Reply {
  const z = ctx.db.read(key!, 'zset');
  if (!z) return 0;
  let n = 0;
  for (const m of members) if (z.delete(m)) n += 1;
  ctx.db.dropIfEmpty(key!, z);
  return n;
}

function zscore(ctx: CommandContext, [key, member]: string[]): Reply {
  const s = ctx.db.read(key!, 'zset')?.score(member!);
  return s === undefined ? null : formatScore(s);
}

function zmscore(ctx: CommandContext, [key, ...members]: string[]): Reply {
  const z = ctx.db.read(key!, 'zset');
  return members.map((m) => {
    const s = z?.score(m);
    return s === undefined ? null : formatScore(s);
  });
}

function withScores(z: SortedSet, members: string[], scores: boolean): Reply {
  if (!scores) return members;
  const out: string[] = [];
  for (const m of members) out.push(m, formatScore(z.score(m)!));
  return out;
}

/** Ranks [start, stop] as Redis reads them (negative from the end), clamped; undefined when empty. */
function rankSpan(size: number, start: number, stop: number): [number, number] | undefined {
  let a = start < 0 ? size + start : start;
  let b = stop < 0 ? size + stop : stop;
  if (a < 0) a = 0;
  if (a > b || a >= size) return undefined;
  if (b >= size) b = size - 1;
  return [a, b];
}

function byRank(z: SortedSet, start: number, stop: number, rev: boolean): string[] {
  const span = rankSpan(z.size, start, stop);
  if (!span) return [];
  if (!rev) return z.slice(span[0], span[1]);
  return z.slice(z.size - 1 - span[1], z.size - 1 - span[0]).reverse();
}

function byScore(
  z: SortedSet,
  min: Bound,
  max: Bound,
  rev: boolean,
  limit: [number, number] | undefined,
): string[] {
  const [first, last] = z.rankRange(min, max);
  if (first >= last) return [];
  let members = z.slice(first, last - 1);
  if (rev) members.reverse();
  if (limit) {
    const [offset, count] = limit;
    if (offset < 0) return [];
    members = count < 0 ? members.slice(offset) : members.slice(offset, offset + count);
  }
  return members;
}

/** ZRANGE and its older spellings: ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE. */
function zrangeGeneric(
  ctx: CommandContext,
  key: string,
  from: string,
  to: string,
  opts: string[],
  mode: { byScore: boolean; rev: boolean; allowByScore: boolean },
): Reply {
  let { byScore: scoreMode, rev } = mode;
  let scores = false;
  let limit: [number, number] | undefined;
  for (let i = 0; i < opts.length; i++) {
    const o = upper(opts[i]);
    if (o === 'WITHSCORES') scores = true;
    else if (o === 'LIMIT' && i + 2 < opts.length) {
      limit = [integer(opts[i + 1]), integer(opts[i + 2])];
      i += 2;
    } else if (mode.allowByScore && o === 'BYSCORE') scoreMode = true;
    else if (mode.allowByScore && o === 'REV') rev = true;
    else if (mode.allowByScore && o === 'BYLEX') {
      throw new CommandError('ERR BYLEX is not supported by the EchoMQ memory engine');
    } else throw new CommandError(SYNTAX);
  }
  if (limit && !scoreMode) {
    throw new CommandError(
      'ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX',
    );
  }
  let lo = from;
  let hi = to;
  if (scoreMode && rev && mode.allowByScore) [lo, hi] = [to, from];
  const z = ctx.db.read(key, 'zset');
  if (scoreMode) {
    const min = scoreBound(lo);
    const max = scoreBound(hi);
    return z ? withScores(z, byScore(z, min, max, rev, limit), scores) : [];
  }
  const start = integer(from);
  const stop = integer(to);
  return z ? withScores(z, byRank(z, start, stop, rev), scores) : [];
}

function zcount(ctx: CommandContext, [key, min, max]: string[]): Reply {
  const lo = scoreBound(min!);
  const hi = scoreBound(max!);
  const z = ctx.db.read(key!, 'zset');
  if (!z) return 0;
  const [first, last] = z.rankRange(lo, hi);
  return last - first;
}

function zpop(ctx: CommandContext, [key, countArg]: string[], max: boolean): Reply {
  const count = countArg === undefined ? 1 : integer(countArg, 'ERR value is out of range, must be positive');
  if (count < 0) throw new CommandError('ERR value is out of range, must be positive');
  const z = ctx.db.read(key!, 'zset');
  if (!z || count === 0) return [];
  const n = Math.min(count, z.size);
  const out: string[] = [];
  const start = max ? z.size - n : 0;
  const members = z.slice(start, start + n - 1);
  if (max) members.reverse();
  for (const m of members) out.push(m, formatScore(z.score(m)!));
  z.removeRanks(start, start + n);
  ctx.db.dropIfEmpty(key!, z);
  return out;
}

function zremrangebyscore(ctx: CommandContext, [key, min, max]: string[]): Reply {
  const lo = scoreBound(min!);
  const hi = scoreBound(max!);
  const z = ctx.db.read(key!, 'zset');
  if (!z) return 0;
  const [first, last] = z.rankRange(lo, hi);
  const n = z.removeRanks(first, last).length;
  ctx.db.dropIfEmpty(key!, z);
  return n;
}

function zremrangebyrank(ctx: CommandContext, [key, start, stop]: string[]): Reply {
  const a = integer(start);
  const b = integer(stop);
  const z = ctx.db.read(key!, 'zset');
  if (!z) return 0;
  const span = rankSpan(z.size, a, b);
  if (!span) return 0;
  const n = z.removeRanks(span[0], span[1] + 1).length;
  ctx.db.dropIfEmpty(key!, z);
  return n;
}

function zrank(ctx: CommandContext, [key, member]: string[], rev: boolean): Reply {
  const z = ctx.db.read(key!, 'zset');
  const r = z?.rank(member!);
  if (z === undefined || r === undefined) return null;
  return rev ? z.size - 1 - r : r;
}

// ── streams ──────────────────────────────────────────────────────────────────

const MAX_SEQ = Number.MAX_SAFE_INTEGER;
const INVALID_ID = 'ERR Invalid stream ID specified as stream command argument';

/** A stream id argument; `-`/`+` and incomplete ids (`<ms>`) take `missingSeq`. */
function parseId(s: string, missingSeq: number): StreamId {
  if (s === '-') return { ms: 0, seq: 0 };
  if (s === '+') return { ms: Number.MAX_SAFE_INTEGER, seq: MAX_SEQ };
  const m = /^(\d+)(?:-(\d+))?$/.exec(s);
  if (!m) throw new CommandError(INVALID_ID);
  const ms = Number(m[1]);
  const seq = m[2] === undefined ? missingSeq : Number(m[2]);
  if (!Number.isSafeInteger(ms) || !Number.isSafeInteger(seq)) throw new CommandError(INVALID_ID);
  return { ms, seq };
}

function entryReply(e: StreamEntry): Reply {
  return [formatId(e.id), e.fields];
}

function xadd(ctx: CommandContext, [key, ...rest]: string[]): Reply {
  let i = 0;
  let noMk = false;
  let maxLen: number | undefined;
  let approx = false;
  for (;;) {
    const o = upper(rest[i]);
    if (o === 'NOMKSTREAM') {
      noMk = true;
      i += 1;
    } else if (o === 'MAXLEN') {
      i += 1;
      if (rest[i] === '~' || rest[i] === '=') {
        approx = rest[i] === '~';
        i += 1;
      }
      maxLen = integer(rest[i], 'ERR value is not an integer or out of range');
      if (maxLen < 0) throw new CommandError('ERR The MAXLEN argument must be >= 0.');
      i += 1;
      if (upper(rest[i]) === 'LIMIT') i += 2;
    } else if (o === 'MINID') {
      throw new CommandError('ERR MINID is not supported by the EchoMQ memory engine');
    } else break;
  }
  const idArg = rest[i];
  const fields = rest.slice(i + 1);
  if (idArg === undefined || fields.length === 0 || fields.length % 2 !== 0) {
    throw new CommandError("ERR wrong number of arguments for 'xadd' command");
  }
  const existing = ctx.db.read(key!, 'stream');
  if (!existing && noMk) return null;
  const s = existing ?? ctx.db.write(key!, 'stream');
  let id: StreamId;
  if (idArg === '*') id = s.nextId(ctx.nowMs());
  else {
    const m = /^(\d+)-\*$/.exec(idArg);
    if (m) {
      const ms = Number(m[1]);
      id = ms === s.lastId.ms ? { ms, seq: s.lastId.seq + 1 } : { ms, seq: 0 };
    } else id = parseId(idArg, 0);
    if (id.ms === 0 && id.seq === 0)
      throw new CommandError('ERR The ID specified in XADD must be greater than 0-0');
    if (compareIds(id, s.lastId) <= 0) {
      throw new CommandError(
        'ERR The ID specified in XADD is equal or smaller than the target stream top item',
      );
    }
  }
  s.append(id, fields);
  if (maxLen !== undefined) s.trim(maxLen, approx);
  ctx.signal(key!);
  return formatId(id);
}

/** A range bound: `(id` is exclusive; an incomplete id covers all its seqs. */
function rangeBound(s: string, isStart: boolean): { id: StreamId; exclusive: boolean } {
  const exclusive = s.startsWith('(');
  const raw = exclusive ? s.slice(1) : s;
  if (exclusive && (raw === '-' || raw === '+')) throw new CommandError(INVALID_ID);
  return { id: parseId(raw, isStart ? 0 : MAX_SEQ), exclusive };
}

function xrange(ctx: CommandContext, [key, a, b, ...opts]: string[], rev: boolean): Reply {
  const start = rangeBound(rev ? b! : a!, true);
  const end = rangeBound(rev ? a! : b!, false);
  let count: number | undefined;
  if (opts.length > 0) {
    if (opts.length !== 2 || upper(opts[0]) !== 'COUNT') throw new CommandError(SYNTAX);
    count = integer(opts[1]);
  }
  const s = ctx.db.read(key!, 'stream');
  if (!s || count === 0) return [];
  let entries = s.range(start.id, start.exclusive, end.id, end.exclusive);
  if (rev) entries = entries.reverse();
  if (count !== undefined && count > 0) entries = entries.slice(0, count);
  return entries.map(entryReply);
}

function xread(ctx: CommandContext, args: string[]): Reply | Blocked {
  let count: number | undefined;
  let block: number | undefined;
  let i = 0;
  for (; i < args.length; i++) {
    const o = upper(args[i]);
    if (o === 'COUNT') count = integer(args[++i]);
    else if (o === 'BLOCK') {
      block = integer(args[++i], 'ERR timeout is not an integer or out of range');
      if (block < 0) throw new CommandError('ERR timeout is negative');
    } else if (o === 'STREAMS') break;
    else throw new CommandError(SYNTAX);
  }
  const rest = args.slice(i + 1);
  if (upper(args[i]) !== 'STREAMS' || rest.length === 0 || rest.length % 2 !== 0) {
    throw new CommandError(
      "ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.",
    );
  }
  const n = rest.length / 2;
  const streamKeys = rest.slice(0, n);
  const after = streamKeys.map((key, j) => {
    const idArg = rest[n + j]!;
    if (idArg === '$') return ctx.db.read(key, 'stream')?.lastId ?? { ms: 0, seq: 0 };
    return parseId(idArg, 0);
  });
  const read = (): Reply | undefined => {
    const out: Reply[] = [];
    streamKeys.forEach((key, j) => {
      const s = ctx.db.read(key, 'stream');
      if (!s) return;
      const from = s.indexFrom(after[j]!, true);
      if (from >= s.length) return;
      const to = count !== undefined && count > 0 ? Math.min(s.length, from + count) : s.length;
      out.push([key, s.entries.slice(from, to).map(entryReply)]);
    });
    return out.length > 0 ? out : undefined;
  };
  const now = read();
  if (now !== undefined) return now;
  if (block === undefined || ctx.inScript) return null;
  return new Blocked(streamKeys, block, read);
}

function xtrim(ctx: CommandContext, [key, strategy, ...rest]: string[]): Reply {
  if (upper(strategy) !== 'MAXLEN') throw new CommandError(SYNTAX);
  let approx = false;
  if (rest[0] === '~' || rest[0] === '=') {
    approx = rest[0] === '~';
    rest.shift();
  }
  const max = integer(rest[0]);
  const s = ctx.db.read(key!, 'stream');
  return s ? s.trim(max, approx) : 0;
}

function xdel(ctx: CommandContext, [key, ...ids]: string[]): Reply {
  const s = ctx.db.read(key!, 'stream');
  if (!s) return 0;
  let n = 0;
  for (const raw of ids) {
    const id = parseId(raw, 0);
    const at = s.indexFrom(id, false);
    const e = s.entries[at];
    if (e && compareIds(e.id, id) === 0) {
      s.entries.splice(at, 1);
      n += 1;
    }
  }
  return n;
}

// ── the table ────────────────────────────────────────────────────────────────

function time(ctx: CommandContext): Reply {
  const us = ctx.nowUs();
  return [String(Math.floor(us / 1_000_000)), String(us % 1_000_000)];
}

const z = (byScore: boolean, rev: boolean, allowByScore: boolean): Run => {
  return (ctx, [key, from, to, ...opts]) =>
    zrangeGeneric(ctx, key!, from!, to!, opts, { byScore, rev, allowByScore });
};

function rpush(ctx: CommandContext, [key, ...values]: string[]): number {
  const list = ctx.db.write(key!, 'list');
  list.push(...values);
  return list.length;
}

/** A list's [start, stop] as Redis reads them: negative counts from the end, clamped to the list. */
function listRange(length: number, start: string | undefined, stop: string | undefined): [number, number] {
  let from = integer(start);
  let to = integer(stop);
  if (from < 0) from = Math.max(0, length + from);
  if (to < 0) to = length + to;
  return [from, Math.min(to, length - 1)];
}

function lrange(ctx: CommandContext, [key, start, stop]: string[]): string[] {
  const list = ctx.db.read(key!, 'list') ?? [];
  const [from, to] = listRange(list.length, start, stop);
  return from > to ? [] : list.slice(from, to + 1);
}

function ltrim(ctx: CommandContext, [key, start, stop]: string[]): Status {
  const list = ctx.db.read(key!, 'list');
  if (!list) return OK;
  const [from, to] = listRange(list.length, start, stop);
  const kept = from > to ? [] : list.slice(from, to + 1);
  list.splice(0, list.length, ...kept);
  ctx.db.dropIfEmpty(key!, list);
  return OK;
}

/**
 * The commands EchoMQ uses, and nothing else: the scripts' (protocol/scripts/*.lua), the
 * runtime's, the CLI's, the dashboard's and the tests' raw reads. MULTI, EXEC, DISCARD, WATCH and
 * QUIT are the engine's own (they act on the connection), see engine.ts.
 */
export const COMMANDS: Record<string, Command> = {
  // keys
  DEL: { arity: -2, run: del },
  UNLINK: { arity: -2, run: del },
  EXISTS: { arity: -2, run: exists },
  TYPE: { arity: 2, run: type },
  KEYS: { arity: 2, run: keys },
  SCAN: { arity: -2, run: scan },
  EXPIRE: { arity: -3, run: (c, [k, s, ...f]) => expireAt(c, k!, c.nowMs() + integer(s) * 1000, f) },
  PEXPIRE: { arity: -3, run: (c, [k, ms, ...f]) => expireAt(c, k!, c.nowMs() + integer(ms), f) },
  PEXPIREAT: { arity: -3, run: (c, [k, at, ...f]) => expireAt(c, k!, integer(at), f) },
  TTL: { arity: 2, run: (c, [k]) => ttl(c, k!, 1000) },
  PTTL: { arity: 2, run: (c, [k]) => ttl(c, k!, 1) },
  PERSIST: { arity: 2, run: persist },
  RENAME: { arity: 3, run: rename },
  DBSIZE: { arity: 1, run: (c) => c.db.keys().length },
  FLUSHDB: {
    arity: -1,
    run: (c) => {
      c.db.flush();
      return OK;
    },
  },
  // strings
  GET: { arity: 2, run: get },
  SET: { arity: -3, run: set },
  MGET: { arity: -2, run: mget },
  INCR: { arity: 2, run: (c, [k]) => incrBy(c, k!, 1) },
  INCRBY: { arity: 3, run: (c, [k, by]) => incrBy(c, k!, integer(by)) },
  DECR: { arity: 2, run: (c, [k]) => incrBy(c, k!, -1) },
  // hashes
  HSET: { arity: -4, run: hset },
  HMSET: { arity: -4, run: hmset },
  HSETNX: { arity: 4, run: hsetnx },
  HGET: { arity: 3, run: hget },
  HMGET: { arity: -3, run: hmget },
  HDEL: { arity: -3, run: hdel },
  HGETALL: { arity: 2, run: hgetall },
  HKEYS: { arity: 2, run: (c, [k]) => [...(c.db.read(k!, 'hash')?.keys() ?? [])] },
  HVALS: { arity: 2, run: (c, [k]) => [...(c.db.read(k!, 'hash')?.values() ?? [])] },
  HLEN: { arity: 2, run: (c, [k]) => c.db.read(k!, 'hash')?.size ?? 0 },
  HEXISTS: { arity: 3, run: (c, [k, f]) => (c.db.read(k!, 'hash')?.has(f!) ? 1 : 0) },
  HINCRBY: { arity: 4, run: hincrby },
  HINCRBYFLOAT: { arity: 4, run: hincrbyfloat },
  // sets
  SADD: { arity: -3, run: sadd },
  SREM: { arity: -3, run: srem },
  SISMEMBER: { arity: 3, run: (c, [k, m]) => (c.db.read(k!, 'set')?.has(m!) ? 1 : 0) },
  SMEMBERS: { arity: 2, run: (c, [k]) => [...(c.db.read(k!, 'set') ?? [])] },
  SCARD: { arity: 2, run: (c, [k]) => c.db.read(k!, 'set')?.size ?? 0 },
  // sorted sets
  ZADD: { arity: -4, run: zadd },
  ZINCRBY: { arity: 4, run: zincrby },
  ZREM: { arity: -3, run: zrem },
  ZSCORE: { arity: 3, run: zscore },
  ZMSCORE: { arity: -3, run: zmscore },
  ZCARD: { arity: 2, run: (c, [k]) => c.db.read(k!, 'zset')?.size ?? 0 },
  ZCOUNT: { arity: 4, run: zcount },
  ZRANK: { arity: 3, run: (c, a) => zrank(c, a, false) },
  ZREVRANK: { arity: 3, run: (c, a) => zrank(c, a, true) },
  ZRANGE: { arity: -4, run: z(false, false, true) },
  ZREVRANGE: { arity: -4, run: z(false, true, false) },
  ZRANGEBYSCORE: { arity: -4, run: z(true, false, false) },
  ZREVRANGEBYSCORE: {
    arity: -4,
    run: (c, [k, max, min, ...o]) => z(true, true, false)(c, [k!, min!, max!, ...o]),
  },
  ZPOPMIN: { arity: -2, run: (c, a) => zpop(c, a, false) },
  ZPOPMAX: { arity: -2, run: (c, a) => zpop(c, a, true) },
  ZREMRANGEBYSCORE: { arity: 4, run: zremrangebyscore },
  ZREMRANGEBYRANK: { arity: 4, run: zremrangebyrank },
  // lists
  RPUSH: { arity: -3, run: rpush },
  LLEN: { arity: 2, run: (c, [k]) => c.db.read(k!, 'list')?.length ?? 0 },
  LRANGE: { arity: 4, run: lrange },
  LTRIM: { arity: 4, run: ltrim },
  // streams
  XADD: { arity: -5, run: xadd },
  XLEN: { arity: 2, run: (c, [k]) => c.db.read(k!, 'stream')?.length ?? 0 },
  XRANGE: { arity: -4, run: (c, a) => xrange(c, a, false) },
  XREVRANGE: { arity: -4, run: (c, a) => xrange(c, a, true) },
  XREAD: { arity: -4, run: xread },
  XTRIM: { arity: -4, run: xtrim },
  XDEL: { arity: -3, run: xdel },
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

export { WRONGTYPE };
