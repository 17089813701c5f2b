// What a set of keys holds, for "a refused call changed nothing" checks. Not DUMP bytes: a
// hash or set held as a hashtable is dumped in its dict's iteration order, and a mid-rehash
// dict moves one bucket on every lookup (HMGET, SISMEMBER), so a call that only reads can
// reorder its DUMP. Hashes and sets are compared as sorted content with their encoding (a
// conversion to hashtable is a write, and stays visible); every other type as DUMP bytes,
// whose order is the data's own (a zset by score, a list, a stream by id).
import type { Redis } from 'ioredis';

/** Every key under `prefix` (SCAN), by name: its encoding and content as comparable text. */
export async function keyState(
  raw: Redis,
  prefix: string,
  opts: { withTtl?: boolean } = {},
): Promise<Record<string, string>> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await raw.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  keys.sort();
  const head = raw.pipeline();
  for (const k of keys) head.type(k).pttl(k).object('ENCODING', k);
  const heads = (await head.exec()) ?? [];
  const body = raw.pipeline();
  const kept: { key: string; type: string; encoding: string }[] = [];
  for (const [i, key] of keys.entries()) {
    const [e1, type] = heads[3 * i]!;
    const [e2, ttl] = heads[3 * i + 1]!;
    const [e3, encoding] = heads[3 * i + 2]!;
    if (e1 || e2 || e3) throw e1 ?? e2 ?? e3;
    // Keys with a ttl (dedupe windows, per-minute stats) may expire between two snapshots.
    if (type === 'none' || (!opts.withTtl && (ttl as number) >= 0)) continue;
    kept.push({ key, type: type as string, encoding: String(encoding) });
    if (type === 'hash') body.hgetall(key);
    else if (type === 'set') body.smembers(key);
    else body.dumpBuffer(key);
  }
  const bodies = (await body.exec()) ?? [];
  const out: Record<string, string> = {};
  for (const [i, { key, type, encoding }] of kept.entries()) {
    const [err, value] = bodies[i]!;
    if (err) throw err;
    let content: string;
    if (type === 'hash') {
      content = JSON.stringify(
        Object.entries(value as Record<string, string>).sort(([a], [b]) => (a < b ? -1 : 1)),
      );
    } else if (type === 'set') content = JSON.stringify((value as string[]).sort());
    else content = value ? (value as Buffer).toString('hex') : '';
    out[key] = `${type}/${encoding} ${content}`;
  }
  return out;
}
