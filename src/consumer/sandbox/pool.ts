// Sandboxed handlers: a pool of worker threads or child processes, each running entry.ts over
// one handler file, one job at a time. The consumer runs in its own process as ever (beat,
// claims, lease extensions, acknowledgements) and hands each job to a sandbox through
// `handler`, so a CPU-bound handler cannot starve the beat and a crash of the handler
// (process.exit, a signal, an out-of-memory thread) fails only that attempt: the sandbox is
// dropped and the next job gets a fresh one. Sandboxes start on demand (at most `size`) and
// stay for the next job; close() ends them all.

import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type ResourceLimits, Worker } from 'node:worker_threads';
import { atLeast, knownKeys } from '../../core/check.js';
import { EchoMQError, optionsObject } from '../../core/errors.js';
import type { Handler, Job, JobContext } from '../../core/types.js';
import { UnrecoverableError } from '../consumer.js';
import type { FromSandbox, ToSandbox, WireError } from './messages.js';
import { toWireError } from './messages.js';

export type SandboxKind = 'thread' | 'process';

export interface SandboxOptions {
  /**
   * Node options for each sandbox, e.g. `['--import', 'tsx']` to run a TypeScript handler
   * file. A thread sandbox imports the `--import` modules itself before the handler file (Node
   * 20's worker threads take no --import), and passes the rest to the Worker.
   */
  execArgv?: string[];
  /** Memory caps of each thread sandbox (worker_threads resourceLimits); threads only. */
  resourceLimits?: ResourceLimits;
  /**
   * After a job's signal aborts (cancelled, lease lost, closing), how long its handler may run
   * on before its sandbox is ended and replaced (a CPU-bound handler never looks at the
   * signal). Default 5000 ms.
   */
  abortGraceMs?: number;
}

const SANDBOX_OPTION_FIELDS: Record<keyof SandboxOptions, true> = {
  execArgv: true,
  resourceLimits: true,
  abortGraceMs: true,
};
const SANDBOX_OPTIONS: ReadonlySet<string> = new Set(Object.keys(SANDBOX_OPTION_FIELDS));

/** The sandbox side, as built (dist/…/entry.js) or, running from source, entry.ts under tsx. */
function entryFile(): { path: string; loader: string[] } {
  const js = fileURLToPath(new URL('./entry.js', import.meta.url));
  if (existsSync(js)) return { path: js, loader: [] };
  return { path: fileURLToPath(new URL('./entry.ts', import.meta.url)), loader: ['tsx'] };
}

/** `--import <spec>` pairs (and --import=<spec>) apart from the other options. */
function splitImports(execArgv: string[]): { imports: string[]; rest: string[] } {
  const imports: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const a = execArgv[i]!;
    if (a === '--import' && i + 1 < execArgv.length) imports.push(execArgv[++i]!);
    else if (a.startsWith('--import=')) imports.push(a.slice('--import='.length));
    else rest.push(a);
  }
  // A relative or absolute path is the caller's (its working directory); a bare name resolves
  // from the sandbox's entry, next to this package.
  const url = (spec: string) =>
    spec.startsWith('.') || isAbsolute(spec) ? pathToFileURL(resolve(spec)).href : spec;
  return { imports: imports.map(url), rest };
}

/** Refuses what cannot be sandboxed before anything starts: a bad option, a missing or unusable file. */
export function checkSandbox(
  file: unknown,
  kind: unknown,
  options: SandboxOptions | undefined,
): { path: string; kind: SandboxKind; options: SandboxOptions } {
  if (kind !== 'thread' && kind !== 'process') {
    throw new EchoMQError('EMQINPUT', `sandbox must be 'thread' or 'process', got ${String(kind)}`);
  }
  const opts = knownKeys(optionsObject(options, 'sandboxOptions'), SANDBOX_OPTIONS, 'sandbox option');
  if (
    opts.execArgv !== undefined &&
    !(Array.isArray(opts.execArgv) && opts.execArgv.every((a) => typeof a === 'string'))
  ) {
    throw new EchoMQError('EMQINPUT', 'sandboxOptions.execArgv must be an array of strings');
  }
  if (opts.abortGraceMs !== undefined) atLeast(opts.abortGraceMs, 'abortGraceMs', 0);
  if (opts.resourceLimits !== undefined && kind !== 'thread') {
    throw new EchoMQError('EMQINPUT', "resourceLimits applies to sandbox 'thread' only (a process has none)");
  }
  if (typeof file !== 'string' || file === '') {
    throw new EchoMQError('EMQINPUT', 'a sandboxed consumer takes the path of a handler file');
  }
  const path = resolve(file);
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new EchoMQError(
      'EMQINPUT',
      `the handler file ${path} does not exist (a relative path is resolved from the working directory ${process.cwd()}); consume() takes a handler function, or the path of a handler file to run in sandboxes`,
    );
  }
  // Loading the file (what it exports) is checked in a process of its own: its top level
  // never runs in the consumer's process, and the answer comes before consume() returns.
  const entry = entryFile();
  const loader = entry.loader.flatMap((m) => ['--import', m]);
  const check = spawnSync(
    process.execPath,
    [...loader, ...(opts.execArgv ?? []), entry.path, '--check', path],
    { encoding: 'utf8', timeout: 60_000 },
  );
  const said = check.stdout?.trim() ?? '';
  if (said !== 'ok') {
    const why = said || check.stderr?.trim() || `the check ended with ${check.signal ?? check.status}`;
    throw new EchoMQError('EMQINPUT', why);
  }
  return { path, kind, options: opts };
}

