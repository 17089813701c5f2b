// The shared next-run table (test/recurring/next-run-cases.json): every runtime's
// calculateNextMillis must give these answers. TypeScript is the reference; the Go runtime's
// runtimes/go/nextrun_test.go reads the same file, so a case added here holds both to it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { calculateNextMillis, type RepeatOptions } from '../../src/recurring/next-run.js';

interface Case {
  name: string;
  repeat: RepeatOptions;
  ref: string;
  count: number;
  next?: string | null;
  error?: string;
}

const table = JSON.parse(readFileSync(join(import.meta.dirname, 'next-run-cases.json'), 'utf8')) as {
  cases: Case[];
};

describe('next-run cases shared with the Go runtime', () => {
  it('holds enough cases to mean something (every, cron, tz, DST gap and fold, dates, limit, errors)', () => {
    expect(table.cases.length).toBeGreaterThanOrEqual(50);
    expect(new Set(table.cases.map((c) => c.name)).size).toBe(table.cases.length);
    for (const c of table.cases) expect(c.error === undefined).toBe(c.next !== undefined);
  });

  for (const c of table.cases) {
    it(c.name, () => {
      const ref = Date.parse(c.ref);
      if (c.error !== undefined) {
        let thrown: unknown;
        try {
          calculateNextMillis(c.repeat, ref, c.count);
        } catch (err) {
          thrown = err;
        }
        expect(thrown).toBeInstanceOf(EchoMQError);
        expect((thrown as EchoMQError).code).toBe(c.error);
        return;
      }
      const next = calculateNextMillis(c.repeat, ref, c.count);
      expect(next === null ? null : new Date(next).toISOString()).toBe(c.next);
    });
  }
});
