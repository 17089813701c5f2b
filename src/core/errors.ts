// One error type for the whole library: every failure carries a stable `code` that
// callers (and other runtimes reading the same protocol) can switch on.

/**
 * The protocol's error codes (scripts reply with them as `<CODE> <message>`) and the
 * runtime's own. See protocol/SPEC.md, "Error codes".
 */
export type ErrorCode =
  | 'EMQKIND' // a job id that is not JOB-namespaced
  | 'EMQLEASE' // a write fenced by a lease token that is no longer the job's
  | 'EMQNOJOB' // no job row with that id
  | 'EMQSTATE' // the verb does not apply to the job's current state
  | 'EMQINPUT' // an argument the runtime refuses before the wire
  | 'EMQDATA' // bad data in the store: a row field no script writes (the job was dead-lettered)
  | 'EMQOOM' // Redis is out of memory (maxmemory with noeviction): the call wrote nothing
  | 'EMQCRON' // a cron pattern or time zone that cannot be parsed
  | 'EMQTOOBIG' // a payload over the configured size limit
  | 'EMQCLOSED' // a call after close()
  | 'EMQCANCELLED' // the job was cancelled (checkpoint, waitFor)
  | 'EMQTIMEOUT' // a wait that ran out of time
  | 'EMQJOBFAILED' // waitFor: the job ended dead
  | 'EMQNOSERVER' // no redis-server to talk to
  | 'EMQPROTOCOL' // a queue written by an incompatible protocol version
  | 'EMQFLEET' // migrate: a live consumer does not speak the version it steps to; a consumer's recovery differs from the queue's meta the module's timers run
  | 'EMQNOMODULE' // connect({ module: 'require' }) on a server without the native module
  | 'EMQNATIVE' // the module's EMQ.COMPLETE outside its plain case (nothing written): the connector sends the script instead, so callers never see it
  | 'EMQSANDBOX' // a sandboxed handler's thread or process ended while running a job
  | 'EMQDURABILITY'; // a write the replicas asked for did not confirm in time (durability)

export class EchoMQError extends Error {
  override readonly name = 'EchoMQError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}

const SCRIPT_ERROR = /^(EMQ[A-Z]+) (.*)$/s;

/**
 * Turns a script's `EMQxxx message` error reply into an EchoMQError, and Redis's OOM refusal
 * (maxmemory reached under noeviction) into EMQOOM; other errors pass through.
 */
export function fromScriptError(err: unknown): unknown {
  if (err instanceof Error) {
    const m = SCRIPT_ERROR.exec(err.message);
    if (m) return new EchoMQError(m[1] as ErrorCode, m[2] ?? '', { cause: err });
    if (err.message.startsWith('OOM ')) {
      return new EchoMQError(
        'EMQOOM',
        'Redis is out of memory (maxmemory reached, eviction off) and refused the call; nothing was written. ' +
          'Retry it once memory is freed: consumers completing jobs free it (retention trims ended jobs), ' +
          'as do a lower retention, clean(), or a larger maxmemory',
        { cause: err },
      );
    }
  }
  return err;
}

/** Options as an object: undefined is no options; anything else that is not a plain object is refused. */
export function optionsObject<T extends object>(value: T | null | undefined, what: string): T {
  if (value === undefined) return {} as T;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
    throw new EchoMQError('EMQINPUT', `${what} must be an object, got ${got}`);
  }
  return value;
}

/** A value as an error message shows it; never throws, whatever the value (hostile objects too). */
export function showValue(value: unknown): string {
  try {
    return String(value);
  } catch {
    return typeof value;
  }
}

/**
 * What a handler threw, as an Error whose message keeps it: an Error as it is, a string as its
 * message, anything else as its JSON (cut at `maxBytes`; String() when it has none), so a
 * thrown `{ code: 'E42' }` is stored as that and not as `[object Object]`. `cause` is the value.
 */
export function thrownError(value: unknown, maxBytes: number): Error {
  if (value instanceof Error) return value;
  if (typeof value === 'string') return new Error(value, { cause: value });
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    text = undefined; // a cycle, a BigInt: fall back to its String()
  }
  if (text === undefined) text = showValue(value);
  if (text.length > maxBytes) text = `${text.slice(0, maxBytes)}…`;
  return new Error(`a non-Error was thrown: ${text}`, { cause: value });
}
