// Redis that does not answer, said the same way everywhere (library, CLI, dashboard, /metrics):
// where (the URL without its password) and why (ECONNREFUSED, ENOTFOUND, a timeout, an auth
// error), instead of ioredis's "Reached the max retries per request limit (which is 20)".
import { EchoMQError } from '../core/errors.js';

/** The URL without its password, for messages. */
export function shownUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

const CONNECTION_CODES = ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH', 'EPIPE'];

/** True for an error that means the connection, not the call, failed. */
export function isConnectionError(err: unknown): boolean {
  if (err instanceof EchoMQError) return err.code === 'EMQNOSERVER';
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: string }).code ?? '';
  return (
    CONNECTION_CODES.includes(code) ||
    err.name === 'MaxRetriesPerRequestError' ||
    /Connection is closed|connect ETIMEDOUT|Stream isn't writeable/.test(err.message)
  );
}

/** True for a refused password or user: the connection cannot become ready. */
export function isAuthError(err: unknown): boolean {
  return err instanceof Error && /^(WRONGPASS|NOAUTH|ERR invalid password|ERR AUTH)/.test(err.message);
}

/** The cause in a few words: the error's code and message (`ECONNREFUSED: connect ECONNREFUSED …`). */
export function causeOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: string }).code;
  return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
}

/**
 * EMQNOSERVER naming where and why: `cause` is the connection's last error when one was seen
 * (it says more than the failed call's own), else the call's error.
 */
export function unreachable(where: string, cause: unknown, during: 'connect' | 'call'): EchoMQError {
  const advice =
    during === 'connect'
      ? 'check the URL (url option or REDIS_URL) and that redis-server runs there'
      : 'the call was not made; EchoMQ reconnects by itself once the server answers';
  return new EchoMQError('EMQNOSERVER', `cannot reach Redis at ${where} (${causeOf(cause)}); ${advice}`, {
    cause,
  });
}
