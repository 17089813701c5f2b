// The sandbox side: a worker thread or a child process that loads one handler file and runs
// the jobs its consumer sends, one at a time. The handler gets a Job and a JobContext as in
// the consumer's own process; every context call (progress, checkpoint, update, children's
// results) is a message answered by the consumer, log lines are sent as they come (the
// consumer buffers them as ctx.log does), and an abort from the consumer aborts ctx.signal.
// Started three ways (see pool.ts): as a worker thread (workerData names the file), as a
// forked child (argv names it) or with `--check <file>` (load it, print whether it is usable).

import { writeSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';
import type { ContextCall, FromSandbox, SandboxJob, ToSandbox } from './messages.js';
import { toWireError } from './messages.js';

type Handler = (job: SandboxJob, ctx: unknown) => unknown;

/** The function a handler module exports: default, `handler`, or module.exports itself. */
function handlerOf(mod: Record<string, unknown>): Handler | undefined {
  const candidates = [
    mod.default,
    mod.handler,
    (mod.default as Record<string, unknown> | undefined)?.default,
  ];
  return candidates.find((c) => typeof c === 'function') as Handler | undefined;
}

/**
 * Imports a module named with `--import` (Node 20's worker threads ignore the flag). tsx's
 * `--import tsx` entry registers its hooks on the main thread only: a thread registers them
 * through its API instead, once.
 */
export async function preloadModule(spec: string): Promise<void> {
  if (spec !== 'tsx') {
    await import(spec);
    return;
  }
  const g = globalThis as { __echomqTsx?: boolean };
  if (g.__echomqTsx) return;
  g.__echomqTsx = true;
  const api = (await import('tsx/esm/api' as string)) as { register: () => void };
  api.register();
}

/** Loads the file (after the preload modules, e.g. a TS loader): its handler, or why it is unusable. */
async function load(file: string, preload: string[]): Promise<Handler | string> {
  try {
    for (const spec of preload) await preloadModule(spec);
    const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    return (
      handlerOf(mod) ??
      `the handler file ${file} exports no function (export default async (job, ctx) => ..., or export a function named handler)`
    );
  } catch (err) {
    return `the handler file ${file} could not be loaded: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/** Serves jobs over `send`/`onMessage` (a thread's port or a child's IPC channel). */
async function serve(
  file: string,
  preload: string[],
  send: (m: FromSandbox) => void,
  onMessage: (fn: (m: ToSandbox) => void) => void,
): Promise<void> {
  const handler = await load(file, preload);
  if (typeof handler === 'string') {
    send({ t: 'unusable', message: handler });
    return;
  }
  let seq = 0;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let controller = new AbortController();
  const call = (name: ContextCall, arg?: unknown): Promise<unknown> =>
    new Promise((resolve, reject) => {
      seq += 1;
      pending.set(seq, { resolve, reject });
      send({ t: 'call', seq, call: name, arg });
    });
  onMessage((m) => {
    if (m.t === 'reply') {
      const waiter = pending.get(m.seq);
      pending.delete(m.seq);
      if (!waiter) return;
      if (m.ok) waiter.resolve(m.value);
      else waiter.reject(Object.assign(new Error(m.error.message), m.error));
    } else if (m.t === 'abort') {
      controller.abort(Object.assign(new Error(m.reason.message), m.reason));
    } else if (m.t === 'run') {
      controller = new AbortController();
      const ctx = {
        signal: controller.signal,
        checkpoint: () => call('checkpoint').then(() => undefined),
        progress: (value: number | object) => call('progress', value).then(() => undefined),
        update: (data: unknown) => call('update', data).then(() => undefined),
        childrenResults: () => call('childrenResults'),
        childrenFailures: () => call('childrenFailures'),
        log: (line: string) => send({ t: 'log', line: String(line) }),
      };
      // Called at once (not a microtask later): an abort right behind the run finds it started.
      new Promise((resolve) => resolve(handler(m.job, ctx))).then(
        (result) => send({ t: 'done', result }),
        (err: unknown) => send({ t: 'failed', error: toWireError(err) }),
      );
    }
  });
  send({ t: 'ready' });
}

const args = process.argv.slice(2);
if (args[0] === '--check') {
  // A consumer checks its handler file once, in a process of its own, before it starts.
  const handler = await load(args[1] ?? '', args.slice(2));
  writeSync(1, typeof handler === 'string' ? handler : 'ok');
  process.exit(0); // a module that keeps the process alive (a timer, a socket) ends here too
} else if (parentPort) {
  const port = parentPort;
  const { file, preload } = workerData as { file: string; preload: string[] };
  await serve(
    file,
    preload,
    (m) => port.postMessage(m),
    (fn) => port.on('message', fn),
  );
} else if (process.send) {
  const send = process.send.bind(process);
  await serve(
    args[0] ?? '',
    [],
    (m) => send(m),
    (fn) => process.on('message', (m) => fn(m as ToSandbox)),
  );
  // The consumer went away (closed, or died): nothing is left to run for.
  process.on('disconnect', () => process.exit(0));
}
