// Stream commands: XADD, XRANGE/XREVRANGE, XREAD (blocking too), XTRIM, XDEL.

import { CommandError } from '../keyspace.js';
import type { Reply } from '../resp.js';
import { compareIds, formatId, type StreamEntry, type StreamId } from '../stream.js';
import { Blocked, type CommandContext } from './context.js';
import { integer, SYNTAX, upper } from './parse.js';

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

export function xadd(ctx: CommandContext, [key, ...rest]: string[]): Reply {
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

export function xrange(ctx: CommandContext, [key, a, b, ...opts]: string[], rev: boolean): Reply {
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

export function xread(ctx: CommandContext, args: string[]): Reply | Blocked {
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

export function xtrim(ctx: CommandContext, [key, strategy, ...rest]: string[]): Reply {
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

export function xdel(ctx: CommandContext, [key, ...ids]: string[]): Reply {
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
