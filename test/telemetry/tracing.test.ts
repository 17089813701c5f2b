// Tracing against a real redis-server, with a recording tracer in place of an SDK: a PRODUCER
// span per admission whose context is kept beside the row, and a CONSUMER span per attempt
// linked to it; nothing written when no SDK makes real span contexts.
import { randomBytes } from 'node:crypto';
import {
  type Attributes,
  type Link,
  type Span,
  type SpanContext,
  SpanKind,
  type SpanOptions,
  type SpanStatus,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { describe, expect } from 'vitest';
import type { Consumer } from '../../src/consumer/consumer.js';
import { formatTraceContext, parseTraceContext, withTracing } from '../../src/telemetry/tracing.js';
import { queueTest, useRedisServer } from '../support/harness.js';

const env = useRedisServer();
const it = queueTest<{ n: number }, number>(env, 'trace');

// ── a tracer that records, standing in for an SDK ──────────────────────────────

class RecordedSpan implements Span {
  readonly context: SpanContext;
  readonly attributes: Attributes = {};
  readonly links: Link[];
  readonly kind: SpanKind;
  readonly exceptions: unknown[] = [];
  status: SpanStatus = { code: SpanStatusCode.UNSET };
  ended = false;

  constructor(
    public name: string,
    options: SpanOptions,
    readonly parent: SpanContext | undefined,
  ) {
    this.context = {
      traceId: parent?.traceId ?? randomBytes(16).toString('hex'),
      spanId: randomBytes(8).toString('hex'),
      traceFlags: 1,
    };
    this.kind = options.kind ?? SpanKind.INTERNAL;
    this.links = [...(options.links ?? [])];
    Object.assign(this.attributes, options.attributes);
  }
  spanContext() {
    return this.context;
  }
  setAttribute(key: string, value: Attributes[string]) {
    this.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: Attributes) {
    Object.assign(this.attributes, attributes);
    return this;
  }
  addEvent() {
    return this;
  }
  addLink(link: Link) {
    this.links.push(link);
    return this;
  }
  addLinks(links: Link[]) {
    this.links.push(...links);
    return this;
  }
  setStatus(status: SpanStatus) {
    this.status = status;
    return this;
  }
  updateName(name: string) {
    this.name = name;
    return this;
  }
  end() {
    this.ended = true;
  }
  isRecording() {
    return !this.ended;
  }
  recordException(exception: unknown) {
    this.exceptions.push(exception);
  }
}

class RecordingTracer {
  readonly spans: RecordedSpan[] = [];
  startSpan(name: string, options: SpanOptions = {}, ctx?: Parameters<Tracer['startSpan']>[2]): Span {
    const parent = ctx ? trace.getSpanContext(ctx) : undefined;
    const span = new RecordedSpan(name, options, parent);
    this.spans.push(span);
    return span;
  }
  startActiveSpan(): never {
    throw new Error('withTracing does not use startActiveSpan');
  }
  of(kind: SpanKind): RecordedSpan[] {
    return this.spans.filter((s) => s.kind === kind);
  }
}

function tracer(): RecordingTracer & Tracer {
  return new RecordingTracer() as RecordingTracer & Tracer;
}

/** Resolves once `n` jobs ended on `c` (completed or dead). */
function ended(c: Consumer<{ n: number }, number>, n: number): Promise<void> {
  let seen = 0;
  return new Promise((resolve) => {
    const one = () => {
      seen += 1;
      if (seen === n) resolve();
    };
    c.on('completed', one);
    c.on('failed', (_j, _e, outcome) => {
      if (outcome !== 'retry') one();
    });
  });
}

// ── the tests ──────────────────────────────────────────────────────────────────

describe('tracing', () => {
  it('makes a PRODUCER span per enqueue and keeps its context beside the row', async ({
    q,
    raw,
    key,
    queueName: name,
  }) => {
    const t = tracer();
    const traced = withTracing(q, { tracer: t, ttlMs: 60_000 });
    const { id, status } = await traced.enqueue({ n: 1 }, { name: 'mail' });
    expect(status).toBe('enqueued');
    const [producer] = t.of(SpanKind.PRODUCER);
    expect(producer).toMatchObject({
      name: `send ${name}`,
      ended: true,
      attributes: {
        'messaging.system': 'echomq',
        'messaging.destination.name': name,
        'messaging.operation.type': 'send',
        'messaging.message.id': id,
        'echomq.job.name': 'mail',
        'echomq.enqueue.status': 'enqueued',
      },
    });
    const kept = await raw.get(key(`trace:${id}`));
    expect(kept).toBe(`00-${producer!.context.traceId}-${producer!.context.spanId}-01`);
    const ttl = await raw.pttl(key(`trace:${id}`));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // Enqueuing the same id again is a duplicate and keeps the first producer's context.
    const again = await traced.enqueue({ n: 1 }, { id });
    expect(again.status).toBe('duplicate');
    expect(await raw.get(key(`trace:${id}`))).toBe(kept);
  });

  it('runs each attempt in a CONSUMER span linked to the producer span', async ({
    q,
    consumers,
    queueName: name,
  }) => {
    const t = tracer();
    const traced = withTracing(q, { tracer: t });
    const { id } = await traced.enqueue({ n: 1 }, { attempts: 2, backoff: { kind: 'fixed', ms: 0 } });
    const inside: (string | undefined)[] = [];
    let calls = 0;
    const c = traced.consume(
      async (job) => {
        inside.push(trace.getActiveSpan()?.spanContext().spanId);
        calls += 1;
        if (calls === 1) throw new Error('first attempt fails');
        return job.data.n;
      },
      { beatMs: 200 },
    );
    consumers.push(c);
    await ended(c, 1);
    const producer = t.of(SpanKind.PRODUCER)[0]!;
    const attempts = t.of(SpanKind.CONSUMER);
    expect(attempts).toHaveLength(2);
    for (const [i, span] of attempts.entries()) {
      expect(span.name).toBe(`process ${name}`);
      expect(span.ended).toBe(true);
      expect(span.attributes['messaging.message.id']).toBe(id);
      expect(span.attributes['echomq.job.attempt']).toBe(i + 1);
      expect(span.links).toHaveLength(1);
      expect(span.links[0]!.context).toMatchObject({
        traceId: producer.context.traceId,
        spanId: producer.context.spanId,
        isRemote: true,
      });
    }
    expect(attempts[0]!.status.code).toBe(SpanStatusCode.ERROR);
    expect(attempts[0]!.exceptions).toHaveLength(1);
    expect(attempts[1]!.status.code).toBe(SpanStatusCode.OK);
    // With no context manager registered (no SDK) there is no active span inside the handler.
    expect(inside).toEqual([undefined, undefined]);
  });

  it('writes one context per job of enqueueMany', async ({ q, raw, key }) => {
    const t = tracer();
    const traced = withTracing(q, { tracer: t });
    const out = await traced.enqueueMany([{ data: { n: 1 } }, { data: { n: 2 }, opts: { name: 'b' } }]);
    const producers = t.of(SpanKind.PRODUCER);
    expect(producers.map((s) => s.attributes['messaging.message.id'])).toEqual(out.map((o) => o.id));
    for (const [i, o] of out.entries()) {
      expect(parseTraceContext(await raw.get(key(`trace:${o.id}`)))?.spanId).toBe(
        producers[i]!.context.spanId,
      );
    }
  });

  it('writes nothing without an SDK (the API alone makes invalid span contexts)', async ({
    q,
    raw,
    key,
    consumers,
  }) => {
    const traced = withTracing(q); // the global tracer: a no-op without an SDK
    const { id } = await traced.enqueue({ n: 1 });
    expect(await raw.exists(key(`trace:${id}`))).toBe(0);
    const c = traced.consume(async (job) => job.data.n, { beatMs: 200 });
    consumers.push(c);
    await ended(c, 1);
    expect((await q.get(id))?.state).toBe('completed');
  });

  it('formats and parses a traceparent with its tracestate', () => {
    const sc: SpanContext = {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: 1,
    };
    expect(formatTraceContext(sc)).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    const back = parseTraceContext(`${formatTraceContext(sc)}\nvendor=abc`);
    expect(back).toMatchObject({ ...sc, isRemote: true });
    expect(back?.traceState?.get('vendor')).toBe('abc');
    expect(parseTraceContext('00-00000000000000000000000000000000-b7ad6b7169203331-01')).toBeNull();
    expect(parseTraceContext('garbage')).toBeNull();
    expect(parseTraceContext(null)).toBeNull();
  });
});
