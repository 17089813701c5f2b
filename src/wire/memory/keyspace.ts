// One database of the memory engine: keys to values, with expiry read on the engine's clock.
// A value is a plain string, a Map (hash), a Set, a SortedSet, a Stream or an array (a list); its kind is its
// Redis TYPE. Reads see an expired key as absent (and delete it), as Redis's lazy expiry does.
import { RespError } from './resp.js';
import { SortedSet } from './sorted-set.js';
import { Stream } from './stream.js';

export type Value = string | Map<string, string> | Set<string> | SortedSet | Stream | string[];
export type Kind = 'string' | 'hash' | 'set' | 'zset' | 'stream' | 'list';

export const WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value';

export function kindOf(v: Value): Kind {
  if (typeof v === 'string') return 'string';
  if (v instanceof Map) return 'hash';
  if (v instanceof Set) return 'set';
  if (v instanceof SortedSet) return 'zset';
  if (Array.isArray(v)) return 'list';
  return 'stream';
}

/** Thrown by a command to answer an error reply; caught where the command was called. */
export class CommandError extends Error {
  constructor(message: string) {
    super(message);
  }
  get reply(): RespError {
    return new RespError(this.message);
  }
}

const MAKE: Record<Exclude<Kind, 'string'>, () => Value> = {
  hash: () => new Map<string, string>(),
  set: () => new Set<string>(),
  zset: () => new SortedSet(),
  stream: () => new Stream(),
  list: () => [] as string[],
};

export class Database {
  readonly data = new Map<string, Value>();
  /** Expiry instants in epoch ms, on the engine's clock. */
  readonly expires = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  /** The live value at `key`, or undefined (an expired key is deleted on the way). */
  get(key: string): Value | undefined {
    const at = this.expires.get(key);
    if (at !== undefined && at <= this.now()) {
      this.delete(key);
      return undefined;
    }
    return this.data.get(key);
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** The value at `key` if it is of `kind`; undefined when absent; WRONGTYPE otherwise. */
  read<K extends Kind>(key: string, kind: K): KindValue<K> | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (kindOf(v) !== kind) throw new CommandError(WRONGTYPE);
    return v as KindValue<K>;
  }

  /** The value at `key` of `kind`, created empty when absent; WRONGTYPE otherwise. */
  write<K extends Exclude<Kind, 'string'>>(key: string, kind: K): KindValue<K> {
    const v = this.read(key, kind);
    if (v !== undefined) return v;
    const made = MAKE[kind]() as KindValue<K>;
    this.data.set(key, made);
    return made;
  }

  /** Sets a string value (keeping no expiry unless `keepTtl`). */
  setString(key: string, value: string, keepTtl = false): void {
    this.data.set(key, value);
    if (!keepTtl) this.expires.delete(key);
  }

  delete(key: string): boolean {
    this.expires.delete(key);
    return this.data.delete(key);
  }

  /** Drops `key` when a collection emptied, as Redis does for hashes, sets and sorted sets. */
  dropIfEmpty(key: string, v: Map<string, string> | Set<string> | SortedSet | string[]): void {
    if ((Array.isArray(v) ? v.length : v.size) === 0) this.delete(key);
  }

  /** Every live key (expired ones are deleted on the way). */
  keys(): string[] {
    const out: string[] = [];
    for (const key of [...this.data.keys()]) if (this.get(key) !== undefined) out.push(key);
    return out;
  }

  flush(): void {
    this.data.clear();
    this.expires.clear();
  }
}

type KindValue<K extends Kind> = K extends 'string'
  ? string
  : K extends 'hash'
    ? Map<string, string>
    : K extends 'set'
      ? Set<string>
      : K extends 'zset'
        ? SortedSet
        : K extends 'list'
          ? string[]
          : Stream;
