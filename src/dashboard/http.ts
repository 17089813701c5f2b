// Plain HTTP for the dashboard: the error a handler throws to answer with a status, how
// EchoMQ's errors map to statuses, replies that always carry the security headers, and a
// request body read with a size limit and parsed as a form or a JSON object of strings.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EchoMQError } from '../core/errors.js';
import { SECURITY_HEADERS } from './guard.js';

const MAX_BODY_BYTES = 16 * 1024;

/** Thrown by a handler or a guard: the status to answer with, and its message. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** The status an error answers with: bad input 400, no such job 404, wrong state 409, closed or no Redis 503. */
export function statusOf(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (err instanceof EchoMQError) {
    if (err.code === 'EMQINPUT' || err.code === 'EMQKIND') return 400;
    if (err.code === 'EMQNOJOB') return 404;
    if (err.code === 'EMQSTATE') return 409;
    if (err.code === 'EMQCLOSED' || err.code === 'EMQNOSERVER') return 503;
  }
  return 500;
}

export function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, ...headers });
  res.end(body);
}

export function html(res: ServerResponse, body: string, status = 200): void {
  send(res, status, 'text/html; charset=utf-8', body);
}

export function json(res: ServerResponse, value: unknown, status = 200): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, 'request body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The fields of a form or JSON body (string values only); {} for any other content type. */
export async function readFields(req: IncomingMessage): Promise<Record<string, string>> {
  const raw = await readBody(req);
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  const fields: Record<string, string> = {};
  if (type === 'application/x-www-form-urlencoded') {
    // A repeated field (the checked boxes of a list, all named id) arrives as its values one a
    // line: job ids hold no whitespace.
    const params = new URLSearchParams(raw);
    for (const k of new Set(params.keys())) fields[k] = params.getAll(k).join('\n');
    return fields;
  }
  if (type === 'application/json' && raw.trim() !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new HttpError(400, 'the body is not JSON');
    }
    if (parsed && typeof parsed === 'object') {
      for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string') fields[k] = v;
    }
  }
  return fields;
}
