// A minimal RESP2 client on one net.Socket, for bench/client-cost.ts: how little Node work a
// call can take when nothing sits between the caller and the socket. Per call it builds one
// Buffer (the command in RESP; or hands the text to the socket as it is, `writeAs`), writes it,
// and queues the caller's promise; replies are parsed
// in place from what the socket read (`onread`: a buffer of our own, no Readable stream in
// between) and settle the queued promises in order, so any number of calls may be in flight
// (pipelining). It knows only the shapes EchoMQ's replies have: arrays, bulk and simple
// strings, integers, errors and nil. No reconnection, TLS, Cluster, AUTH or SELECT: it is a
// measuring stick, not a client for src/.
import { connect, type Socket } from 'node:net';

export type RespArg = string | number;

/** An error reply (`-ERR ...`): its message is the server's line. */
export class RespReplyError extends Error {
  override name = 'RespReplyError';
}

/** The reply is not all there yet: wait for more bytes. */
const INCOMPLETE = Symbol('incomplete');
type Parsed = unknown | typeof INCOMPLETE;

const CR = 13;
const CRLF = '\r\n';

/**
 * Parses replies out of a byte stream, one after the other. A chunk that ends inside a reply is
 * kept (only the unparsed tail) and joined with the next; replies here are small, so a partial
 * one is parsed again from its start rather than resumed.
 */
export class RespParser {
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;

  constructor(private readonly onReply: (reply: unknown) => void) {}

  /** `chunk` may be reused by the caller after this returns: a partial reply is copied out. */
  feed(chunk: Buffer): void {
    let buf: Buffer;
    if (this.pos < this.buf.length) buf = Buffer.concat([this.buf.subarray(this.pos), chunk]);
    else buf = chunk;
    this.buf = buf;
    this.pos = 0;
    while (this.pos < buf.length) {
      const start = this.pos;
      const reply = this.value();
      if (reply === INCOMPLETE) {
        // Keep our own copy of the tail: `chunk` is the socket's read buffer, reused next read.
        this.buf = Buffer.from(buf.subarray(start));
        this.pos = 0;
        return;
      }
      this.onReply(reply);
    }
    this.buf = Buffer.alloc(0);
    this.pos = 0;
  }

  /** The index of the CR ending the line that starts at `from`, or -1. */
  private lineEnd(from: number): number {
    const buf = this.buf;
    for (let i = from; i < buf.length; i++) if (buf[i] === CR) return i + 1 < buf.length ? i : -1;
    return -1;
  }

  /** The integer from `from` to the line's end (a length, a count or an integer reply). */
  private integer(from: number, end: number): number {
    const buf = this.buf;
    let i = from;
    let sign = 1;
    if (buf[i] === 45 /* - */) {
      sign = -1;
      i++;
    }
    let n = 0;
    for (; i < end; i++) n = n * 10 + (buf[i]! - 48);
    return sign * n;
  }

  private value(): Parsed {
    const buf = this.buf;
    const type = buf[this.pos];
    const end = this.lineEnd(this.pos + 1);
    if (end < 0) return INCOMPLETE;
    const from = this.pos + 1;
    switch (type) {
      case 36 /* $ */:
        {
          const len = this.integer(from, end);
          if (len < 0) {
            this.pos = end + 2;
            return null;
          }
          const dataEnd = end + 2 + len;
          if (dataEnd + 2 > buf.length) return INCOMPLETE;
          this.pos = dataEnd + 2;
          return buf.toString('utf8', end + 2, dataEnd);
        }
      case 42 /* * */:
        {
          const n = this.integer(from, end);
          this.pos = end + 2;
          if (n < 0) return null;
          const items = new Array<unknown>(n);
          for (let i = 0; i < n; i++) {
            if (this.pos >= buf.length) return INCOMPLETE;
            const item = this.value();
            if (item === INCOMPLETE) return INCOMPLETE;
            items[i] = item;
          }
          return items;
        }
      case 58 /* : */:
        this.pos = end + 2;
        return this.integer(from, end);
      case 43 /* + */:
        this.pos = end + 2;
        return buf.toString('utf8', from, end);
      case 45 /* - */:
        this.pos = end + 2;
        return new RespReplyError(buf.toString('utf8', from, end));
      default:
        throw new Error(`RESP: unexpected type byte ${String(type)} at ${this.pos}`);
    }
  }
}

/**
 * `command` and its `args` as RESP text: one string, numbers as their decimal text, each
 * string's length in UTF-8 bytes. (Writing each piece into a Buffer sized first costs more: a
 * call into C++ per piece, ~30 a command.)
 */
export function encodeText(command: string, args: readonly RespArg[]): string {
  let text = `*${args.length + 1}${CRLF}$${Buffer.byteLength(command)}${CRLF}${command}${CRLF}`;
  for (const a of args) {
    const arg = typeof a === 'string' ? a : String(a);
    text += `$${Buffer.byteLength(arg)}${CRLF}${arg}${CRLF}`;
  }
  return text;
}

/** The same as one Buffer. */
export function encodeCommand(command: string, args: readonly RespArg[]): Buffer {
  return Buffer.from(encodeText(command, args));
}

/**
 * How a call reaches the socket: 'buffer', one Buffer per call (encodeCommand); 'string', the
 * text handed to socket.write as it is (Node encodes it straight into the write: what ioredis
 * does with a command's RESP).
 */
export type WriteAs = 'buffer' | 'string';

interface Waiting {
  resolve(reply: unknown): void;
  reject(err: unknown): void;
}

export class RawRespClient {
  /** Calls sent and not yet answered, oldest first (the server answers in order). */
  private readonly waiting: Waiting[] = [];
  private head = 0;
  private readonly parser = new RespParser((reply) => this.settle(reply));

  private constructor(
    private readonly socket: Socket,
    private readonly writeAs: WriteAs,
  ) {
    socket.on('error', (err) => this.failAll(err));
    socket.on('close', () => this.failAll(new Error('connection closed')));
  }

  static connect(port: number, host = '127.0.0.1', writeAs: WriteAs = 'buffer'): Promise<RawRespClient> {
    return new Promise((resolve, reject) => {
      let client: RawRespClient | undefined;
      // Reads go straight into this buffer and to the parser: no Readable stream, no 'data'
      // event, no Buffer allocated per read.
      const readBuffer = Buffer.allocUnsafe(64 * 1024);
      const socket = connect({
        port,
        host,
        noDelay: true,
        onread: {
          buffer: readBuffer,
          callback: (n) => {
            client!.parser.feed(readBuffer.subarray(0, n));
            return true;
          },
        },
      });
      client = new RawRespClient(socket, writeAs);
      socket.once('connect', () => resolve(client!));
      socket.once('error', reject);
    });
  }

  /** Sends one command; resolves with its reply, rejects with RespReplyError on an error reply. */
  call(command: string, args: readonly RespArg[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (this.writeAs === 'buffer') this.socket.write(encodeCommand(command, args));
      else this.socket.write(encodeText(command, args));
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private settle(reply: unknown): void {
    const w = this.waiting[this.head++];
    if (!w) throw new Error('RESP: a reply with no call waiting');
    // All answered (always so for calls awaited one by one): start the queue over; while many
    // are in flight, drop the answered front now and then.
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    } else if (this.head > 1024) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    if (reply instanceof RespReplyError) w.reject(reply);
    else w.resolve(reply);
  }

  private failAll(err: unknown): void {
    for (let i = this.head; i < this.waiting.length; i++) this.waiting[i]!.reject(err);
    this.waiting.length = 0;
    this.head = 0;
  }
}
