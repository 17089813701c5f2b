// RESP2, the Redis wire format, both ways: the requests a client writes (arrays of bulk strings,
// or inline commands) parsed incrementally, and replies encoded. Strings are latin1 here (one
// char per byte), so lengths are byte lengths and any payload passes through unchanged.

/** A reply as the engine produces it; `RespError` and `Status` mark the two kinds of simple string. */
export type Reply = string | number | null | Reply[] | RespError | Status;

export class RespError {
  constructor(readonly message: string) {}
}

export class Status {
  constructor(readonly text: string) {}
}

export const OK = new Status('OK');
export const QUEUED = new Status('QUEUED');

/** Collects a client's bytes and yields whole commands as they complete. */
export class RequestParser {
  private buf = '';
  private pos = 0;

  push(chunk: Buffer): void {
    this.buf =
      this.pos < this.buf.length
        ? this.buf.slice(this.pos) + chunk.toString('latin1')
        : chunk.toString('latin1');
    this.pos = 0;
  }

  /** The next whole command, or undefined until more bytes arrive. */
  next(): string[] | undefined {
    if (this.pos >= this.buf.length) return undefined;
    if (this.buf[this.pos] !== '*') return this.inline();
    const start = this.pos;
    const header = this.line(this.pos + 1);
    if (header === undefined) return undefined;
    let at = header.end;
    const count = Number(header.text);
    const out: string[] = [];
    for (let i = 0; i < count; i++) {
      if (this.buf[at] !== '$') {
        if (at >= this.buf.length) return this.rewind(start);
        throw new Error(`Protocol error: expected '$', got '${this.buf[at]}'`);
      }
      const len = this.line(at + 1);
      if (len === undefined) return this.rewind(start);
      const n = Number(len.text);
      if (len.end + n + 2 > this.buf.length) return this.rewind(start);
      out.push(this.buf.slice(len.end, len.end + n));
      at = len.end + n + 2;
    }
    this.pos = at;
    return out;
  }

  private rewind(start: number): undefined {
    this.pos = start;
    return undefined;
  }

  private inline(): string[] | undefined {
    const l = this.line(this.pos);
    if (l === undefined) return undefined;
    this.pos = l.end;
    const words = l.text.trim().split(/\s+/).filter(Boolean);
    return words.length > 0 ? words : this.next();
  }

  private line(from: number): { text: string; end: number } | undefined {
    const cr = this.buf.indexOf('\r\n', from);
    if (cr < 0) return undefined;
    return { text: this.buf.slice(from, cr), end: cr + 2 };
  }
}

/** Appends the RESP2 encoding of `reply` to `out` (latin1 text, one char per byte). */
export function encode(reply: Reply, out: string[]): void {
  if (reply === null) out.push('$-1\r\n');
  else if (typeof reply === 'string') out.push(`$${reply.length}\r\n`, reply, '\r\n');
  else if (typeof reply === 'number') out.push(`:${reply}\r\n`);
  else if (Array.isArray(reply)) {
    out.push(`*${reply.length}\r\n`);
    for (const r of reply) encode(r, out);
  } else if (reply instanceof Status) out.push(`+${reply.text}\r\n`);
  else out.push(`-${reply.message.replace(/[\r\n]+/g, ' ')}\r\n`);
}
