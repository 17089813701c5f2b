// The native module (module/, SPEC.md "The native module"): on a redis-server that loaded it,
// the two sweeps run as server commands instead of scripts, with the script's KEYS and ARGV
// and the same effects and replies. Detected once at connect with COMMAND INFO.
import { Cluster, type Redis } from 'ioredis';
import { EchoMQError } from '../core/errors.js';

/** The scripts the module offers as commands, by script name. */
export const NATIVE_COMMANDS = {
  promote: 'EMQ.PROMOTE',
  sweep_stalled: 'EMQ.STALLED.CHECK',
} as const;

/**
 * 'auto' (default): use the module's commands where every node offers them, the scripts
 * elsewhere. 'off': always the scripts. 'require': refuse to connect without the module.
 */
export type ModuleMode = 'auto' | 'off' | 'require';

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
  for (const [script, command] of Object.entries(NATIVE_COMMANDS)) {
    const i = names.indexOf(command);
    if (offered.every((node) => node[i])) found.set(script, command);
  }
  if (mode === 'require' && found.size < names.length) {
    throw new EchoMQError(
      'EMQNOMODULE',
      `module: 'require', but ${nodes.length > 1 ? 'not every node offers' : 'the server does not offer'} ${names.join(' and ')}; ` +
        'load module/build/echomq.so (redis-server --loadmodule, see docs/reference/native-module.md) or connect with module: "auto"',
    );
  }
  return found;
}
