// Command arguments read as Redis reads them (integers, floats, score bounds, glob patterns),
// with Redis's error wording.

import { CommandError } from '../keyspace.js';
import type { Bound } from '../sorted-set.js';

const NOT_INTEGER = 'ERR value is not an integer or out of range';
const NOT_FLOAT = 'ERR value is not a valid float';
export const SYNTAX = 'ERR syntax error';

export function integer(s: string | undefined, message = NOT_INTEGER): number {
  if (s === undefined || !/^-?\d{1,19}$/.test(s)) throw new CommandError(message);
  const n = Number(s);
  if (!Number.isSafeInteger(n)) throw new CommandError(message);
  return n;
}

export function float(s: string | undefined, message = NOT_FLOAT): number {
  if (s === undefined) throw new CommandError(message);
  const t = s.toLowerCase();
  if (t === 'inf' || t === '+inf' || t === 'infinity' || t === '+infinity') return Number.POSITIVE_INFINITY;
  if (t === '-inf' || t === '-infinity') return Number.NEGATIVE_INFINITY;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/.test(t)) throw new CommandError(message);
  return Number(t);
}

export function scoreBound(s: string): Bound {
  const exclusive = s.startsWith('(');
  return { value: float(exclusive ? s.slice(1) : s, 'ERR min or max is not a float'), exclusive };
}

/** A score as Redis writes it in a reply. */
export function formatScore(n: number): string {
  if (n === Number.POSITIVE_INFINITY) return 'inf';
  if (n === Number.NEGATIVE_INFINITY) return '-inf';
  return String(n);
}

export function upper(s: string | undefined): string {
  return (s ?? '').toUpperCase();
}

/** Redis's glob (KEYS, SCAN MATCH): *, ?, [set], [^set], \x. */
export function globToRegExp(pattern: string): RegExp {
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
