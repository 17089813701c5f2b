// ioredis connected to a memory engine: a Connector (ioredis's own seam for how a connection is
// made) that hands ioredis an in-process duplex stream instead of a TCP socket. ioredis then
// works unchanged, pipelines, MULTI, duplicate() and blocking reads included, and everything
// above it (the connector, consumers, tests' raw clients) cannot tell the difference.
import { Duplex } from 'node:stream';
import { Redis, type RedisOptions } from 'ioredis';
import type { MemoryEngine } from './engine.js';
import { encode, type Reply, RequestParser } from './resp.js';
import type { Session } from './session.js';

/** The options key that carries the engine through ioredis (duplicate() copies it). */
const ENGINE = 'echomqMemoryEngine';

class MemorySocket extends Duplex {
  readonly connecting = false;
  readonly remoteAddress = 'memory';
  readonly remotePort = 0;
  private readonly parser = new RequestParser();
  private readonly session: Session;
  private out: string[] = [];
  private flushing = false;
  private eof = false;

  constructor(engine: MemoryEngine) {
    super();
    this.session = engine.connect(
      (reply) => this.reply(reply),
      () => queueMicrotask(() => this.finish()),
      () => queueMicrotask(() => this.destroy()),
    );
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  setTimeout(): this {
    return this;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.parser.push(chunk);
    try {
      for (let argv = this.parser.next(); argv !== undefined; argv = this.parser.next())
        this.session.feed(argv);
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  }

  override _read(): void {}

  override _final(done: (err?: Error | null) => void): void {
    this.session.close();
    this.finish();
    done();
  }

  private finish(): void {
    if (this.eof) return;
    this.eof = true;
    this.push(null);
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.session.close();
    done(err);
  }

  /** Replies of one tick go out as one chunk (a pipeline's replies arrive together). */
  private reply(reply: Reply): void {
    encode(reply, this.out);
    if (this.flushing) return;
    this.flushing = true;
    queueMicrotask(() => {
      this.flushing = false;
      const text = this.out.join('');
      this.out = [];
      if (!this.eof && !this.destroyed) this.push(Buffer.from(text, 'latin1'));
    });
  }
}

/** ioredis's Connector interface, for a memory engine. */
class MemoryConnector {
  private stream: MemorySocket | undefined;
  firstError: Error | undefined;
  connecting = false;

  constructor(private readonly options: Record<string, unknown>) {}

  check(): boolean {
    return true;
  }

  connect(): Promise<MemorySocket> {
    this.connecting = true;
    return new Promise((resolve, reject) => {
      process.nextTick(() => {
        if (!this.connecting) {
          reject(new Error('Connection is closed.'));
          return;
        }
        this.stream = new MemorySocket(this.options[ENGINE] as MemoryEngine);
        resolve(this.stream);
      });
    });
  }

  disconnect(): void {
    this.connecting = false;
    const stream = this.stream;
    this.stream = undefined;
    if (stream && !stream.destroyed) {
      stream.end();
      stream.destroy();
    }
  }
}

/** An ioredis client on `engine`; its duplicates are on the same engine. */
export function memoryClient(engine: MemoryEngine, options: RedisOptions = {}): Redis {
  return new Redis({
    ...options,
    Connector: MemoryConnector as unknown as RedisOptions['Connector'],
    [ENGINE]: engine,
  } as RedisOptions);
}
