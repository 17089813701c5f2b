// fengari, the Lua VM the memory engine runs scripts in, loaded once and patched so its
// numbers behave as Lua 5.1's (Redis's Lua) do: see lua.ts for why and how. Also the two
// conversions every bridge to it needs: a latin1 string to Lua's bytes and back.
import { createRequire } from 'node:module';

export type State = object;
export type LuaString = Uint8Array;
interface Debug {
  currentline: number;
  source: LuaString | null;
}
export interface Fengari {
  lua: {
    LUA_OK: number;
    LUA_REGISTRYINDEX: number;
    LUA_TNIL: number;
    LUA_TBOOLEAN: number;
    LUA_TNUMBER: number;
    LUA_TSTRING: number;
    LUA_TTABLE: number;
    lua_Debug: new () => Debug;
    lua_createtable(L: State, narr: number, nrec: number): void;
    lua_error(L: State): never;
    lua_getglobal(L: State, name: string): number;
    lua_getinfo(L: State, what: string, ar: Debug): number;
    lua_getstack(L: State, level: number, ar: Debug): number;
    lua_gettop(L: State): number;
    lua_pcall(L: State, nargs: number, nresults: number, msgh: number): number;
    lua_pop(L: State, n: number): void;
    lua_pushboolean(L: State, b: boolean): void;
    lua_pushcfunction(L: State, f: (L: State) => number): void;
    lua_pushnil(L: State): void;
    lua_pushnumber(L: State, n: number): void;
    lua_pushstring(L: State, s: LuaString | string): void;
    lua_pushvalue(L: State, idx: number): void;
    lua_rawgeti(L: State, idx: number, n: number): number;
    lua_rawseti(L: State, idx: number, n: number): void;
    lua_remove(L: State, idx: number): void;
    lua_setfield(L: State, idx: number, k: string): void;
    lua_getfield(L: State, idx: number, k: string): number;
    lua_gettable(L: State, idx: number): number;
    lua_next(L: State, idx: number): number;
    lua_pushlightuserdata(L: State, p: unknown): void;
    lua_touserdata(L: State, idx: number): unknown;
    LUA_TLIGHTUSERDATA: number;
    lua_setglobal(L: State, name: string): void;
    lua_settop(L: State, idx: number): void;
    lua_toboolean(L: State, idx: number): boolean;
    lua_tonumber(L: State, idx: number): number;
    lua_tolstring(L: State, idx: number): LuaString | null;
    lua_type(L: State, idx: number): number;
  };
  lauxlib: {
    luaL_newstate(): State;
    luaL_loadbuffer(L: State, buf: LuaString, size: number | null, name: string): number;
    luaL_ref(L: State, t: number): number;
    luaL_requiref(L: State, name: string, open: (L: State) => number, glb: number): void;
    luaL_checknumber(L: State, idx: number): number;
    luaL_tolstring(L: State, idx: number): LuaString;
    luaL_error(L: State, fmt: LuaString): never;
  };
  lualib: Record<'luaopen_base' | 'luaopen_table' | 'luaopen_string' | 'luaopen_math', (L: State) => number>;
}
interface TValue {
  value: number;
  ttisinteger(): boolean;
  setfltvalue(n: number): void;
  setsvalue(s: unknown): void;
}

let loaded: Fengari | undefined;

/** Loads fengari once, configured and patched for Lua 5.1's numbers (see the header). */
export function fengari(): Fengari {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  // Read by fengari's luaconf when first loaded: integral floats print without ".0".
  const before = process.env.FENGARICONF;
  process.env.FENGARICONF = JSON.stringify({ LUA_COMPAT_FLOATSTRING: true });
  try {
    loaded = require('fengari') as Fengari;
  } finally {
    if (before === undefined) delete process.env.FENGARICONF;
    else process.env.FENGARICONF = before;
  }
  const lobject = require('fengari/src/lobject.js') as {
    luaO_str2num: (s: LuaString, o: TValue) => number;
    luaO_tostring: (L: State, o: TValue) => void;
  };
  const lstring = require('fengari/src/lstring.js') as { luaS_bless: (L: State, s: LuaString) => unknown };
  // 1: every numeral and every string turned into a number is a float.
  const str2num = lobject.luaO_str2num;
  lobject.luaO_str2num = (s, o) => {
    const size = str2num(s, o);
    if (size !== 0 && o.ttisinteger()) o.setfltvalue(o.value);
    return size;
  };
  // 2: numbers print with C's %.14g, as Lua 5.1 prints them.
  lobject.luaO_tostring = (L, o) => {
    o.setsvalue(lstring.luaS_bless(L, bytes(o.ttisinteger() ? String(o.value) : formatG(o.value, 14))));
  };
  return loaded;
}

/** C's printf `%.<precision>g`, ties to even as glibc rounds the exact binary value. */
export function formatG(n: number, precision: number): string {
  if (Number.isNaN(n)) return 'nan';
  if (!Number.isFinite(n)) return n > 0 ? 'inf' : '-inf';
  if (n === 0) return Object.is(n, -0) ? '-0' : '0';
  const [digits, e] = roundedDigits(Math.abs(n), precision);
  const sign = n < 0 ? '-' : '';
  if (e < -4 || e >= precision) {
    const mantissa = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${stripZeros(mantissa)}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  const fixed =
    e >= 0 ? `${digits.slice(0, e + 1)}.${digits.slice(e + 1)}` : `0.${'0'.repeat(-e - 1)}${digits}`;
  return sign + stripZeros(fixed);
}

/**
 * The first `precision` significant digits of a positive number and its decimal exponent.
 * JavaScript's toExponential breaks an exact tie upwards; C breaks it to even, so a tie
 * (the exact expansion is the kept digits then 5 and nothing else) is decided here.
 */
function roundedDigits(x: number, precision: number): [string, number] {
  const [longMantissa, longExp] = x.toExponential(Math.min(100, precision + 30)).split('e') as [
    string,
    string,
  ];
  const exact = longMantissa.replace('.', '');
  const rest = exact.slice(precision);
  if (/^50*$/.test(rest) && Number(exact[precision - 1]) % 2 === 0) {
    return [exact.slice(0, precision), Number(longExp)];
  }
  const [mantissa, exp] = x.toExponential(precision - 1).split('e') as [string, string];
  return [mantissa.replace('.', ''), Number(exp)];
}

function stripZeros(s: string): string {
  return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

/** A latin1 string (one char per byte) as Lua's bytes, and back; short ones by hand (cheaper). */
export function bytes(s: string): LuaString {
  if (s.length > 64) return Buffer.from(s, 'latin1');
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b;
}

export function text(b: LuaString): string {
  if (b.length > 64) return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');
  let s = '';
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]!);
  return s;
}
