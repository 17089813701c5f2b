// How values cross the wire: JSON text in the job row (payload, result, progress), refused
// before the wire when it cannot round-trip or is over the size limit.
import { EchoMQError } from './errors.js';

/** Encodes a value as JSON for the wire, refusing what cannot round-trip or is too big. */
export function encodeJson(value: unknown, what: string, limit: number): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new EchoMQError('EMQINPUT', `${what} cannot be encoded as JSON: ${(err as Error).message}`);
  }
  if (text === undefined) {
    throw new EchoMQError(
      'EMQINPUT',
      `${what} cannot be encoded as JSON (got ${typeof value}); pass null instead`,
    );
  }
  const size = Buffer.byteLength(text);
  if (size > limit) {
    throw new EchoMQError(
      'EMQTOOBIG',
      `${what} is ${size} bytes encoded, over the ${limit}-byte limit; store large data elsewhere and enqueue a reference, or raise maxPayloadBytes`,
    );
  }
  return text;
}

/** Decodes a JSON field; text another runtime stored as plain text comes back as is. */
export function parseMaybe(v: string | undefined): unknown {
  if (v === undefined) return undefined;
  try {
    return JSON.parse(v);
  } catch {
    return v; // a runtime in another language may store plain text
  }
}
