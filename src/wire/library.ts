// The protocol's scripts as one Redis Functions library, generated from protocol/scripts: the
// same scripts, KEYS, ARGV, replies and errors, called by FCALL instead of EVALSHA. A script
// carries its own copy of each protocol/lib file it uses (tools/embed-lua.ts), and EVALSHA
// re-runs those definitions on every call; the library defines each lib file once per load,
// and each script's own body becomes one function over them.
import { createHash } from 'node:crypto';
import type { Script } from './scripts.js';

export interface Library {
  /**
   * `emq_<hash of the scripts>`, and each function `<name>_<script>`: two releases load two
   * libraries side by side, and neither replaces nor collides with the other.
   */
  readonly name: string;
  /** The FUNCTION LOAD source. */
  readonly code: string;
  /** Script name -> its function's name and the sha of the script it was made from. */
  readonly functions: ReadonlyMap<string, { readonly name: string; readonly sha: string }>;
}

const BLOCK = /^-- >>> (lib\/[\w.-]+\.lua)\n([\s\S]*?)^-- <<< \1$/gm;
const SHEBANG = /^#!lua\b(?:.*\bflags=([\w,-]*))?/;
/** A lib file's top-level names: `local function x` and `local X =`. */
const DEFINES = /^local\s+(?:function\s+)?([A-Za-z_]\w*)/gm;
/** Commands that only read: a script calling none but these may run as `no-writes`. */
const READS = new Set([
  'TIME',
  'EXISTS',
  'GET',
  'HGET',
  'HGETALL',
  'HMGET',
  'HEXISTS',
  'HLEN',
  'ZRANGE',
  'ZRANGEBYSCORE',
  'ZSCORE',
  'ZCARD',
  'ZCOUNT',
  'LRANGE',
  'LLEN',
  'SMEMBERS',
  'SISMEMBER',
  'SCARD',
  'XRANGE',
  'XREVRANGE',
  'XLEN',
  'TYPE',
  'PTTL',
  'TTL',
]);

interface Parts {
  /** The embedded lib files, in the script's order. */
  readonly libs: readonly { readonly name: string; readonly text: string }[];
  /** The script without its lib blocks and shebang. */
  readonly body: string;
  readonly flags: readonly string[];
}

function split(script: Script): Parts {
  const libs = [...script.body.matchAll(BLOCK)].map((m) => ({ name: m[1] as string, text: m[2] as string }));
  // The script's own code, in its order (some check their ARGV between two lib blocks).
  const body = script.body.replace(BLOCK, '').replace(/^#!.*\n/, '');
  return { libs, body, flags: flagsOf(script.body) };
}

/**
 * A shebang's flags, as EVAL reads them. A script without one runs under EVAL's legacy rules,
 * where a script that only reads is not refused when Redis is out of memory: as a function
 * that takes `no-writes` (a function without flags is refused then). Any call whose command
 * is not a literal read counts as a write.
 */
function flagsOf(body: string): string[] {
  const shebang = SHEBANG.exec(body);
  if (shebang) return shebang[1]?.split(',').filter(Boolean) ?? [];
  const calls = [...body.matchAll(/redis\.p?call\(\s*(?:'(\w+)'|"(\w+)")?/g)];
  const onlyReads = calls.every((m) => READS.has((m[1] ?? m[2] ?? '').toUpperCase()));
  return onlyReads ? ['no-writes'] : [];
}

/**
 * The lib files in an order where each comes after the ones whose top-level names it uses
 * (scripts embed independent libs in any order), so each is defined once at the top level.
 */
function libOrder(texts: ReadonlyMap<string, string>): string[] {
  const owner = new Map<string, string>();
  for (const [lib, text] of texts) for (const m of text.matchAll(DEFINES)) owner.set(m[1] as string, lib);
  const uses = new Map<string, Set<string>>();
  for (const [lib, text] of texts) {
    const code = text.replace(/--[^\n]*/g, '');
    const deps = new Set<string>();
    for (const word of code.match(/[A-Za-z_]\w*/g) ?? []) {
      const other = owner.get(word);
      if (other !== undefined && other !== lib) deps.add(other);
    }
    uses.set(lib, deps);
  }
  const order: string[] = [];
  const placing = new Set<string>();
  const place = (lib: string) => {
    if (order.includes(lib)) return;
    if (placing.has(lib)) throw new Error(`protocol/lib files use each other in a cycle through ${lib}`);
    placing.add(lib);
    for (const dep of [...(uses.get(lib) ?? [])].sort()) place(dep);
    order.push(lib);
  };
  for (const lib of [...texts.keys()].sort()) place(lib);
  return order;
}

export function buildLibrary(scripts: Iterable<Script>): Library {
  const all = [...scripts].sort((a, b) => (a.name < b.name ? -1 : 1));
  const parts = all.map(split);
  const texts = new Map<string, string>();
  parts.forEach((p, i) => {
    for (const lib of p.libs) {
      const seen = texts.get(lib.name);
      if (seen !== undefined && seen !== lib.text) {
        throw new Error(
          `protocol/scripts/${all[i]?.name}.lua embeds a stale ${lib.name}: run npm run protocol:embed`,
        );
      }
      texts.set(lib.name, lib.text);
    }
  });
  // Function names are one namespace across libraries: each carries its library's hash too.
  const hash = createHash('sha1')
    .update(all.map((s) => s.body).join('\0'))
    .digest('hex')
    .slice(0, 16);
  const name = `emq_${hash}`;
  const functions = new Map<string, { name: string; sha: string }>();
  const bodies = all.map((s, i) => {
    const p = parts[i] as Parts;
    const fn = `${name}_${s.name}`;
    functions.set(s.name, { name: fn, sha: s.sha });
    const flags = p.flags.map((f) => `'${f}'`).join(', ');
    return `redis.register_function{function_name='${fn}', flags={${flags}}, callback=function(KEYS, ARGV)\n${p.body}\nend}`;
  });
  const source = [...libOrder(texts).map((n) => `-- ${n}\n${texts.get(n)}`), ...bodies].join('\n');
  return { name, code: `#!lua name=${name}\n${source}\n`, functions };
}
