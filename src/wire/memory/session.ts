// One connection to the memory engine (engine.ts): its database, its MULTI queue, the commands
// that came while a blocking read of it is parked. It runs each command through the command
// table and hands the engine what only the engine can do (park, signal, serve parked reads).
import type { MemoryClock } from './clock.js';
import { Blocked, COMMANDS, type CommandContext, runCommand, type ServerCommands } from './commands.js';
import { CommandError, type Database } from './keyspace.js';
import { OK, QUEUED, type Reply, RespError } from './resp.js';

/** What a session needs of its engine. */
export interface SessionHost extends ServerCommands {
  readonly clock: MemoryClock;
  db(index: number): Database;
  /** A write to `key` in database `db`. */
  signal(db: number, key: string): void;
  park(session: Session, blocked: Blocked): void;
  /** Retries the parked reads whose keys the command that just ran wrote. */
  serveSignaled(): void;
  forget(session: Session): void;
}

/** A blocking read waiting for a write to one of its keys, its timeout or CLIENT UNBLOCK. */
export interface Parked {
  session: Session;
  keys: Set<string>;
  retry: () => Reply | undefined;
  /** When the read times out on the engine's clock (a clock move may get there first). */
  until: number | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** One connection to the engine: its database, its MULTI queue, and whether it is parked. */
export class Session implements CommandContext {
  dbIndex = 0;
  clientName = '';
  lastCommand = 'NULL';
  parkedOn: Parked | undefined;
  readonly inScript = false;
  private multi: string[][] | undefined;
  private multiFailed = false;
  private readonly backlog: string[][] = [];
  private closed = false;

  constructor(
    private readonly engine: SessionHost,
    readonly id: number,
    private readonly send: (reply: Reply) => void,
    private readonly onQuit: () => void,
    private readonly onKill: () => void,
  ) {}

  get db(): Database {
    return this.engine.db(this.dbIndex);
  }

  get server(): ServerCommands {
    return this.engine;
  }

  nowMs(): number {
    return this.engine.clock.now();
  }

  nowUs(): number {
    return this.engine.clock.nowUs();
  }

  signal(key: string): void {
    this.engine.signal(this.dbIndex, key);
  }

  /** A command from the client: run now, or after the parked read ends. */
  feed(argv: string[]): void {
    if (this.closed) return;
    if (this.parkedOn || this.backlog.length > 0) {
      this.backlog.push(argv);
      return;
    }
    this.execute(argv);
  }

  /** The parked read ended with `reply`; the commands that came meanwhile run now. */
  resume(reply: Reply): void {
    this.send(reply);
    while (!this.parkedOn && this.backlog.length > 0 && !this.closed) this.execute(this.backlog.shift()!);
  }

  /** Drops the connection at once, as CLIENT KILL does. */
  kill(): void {
    this.close();
    this.onKill();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.backlog.length = 0;
    this.engine.forget(this);
  }

  private execute(argv: string[]): void {
    const name = (argv[0] ?? '').toUpperCase();
    this.lastCommand = name.toLowerCase();
    if (this.multi !== undefined && !['EXEC', 'DISCARD', 'MULTI', 'WATCH', 'QUIT'].includes(name)) {
      const cmd = COMMANDS[name];
      if (!cmd || (cmd.arity >= 0 ? argv.length !== cmd.arity : argv.length < -cmd.arity)) {
        this.multiFailed = true;
        this.send(runCommand(this, argv) as Reply);
        return;
      }
      this.multi.push(argv);
      this.send(QUEUED);
      return;
    }
    switch (name) {
      case 'MULTI':
        if (this.multi !== undefined) {
          this.send(new RespError('ERR MULTI calls can not be nested'));
          return;
        }
        this.multi = [];
        this.multiFailed = false;
        this.send(OK);
        return;
      case 'EXEC':
        this.exec();
        return;
      case 'DISCARD':
        if (this.multi === undefined) {
          this.send(new RespError('ERR DISCARD without MULTI'));
          return;
        }
        this.multi = undefined;
        this.send(OK);
        return;
      // One process, one thread: nothing changes a watched key between WATCH and EXEC but the
      // connection's own commands, so EXEC never aborts for a watched key.
      case 'WATCH':
      case 'UNWATCH':
        this.send(OK);
        return;
      case 'QUIT':
        this.send(OK);
        this.close();
        this.onQuit();
        return;
    }
    const reply = this.run(argv);
    if (reply instanceof Blocked) this.engine.park(this, reply);
    else this.send(reply);
    this.engine.serveSignaled();
  }

  private run(argv: string[]): Reply | Blocked {
    try {
      return runCommand(this, argv);
    } catch (err) {
      if (err instanceof CommandError) return err.reply;
      return new RespError(`ERR memory engine: ${(err as Error).message}`);
    }
  }

  private exec(): void {
    const queued = this.multi;
    this.multi = undefined;
    if (queued === undefined) {
      this.send(new RespError('ERR EXEC without MULTI'));
      return;
    }
    if (this.multiFailed) {
      this.send(new RespError('EXECABORT Transaction discarded because of previous errors.'));
      return;
    }
    const replies: Reply[] = [];
    for (const argv of queued) {
      const reply = this.run(argv);
      replies.push(reply instanceof Blocked ? null : reply);
    }
    this.send(replies);
    this.engine.serveSignaled();
  }
}
