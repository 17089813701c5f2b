// The native module (module/, SPEC.md "The native module"): on a redis-server that loaded it,
// the two sweeps and complete's and enqueue's plain cases run as server commands instead of scripts, with the
// script's KEYS and ARGV and the same effects and replies. Detected once at connect with COMMAND
// INFO, command by command: a module of an earlier release (the sweeps without EMQ.COMPLETE or
// EMQ.ENQUEUE) is
// used for what it offers.
import { Cluster, type Redis } from 'ioredis';
import { EchoMQError } from '../core/errors.js';

/** The scripts the module offers as commands, by script name. */
export const NATIVE_COMMANDS = {
  promote: 'EMQ.PROMOTE',
  sweep_stalled: 'EMQ.STALLED.CHECK',
  /**
   * complete's plain case (no lanes, caps, rate limits, holds, pause, dedupe, flow parents, a job's
   * own retention, timeouts): anything else it refuses with EMQNATIVE, writing nothing, and the
   * connector sends the same call as the script (src/wire/connector.ts).
   */
  complete: 'EMQ.COMPLETE',
  /**
   * enqueue's plain case (7-field tuples without a group: no dedupe key, lifo, retention, tags or
   * timeout of a job's own). The verb sends only such calls as the command (src/wire/verbs/jobs.ts
   * decides by the call's shape, which is per call, not per queue); an EMQNATIVE is a safety net.
   */
  enqueue: 'EMQ.ENQUEUE',
} as const;

/**
 * What `module: 'require'` requires: the sweeps, which every release of the module offers. A
 * module without EMQ.COMPLETE (an earlier release) satisfies it; complete then goes by the script.
 */
const REQUIRED: readonly string[] = [NATIVE_COMMANDS.promote, NATIVE_COMMANDS.sweep_stalled];

/**
 * 'auto' (default): use each of the module's commands where every node offers it, the scripts
 * elsewhere. 'off': always the scripts. 'require': refuse to connect without the module's sweeps.
 */
export type ModuleMode = 'auto' | 'off' | 'require';

/** Whether `command` is one `module: 'require'` requires (a sweep). */
export function isRequiredCommand(command: string): boolean {
  return REQUIRED.includes(command);
}

/** The script names to send as module commands (empty: scripts only). */
export async function detectNativeCommands(
  client: Redis | Cluster,
  mode: ModuleMode,
): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (mode === 'off') return found;
  const names = Object.values(NATIVE_COMMANDS);
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const offered = await Promise.all(
    nodes.map(async (node) => {
      try {
        const info = (await node.command('INFO', ...names)) as (unknown[] | null)[];
        return info.map((entry) => Array.isArray(entry));
      } catch {
        return names.map(() => false); // COMMAND refused (an ACL user without it): scripts
      }
    }),
  );
  // Each command on its own: every node must offer it (a call goes to whichever node holds the queue).
  for (const [script, command] of Object.entries(NATIVE_COMMANDS)) {
    const i = names.indexOf(command);
    if (offered.every((node) => node[i])) found.set(script, command);
  }
  const values = [...found.values()];
  if (mode === 'require' && !REQUIRED.every((command) => values.includes(command))) {
    throw new EchoMQError(
      'EMQNOMODULE',
      `module: 'require', but ${nodes.length > 1 ? 'not every node offers' : 'the server does not offer'} ${REQUIRED.join(' and ')}; ` +
        'load module/build/echomq.so (redis-server --loadmodule, see docs/reference/native-module.md) or connect with module: "auto"',
    );
  }
  return found;
}
