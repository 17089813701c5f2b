// List commands: RPUSH, LRANGE, LTRIM.

import { OK, type Status } from '../resp.js';
import type { CommandContext } from './context.js';
import { integer } from './parse.js';

export function rpush(ctx: CommandContext, [key, ...values]: string[]): number {
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

export function lrange(ctx: CommandContext, [key, start, stop]: string[]): string[] {
  const list = ctx.db.read(key!, 'list') ?? [];
  const [from, to] = listRange(list.length, start, stop);
  return from > to ? [] : list.slice(from, to + 1);
}

export function ltrim(ctx: CommandContext, [key, start, stop]: string[]): Status {
  const list = ctx.db.read(key!, 'list');
  if (!list) return OK;
  const [from, to] = listRange(list.length, start, stop);
  const kept = from > to ? [] : list.slice(from, to + 1);
  list.splice(0, list.length, ...kept);
  ctx.db.dropIfEmpty(key!, list);
  return OK;
}
