// Which node of a Redis Cluster client serves a key. A command that names no key (CLIENT ID,
// CLIENT UNBLOCK, WAIT) goes to a node of the client's choosing, and each answers only for the
// node it reaches: client ids are per server, and WAIT counts the replicas of the connection's
// own writes. Callers that must reach the node holding a queue's slot send them over the node
// connection this returns: the same connection ioredis sends the queue's keyed commands on.
import { Cluster, type Redis } from 'ioredis';
import { keySlot } from './slot.js';

/** `host:port` of a node connection, as ioredis keys its slot table. */
export function nodeKeyOf(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

/**
 * The connection of `client` to the primary serving `key`'s slot, as the client's slot table says
 * now (after any natMap). Undefined before the client has learned the slots, or for a plain Redis.
 */
export function nodeServing(client: Redis | Cluster, key: string): Redis | undefined {
  if (!(client instanceof Cluster)) return undefined;
  const want = client.slots[keySlot(key)]?.[0];
  if (!want) return undefined;
  return client.nodes('master').find((n) => nodeKeyOf(n) === want);
}

/** The connection of `client` to the node `host:port` (undefined when it has none). */
export function nodeAt(client: Cluster, nodeKey: string): Redis | undefined {
  return client.nodes('all').find((n) => nodeKeyOf(n) === nodeKey);
}
