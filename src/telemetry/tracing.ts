// Tracing through the OpenTelemetry API alone (@opentelemetry/api; the application brings the
// SDK and exporter, and without one every span is a no-op). What withTracing() adds:
//   1. enqueue    — a PRODUCER span `send <queue>` around each admission, whose span context
//                   is kept for the job as a W3C traceparent
//   2. processing — a CONSUMER span `process <queue>` around each handler run (every attempt),
//                   linked to the producer span by a span link, and active while the handler
//                   runs, so the handler's own spans nest under it
// How the context travels: the enqueue script's tuple has no field for it and the claim reply
// carries none, so rather than change the protocol the context is kept beside the row, at
// `emq:{<queue>}:trace:<job id>` (same hash slot as the row), written with SET NX PX before the
// admission and read with one GET when an attempt starts. Scripts never touch that key: it
// expires on its own (ttlMs), a job enqueued without tracing has none, and a runtime that does
// not trace never sees it. Only a valid (sampled or not) span context is written, so with no
// SDK installed nothing is written at all.
import {
  type Context,
  context,
  createTraceState,
  isSpanContextValid,
  type Link,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { ConsumeOptions, Consumer } from '../consumer/consumer.js';
import { mintJobId } from '../core/ids.js';
import type { EnqueueOptions, EnqueueStatus, Handler, ScheduleStatus } from '../core/types.js';
import type { Queue } from '../queue/queue.js';
import { dropTrace, keepTrace, keepTraces, readTrace } from '../wire/trace-store.js';

export interface TracingOptions {
  /** The tracer spans are made with. Default: trace.getTracer('echomq'), the global provider's. */
  tracer?: Tracer | undefined;
  /** How long a job's trace context is kept for its attempts, in ms. Default 7 days (604800000). */
  ttlMs?: number | undefined;
}

const DEFAULT_TTL_MS = 7 * 24 * 3600 * 1000;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A span context as a W3C traceparent, with its tracestate on a second line when it has one. */
export function formatTraceContext(sc: SpanContext): string {
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0');
  const parent = `00-${sc.traceId}-${sc.spanId}-${flags}`;
  const state = sc.traceState?.serialize();
  return state ? `${parent}\n${state}` : parent;
}

/** Parses formatTraceContext's text back (a remote span context); null when it is not one. */
export function parseTraceContext(text: string | null | undefined): SpanContext | null {
  if (!text) return null;
  const [parent, state] = text.split('\n');
  const m = TRACEPARENT.exec(parent ?? '');
  if (!m) return null;
  const sc: SpanContext = {
    traceId: m[1]!,
    spanId: m[2]!,
    traceFlags: Number.parseInt(m[3]!, 16),
    isRemote: true,
  };
  if (state) sc.traceState = createTraceState(state);
  return isSpanContextValid(sc) ? sc : null;
}

/** A queue whose admissions and handlers make spans. Build one with withTracing(queue). */
export class TracedQueue<D = unknown, R = unknown> {
  readonly tracer: Tracer;
  readonly ttlMs: number;

  constructor(
    readonly queue: Queue<D, R>,
    opts: TracingOptions = {},
  ) {
    this.tracer = opts.tracer ?? trace.getTracer('echomq');
    this.ttlMs = opts.ttlMs ?? DEFAULT_TTL_MS;
  }

  /** The key a job's trace context is kept at. */
  traceKey(id: string): string {
    return this.queue.keys.trace(id);
  }

  /** queue.enqueue inside a PRODUCER span; the span's context is kept for the job. */
  enqueue(data: D, opts: EnqueueOptions = {}): Promise<{ id: string; status: EnqueueStatus }> {
    return this.send(opts, (o) => this.queue.enqueue(data, o));
  }

  /** queue.enqueueAt inside a PRODUCER span. */
  enqueueAt(
    data: D,
    runAtMs: number,
    opts: EnqueueOptions = {},
  ): Promise<{ id: string; status: ScheduleStatus }> {
    return this.send(opts, (o) => this.queue.enqueueAt(data, runAtMs, o));
  }

  /** queue.enqueueIn inside a PRODUCER span. */
  enqueueIn(
    data: D,
    delayMs: number,
    opts: EnqueueOptions = {},
  ): Promise<{ id: string; status: ScheduleStatus }> {
    return this.send(opts, (o) => this.queue.enqueueIn(data, delayMs, o));
  }

  /** queue.enqueueMany with one PRODUCER span per job, their contexts written in one pipeline. */
  async enqueueMany(
    items: readonly { data: D; opts?: EnqueueOptions }[],
  ): Promise<{ id: string; status: EnqueueStatus }[]> {
    const parent = context.active();
    const withIds = items.map((it) => ({
      data: it.data,
      opts: { ...it.opts, id: it.opts?.id ?? mintJobId() },
    }));
    const spans = withIds.map((it) => this.producerSpan(it.opts, parent));
    try {
      const contexts: [string, string][] = [];
      for (const [i, span] of spans.entries()) {
        const sc = span.spanContext();
        if (isSpanContextValid(sc)) contexts.push([withIds[i]!.opts.id, formatTraceContext(sc)]);
      }
      await keepTraces(this.queue.wire, contexts, this.ttlMs);
      const out = await this.queue.enqueueMany(withIds);
      for (const [i, r] of out.entries()) spans[i]!.setAttribute('echomq.enqueue.status', r.status);
      return out;
    } catch (err) {
      for (const span of spans) failSpan(span, err);
      throw err;
    } finally {
      for (const span of spans) span.end();
    }
  }

  /** Wraps a handler: each attempt runs inside a CONSUMER span linked to the job's producer span. */
  handler(handler: Handler<D, R>): Handler<D, R> {
    return async (job, ctx) => {
      const carried = await this.context(job.id).catch(() => null);
      const links: Link[] = carried ? [{ context: carried }] : [];
      const span = this.tracer.startSpan(
        `process ${this.queue.name}`,
        {
          kind: SpanKind.CONSUMER,
          links,
          attributes: {
            'messaging.system': 'echomq',
            'messaging.operation.type': 'process',
            'messaging.operation.name': 'process',
            'messaging.destination.name': this.queue.name,
            'messaging.message.id': job.id,
            'echomq.job.attempt': job.attempts,
            ...(job.name ? { 'echomq.job.name': job.name } : {}),
          },
        },
        context.active(),
      );
      try {
        const result = await context.with(trace.setSpan(context.active(), span), () => handler(job, ctx));
        span.setStatus({ code: SpanStatusCode.OK });
        return result;
      } catch (err) {
        failSpan(span, err);
        throw err;
      } finally {
        span.end();
      }
    };
  }

  /** queue.consume with the handler wrapped by handler(). */
  consume(handler: Handler<D, R>, opts?: ConsumeOptions): Consumer<D, R> {
    return this.queue.consume(this.handler(handler), opts);
  }

  /** The producer span context kept for a job, or null (none written, or expired). */
  async context(id: string): Promise<SpanContext | null> {
    return parseTraceContext(await readTrace(this.queue.wire, id));
  }

  // ── producing ──────────────────────────────────────────────────────────────

  private producerSpan(opts: EnqueueOptions & { id: string }, parent: Context): Span {
    return this.tracer.startSpan(
      `send ${this.queue.name}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          'messaging.system': 'echomq',
          'messaging.operation.type': 'send',
          'messaging.operation.name': 'send',
          'messaging.destination.name': this.queue.name,
          'messaging.message.id': opts.id,
          ...(opts.name ? { 'echomq.job.name': opts.name } : {}),
        },
      },
      parent,
    );
  }

  private async send<S extends string>(
    opts: EnqueueOptions,
    admit: (opts: EnqueueOptions) => Promise<{ id: string; status: S }>,
  ): Promise<{ id: string; status: S }> {
    // The id is minted here so the context can be written before the job can be claimed.
    const withId = { ...opts, id: opts.id ?? mintJobId() };
    const span = this.producerSpan(withId, context.active());
    try {
      const sc = span.spanContext();
      let wrote = false;
      if (isSpanContextValid(sc)) {
        // NX: enqueuing an existing id again (a duplicate) keeps the first producer's context.
        wrote = await keepTrace(this.queue.wire, withId.id, formatTraceContext(sc), this.ttlMs);
      }
      let out: { id: string; status: S };
      try {
        out = await context.with(trace.setSpan(context.active(), span), () => admit(withId));
      } catch (err) {
        if (wrote) await dropTrace(this.queue.wire, withId.id).catch(() => {});
        throw err;
      }
      span.setAttribute('echomq.enqueue.status', out.status);
      return out;
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  }
}

function failSpan(span: Span, err: unknown): void {
  const error = err instanceof Error ? err : new Error(String(err));
  span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

/**
 * Traces a queue's admissions (PRODUCER spans) and, through `.consume()` or `.handler()`, its
 * processing (CONSUMER spans linked to the producer's).
 * @example
 *   const traced = withTracing(mq.queue('emails'));
 *   await traced.enqueue({ to: 'a@b.c' });
 *   traced.consume(async (job) => send(job.data));
 */
export function withTracing<D, R>(queue: Queue<D, R>, opts?: TracingOptions): TracedQueue<D, R> {
  return new TracedQueue(queue, opts);
}
