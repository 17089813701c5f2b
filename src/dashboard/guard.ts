// The dashboard's guards: what a request must pass before any handler sees it, as predicates
// over the request, apart from routing and rendering (steps 2, 3 and 5 of index.ts):
//   host   — the Host header is one of allowedHosts (DNS rebinding), when those are set
//   auth   — basic and/or bearer credentials, compared in constant time; serving without any
//            is the explicit `auth: false`, never what a missing variable leaves behind
//   action — the CSRF token (header x-csrf-token or form field _csrf) and a same-origin
//            Origin/Referer; the return address of a form is a path of this dashboard
// and the security headers every response carries.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { knownKeys } from '../core/check.js';
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

/**
 * The credentials every request must carry: HTTP basic, a bearer token, or either when both are
 * given. Each one named must be usable (a bearer of 16+ characters, a user and a password of 8+):
 * `bearer: process.env.TOKEN` with TOKEN unset refuses to start, it never serves without auth.
 */
export interface DashboardAuth {
  basic?: { user: string | undefined; password: string | undefined } | undefined;
  bearer?: string | undefined;
}

export interface GuardOptions {
  /** The credentials, or `false` to serve without any (anyone who reaches the port may act). */
  auth?: DashboardAuth | false | undefined;
  allowedHosts?: string[];
  allowedOrigins?: string[];
  csrfToken?: string;
}

const MIN_BEARER = 16;
const MIN_PASSWORD = 8;
const AUTH_KEYS = new Set(['basic', 'bearer']);
const BASIC_KEYS = new Set(['user', 'password']);
const HOW =
  "pass auth: { bearer: '<a random token of 16+ characters>' } or auth: { basic: { user, password } }, " +
  'or auth: false to serve without credentials (anyone who reaches the port can retry, cancel and remove jobs)';

/** What a credential's value is, for an error: never the secret itself. */
function described(value: unknown): string {
  if (value === undefined) return 'undefined (an unset environment variable?)';
  if (value === '') return 'empty';
  if (typeof value !== 'string') return `a ${value === null ? 'null' : typeof value}, not a string`;
  return `${value.length} characters`;
}

/** How checkAuth names each credential in its errors, and what to do instead. */
export interface AuthNames {
  bearer: string;
  user: string;
  password: string;
  how: string;
}

const OPTION_NAMES: AuthNames = {
  bearer: 'dashboard option auth.bearer',
  user: 'dashboard option auth.basic.user',
  password: 'dashboard option auth.basic.password',
  how: HOW,
};

/**
 * The credentials of `auth`, checked: undefined (no option) and unusable credentials are refused
 * with EMQINPUT naming the option, so a dashboard only ever serves openly when told `auth: false`.
 * `names` words the errors for another front (the CLI names its flags).
 */
export function checkAuth(
  auth: unknown,
  names: AuthNames = OPTION_NAMES,
): { basic?: { user: string; password: string }; bearer?: string } {
  if (auth === false) return {};
  if (auth === undefined)
    throw new EchoMQError('EMQINPUT', `dashboard option auth is required: ${names.how}`);
  if (auth === null || typeof auth !== 'object' || Array.isArray(auth)) {
    throw new EchoMQError(
      'EMQINPUT',
      `dashboard option auth must be an object or false, got ${described(auth)}: ${names.how}`,
    );
  }
  const given = knownKeys(auth as DashboardAuth, AUTH_KEYS, 'dashboard auth option');
  const out: { basic?: { user: string; password: string }; bearer?: string } = {};
  if ('bearer' in given) {
    const { bearer } = given;
    if (typeof bearer !== 'string' || bearer.length < MIN_BEARER) {
      throw new EchoMQError(
        'EMQINPUT',
        `${names.bearer} is ${described(bearer)}: it must be a random token of at least ${MIN_BEARER} characters (e.g. openssl rand -hex 24)`,
      );
    }
    out.bearer = bearer;
  }
  if ('basic' in given) {
    const basic: unknown = given.basic;
    if (basic === null || typeof basic !== 'object') {
      throw new EchoMQError(
        'EMQINPUT',
        `dashboard option auth.basic is ${described(basic)}: it takes { user, password }`,
      );
    }
    const { user, password } = knownKeys(
      basic as { user?: unknown; password?: unknown },
      BASIC_KEYS,
      'dashboard auth.basic option',
    );
    if (typeof user !== 'string' || user === '') {
      throw new EchoMQError('EMQINPUT', `${names.user} is ${described(user)}: it needs a user name`);
    }
    if (typeof password !== 'string' || password.length < MIN_PASSWORD) {
      throw new EchoMQError(
        'EMQINPUT',
        `${names.password} is ${described(password)}: it needs at least ${MIN_PASSWORD} characters`,
      );
    }
    out.basic = { user, password };
  }
  if (out.basic === undefined && out.bearer === undefined) {
    throw new EchoMQError('EMQINPUT', `dashboard option auth names no credential: ${names.how}`);
  }
  return out;
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

  /** Checks the options: a bad token, a missing or unusable credential is refused (EMQINPUT) before serving. */
  constructor(opts: GuardOptions) {
    this.csrf = opts.csrfToken ?? PROCESS_CSRF;
    if (this.csrf.length < 16) throw new EchoMQError('EMQINPUT', 'csrfToken must be at least 16 characters');
    this.allowedHosts = opts.allowedHosts?.map((h) => hostName(h));
    this.allowedOrigins = new Set(opts.allowedOrigins ?? []);
    const { basic, bearer } = checkAuth(opts.auth);
    this.basic = basic;
    this.bearer = bearer;
  }

  /** Whether the Host header is one the dashboard answers to (any, without allowedHosts). */
  hostAllowed(req: IncomingMessage): boolean {
    return !this.allowedHosts || this.allowedHosts.includes(hostName(req.headers.host));
  }

  /** Whether the request carries the configured credentials (true when told `auth: false`). */
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
