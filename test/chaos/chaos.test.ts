// The chaos suite, short: 9 s of faults (every kind at least once: consumer SIGKILL, SIGSTOP past
// the lease then SIGCONT, CLIENT KILL, redis-server SIGKILL + restart, a handler that outlives its
// lease) against producer and consumer processes on a real redis-server with appendfsync always.
// Only invariants are asserted, never timings: nothing acknowledged is lost, no job is left open,
// no lane ran over its limit, no recurring occurrence was made twice. `npm run chaos` is the long
// version (chaos/README.md).
import { describe, expect, it } from 'vitest';
import { FAULT_KINDS, planFaults } from '../../chaos/faults.js';
import { formatTable, runProfile } from '../../chaos/harness.js';
import { formatServerFaults, runServerFaults, serverFaultFailures } from '../../chaos/server-faults.js';

describe('chaos (short)', () => {
  it('the fault plan is seeded and covers every kind', () => {
    const a = planFaults({ seed: 42, durationMs: 9000, leaseMs: 2000, beatMs: 500 });
    expect(planFaults({ seed: 42, durationMs: 9000, leaseMs: 2000, beatMs: 500 })).toEqual(a);
    expect(new Set(a.map((f) => f.kind))).toEqual(new Set(FAULT_KINDS));
    for (const f of a) expect(f.at).toBeLessThanOrEqual(9000 * 0.75);
  });

  it('loses nothing acknowledged, keeps lanes within limits and never duplicates an occurrence', async () => {
    const report = await runProfile({
      seed: 42,
      durationS: 9,
      jobs: 300,
      workers: 2,
      profile: 'always',
      drainMs: 30_000,
    });
    const table = formatTable([report]);
    // Every fault kind struck (a kill, stop or slow finds a running consumer to act on).
    const struck = new Set(report.faults.filter((f) => !f.note?.startsWith('skipped')).map((f) => f.kind));
    expect(struck, table).toEqual(new Set(FAULT_KINDS));
    expect(report.enqueued + report.inDoubt, table).toBe(300);
    expect(report.enqueued, table).toBeGreaterThan(0);
    expect(report.lost, table).toBe(0);
    expect(report.stuck, table).toBe(0);
    expect(report.drainTimedOut, table).toBe(false);
    expect(report.completed, table).toBe(report.enqueued);
    expect(report.laneViolations, table).toBe(0);
    expect(report.laneSampleViolations, table).toBe(0);
    expect(report.laneDrift, table).toBe(0);
    expect(report.schedulerDuplicates, table).toBe(0);
    expect(report.doubleCompletions, table).toBe(0);
    expect(report.claimedAfterCompleted, table).toBe(0);
    expect(report.recurring.repeatMade + report.recurring.schedMade, table).toBeGreaterThan(0);
    expect(report.failures, table).toEqual([]);
  }, 120_000);

  it('a server paused past the lease: nothing lost, nothing run twice, no superseded result accepted', async () => {
    const rows = await runServerFaults(() => {}, ['pause']);
    const table = formatServerFaults(rows);
    expect(rows[0]!.skipped, table).toBeUndefined();
    expect(rows[0]!.acknowledged, table).toBeGreaterThan(0);
    expect(rows[0]!.lost, table).toBe(0);
    expect(rows[0]!.runTwice, table).toBe(0);
    expect(serverFaultFailures(rows), table).toEqual([]);
  }, 120_000);
});
