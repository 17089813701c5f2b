// Lanes (groups): jobs enqueued with `group` wait in their lane; a ring serves the lanes
// round-robin, one job per lane per turn, each lane within its own concurrency and rate
// limit across all consumers. This module configures and inspects lanes; the serving itself
// happens inside the claim script, atomically, on the server clock.

import { assertName, atLeast, isWhole, knownKeys } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import type { LaneInfo, RateLimit } from '../core/types.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as reads from '../wire/reads.js';
import * as verbs from '../wire/verbs/index.js';

export interface LaneSettings {
  /**
   * Jobs of the lane running at once across all consumers; 0 = unlimited (the default); null
   * removes the lane's own setting, so the default for lanes (configureDefault) applies again.
   */
  concurrency?: number | null;
  /** Claims of the lane per window; null removes the limit. */
  rateLimit?: RateLimit | null;
}

const SETTING_KEYS = new Set(['concurrency', 'rateLimit']);

export function rateSpec(limit: RateLimit | null | undefined, what: string): string {
  if (limit === undefined) return '';
  if (limit === null) return '-';
  if (!isWhole(limit.max, 1) || !isWhole(limit.perMs, 1)) {
    throw new EchoMQError(
      'EMQINPUT',
      `${what} rateLimit needs whole numbers max >= 1 and perMs >= 1, e.g. { max: 10, perMs: 1000 }`,
    );
  }
  return `${limit.max}:${limit.perMs}`;
}

export class Lanes {
  constructor(private readonly queue: QueueWire) {}

  /** Sets one lane's concurrency and/or rate limit (omitted settings stay as they are). */
  async configure(group: string, settings: LaneSettings): Promise<void> {
    assertName('group', group);
    await this.apply(group, settings);
  }

  /** The settings for every lane that has none of its own. */
  async configureDefault(settings: LaneSettings): Promise<void> {
    await this.apply('*', settings);
  }

  private async apply(group: string, settings: LaneSettings): Promise<void> {
    const s = knownKeys(optionsObject(settings, 'lane settings'), SETTING_KEYS, 'lane setting');
    const conc =
      s.concurrency === undefined
        ? ''
        : s.concurrency === null
          ? '-'
          : String(atLeast(s.concurrency, 'lane concurrency', 0, '0 = unlimited'));
    await verbs.configureLane(this.queue, group, conc, rateSpec(s.rateLimit, 'lane'));
  }

  /** Holds a lane's jobs (others keep flowing); running jobs finish. True when it was running. */
  async pause(group: string): Promise<boolean> {
    assertName('group', group);
    return verbs.pause(this.queue, group);
  }

  async resume(group: string): Promise<boolean> {
    assertName('group', group);
    return verbs.resume(this.queue, group);
  }

  /** Every lane seen on this queue with its counts and settings. */
  list(): Promise<LaneInfo[]> {
    return reads.lanes(this.queue);
  }
}
