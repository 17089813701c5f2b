// The dashboard's route table: every pattern is named once, a path fits at most one route, and
// `:name` segments come back decoded as the handler's params. No server, no Redis.
import { describe, expect, it } from 'vitest';
import { ACTIONS, match, OFFLINE, READS } from '../../src/dashboard/routes.js';

const TABLES: Record<string, readonly { pattern: string; segments: readonly string[] }[]> = {
  reads: [...OFFLINE, ...READS],
  actions: ACTIONS,
};

/** A path that fits `pattern`, each `:name` filled with `<name>-value`. */
function pathOf(pattern: string): string[] {
  return pattern
    .split('/')
    .filter(Boolean)
    .map((s) => (s.startsWith(':') ? `${s.slice(1)}-value` : s));
}

describe('the route table', () => {
  it.each(Object.entries(TABLES))(
    '%s: each pattern once, and its own paths fit it alone',
    (_table, routes) => {
      const patterns = routes.map((r) => r.pattern);
      expect(new Set(patterns).size).toBe(patterns.length);
      for (const r of routes) {
        const path = pathOf(r.pattern);
        const fitting = routes.filter((other) => match([other], path) !== undefined).map((o) => o.pattern);
        expect(fitting).toEqual([r.pattern]);
      }
    },
  );

  it('hands the named segments to the handler', () => {
    const found = match(READS, ['queues', 'emails', 'jobs', 'JOB1']);
    expect(found?.route.pattern).toBe('/queues/:queue/jobs/:id');
    expect(found?.params).toEqual({ queue: 'emails', id: 'JOB1' });
    expect(match(READS, [])?.route.pattern).toBe('/');
  });

  it('a path longer, shorter or with another literal fits nothing', () => {
    expect(match(READS, ['queues', 'emails', 'jobs', 'JOB1', 'extra'])).toBeUndefined();
    expect(match(READS, ['queues', 'emails', 'jobz', 'JOB1'])).toBeUndefined();
    expect(match(ACTIONS, ['queues', 'emails', 'jobs', 'JOB1', 'delete'])).toBeUndefined();
    expect(match(ACTIONS, ['queues', 'emails'])).toBeUndefined();
  });
});
