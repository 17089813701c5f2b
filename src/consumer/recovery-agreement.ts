// A consumer's recovery where the server runs it (SPEC 26.1 point 12). With the native module's
// timers on, the server recovers a queue's expired leases by meta `recovery` / `max_stalled`,
// and the consumer's own recovery leg is only a backstop: a consumer started with
// `recovery: 'stalled'` or `'off'` would otherwise see the server reap what it meant to count or
// leave. So, once a consumer first sees the timers:
//   - meta names no recovery (the default, reap): a consumer that runs reap agrees; one that runs
//     stalled or off writes its own into meta through configure, and the server runs it;
//   - meta names one: the consumer agrees, or it is told (its 'error' channel), with both values
//     and the two ways to make them agree. An explicit meta value is never overwritten: it is
//     the fleet's setting, and a consumer that differs is the one out of step.
// Two consumers writing different modes at once: the one whose write was overtaken reads the
// other's back and is told, as if it had come second.
import { EchoMQError } from '../core/errors.js';
import { configure } from '../upkeep/settings.js';
import type { QueueWire } from '../wire/queue-wire.js';
import { metaFields } from '../wire/reads.js';
import type { Recovery } from './options.js';

/** meta's recovery as the module reads it: absent is reap, absent max_stalled is 1. */
interface MetaRecovery {
  mode: string;
  maxStalled: string;
}

async function metaRecovery(w: QueueWire): Promise<MetaRecovery | undefined> {
  const [mode, maxStalled] = await metaFields(w, 'recovery', 'max_stalled');
  if (mode === null || mode === undefined) return undefined;
  return { mode, maxStalled: maxStalled ?? '1' };
}

const agrees = (m: MetaRecovery, recovery: Recovery, maxStalled: number) =>
  m.mode === recovery && (recovery !== 'stalled' || m.maxStalled === String(maxStalled));

const shown = (mode: string, maxStalled: string | number) =>
  mode === 'stalled' ? `'stalled' (maxStalled ${maxStalled})` : `'${mode}'`;

/**
 * Makes the server's recovery this consumer's where meta has none; where meta has another,
 * resolves with the warning to report (undefined when they agree).
 */
export async function agreeRecovery(
  w: QueueWire,
  recovery: Recovery,
  maxStalled: number,
): Promise<EchoMQError | undefined> {
  let meta = await metaRecovery(w);
  if (meta === undefined) {
    if (recovery === 'reap') return undefined;
    await configure(w, recovery === 'stalled' ? { recovery, maxStalled } : { recovery });
    meta = await metaRecovery(w);
    if (meta === undefined) return undefined; // removed since (configure recovery null): the default
  }
  if (agrees(meta, recovery, maxStalled)) return undefined;
  const ours = shown(recovery, maxStalled);
  const theirs = shown(meta.mode, meta.maxStalled);
  const setting =
    recovery === 'stalled'
      ? `{ recovery: 'stalled', maxStalled: ${maxStalled} }`
      : `{ recovery: '${recovery}' }`;
  const option =
    meta.mode === 'stalled'
      ? `recovery: 'stalled', maxStalled: ${meta.maxStalled}`
      : `recovery: '${meta.mode}'`;
  return new EchoMQError(
    'EMQFLEET',
    `queue ${w.name}: this consumer runs recovery ${ours}, but the queue's meta says ${theirs}, and the native module's timers recover expired leases by meta, so the server runs ${theirs}: to run ${ours} fleet-wide call queue.configure(${setting}); else start this consumer with ${option}`,
  );
}
