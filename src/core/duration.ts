// Durations as people type them on a command line: 500ms, 5s, 10m, 1h, 2d, or bare ms.
import { EchoMQError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses `<whole number><unit>` (units ms, s, m, h, d; none means ms) into ms.
 * E.g. parseDuration('5s') is 5000, parseDuration('1h') is 3600000, parseDuration('250') is 250.
 * Throws EMQINPUT for anything else (1.5h, -5s, 5x).
 */
export function parseDuration(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) {
    throw new EchoMQError(
      'EMQINPUT',
      `cannot read duration ${JSON.stringify(text)}: use a whole number with ms, s, m, h or d, e.g. 500ms, 5s, 10m, 1h`,
    );
  }
  const ms = Number(m[1]) * UNIT_MS[m[2] ?? 'ms']!;
  if (!Number.isSafeInteger(ms)) throw new EchoMQError('EMQINPUT', `duration ${text} is too long`);
  return ms;
}

/** The shortest of those forms for `ms` (largest unit that divides it), for messages. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0ms';
  for (const unit of ['d', 'h', 'm', 's']) {
    if (ms % UNIT_MS[unit]! === 0) return `${ms / UNIT_MS[unit]!}${unit}`;
  }
  return `${ms}ms`;
}
