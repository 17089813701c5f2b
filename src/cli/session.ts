// A CLI run's connection, and the course most commands take: connect (no answer exits 3 and
// says what to do), check the queue exists (exit 2, naming the queues there are), read or call
// one verb, print the value as JSON under --json or as text for people, close.
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { Cluster, Redis } from 'ioredis';
import { isJobId } from '../core/ids.js';
import { Inspector } from '../inspect/inspector.js';
import { EchoMQ } from '../queue/echomq.js';
import { shownUrl as shown } from '../wire/unreachable.js';
import { printJson, write } from './render.js';

/**
 * Asks before a command that deletes for good: `--yes` skips the question; without a terminal
 * to ask on, the command refuses (exit 1) and says to pass --yes.
 */
export async function confirm(question: string, yes: boolean | undefined): Promise<void> {
  if (yes) return;
  if (!process.stdin.isTTY) {
    throw new CliError(EXIT.usage, `${question} Pass --yes to confirm (stdin is not a terminal).`);
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim()))
      throw new CliError(EXIT.usage, 'not confirmed: nothing was deleted');
  } finally {
    rl.close();
  }
}

/** Exit codes: what a script calling the CLI can switch on. */
export const EXIT = { ok: 0, usage: 1, notFound: 2, noServer: 3 } as const;

export const DEFAULT_URL = 'redis://127.0.0.1:6379';

/** A failure with the exit code and a message that says what to do. */
export class CliError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** The global options, as every command sees them. */
export interface Globals {
  url?: string;
  json?: boolean;
}

export function globals(cmd: Command): Globals {
  return cmd.optsWithGlobals() as Globals;
}

/** What each command group's register() is given besides the program. */
export interface CliContext {
  /** The package root: package.json, and bench/ in a source checkout. */
  root: string;
}

function urlOf(g: Globals): string {
  return g.url ?? process.env.REDIS_URL ?? DEFAULT_URL;
}

export { isConnectionError, shownUrl as shown } from '../wire/unreachable.js';

export interface Session {
  mq: EchoMQ;
  inspector: Inspector;
  url: string;
  close(): Promise<void>;
}

/**
 * One connection for the run. Before the first answer a refused server fails fast (three
 * tries); once connected, a dropped connection is retried (so `tail` survives a restart).
 */
async function connect(url: string): Promise<Session> {
  let ready = false;
  let lastError: Error | undefined;
  const options = {
    connectTimeout: 3000,
    maxRetriesPerRequest: 2,
    retryStrategy: (times: number) => (ready ? Math.min(times * 200, 2000) : times > 2 ? null : 200),
  };
  let client: Redis | Cluster = new Redis(url, options);
  client.on('error', (err: Error) => {
    lastError = err;
  });
  client.once('ready', () => {
    ready = true;
  });
  let mq: EchoMQ;
  try {
    client = await clusterIfEnabled(client, options);
    mq = await EchoMQ.connect({ redis: client });
  } catch (err) {
    client.disconnect();
    const reason = (lastError ?? (err as Error)).message;
    throw new CliError(
      EXIT.noServer,
      `cannot reach Redis at ${shown(url)} (${reason}) — start redis-server, or pass --url redis://host:port (or set REDIS_URL)`,
    );
  }
  return {
    mq,
    inspector: new Inspector(mq),
    url,
    async close() {
      await mq.close();
      await client.quit().catch(() => client.disconnect());
    },
  };
}

/**
 * The URL may name any node of a Redis Cluster: then the run goes through a Cluster client seeded
 * with it (same credentials), so every queue's slot is reached on its own shard, where a plain
 * connection would get MOVED for the queues of the other shards.
 */
async function clusterIfEnabled(
  client: Redis,
  options: { connectTimeout: number; maxRetriesPerRequest: number },
): Promise<Redis | Cluster> {
  const info = await client.info('cluster');
  if (!/cluster_enabled:1/.test(info)) return client;
  const { host, port, username, password, tls } = client.options;
  client.disconnect();
  const cluster = new Cluster([{ host: host ?? '127.0.0.1', port: port ?? 6379 }], {
    redisOptions: { ...options, username, password, tls },
    clusterRetryStrategy: (times) => (times > 2 ? null : 200),
  });
  cluster.on('error', () => {}); // reported through the calls that fail
  return cluster;
}

export async function withSession<T>(g: Globals, fn: (s: Session) => Promise<T>): Promise<T> {
  const session = await connect(urlOf(g));
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

export async function requireQueue(s: Session, queue: string): Promise<void> {
  if (await s.inspector.has(queue)) return;
  const known = await s.inspector.names();
  throw new CliError(
    EXIT.notFound,
    `no queue ${JSON.stringify(queue)} on ${shown(s.url)}${known.length > 0 ? ` (queues: ${known.slice(0, 10).join(', ')}${known.length > 10 ? ', …' : ''})` : ' (it has no queues yet)'} — \`echomq queues\` lists them`,
  );
}

export function noJob(queue: string, id: string): never {
  throw new CliError(EXIT.notFound, `no job ${id} in queue ${queue}`);
}

export function requireJobId(queue: string, id: string): void {
  if (!isJobId(id)) {
    throw new CliError(
      EXIT.notFound,
      `no job ${JSON.stringify(id)} in queue ${queue}: job ids start with JOB — \`echomq jobs ${queue}\` lists them`,
    );
  }
}

// ── a command's usual course ────────────────────────────────────────────────

/**
 * In a session (on `queue`, which must exist, when one is given), `run` reads or changes
 * something, and its value is printed as JSON under --json, else as `human` says.
 */
export async function report<T>(
  g: Globals,
  queue: string | undefined,
  run: (s: Session) => Promise<T>,
  human: (value: T, s: Session) => string,
): Promise<void> {
  await withSession(g, async (s) => {
    if (queue !== undefined) await requireQueue(s, queue);
    const value = await run(s);
    if (g.json) return printJson(value);
    write(human(value, s));
  });
}

/** `echomq <name> <arg>…`: a command of positional arguments only, its action still to give. */
function positional(program: Command, name: string, description: string, args: string[]): Command {
  const command = program.command(name).description(description);
  for (const arg of args) command.argument(arg);
  return command;
}

/**
 * `echomq <name> <queue> <id>`: `run` on one job (its id checked first) in a session, with the
 * options `options` declares (handed to `run` as parsed).
 */
export function jobCommand<T, O = Record<string, never>>(
  program: Command,
  name: string,
  description: string,
  run: (s: Session, queue: string, id: string, opts: O) => Promise<T>,
  human: (value: T) => string,
  options?: (command: Command) => Command,
): void {
  const command = positional(program, name, description, ['<queue>', '<id>']);
  (options ? options(command) : command).action(async (queue: string, id: string, opts: O, cmd: Command) => {
    requireJobId(queue, id);
    await report(globals(cmd), undefined, (s) => run(s, queue, id, opts), human);
  });
}

/** `echomq <name> <queue>`: one view of a queue that must exist, read in a session. */
export function queueView<T>(
  program: Command,
  name: string,
  description: string,
  read: (s: Session, queue: string) => Promise<T>,
  human: (value: T) => string,
): void {
  positional(program, name, description, ['<queue>']).action(async (queue: string, _opts, cmd: Command) => {
    await report(globals(cmd), queue, (s) => read(s, queue), human);
  });
}
