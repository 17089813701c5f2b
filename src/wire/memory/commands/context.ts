// What a memory-engine command sees of the engine around it, and the shape of a command.

import type { Database } from '../keyspace.js';
import type { Reply } from '../resp.js';

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

export type Run = (ctx: CommandContext, args: string[]) => Reply | Blocked;

export interface Command {
  /** Redis's arity: the exact count of words with the name when >= 0, the least count when < 0. */
  arity: number;
  run: Run;
}
