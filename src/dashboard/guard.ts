// The dashboard's guards: what a request must pass before any handler sees it, as predicates
// over the request, apart from routing and rendering (steps 2, 3 and 5 of index.ts):
//   host   — the Host header is one of allowedHosts (DNS rebinding), when those are set
//   auth   — basic and/or bearer credentials, compared in constant time, when configured
//   action — the CSRF token (header x-csrf-token or form field _csrf) and a same-origin
//            Origin/Referer; the return address of a form is a path of this dashboard
// and the security headers every response carries.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { EchoMQError } from '../core/errors.js';

/** A CSP without inline script or style, nosniff, no framing, no caching. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

/** The Host names a dashboard on a loopback interface accepts by default. */
export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];

/** The CSRF token of every dashboard in this process that is not given one. */
const PROCESS_CSRF = randomBytes(32).toString('base64url');

export interface GuardOptions {
  auth?: { basic?: { user: string; password: string }; bearer?: string };
  allowedHosts?: string[];
  allowedOrigins?: string[];
  csrfToken?: string;
}

/** Compares secrets in constant time (hashing first makes the lengths equal). */
function same(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** The name part of a Host header, lower case: 'a.b' of 'A.b:3000', '[::1]' of '[::1]:80'. */
export function hostName(host: string | undefined): string {
  if (!host) return '';
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  return h.split(':')[0] ?? '';
}

export class Guard {
  /** The token pages carry in their forms and actions must send back. */
  readonly csrf: string;
  private readonly allowedHosts: string[] | undefined;
  private readonly allowedOrigins: Set<string>;
  private readonly basic: { user: string; password: string } | undefined;
  private readonly bearer: string | undefined;

  /** Checks the options: a bad token or half a credential is refused (EMQINPUT) before serving. */
  constructor(opts: GuardOptions) {
    this.csrf = opts.csrfToken ?? PROCESS_CSRF;
    if (this.csrf.length < 16) throw new EchoMQError('EMQINPUT', 'csrfToken must be at least 16 characters');
    this.allowedHosts = opts.allowedHosts?.map((h) => hostName(h));
    this.allowedOrigins = new Set(opts.allowedOrigins ?? []);
    this.basic = opts.auth?.basic;
    this.bearer = opts.auth?.bearer;
    if (this.basic && (!this.basic.user || !this.basic.password))
      throw new EchoMQError('EMQINPUT', 'auth.basic needs a user and a password');
    if (this.bearer !== undefined && this.bearer.length < 16) {
      throw new EchoMQError('EMQINPUT', 'auth.bearer must be at least 16 characters (a random token)');
    }
  }

  /** Whether the Host header is one the dashboard answers to (any, without allowedHosts). */
  hostAllowed(req: IncomingMessage): boolean {
    return !this.allowedHosts || this.allowedHosts.includes(hostName(req.headers.host));
  }

  /** Whether the request carries the configured credentials (true when none are). */
  authorized(req: IncomingMessage): boolean {
    const { basic, bearer } = this;
    if (!basic && bearer === undefined) return true;
    const header = req.headers.authorization ?? '';
    const space = header.indexOf(' ');
    const scheme = header.slice(0, space).toLowerCase();
    const value = header.slice(space + 1).trim();
    if (bearer !== undefined && scheme === 'bearer') return same(value, bearer);
    if (basic && scheme === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) return false;
      // Both compared, always: no early exit tells which one was wrong.
      const userOk = same(decoded.slice(0, colon), basic.user);
      const passOk = same(decoded.slice(colon + 1), basic.password);
      return userOk && passOk;
    }
    return false;
  }

  /** The WWW-Authenticate header of a 401: the schemes that would be accepted. */
  challenge(): Record<string, string> {
    const schemes: string[] = [];
    if (this.basic) schemes.push('Basic realm="EchoMQ dashboard", charset="UTF-8"');
    if (this.bearer !== undefined) schemes.push('Bearer realm="EchoMQ dashboard"');
    return { 'www-authenticate': schemes.join(', ') };
  }

  /** Whether an action carries the CSRF token, in the x-csrf-token header or the _csrf field. */
  tokenMatches(req: IncomingMessage, fields: Readonly<Record<string, string>>): boolean {
    const header = req.headers['x-csrf-token'];
    const token = (typeof header === 'string' ? header : undefined) ?? fields._csrf;
    return token !== undefined && token !== '' && same(token, this.csrf);
  }

  /** Whether a browser sent the action from this dashboard's own origin (or an allowed one). */
  sameOrigin(req: IncomingMessage): boolean {
    if (req.headers['sec-fetch-site'] === 'cross-site') return false;
    const source = req.headers.origin ?? req.headers.referer;
    if (source === undefined) return true; // no browser sent this; the token still must match
    if (this.allowedOrigins.has(source)) return true;
    try {
      const u = new URL(source);
      return u.host === req.headers.host && (u.protocol === 'http:' || u.protocol === 'https:');
    } catch {
      return false;
    }
  }
}

/**
 * Where a form's `return` field may send the browser after an action: a plain path under
 * `linkBase` (no scheme, host, `//` or backslash: no open redirect); else the dashboard's root.
 */
export function safeReturn(ret: string | undefined, linkBase: string): string {
  const r = ret ?? '';
  const safe =
    /^[\x21-\x7e]+$/.test(r) &&
    r.startsWith('/') &&
    !r.startsWith('//') &&
    !r.includes('\\') &&
    (linkBase === '' || r === linkBase || r.startsWith(`${linkBase}/`) || r.startsWith(`${linkBase}?`));
  return safe ? r : `${linkBase}/`;
}
