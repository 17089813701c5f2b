// The protocol's scripts, loaded from protocol/scripts/*.lua. Each script's contract header
// (`-- KEYS: ...`) is the one machine-readable source of its key order: the runtime builds
// KEYS from it and never retypes the order by hand.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SCRIPT_KEYS, type ScriptKey } from './keyspace.js';

export interface Script {
  /** The verb, the file name without `.lua`. */
  readonly name: string;
  /** Key names in KEYS order, from the `-- KEYS:` line. */
  readonly keys: readonly ScriptKey[];
  readonly body: string;
  readonly sha: string;
}

export type ScriptName =
  | 'hello'
  | 'migrate'
  | 'enqueue'
  | 'schedule'
  | 'promote'
  | 'claim'
  | 'complete'
  | 'fail'
  | 'extend_lock'
  | 'reap'
  | 'sweep_stalled'
  | 'cancel'
  | 'remove'
  | 'handback'
  | 'snooze'
  | 'rate_limit'
  | 'progress'
  | 'register'
  | 'unregister'
  | 'pump'
  | 'addJobScheduler'
  | 'updateJobScheduler'
  | 'getJobScheduler'
  | 'removeJobScheduler'
  | 'pause'
  | 'resume'
  | 'configure'
  | 'configure_lane'
  | 'heartbeat'
  | 'retry'
  | 'clean'
  | 'flow_add'
  | 'promote_job'
  | 'reschedule'
  | 'reprioritize'
  | 'update_data'
  | 'log'
  | 'drain'
  | 'obliterate'
  | 'child_notice'
  | 'notices';

/** protocol/ sits beside src/ and dist/ alike. */
export const PROTOCOL_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'protocol');

export function parseScript(name: string, body: string): Script {
  const line = /^-- KEYS:(.*)$/m.exec(body);
  if (!line) throw new Error(`protocol/scripts/${name}.lua has no "-- KEYS:" line in its contract`);
  const names = (line[1] ?? '').trim().split(/\s+/).filter(Boolean);
  // Each name as SCRIPT_KEYS's own literal, not a slice of the script's text: that text holds
  // characters beyond Latin-1 (its comments), so V8 stores it, and every slice of it, two bytes a
  // character, and so every key built from a slice. Each call's RESP (one string concatenated
  // from the keys) was then two-byte as well, and Node transcoded it from UTF-16 on every socket
  // write instead of copying its bytes.
  const keys = names.map((k) => SCRIPT_KEYS.find((known) => known === k));
  const unknown = names.find((_, i) => keys[i] === undefined);
  if (unknown !== undefined) {
    throw new Error(`protocol/scripts/${name}.lua lists KEYS "${unknown}", not a key of SPEC section 4`);
  }
  return { name, keys: keys as ScriptKey[], body, sha: createHash('sha1').update(body).digest('hex') };
}

const SCRIPTS_DIR = join(PROTOCOL_DIR, 'scripts');
let cache: Map<string, Script> | undefined;

/** Every script in protocol/scripts (or `dir`), parsed once per process. */
export function loadScripts(dir = SCRIPTS_DIR): Map<string, Script> {
  if (dir === SCRIPTS_DIR && cache) return cache;
  const scripts = new Map<string, Script>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
    const name = file.slice(0, -4);
    scripts.set(name, parseScript(name, readFileSync(join(dir, file), 'utf8')));
  }
  if (dir === SCRIPTS_DIR) cache = scripts;
  return scripts;
}

/** The script `name` (every call of every verb asks: no path work here, only the cache). */
export function script(name: ScriptName): Script {
  const s = (cache ?? loadScripts()).get(name);
  if (!s) throw new Error(`protocol/scripts/${name}.lua is missing`);
  return s;
}
