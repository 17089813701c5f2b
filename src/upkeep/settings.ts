// Queue-wide settings (configure): the rate limit, retention of ended jobs, the events cap and
// the idempotency window, each checked (unknown keys refused at every level), then written by one
// configure call; omitted settings stay.
import { atLeast, knownKeys, wholeNumber } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import type { QueueSettings } from '../core/types.js';
import { rateSpec } from '../lanes/lanes.js';
import { RETAIN_KEYS } from '../wire/admission.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';

const SETTINGS_KEYS = new Set([
  'rateLimit',
  'retention',
  'eventsMaxLen',
  'idempotencyMs',
  'concurrency',
  'recovery',
  'maxStalled',
]);
const RECOVERY_MODES = new Set(['reap', 'stalled', 'off']);
const ENDED_SETS = new Set(['completed', 'dead']);

/** configure's retention, every level of it checked for unknown keys. */
function retentionSettings(value: NonNullable<QueueSettings['retention']>): QueueSettings['retention'] {
  const r = knownKeys(optionsObject(value, 'retention'), ENDED_SETS, 'retention set');
  for (const set of ENDED_SETS) {
    const one = r[set as 'completed' | 'dead'];
    if (one !== undefined)
      knownKeys(optionsObject(one, `retention.${set}`), RETAIN_KEYS, `retention.${set} option`);
  }
  return r;
}

/** Changes queue-wide settings (rate limit, retention, events cap, concurrency); omitted ones stay. */
export async function configure(w: QueueWire, options: QueueSettings): Promise<void> {
  const settings = knownKeys(optionsObject(options, 'queue settings'), SETTINGS_KEYS, 'queue setting');
  const fields: [verbs.SettingField, string][] = [];
  const set = (field: verbs.SettingField, value: number | undefined, what: string, min: number) => {
    if (value !== undefined) fields.push([field, String(wholeNumber(value, what, min))]);
  };
  if (settings.rateLimit !== undefined) {
    const [max = '-', perMs = '-'] = rateSpec(settings.rateLimit, 'queue').split(':');
    fields.push(['rate_max', max], ['rate_ms', perMs]);
  }
  const r = settings.retention === undefined ? undefined : retentionSettings(settings.retention);
  set('keep_completed', r?.completed?.count, 'retention.completed.count', 0);
  set('keep_completed_ms', r?.completed?.ageMs, 'retention.completed.ageMs', -1);
  set('keep_dead', r?.dead?.count, 'retention.dead.count', 0);
  set('keep_dead_ms', r?.dead?.ageMs, 'retention.dead.ageMs', -1);
  set('events_max', settings.eventsMaxLen, 'eventsMaxLen', 1);
  set('keep_ids_ms', settings.idempotencyMs, 'idempotencyMs', 0);
  if (settings.concurrency === null) fields.push(['concurrency', '-']);
  else if (settings.concurrency !== undefined)
    fields.push([
      'concurrency',
      String(atLeast(settings.concurrency, 'concurrency', 1, 'null removes the cap')),
    ]);
  if (settings.recovery === null) fields.push(['recovery', '-']);
  else if (settings.recovery !== undefined) {
    if (!RECOVERY_MODES.has(settings.recovery as string))
      throw new EchoMQError(
        'EMQINPUT',
        `recovery must be 'reap', 'stalled' or 'off' (got ${JSON.stringify(settings.recovery)}): set it to the recovery your consumers run, or null for the default`,
      );
    fields.push(['recovery', settings.recovery]);
  }
  if (settings.maxStalled === null) fields.push(['max_stalled', '-']);
  else set('max_stalled', settings.maxStalled, 'maxStalled', 0);
  await verbs.configure(w, fields);
}
