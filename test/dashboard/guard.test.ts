// The dashboard's guards as plain predicates over a request: Host names, credentials, the CSRF
// token, the origin, and the return address of a form. No server, no Redis.
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { Guard, type GuardOptions, hostName, safeReturn } from '../../src/dashboard/guard.js';

const TOKEN = 'a-csrf-token-of-32-characters-ok';

function request(headers: Record<string, string>): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

describe('Guard', () => {
  it('refuses a short CSRF token, half a basic credential and a short bearer with EMQINPUT', () => {
    for (const opts of <GuardOptions[]>[
      { auth: false, csrfToken: 'short' },
      { auth: { basic: { user: 'ops', password: '' } } },
      { auth: { bearer: 'short' } },
      { auth: { bearer: undefined } },
      {},
    ]) {
      expect(() => new Guard(opts)).toThrow(EchoMQError);
    }
  });

  it('answers any Host without allowedHosts, and only those names (any port) with them', () => {
    expect(new Guard({ auth: false }).hostAllowed(request({ host: 'anything.example' }))).toBe(true);
    const g = new Guard({ auth: false, allowedHosts: ['Queues.internal', '[::1]'] });
    expect(g.hostAllowed(request({ host: 'queues.internal:8080' }))).toBe(true);
    expect(g.hostAllowed(request({ host: '[::1]:3000' }))).toBe(true);
    expect(g.hostAllowed(request({ host: 'evil.example' }))).toBe(false);
    expect(g.hostAllowed(request({}))).toBe(false);
    expect(hostName(' A.B:3000 ')).toBe('a.b');
  });

  it('takes basic or bearer credentials when both are configured, and names both in the challenge', () => {
    const g = new Guard({ auth: { basic: { user: 'ops', password: 'pw-of-8+' }, bearer: 'b'.repeat(16) } });
    expect(g.authorized(request({ authorization: basic('ops', 'pw-of-8+') }))).toBe(true);
    expect(g.authorized(request({ authorization: `Bearer ${'b'.repeat(16)}` }))).toBe(true);
    expect(g.authorized(request({ authorization: basic('ops', 'wrong') }))).toBe(false);
    expect(g.authorized(request({ authorization: 'Bearer wrong' }))).toBe(false);
    expect(g.authorized(request({}))).toBe(false);
    expect(g.challenge()['www-authenticate']).toMatch(/^Basic realm=.*, Bearer realm=/);
    expect(new Guard({ auth: false }).authorized(request({}))).toBe(true);
  });

  it('matches the CSRF token from the header or the _csrf field, never an empty one', () => {
    const g = new Guard({ auth: false, csrfToken: TOKEN });
    expect(g.tokenMatches(request({ 'x-csrf-token': TOKEN }), {})).toBe(true);
    expect(g.tokenMatches(request({}), { _csrf: TOKEN })).toBe(true);
    expect(g.tokenMatches(request({}), { _csrf: 'wrong' })).toBe(false);
    expect(g.tokenMatches(request({}), { _csrf: '' })).toBe(false);
    expect(g.tokenMatches(request({}), {})).toBe(false);
  });

  it('takes an action from its own origin or an allowed one, not a cross-site one', () => {
    const g = new Guard({ auth: false, allowedOrigins: ['https://proxy.example'] });
    const host = 'queues.internal:3000';
    expect(g.sameOrigin(request({ host, origin: 'http://queues.internal:3000' }))).toBe(true);
    expect(g.sameOrigin(request({ host, referer: 'https://queues.internal:3000/queues/a' }))).toBe(true);
    expect(g.sameOrigin(request({ host, origin: 'https://proxy.example' }))).toBe(true);
    expect(g.sameOrigin(request({ host }))).toBe(true); // no browser: the token still decides
    expect(g.sameOrigin(request({ host, origin: 'http://evil.example' }))).toBe(false);
    expect(g.sameOrigin(request({ host, origin: 'javascript:alert(1)' }))).toBe(false);
    expect(g.sameOrigin(request({ host, 'sec-fetch-site': 'cross-site' }))).toBe(false);
  });
});

describe('safeReturn', () => {
  it('follows a path under the mount, and sends anything else to the dashboard root', () => {
    expect(safeReturn('/admin/queues/emails?state=dead', '/admin')).toBe('/admin/queues/emails?state=dead');
    expect(safeReturn('/admin', '/admin')).toBe('/admin');
    expect(safeReturn('/queues/a', '')).toBe('/queues/a');
    for (const bad of [
      '//evil.example/',
      'https://evil.example/',
      '/\\evil',
      '/adminx',
      '/other',
      '/a b',
      '',
    ]) {
      expect(safeReturn(bad, '/admin')).toBe('/admin/');
    }
    expect(safeReturn(undefined, '')).toBe('/');
  });
});
