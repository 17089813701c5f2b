// The memory engine: a Redis in this process, for tests, demos and single-process development
// (no persistence, no other process can reach it; not for production). It keeps the databases,
// the scripts and the clock, and serves connections (sessions) one command at a time, as Redis
// does on its one thread:
//   1. a command runs to completion, scripts included, before the next one starts (atomicity);
//   2. a blocking read that finds nothing parks its connection, which then answers nothing else
//      until a write to one of its keys, its timeout, CLIENT UNBLOCK or a clock move ends it;
//   3. writes signal the keys they touched, and parked reads are retried once the command that
//      wrote has finished.
// `memory://` is an engine of its own per connect; `memory://<name>` is shared by every
// connection in the process that names it.
import { EchoMQError } from '../../core/errors.js';
import { MemoryClock } from './clock.js';
import {
  Blocked,
  COMMANDS,
  type CommandContext,
  integer,
  runCommand,
  type ServerCommands,
} from './commands.js';
import { CommandError, Database } from './keyspace.js';
import { LuaScripts } from './lua.js';
import { OK, type Reply, RespError, Status } from './resp.js';
import { type Parked, Session } from './session.js';

const DATABASES = 16;
/** Commands a script may not call (they act on connections or run scripts themselves). */
const NOT_IN_SCRIPTS = new Set([
  'EVAL',
  'EVALSHA',
  'SCRIPT',
  'MULTI',
  'EXEC',
  'DISCARD',
  'WATCH',
  'CLIENT',
  'QUIT',
]);

const named = new Map<string, MemoryEngine>();

export class MemoryEngine implements ServerCommands {
  readonly clock = new MemoryClock();
  private readonly dbs: Database[] = [];
  private lua: LuaScripts | undefined;
  private readonly sessions = new Map<number, Session>();
  private readonly parked = new Set<Parked>();
  private signaled = new Set<string>();
  private nextId = 1;

  constructor(readonly name = '') {
    this.clock.watch(() => this.clockMoved());
  }

