// A Redis stream: entries in id order, each id `<ms>-<seq>`. `MAXLEN ~ N` trims as Redis does:
// only whole nodes, where Redis closes a node at 100 entries or about 4 KB
// (stream-node-max-entries, stream-node-max-bytes), so a capped stream may hold a node's worth
// of entries past its cap. Node sizes are tracked here the same way, with the entry's bytes
// estimated as a listpack would hold them.

const NODE_MAX_ENTRIES = 100;
const NODE_MAX_BYTES = 4096;

export interface StreamId {
  ms: number;
  seq: number;
}

export interface StreamEntry {
  id: StreamId;
  fields: string[];
}

export function formatId(id: StreamId): string {
  return `${id.ms}-${id.seq}`;
}

export function compareIds(a: StreamId, b: StreamId): number {
  return a.ms !== b.ms ? a.ms - b.ms : a.seq - b.seq;
}

export class Stream {
  entries: StreamEntry[] = [];
  lastId: StreamId = { ms: 0, seq: 0 };
  /** Entries per node, oldest first, and the bytes of the newest node. */
  private nodes: number[] = [];
  private tailBytes = 0;

  get length(): number {
    return this.entries.length;
  }

  /** The id `*` stands for now: the clock's ms, or one more seq when the clock is not ahead. */
  nextId(nowMs: number): StreamId {
    if (nowMs > this.lastId.ms) return { ms: nowMs, seq: 0 };
    return { ms: this.lastId.ms, seq: this.lastId.seq + 1 };
  }

  append(id: StreamId, fields: string[]): void {
    this.entries.push({ id, fields });
    this.lastId = id;
    let bytes = 8;
    for (const f of fields) bytes += f.length + 2;
    const n = this.nodes.length;
    if (n === 0 || this.nodes[n - 1]! >= NODE_MAX_ENTRIES || this.tailBytes + bytes > NODE_MAX_BYTES) {
      this.nodes.push(1);
      this.tailBytes = bytes;
    } else {
      this.nodes[n - 1] = this.nodes[n - 1]! + 1;
      this.tailBytes += bytes;
    }
  }

  /** Trims to `max` entries; approximately (whole nodes only) when `approx`. Returns how many went. */
  trim(max: number, approx: boolean): number {
    let excess = 0;
    if (approx) {
      while (this.nodes.length > 0 && this.entries.length - excess - this.nodes[0]! >= max) {
        excess += this.nodes.shift()!;
      }
    } else {
      excess = Math.max(0, this.entries.length - max);
      let left = excess;
      while (left > 0 && this.nodes.length > 0) {
        const take = Math.min(left, this.nodes[0]!);
        left -= take;
        if (take === this.nodes[0]) this.nodes.shift();
        else this.nodes[0] = this.nodes[0]! - take;
      }
    }
    if (this.nodes.length === 0) this.tailBytes = 0;
    if (excess > 0) this.entries.splice(0, excess);
    return excess;
  }

  /** The index of the first entry with an id >= `id` (> when `exclusive`). */
  indexFrom(id: StreamId, exclusive: boolean): number {
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = compareIds(this.entries[mid]!.id, id);
      if (c < 0 || (exclusive && c === 0)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Entries with ids in [start, end] (bounds already made inclusive or exclusive by the flags). */
  range(start: StreamId, startEx: boolean, end: StreamId, endEx: boolean): StreamEntry[] {
    const from = this.indexFrom(start, startEx);
    const to = this.indexFrom(end, !endEx);
    return from < to ? this.entries.slice(from, to) : [];
  }
}