/** A job running in a sandbox: its context, and how its run ends. */
interface Run {
  ctx: JobContext;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  onAbort: () => void;
  graceTimer?: NodeJS.Timeout;
}

/** One thread or process; `run` is the job it runs now, if any. */
class Sandbox {
  run: Run | undefined;
  exited = false;
  /** Set once the handler file loaded; a sandbox takes a job only then. */
  readonly ready: Promise<void>;
  private crash: string | undefined;
  private readonly thread: Worker | undefined;
  private readonly child: ChildProcess | undefined;

  constructor(
    readonly kind: SandboxKind,
    file: string,
    options: SandboxOptions,
    private readonly onExit: (box: Sandbox) => void,
  ) {
    const entry = entryFile();
    const { imports, rest } = splitImports(options.execArgv ?? []);
    let readyOk!: () => void;
    let readyFail!: (e: Error) => void;
    this.ready = new Promise((res, rej) => {
      readyOk = res;
      readyFail = rej;
    });
    this.ready.catch(() => {}); // a run awaiting it sees the failure; no unhandled rejection
    const onMessage = (m: FromSandbox) => {
      if (m.t === 'ready') readyOk();
      else if (m.t === 'unusable') {
        readyFail(new EchoMQError('EMQINPUT', m.message));
        this.end();
      } else this.message(m);
    };
    if (kind === 'thread') {
      const workerData = { file, preload: [...entry.loader, ...imports] };
      // From source, the entry itself needs the TS loader before it can load: a bootstrap.
      const thread =
        entry.loader.length > 0
          ? new Worker(
              `globalThis.__echomqTsx = true; import('tsx/esm/api').then((a) => { a.register(); return import(${JSON.stringify(pathToFileURL(entry.path).href)}); })`,
              { eval: true, workerData, execArgv: rest, resourceLimits: options.resourceLimits ?? {} },
            )
          : new Worker(entry.path, {
              workerData,
              execArgv: rest,
              resourceLimits: options.resourceLimits ?? {},
            });
      thread.on('message', onMessage);
      thread.on('error', (err) => {
        this.crash = err.message;
      });
      thread.on('exit', (code) => this.exit(`the sandbox thread exited with code ${code}`, readyFail));
      this.thread = thread;
    } else {
      const loader = entry.loader.flatMap((m) => ['--import', m]);
      const child = fork(entry.path, [file], {
        execArgv: [...loader, ...(options.execArgv ?? [])],
        serialization: 'advanced',
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      child.on('message', (m) => onMessage(m as FromSandbox));
      child.on('error', (err) => {
        this.crash = err.message;
      });
      child.on('exit', (code, signal) =>
        this.exit(
          signal
            ? `the sandbox process ${child.pid} was killed by ${signal}`
            : `the sandbox process ${child.pid} exited with code ${code}`,
          readyFail,
        ),
      );
      this.child = child;
    }
  }

  send(m: ToSandbox): void {
    if (this.exited) return;
    if (this.thread) this.thread.postMessage(m);
    else if (this.child?.connected) this.child.send(m, () => {});
  }

  /** Starts `job` here; resolves or rejects as its handler ends (or its sandbox dies). */
  start(job: Job, ctx: JobContext, abortGraceMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.send({ t: 'abort', reason: toWireError(ctx.signal.reason) });
        // One timer, and only for an aborted job: a handler that ignores its signal is ended.
        run.graceTimer ??= setTimeout(() => this.end(), abortGraceMs);
      };
      const run: Run = { ctx, resolve, reject, onAbort };
      this.run = run;
      const { id, name, data, attempts, maxAttempts } = job;
      this.send({ t: 'run', job: { id, name, data, attempts, maxAttempts } });
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends the sandbox; a job running in it fails with the exit's reason (see exit). */
  end(): void {
    if (this.exited) return;
    if (this.thread) void this.thread.terminate();
    else this.child?.kill('SIGKILL');
  }

  private settle(): Run | undefined {
    const run = this.run;
    this.run = undefined;
    if (run) {
      clearTimeout(run.graceTimer);
      run.ctx.signal.removeEventListener('abort', run.onAbort);
    }
    return run;
  }

  private message(m: FromSandbox): void {
    const run = this.run;
    if (!run) return;
    if (m.t === 'log') run.ctx.log(m.line);
    else if (m.t === 'done') this.settle()?.resolve(m.result);
    else if (m.t === 'failed') this.settle()?.reject(fromWire(m.error));
    else if (m.t === 'call') {
      const ctx = run.ctx;
      const answer =
        m.call === 'checkpoint'
          ? ctx.checkpoint()
          : m.call === 'progress'
            ? ctx.progress(m.arg as number | object)
            : m.call === 'update'
              ? ctx.update(m.arg)
              : m.call === 'childrenResults'
                ? ctx.childrenResults()
                : ctx.childrenFailures();
      answer.then(
        (value) => this.send({ t: 'reply', seq: m.seq, ok: true, value: value ?? null }),
        (err: unknown) => this.send({ t: 'reply', seq: m.seq, ok: false, error: toWireError(err) }),
      );
    }
  }

  private exit(how: string, readyFail: (e: Error) => void): void {
    if (this.exited) return;
    this.exited = true;
    const reason = this.crash ? `${how} (${this.crash})` : how;
    readyFail(new EchoMQError('EMQSANDBOX', reason));
    const run = this.settle();
    if (run) run.reject(new EchoMQError('EMQSANDBOX', `${reason} while running the job`));
    this.onExit(this);
  }
}

/** A handler's thrown error as the consumer stores it (UnrecoverableError keeps its meaning). */
function fromWire(e: WireError): Error {
  let err: Error;
  if (e.name === 'UnrecoverableError') err = new UnrecoverableError(e.message);
  else {
    err = new Error(e.message);
    err.name = e.name;
  }
  if (e.stack) err.stack = e.stack;
  if (e.code) Object.assign(err, { code: e.code });
  return err;
}

export class SandboxPool {
  private readonly idle: Sandbox[] = [];
  private readonly all = new Set<Sandbox>();
  private readonly waiting: ((box: Sandbox) => void)[] = [];
  private closed = false;
  private readonly abortGraceMs: number;

  constructor(
    private readonly file: string,
    private readonly kind: SandboxKind,
    private readonly size: number,
    private readonly options: SandboxOptions,
  ) {
    this.abortGraceMs = options.abortGraceMs ?? 5000;
  }

  /** The consumer's handler: runs each job in a sandbox of this pool. */
  readonly handler: Handler<unknown, unknown> = async (job, ctx) => {
    const box = await this.acquire();
    try {
      await box.ready;
      return await box.start(job, ctx, this.abortGraceMs);
    } finally {
      this.release(box);
    }
  };

  /** Sandboxes alive now (threads or processes). */
  get sandboxes(): number {
    return this.all.size;
  }

  private acquire(): Promise<Sandbox> {
    if (this.closed) return Promise.reject(new EchoMQError('EMQCLOSED', 'the sandbox pool is closed'));
    const box = this.idle.pop();
    if (box) return Promise.resolve(box);
    if (this.all.size < this.size) {
      const fresh = new Sandbox(this.kind, this.file, this.options, (b) => this.dropped(b));
      this.all.add(fresh);
      return Promise.resolve(fresh);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(box: Sandbox): void {
    if (box.exited) return; // dropped(): a waiter gets a fresh sandbox from there
    const next = this.waiting.shift();
    if (next) next(box);
    else this.idle.push(box);
  }

  /** A sandbox exited (crashed, or was ended): forget it; a waiting job starts a fresh one. */
  private dropped(box: Sandbox): void {
    this.all.delete(box);
    const at = this.idle.indexOf(box);
    if (at >= 0) this.idle.splice(at, 1);
    if (this.closed) return;
    const next = this.waiting.shift();
    if (next) {
      const fresh = new Sandbox(this.kind, this.file, this.options, (b) => this.dropped(b));
      this.all.add(fresh);
      next(fresh);
    }
  }

  /** Ends every sandbox (a job still running in one fails with EMQSANDBOX; close hands those back first). */
  close(): void {
    this.closed = true;
    for (const box of this.all) box.end();
  }
}