  /** The engine a `memory://` or `memory://<name>` URL stands for. */
  static forUrl(url: string): MemoryEngine {
    const m = /^memory:\/\/([^/?#]*)\/?$/.exec(url);
    if (!m) {
      throw new EchoMQError('EMQINPUT', `a memory engine URL is memory:// or memory://<name>, got ${url}`);
    }
    const name = decodeURIComponent(m[1]!);
    if (name === '') return new MemoryEngine();
    let engine = named.get(name);
    if (!engine) {
      engine = new MemoryEngine(name);
      named.set(name, engine);
    }
    return engine;
  }

  /** Forgets the shared engine `memory://<name>` (its data goes with it). */
  static drop(name: string): void {
    named.delete(name);
  }

  db(index: number): Database {
    let db = this.dbs[index];
    if (!db) {
      db = new Database(() => this.clock.now());
      this.dbs[index] = db;
    }
    return db;
  }

  /** A new connection; `send` receives each reply in order. */
  connect(send: (reply: Reply) => void, close: () => void, kill: () => void): Session {
    const session = new Session(this, this.nextId++, send, close, kill);
    this.sessions.set(session.id, session);
    return session;
  }

  forget(session: Session): void {
    this.sessions.delete(session.id);
    if (session.parkedOn) this.unpark(session.parkedOn);
  }

  /** A write to `key` in database `db`: parked reads on it are retried after the command. */
  signal(db: number, key: string): void {
    if (this.parked.size > 0) this.signaled.add(`${db}\n${key}`);
  }

  park(session: Session, blocked: Blocked): void {
    const p: Parked = {
      session,
      keys: new Set(blocked.keys.map((k) => `${session.dbIndex}\n${k}`)),
      retry: blocked.retry,
      until: blocked.timeoutMs > 0 ? this.clock.now() + blocked.timeoutMs : undefined,
      timer: undefined,
    };
    if (blocked.timeoutMs > 0) p.timer = setTimeout(() => this.wake(p, null), blocked.timeoutMs);
    session.parkedOn = p;
    this.parked.add(p);
  }

  /** Retries the parked reads whose keys were written by the command that just ran. */
  serveSignaled(): void {
    while (this.signaled.size > 0) {
      const keys = this.signaled;
      this.signaled = new Set();
      for (const p of [...this.parked]) {
        if (![...p.keys].some((k) => keys.has(k))) continue;
        const reply = p.retry();
        if (reply !== undefined) this.wake(p, reply);
      }
    }
  }

  private wake(p: Parked, reply: Reply): void {
    if (!this.parked.has(p)) return;
    this.unpark(p);
    p.session.resume(reply);
  }

  private unpark(p: Parked): void {
    this.parked.delete(p);
    if (p.timer) clearTimeout(p.timer);
    p.session.parkedOn = undefined;
  }

  /** A clock move ends the parked reads whose timeout has passed on the engine's clock. */
  private clockMoved(): void {
    const now = this.clock.now();
    for (const p of [...this.parked]) if (p.until !== undefined && p.until <= now) this.wake(p, null);
  }

  // ── the commands that act on the engine (ServerCommands) ──────────────────

  private scripts(): LuaScripts {
    this.lua ??= new LuaScripts();
    return this.lua;
  }

  eval(ctx: CommandContext, body: string, args: string[]): Reply {
    const sha = this.scripts().load(body);
    if (sha instanceof RespError) return sha;
    return this.evalsha(ctx, sha, args);
  }

  evalsha(ctx: CommandContext, sha: string, args: string[]): Reply {
    const numkeys = integer(args[0]);
    if (numkeys < 0) throw new CommandError("ERR Number of keys can't be negative");
    if (numkeys > args.length - 1)
      throw new CommandError("ERR Number of keys can't be greater than number of args");
    const keys = args.slice(1, 1 + numkeys);
    const argv = args.slice(1 + numkeys);
    // One clock reading per script call: TIME, stream ids and expiry inside it all read it. A
    // script runs in microseconds on Redis and in milliseconds here; a live clock would let the
    // ids of the events it writes drift past the TIME it priced its instants from.
    const us = ctx.nowUs();
    const scriptCtx: CommandContext = {
      ...contextOf(ctx),
      inScript: true,
      nowUs: () => us,
      nowMs: () => Math.floor(us / 1000),
    };
    return this.scripts().run(sha.toLowerCase(), keys, argv, (command) => {
      const name = (command[0] ?? '').toUpperCase();
      if (NOT_IN_SCRIPTS.has(name)) return new RespError('ERR This Redis command is not allowed from script');
      if (!COMMANDS[name]) return new RespError('ERR Unknown Redis command called from script');
      const reply = runCommand(scriptCtx, command);
      if (reply instanceof Blocked) return null;
      if (reply instanceof RespError && reply.message.startsWith('ERR wrong number of arguments')) {
        return new RespError('ERR Wrong number of args calling Redis command from script');
      }
      return reply;
    });
  }

  script(_ctx: CommandContext, [sub, ...rest]: string[]): Reply {
    switch ((sub ?? '').toUpperCase()) {
      case 'LOAD':
        if (rest.length !== 1)
          throw new CommandError("ERR wrong number of arguments for 'script|load' command");
        return this.scripts().load(rest[0]!);
      case 'EXISTS':
        return rest.map((sha) => (this.scripts().has(sha.toLowerCase()) ? 1 : 0));
      case 'FLUSH':
        this.scripts().flush();
        return OK;
      default:
        throw new CommandError(`ERR unknown subcommand '${sub}'. Try SCRIPT HELP.`);
    }
  }

  client(ctx: CommandContext, [sub, ...rest]: string[]): Reply {
    const session = (ctx as Session).id !== undefined ? (ctx as Session) : undefined;
    switch ((sub ?? '').toUpperCase()) {
      case 'ID':
        return session?.id ?? 0;
      case 'SETNAME':
        if (session) session.clientName = rest[0] ?? '';
        return OK;
      case 'GETNAME':
        return session?.clientName || null;
      case 'SETINFO':
        return OK;
      case 'UNBLOCK': {
        const target = this.sessions.get(integer(rest[0]));
        if (!target?.parkedOn) return 0;
        const mode = (rest[1] ?? 'TIMEOUT').toUpperCase();
        this.wake(
          target.parkedOn,
          mode === 'ERROR' ? new RespError('UNBLOCKED client unblocked via CLIENT UNBLOCK') : null,
        );
        return 1;
      }
      case 'LIST':
        return [...this.sessions.values()]
          .map(
            (s) =>
              `id=${s.id} addr=memory:${s.id} name=${s.clientName} db=${s.dbIndex} cmd=${s.lastCommand}\n`,
          )
          .join('');
      case 'KILL':
        return this.kill(session, rest);
      case 'INFO':
        return session
          ? `id=${session.id} addr=memory:${session.id} name=${session.clientName} db=${session.dbIndex}\n`
          : '';
      default:
        throw new CommandError(
          `ERR CLIENT ${sub} is not supported by the EchoMQ memory engine (it has no network clients)`,
        );
    }
  }

  /** CLIENT KILL with filters (ID, TYPE normal, SKIPME): the connection drops as a killed socket would. */
  private kill(caller: Session | undefined, args: string[]): Reply {
    if (args.length % 2 !== 0 || args.length === 0) {
      throw new CommandError('ERR CLIENT KILL takes filters (ID, TYPE, SKIPME) on the memory engine');
    }
    let id: number | undefined;
    let skipMe = true;
    for (let i = 0; i < args.length; i += 2) {
      const filter = args[i]!.toUpperCase();
      const value = args[i + 1]!;
      if (filter === 'ID') id = integer(value);
      else if (filter === 'SKIPME') skipMe = value.toLowerCase() !== 'no';
      else if (filter === 'TYPE') {
        if (!['normal', 'pubsub', 'master', 'replica', 'slave'].includes(value.toLowerCase())) {
          throw new CommandError(`ERR Unknown client type '${value}'`);
        }
        if (value.toLowerCase() !== 'normal') return 0;
      } else throw new CommandError(`ERR CLIENT KILL filter ${filter} is not supported by the memory engine`);
    }
    let n = 0;
    for (const s of [...this.sessions.values()]) {
      if ((id !== undefined && s.id !== id) || (skipMe && s === caller)) continue;
      s.kill();
      n += 1;
    }
    return n;
  }

  select(ctx: CommandContext, index: number): Reply {
    if (index < 0 || index >= DATABASES) throw new CommandError('ERR DB index is out of range');
    const session = ctx as Session;
    if (ctx.inScript || session.id === undefined) return OK;
    session.dbIndex = index;
    return OK;
  }

  flushall(): Reply {
    for (const db of this.dbs) db?.flush();
    return OK;
  }

  info(): Reply {
    const keyspace = this.dbs
      .map((db, i) =>
        db && db.data.size > 0
          ? `db${i}:keys=${db.keys().length},expires=${db.expires.size},avg_ttl=0\r\n`
          : '',
      )
      .join('');
    return [
      '# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nechomq_engine:memory\r\n',
      `# Clients\r\nconnected_clients:${this.sessions.size}\r\nblocked_clients:${this.parked.size}\r\n`,
      `# Memory\r\nused_memory:0\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n`,
      '# Persistence\r\nloading:0\r\n',
      `# Keyspace\r\n${keyspace}`,
    ].join('\r\n');
  }
}

function contextOf(ctx: CommandContext): CommandContext {
  return {
    db: ctx.db,
    inScript: ctx.inScript,
    nowMs: () => ctx.nowMs(),
    nowUs: () => ctx.nowUs(),
    signal: (key) => ctx.signal(key),
    server: ctx.server,
  };
}

export { Status };
