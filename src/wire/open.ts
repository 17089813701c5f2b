// Opening a connection EchoMQ can trust: the server answers (within connectTimeoutMs), the URL's
// database is really selected, the native module's commands are found (or refused, as `module`
// asks), and a server that may evict keys is warned about.
import { Cluster } from 'ioredis';
import { EchoMQError } from '../core/errors.js';
import { type ConnectOptions, Connector, type RedisClient } from './connector.js';
import { detectNativeCommands } from './native-module.js';

/** Opens and checks a connection; on a failed check it is closed again and the error thrown. */
export async function openChecked(opts: ConnectOptions): Promise<Connector> {
  const connector = Connector.open(opts);
  try {
    await connector.reach(opts.connectTimeoutMs);
    await selectDatabase(connector.client);
    connector.moduleMode = opts.module ?? 'auto';
    for (const [script, command] of await detectNativeCommands(connector.client, connector.moduleMode)) {
      connector.native.set(script, command);
    }
    if (connector.durability) await checkShardReplicas(connector.client, connector.durability.replicas);
  } catch (err) {
    await connector.close();
    throw err;
  }
  await warnOnEviction(connector.client);
  return connector;
}

/**
 * On a Cluster, refuses a `durability` no shard could ever meet: more replicas than a shard has
 * (counted from CLUSTER NODES, replicas marked failed included: one down for a while is what
 * EMQDURABILITY reports, call by call). Such a setting would fail every write of that shard.
 */
async function checkShardReplicas(client: RedisClient, replicas: number): Promise<void> {
  if (!(client instanceof Cluster)) return;
  let text: string;
  try {
    text = (await client.cluster('NODES')) as string;
  } catch {
    return; // CLUSTER NODES refused (an ACL): WAIT still tells, call by call
  }
  const rows = text
    .trim()
    .split('\n')
    .map((line) => line.split(' '));
  for (const [id, addr, flags, , , , , , ...slots] of rows) {
    if (!flags?.includes('master') || slots.length === 0) continue;
    const has = rows.filter((r) => r[3] === id).length;
    if (has < replicas) {
      throw new EchoMQError(
        'EMQINPUT',
        `durability asks for ${replicas} replica(s), but the shard of ${addr?.split('@')[0]} (slots ${slots.join(' ')}) has ${has}: ` +
          'WAIT there could never confirm a write; ask for at most the replicas every shard has',
      );
    }
  }
}

/**
 * Selects a URL's `/<db>` once more, and refuses to connect when that fails: ioredis selects it
 * on connect but carries on in database 0 when SELECT is refused (an ACL user without +select),
 * which would put the queues in the wrong database.
 */
async function selectDatabase(client: RedisClient): Promise<void> {
  const db = client instanceof Cluster ? 0 : (client.options.db ?? 0);
  if (db === 0) return;
  try {
    await client.select(db);
  } catch (err) {
    throw new Error(
      `cannot select database ${db}: ${(err as Error).message}; grant the user +select or use database 0`,
      { cause: err },
    );
  }
}

/**
 * Warns (process.emitWarning, code EMQEVICTION) when Redis may evict keys under memory pressure:
 * an evicted job row is a lost job. A server (or cluster master) that refuses CONFIG GET, as a
 * least-privilege ACL user or a managed Redis may, is not checked.
 */
async function warnOnEviction(client: RedisClient): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const policies = await Promise.all(
    nodes.map(async (node) => {
      try {
        const reply = (await node.config('GET', 'maxmemory-policy')) as string[];
        return reply[1];
      } catch {
        return undefined; // CONFIG is forbidden here: nothing to check
      }
    }),
  );
  const evicting = [...new Set(policies.filter((p) => p !== undefined && p !== 'noeviction'))];
  if (evicting.length === 0) return;
  process.emitWarning(
    `Redis maxmemory-policy is ${evicting.join(', ')}, not noeviction: when Redis reaches maxmemory it ` +
      'evicts keys, and an evicted job row (or queue set) is a lost job. Set maxmemory-policy to ' +
      'noeviction on the Redis EchoMQ uses (CONFIG SET maxmemory-policy noeviction, and in redis.conf), ' +
      'give it enough memory, and keep caches on another Redis.',
    { code: 'EMQEVICTION', type: 'EchoMQWarning' },
  );
}
