#!/usr/bin/env node
// The `echomq` command: a terminal onto the queues on one Redis, reading through the Inspector
// and writing only through the Queue's verbs. A run, in order:
//   1. parse   — commander reads the command line; a usage error exits 1
//   2. connect — one connection to --url / REDIS_URL; no answer exits 3 and says what to do
//   3. act     — the command reads (Inspector) or calls one verb (Queue)
//   4. print   — a table for people, or JSON with --json; exit 0, 2 when something is not found
// The files of this folder, one part each:
//   index.ts   — the program, its global options, the exit codes, main (this file)
//   session.ts — the connection, a command's usual course (connect, check, run, print), CliError
//   args.ts    — parsers of option values (whole numbers, durations, instants, stream ids)
//   render.ts  — tables, times, colours, progress bars: what is printed and how
//   read.ts, write.ts, serve.ts — the commands, by what they do; each registers its own
import { readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command, CommanderError } from 'commander';
import { EchoMQError } from '../core/errors.js';
import { registerReads } from './read.js';
import { registerServe } from './serve.js';
import { type CliContext, CliError, DEFAULT_URL, EXIT, isConnectionError } from './session.js';
import { registerWrites } from './write.js';

export { CliError, EXIT } from './session.js';

/** The package root (two floors up from src/cli/ and from dist/cli/): package.json, bench/. */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The command groups, in the order `echomq --help` lists them. */
const GROUPS: readonly ((program: Command, ctx: CliContext) => void)[] = [
  registerReads,
  registerWrites,
  registerServe,
];

function version(): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

/** Builds the command tree; `main` runs it. */
export function buildProgram(): Command {
  const program = new Command('echomq')
    .description('Inspect and operate EchoMQ queues on a Redis server.')
    .version(version())
    .option('--url <url>', `Redis to talk to (default: $REDIS_URL, then ${DEFAULT_URL})`)
    .option('--json', 'print JSON (for programs) instead of tables')
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  const ctx: CliContext = { root: ROOT };
  for (const register of GROUPS) register(program, ctx);
  return program;
}

/** The exit code an error maps to. */
function exitCodeOf(err: unknown): number {
  if (err instanceof CliError) return err.exitCode;
  if (err instanceof EchoMQError) return err.code === 'EMQNOJOB' ? EXIT.notFound : EXIT.usage;
  if (isConnectionError(err)) return EXIT.noServer;
  return EXIT.usage;
}

function messageOf(err: unknown): string {
  if (err instanceof EchoMQError && err.code === 'EMQSTATE') return err.message.replace(/^EMQSTATE: /, '');
  if (err instanceof EchoMQError && err.code === 'EMQNOJOB') return err.message.replace(/^EMQNOJOB: /, '');
  if (isConnectionError(err)) {
    return `lost the connection to Redis (${(err as Error).message}) — check the server is up, or pass --url`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Runs the CLI over `argv` (as process.argv: node, script, ...) and resolves with the exit code. */
export async function main(argv: string[] = process.argv): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage; // commander printed it
    process.stderr.write(`echomq: ${messageOf(err)}\n`);
    return exitCodeOf(err);
  }
}

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(resolve(entry)) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return pathToFileURL(resolve(entry)).href === import.meta.url;
  }
}

if (isEntryPoint()) {
  // `echomq … | head`: the reader went away; stop quietly, as Unix tools do, not with a stack.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(EXIT.ok);
    throw err;
  });
  process.exitCode = await main();
}
