// What crosses the boundary between a consumer and one of its sandboxes (a worker thread or a
// child process running entry.ts): the same messages either way, sent with structured clone
// (postMessage, or IPC with serialization 'advanced'). One job runs in a sandbox at a time.

/** The job as a sandboxed handler sees it (`Job` without the consumer-side fields). */
export interface SandboxJob {
  id: string;
  name: string | undefined;
  data: unknown;
  attempts: number;
  maxAttempts: number;
}

/** An error as it crosses: enough to rebuild it (and to tell UnrecoverableError by its name). */
export interface WireError {
  name: string;
  message: string;
  stack: string | undefined;
  code?: string;
}

/** The context calls a handler makes that need the consumer (each answered by a `reply`). */
export type ContextCall = 'checkpoint' | 'progress' | 'update' | 'childrenResults' | 'childrenFailures';

export type ToSandbox =
  | { t: 'run'; job: SandboxJob }
  | { t: 'abort'; reason: WireError }
  | { t: 'reply'; seq: number; ok: true; value: unknown }
  | { t: 'reply'; seq: number; ok: false; error: WireError };

export type FromSandbox =
  /** The handler file loaded and exports a function: the sandbox takes jobs. */
  | { t: 'ready' }
  /** The handler file could not be loaded, or exports no function: the message says which. */
  | { t: 'unusable'; message: string }
  | { t: 'call'; seq: number; call: ContextCall; arg: unknown }
  | { t: 'log'; line: string }
  | { t: 'done'; result: unknown }
  | { t: 'failed'; error: WireError };

export function toWireError(err: unknown): WireError {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return {
      name: err.name,
      message: err.message,
      stack: err.stack,
      ...(typeof code === 'string' ? { code } : {}),
    };
  }
  return { name: 'Error', message: String(err), stack: undefined };
}
