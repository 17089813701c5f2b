// The consumer's execution-timeout clock (src/consumer/deadlines.ts): one timer for every held
// job with a deadline, never one per job, and none once no such job is held.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Deadlines, type Timed } from '../../src/consumer/deadlines.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('Deadlines', () => {
  it('holds a thousand deadlines on one timer and expires each job once, in deadline order', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const expired: number[] = [];
    const jobs = Array.from({ length: 1000 }, (_, i) => ({ i }) as Timed & { i: number });
    const d = new Deadlines<Timed & { i: number }>((job) => expired.push(job.i));
    for (const job of jobs) d.add(job, 1000 + job.i);
    expect(vi.getTimerCount()).toBe(1);
    for (const job of jobs.slice(0, 500)) d.remove(job); // finished in time
    vi.advanceTimersByTime(1000 + 749);
    expect(expired).toEqual(Array.from({ length: 250 }, (_, k) => 500 + k));
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(10_000);
    expect(expired).toHaveLength(500);
    expect(d.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('arms no timer while no job has a deadline, and drops it when the last job leaves', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const d = new Deadlines<Timed>(() => {
      throw new Error('no job should expire');
    });
    expect(vi.getTimerCount()).toBe(0);
    const job: Timed = {};
    d.add(job, 50);
    d.remove(job);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(100);
  });
});
