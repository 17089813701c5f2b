// FCALL as the scripts' transport (connect's `scripts: 'functions'`, the default): the library of
// src/wire/library.ts, loaded with FUNCTION LOAD where a call finds it missing (a new server, a
// restart, a failover, a FUNCTION FLUSH), on every primary of a Cluster, and the call sent once
// more. Where the server refuses FUNCTION or FCALL (an ACL user without them, a server older
// than 7.0) the connection goes on with EVALSHA for good, with no error to the caller.
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

/** What call() answers when FCALL cannot carry this call: send it by EVALSHA. */
export const USE_EVAL = Symbol('use EVALSHA');

let built: Library | undefined;
/** The library of protocol/scripts, generated once per process. */
export function library(): Library {
  built ??= buildLibrary(loadScripts().values());
  return built;
}

/** The minimal client surface used here: one command, and a Cluster's primaries. */
type Client = {
  call(command: string, args: (string | number)[]): Promise<unknown>;
  call(...args: (string | number)[]): Promise<unknown>;
};

export class FunctionCalls {
  /** False once the server refused FUNCTION or FCALL: EVALSHA from then on. */
  private available = true;
  private loading: Promise<boolean> | undefined;

  constructor(private readonly client: Client | Cluster) {}

  async call(script: Script, keys: readonly string[], argv: readonly (string | number)[]): Promise<unknown> {
    const fn = library().functions.get(script.name);
    // A script not made from protocol/scripts (another directory's copy) is not in the library.
    if (!this.available || fn?.sha !== script.sha) return USE_EVAL;
    // One argument array, built once and sent as is (again after a load): every call of every
    // verb comes through here, so no closure and no spread into a rest parameter per call.
    const args: (string | number)[] = [fn.name, keys.length];
    for (const k of keys) args.push(k);
    for (const a of argv) args.push(a);
    try {
      return await this.client.call('FCALL', args);
    } catch (err) {
      if (refused(err)) return this.giveUp();
      if (!notFound(err)) throw err;
    }
    if (!(await this.load())) return USE_EVAL;
    try {
      return await this.client.call('FCALL', args);
    } catch (err) {
      if (refused(err)) return this.giveUp();
      // Flushed again between the load and the call (or a node the load did not reach): this
      // call goes by EVALSHA, the next one loads again.
      if (notFound(err)) return USE_EVAL;
      throw err;
    }
  }

  private giveUp(): typeof USE_EVAL {
    this.available = false;
    return USE_EVAL;
  }

  /** Loads the library (every primary on a Cluster), once for all the calls that found it missing. */
  private load(): Promise<boolean> {
    this.loading ??= this.loadEverywhere().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async loadEverywhere(): Promise<boolean> {
    const { code } = library();
    const nodes: Client[] = this.client instanceof Cluster ? this.client.nodes('master') : [this.client];
    try {
      await Promise.all(
        nodes.map((node) =>
          node.call('FUNCTION', 'LOAD', code).catch((err: unknown) => {
            // Another process (or this one's other connection) loaded the same source first.
            if (!(err instanceof Error && /^ERR Library .* already exists/i.test(err.message))) throw err;
          }),
        ),
      );
      return true;
    } catch (err) {
      if (refused(err)) {
        this.giveUp();
        return false;
      }
      throw err;
    }
  }
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
