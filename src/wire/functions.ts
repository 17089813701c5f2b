// FCALL as the scripts' transport (connect's `scripts: 'functions'`, the default): the library of
// src/wire/library.ts, loaded with FUNCTION LOAD where a call finds it missing (a new server, a
// restart, a failover, a FUNCTION FLUSH), on every primary of a Cluster, and the call sent once
// more. Where the server refuses FUNCTION or FCALL (an ACL user without them, a server older
// than 7.0) the connection goes on with EVALSHA for good, with no error to the caller. The same
// steps carry a single call (Connector.run) and the pipelined writes of durability.ts.
import { Cluster } from 'ioredis';
import { EchoMQError } from '../core/errors.js';
import { buildLibrary, type Library } from './library.js';
import { loadScripts, type Script } from './scripts.js';

/** How scripts are sent: 'functions' (FCALL where the server allows it, else EVALSHA) or 'eval'. */
export type ScriptsMode = 'functions' | 'eval';
const SCRIPTS_MODES: readonly ScriptsMode[] = ['functions', 'eval'];

export function scriptsModeOf(value: unknown): ScriptsMode {
  if (value === undefined) return 'functions';
  if ((SCRIPTS_MODES as readonly unknown[]).includes(value)) return value as ScriptsMode;
  throw new EchoMQError(
    'EMQINPUT',
    `scripts must be 'functions' (FCALL where the server allows it, the default) or 'eval' (EVALSHA always), got ${JSON.stringify(value)}`,
  );
}

let built: Library | undefined;
/** The library of protocol/scripts, generated once per process. */
export function library(): Library {
  built ??= buildLibrary(loadScripts().values());
  return built;
}

/**
 * One sending of a script call: FCALL of its function, EVALSHA of its sha, or EVAL of its body,
 * each followed by the call's key count, KEYS and ARGV.
 */
export interface Send {
  readonly command: 'FCALL' | 'EVALSHA' | 'EVAL';
  readonly target: string;
  /** An FCALL sent once more after the library was loaded: a second "not found" goes by EVALSHA. */
  readonly reloaded?: boolean;
}

/** The minimal client surface used here: one command, and a Cluster's primaries. */
type Client = { call(...args: (string | number)[]): Promise<unknown> };

/**
 * How a connector sends the protocol's scripts, one sending at a time: `first` says how a call
 * goes, `after` what a refused sending becomes. A single call (Connector.run) and a pipelined
 * batch (durability's writes, each answered with its own error) walk the same steps:
 * FCALL -> (load the library) FCALL -> EVALSHA -> (NOSCRIPT) EVAL.
 */
export class ScriptTransport {
  /** False once the server refused FUNCTION or FCALL (or `scripts: 'eval'`): EVALSHA from then on. */
  private functions: boolean;
  /** Each script's first sending while functions are in use (made once, not per call). */
  private readonly fcalls = new Map<Script, Send>();
  /** Each node's FUNCTION LOAD in flight. */
  private readonly loading = new Map<Client, Promise<void>>();

  constructor(
    private readonly client: Client | Cluster,
    mode: ScriptsMode,
  ) {
    this.functions = mode === 'functions';
  }

  first(script: Script): Send {
    if (!this.functions) return evalsha(script);
    let send = this.fcalls.get(script);
    if (send === undefined) {
      const fn = library().functions.get(script.name);
      // A script not made from protocol/scripts (another directory's copy) is not in the library.
      send = fn?.sha === script.sha ? { command: 'FCALL', target: fn.name } : evalsha(script);
      this.fcalls.set(script, send);
    }
    return send;
  }

  /** How to send `script` again after `sent` failed with `err`; undefined when the error stands. */
  async after(script: Script, sent: Send, err: unknown): Promise<Send | undefined> {
    if (sent.command === 'EVALSHA') return message(err).startsWith('NOSCRIPT') ? evalOf(script) : undefined;
    if (sent.command !== 'FCALL') return undefined;
    if (refused(err)) {
      this.functions = false;
      return evalsha(script);
    }
    if (!notFound(err)) return undefined;
    // Flushed again between the load and the call (or a node the load did not reach): this
    // call goes by EVALSHA, the next one loads again.
    if (sent.reloaded || !(await this.load())) return evalsha(script);
    return { ...sent, reloaded: true };
  }

  /**
   * Loads the library on every primary (the one server otherwise). A call that found it missing
   * shares a node's FUNCTION LOAD only while that load is unanswered: one answered already may
   * have run before the FUNCTION FLUSH this call met, so that node gets a new one.
   */
  private async load(): Promise<boolean> {
    const nodes: Client[] = this.client instanceof Cluster ? this.client.nodes('master') : [this.client];
    try {
      await Promise.all(nodes.map((node) => this.loadOn(node)));
      return true;
    } catch (err) {
      if (refused(err)) {
        this.functions = false;
        return false;
      }
      throw err;
    }
  }

  private loadOn(node: Client): Promise<void> {
    let loading = this.loading.get(node);
    if (!loading) {
      loading = node
        .call('FUNCTION', 'LOAD', library().code)
        .then(
          () => undefined,
          (err: unknown) => {
            // Another process (or this one's other connection) loaded the same source first.
            if (!/^ERR Library .* already exists/i.test(message(err))) throw err;
          },
        )
        .finally(() => this.loading.delete(node));
      this.loading.set(node, loading);
    }
    return loading;
  }
}

function evalsha(script: Script): Send {
  return { command: 'EVALSHA', target: script.sha };
}

function evalOf(script: Script): Send {
  return { command: 'EVAL', target: script.body };
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : '';
}

/** FUNCTION or FCALL refused: an ACL without them (NOPERM), a server older than 7.0. */
function refused(err: unknown): boolean {
  const text = message(err);
  return text.startsWith('NOPERM') || /^ERR unknown command [`'"]?(fcall|function)/i.test(text);
}

function notFound(err: unknown): boolean {
  return /^ERR Function not found/i.test(message(err));
}
