// The memory engine standing in for a test file's redis-server, when the file runs in the
// `memory` project (ECHOMQ_TEST_ENGINE=memory, see vitest.config.ts): the same url/client/stop
// surface, on a `memory://<name>` engine of the file's own. What only a process can do (kill,
// restart) it refuses, naming why, so a test that needs it is marked `redisOnly`.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { memoryClient } from '../../src/wire/memory/connection.js';
import { MemoryEngine } from '../../src/wire/memory/engine.js';

/** True when this test run uses the memory engine instead of redis-server. */
export const onMemory = process.env.ECHOMQ_TEST_ENGINE === 'memory';

export class MemoryServer {
  readonly engine: MemoryEngine;

  private constructor(readonly name: string) {
    this.engine = MemoryEngine.forUrl(`memory://${name}`);
  }

  /** A memory engine of its own: its name is unique (no counter shared between files' servers). */
  static async start(): Promise<MemoryServer> {
    return new MemoryServer(`test-${process.pid}-${randomUUID()}`);
  }

  get url(): string {
    return `memory://${this.name}`;
  }

  get port(): number {
    throw new Error('a memory engine has no port; this test needs redis-server (mark it redisOnly)');
  }

  /** A plain ioredis client on this engine, for assertions on raw keys. */
  client(): Redis {
    return memoryClient(this.engine, { maxRetriesPerRequest: 1 });
  }

  async kill(): Promise<void> {
    throw new Error(
      'a memory engine is no process to kill; this test needs redis-server (mark it redisOnly)',
    );
  }

  async restart(): Promise<void> {
    throw new Error('a memory engine cannot restart; this test needs redis-server (mark it redisOnly)');
  }

  async stop(): Promise<void> {
    MemoryEngine.drop(this.name);
  }
}
