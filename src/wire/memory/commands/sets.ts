// Set commands: SADD, SREM.

import type { Reply } from '../resp.js';
import type { CommandContext } from './context.js';

export function sadd(ctx: CommandContext, [key, ...members]: string[]): Reply {
  const s = ctx.db.write(key!, 'set');
  let n = 0;
  for (const m of members) {
    if (!s.has(m)) {
      s.add(m);
      n += 1;
    }
  }
  return n;
}

export function srem(ctx: CommandContext, [key, ...members]: string[]): Reply {
  const s = ctx.db.read(key!, 'set');
  if (!s) return 0;
  let n = 0;
  for (const m of members) if (s.delete(m)) n += 1;
  ctx.db.dropIfEmpty(key!, s);
  return n;
}
