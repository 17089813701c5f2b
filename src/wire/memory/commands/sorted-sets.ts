// Sorted-set commands: ZADD (with its flags), ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCOUNT, ZRANGE and
// its by-score and reverse forms, ZPOP*, ZREMRANGEBY*, ZRANK.

import { CommandError } from '../keyspace.js';
import type { Reply } from '../resp.js';
import type { Bound, SortedSet } from '../sorted-set.js';
import type { CommandContext } from './context.js';
import { float, formatScore, integer, SYNTAX, scoreBound, upper } from './parse.js';

export function zadd(ctx: CommandContext, [key, ...rest]: string[]): Reply {
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

export function zincrby(ctx: CommandContext, [key, by, member]: string[]): Reply {
  return zadd(ctx, [key!, 'INCR', by!, member!]);
}

export function zrem(ctx: CommandContext, [key, ...members]: string[]): Reply {
  const z = ctx.db.read(key!, 'zset');
  if (!z) return 0;
  let n = 0;
  for (const m of members) if (z.delete(m)) n += 1;
  ctx.db.dropIfEmpty(key!, z);
  return n;
}

export function zscore(ctx: CommandContext, [key, member]: string[]): Reply {
  const s = ctx.db.read(key!, 'zset')?.score(member!);
  return s === undefined ? null : formatScore(s);
}

export function zmscore(ctx: CommandContext, [key, ...members]: string[]): Reply {
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
export function zrangeGeneric(
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

export function zcount(ctx: CommandContext, [key, min, max]: string[]): Reply {
  const lo = scoreBound(min!);
  const hi = scoreBound(max!);
  const z = ctx.db.read(key!, 'zset');
  if (!z) return 0;
  const [first, last] = z.rankRange(lo, hi);
  return last - first;
}

export function zpop(ctx: CommandContext, [key, countArg]: string[], max: boolean): Reply {
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

export function zremrangebyscore(ctx: CommandContext, [key, min, max]: string[]): Reply {
  const lo = scoreBound(min!);
  const hi = scoreBound(max!);
  const z = ctx.db.read(key!, 'zset');
  if (!z) return 0;
  const [first, last] = z.rankRange(lo, hi);
  const n = z.removeRanks(first, last).length;
  ctx.db.dropIfEmpty(key!, z);
  return n;
}

export function zremrangebyrank(ctx: CommandContext, [key, start, stop]: string[]): Reply {
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

export function zrank(ctx: CommandContext, [key, member]: string[], rev: boolean): Reply {
  const z = ctx.db.read(key!, 'zset');
  const r = z?.rank(member!);
  if (z === undefined || r === undefined) return null;
  return rev ? z.size - 1 - r : r;
}
