// How a consumer cuts a tick's acknowledgements into complete calls (src/consumer/acks.ts): halves
// of a large batch, so Redis and this process overlap, but a small batch whole, since every call
// pays the same fixed commands.
import { describe, expect, it } from 'vitest';
import { ackChunkFor, MIN_ACK_CHUNK } from '../../src/consumer/acks.js';

describe('ackChunkFor: completions per complete call', () => {
  it('sends a small consumer’s whole batch in one call instead of halves', () => {
    expect(ackChunkFor(1)).toBe(1);
    expect(ackChunkFor(10)).toBe(10);
    expect(ackChunkFor(50)).toBe(50);
  });

  it('splits a large batch into halves, never below the floor', () => {
    expect(ackChunkFor(MIN_ACK_CHUNK + 1)).toBe(MIN_ACK_CHUNK);
    expect(ackChunkFor(100)).toBe(50);
    expect(ackChunkFor(101)).toBe(51);
    expect(ackChunkFor(400)).toBe(200);
  });
});
