// The memory engine's Lua: protocol/scripts/*.lua run unchanged in fengari, a Lua VM written in
// JavaScript (what ioredis-mock uses too). Fengari is Lua 5.3 with 32-bit integers, and Redis is
// Lua 5.1, where every number is a double; so that scripts see 5.1's arithmetic and printing:
//   1. every number is a float: numerals in the source and strings turned into numbers parse
//      as floats, Redis replies arrive as floats, math.floor and math.ceil answer floats (no
//      32-bit integer ever overflows, and 10 / 2 .. '' is "5");
//   2. numbers print as 5.1 prints them, C's %.14g ("3", "1e+15", "0.33333333333333");
//   3. 5.1's `unpack` is there, Redis's `redis` (redis-lib.ts) and `cjson` (cjson.ts), and the
//      globals are read-only as Redis 7 makes them (reading a missing one is an error). Redis's
//      other libraries (bit, struct, cmsgpack) are not: no protocol script uses them.
// Conversions both ways follow Redis 7 (scripting docs, "Conversion between Lua and Redis data
// types"): a Lua number becomes an integer reply truncated toward zero, false becomes nil, a
// table stops at its first nil, {ok=…} is a status and {err=…} an error; numbers passed to
// redis.call are written with %.17g (redis-lib.ts). Error replies carry Redis's wording and its
// "script: <sha>, on @user_script:<line>." suffix.
import { installCjson } from './cjson.js';
import { bytes, type Fengari, fengari, formatG, type State, text } from './fengari.js';
import { installRedis, type ScriptCall, sha1hex } from './redis-lib.js';
import { type Reply, RespError, Status } from './resp.js';

export type { ScriptCall } from './redis-lib.js';

const SHEBANG_FLAGS = new Set([
  'no-writes',
  'allow-oom',
  'allow-stale',
  'no-cluster',
  'allow-cross-slot-keys',
]);

const PRELUDE = `
unpack = table.unpack
-- 5.1's '%d' prints a number as a C long (64 bits on the servers Redis runs on); fengari's
-- integers are 32-bit, so a plain '%d' spec gets the number's whole text from '%.0f' instead.
do
  local format, gsub, pack, unpack_ = string.format, string.gsub, table.pack, table.unpack
  local floor, ceil = math.floor, math.ceil
  string.format = function(fmt, ...)
    if not string.find(fmt, '%%[di]') then return format(fmt, ...) end
    local args, i = pack(...), 0
    local spec = gsub(fmt, '%%([-+ #0-9.]*)([%a%%])', function(flags, conv)
      if conv == '%' then return nil end
      i = i + 1
      local v = tonumber(args[i])
      if (conv == 'd' or conv == 'i') and flags == '' and v then
        args[i] = format('%.0f', v < 0 and ceil(v) or floor(v))
        return '%s'
      end
    end)
    return format(spec, unpack_(args, 1, args.n))
  end
end
local function readonly()
  error('Attempt to modify a readonly table', 2)
end
local function missing(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end
setmetatable(_G, { __index = missing, __newindex = readonly })
`;

/** An error raised inside a script, already worded as the reply the client gets. */
class ScriptFailure extends Error {}

let shared: LuaVm | undefined;

function sharedVm(): LuaVm {
  shared ??= new LuaVm();
  return shared;
}

/**
 * One engine's scripts (SCRIPT LOAD, EXISTS, FLUSH and EVALSHA see only what this engine
 * loaded), compiled in the process's one Lua state: a script is compiled once whatever engine
 * loads it, so a test suite's hundred `memory://` engines do not compile the protocol a hundred
 * times. Sharing is safe because a script keeps nothing between calls: the globals are
 * read-only and KEYS, ARGV and redis.call's target are set for each call.
 */
export class LuaScripts {
  private readonly loaded = new Set<string>();
  private readonly vm = sharedVm();

  has(sha: string): boolean {
    return this.loaded.has(sha);
  }

  flush(): void {
    this.loaded.clear();
  }

  /** Compiles (once per process) and loads a script body; an error reply when it does not compile. */
  load(body: string): string | RespError {
    const sha = this.vm.load(body);
    if (typeof sha === 'string') this.loaded.add(sha);
    return sha;
  }

  /** Runs a script this engine loaded; `call` runs the commands it calls. */
  run(sha: string, keys: string[], argv: string[], call: ScriptCall): Reply {
    if (!this.loaded.has(sha)) return new RespError('NOSCRIPT No matching script. Please use EVAL.');
    return this.vm.run(sha, keys, argv, call);
  }
}

/** The Lua state: the libraries Redis offers, and every script compiled so far, by SHA1. */
class LuaVm {
  private readonly L: State;
  private readonly lua: Fengari['lua'];
  private readonly aux: Fengari['lauxlib'];
  private readonly refs = new Map<string, number>();
  /** The reply tables' keys `err` and `ok`, kept as Lua strings (their hash computed once). */
  private readonly errKey: number;
  private readonly okKey: number;
  private call: ScriptCall | undefined;
  private running = '';
  /** Where the last error was raised: the script's line. */
  private errorLine = 0;

  constructor() {
    const f = fengari();
    this.lua = f.lua;
    this.aux = f.lauxlib;
    const L = f.lauxlib.luaL_newstate();
    this.L = L;
    for (const [name, open] of [
      ['_G', f.lualib.luaopen_base],
      ['table', f.lualib.luaopen_table],
      ['string', f.lualib.luaopen_string],
      ['math', f.lualib.luaopen_math],
    ] as const) {
      f.lauxlib.luaL_requiref(L, name, open, 1);
      f.lua.lua_pop(L, 1);
    }
    installRedis(f, L, () => this.call);
    this.installNumbers();
    installCjson(f, L);
    for (const name of ['KEYS', 'ARGV']) {
      this.lua.lua_createtable(L, 0, 0);
      this.lua.lua_setglobal(L, name);
    }
    for (const name of ['dofile', 'loadfile', 'print']) {
      this.lua.lua_pushnil(L);
      this.lua.lua_setglobal(L, name);
    }
    if (this.aux.luaL_loadbuffer(L, bytes(PRELUDE), null, '=prelude') !== this.lua.LUA_OK) {
      throw new Error(`memory engine prelude: ${text(this.lua.lua_tolstring(L, -1)!)}`);
    }
    this.lua.lua_pcall(L, 0, 0, 0);
    this.errKey = this.keep('err');
    this.okKey = this.keep('ok');
  }

  /** A string held in the registry, for lookups that would otherwise make it anew each time. */
  private keep(s: string): number {
    this.lua.lua_pushstring(this.L, bytes(s));
    return this.aux.luaL_ref(this.L, this.lua.LUA_REGISTRYINDEX);
  }

  /** Pushes table[key] for a kept key (lua_getfield with a JS string re-makes and re-hashes it). */
  private field(table: number, key: number): number {
    this.lua.lua_rawgeti(this.L, this.lua.LUA_REGISTRYINDEX, key);
    return this.lua.lua_gettable(this.L, table);
  }

  /** Compiles a script body and caches it by its SHA1; an error reply when it does not compile. */
  load(body: string): string | RespError {
    const sha = sha1hex(body);
    if (this.refs.has(sha)) return sha;
    const source = scriptSource(body);
    if (source instanceof RespError) return source;
    const { L, lua } = this;
    if (this.aux.luaL_loadbuffer(L, bytes(source), null, '@user_script') !== lua.LUA_OK) {
      const msg = text(lua.lua_tolstring(L, -1) ?? bytes('?'));
      lua.lua_pop(L, 1);
      return new RespError(`ERR Error compiling script (new function): ${msg}`);
    }
    this.refs.set(sha, this.aux.luaL_ref(L, lua.LUA_REGISTRYINDEX));
    return sha;
  }

  /** Runs a loaded script; `call` runs the commands it calls. */
  run(sha: string, keys: string[], argv: string[], call: ScriptCall): Reply {
    const ref = this.refs.get(sha);
    if (ref === undefined) return new RespError('NOSCRIPT No matching script. Please use EVAL.');
    const { L, lua } = this;
    this.setArray('KEYS', keys);
    this.setArray('ARGV', argv);
    lua.lua_pushcfunction(L, (L2) => this.onError(L2));
    const handler = lua.lua_gettop(L);
    lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, ref);
    this.call = call;
    this.running = sha;
    try {
      const status = lua.lua_pcall(L, 0, 1, handler);
      if (status !== lua.LUA_OK) return this.failure();
      return this.toReply(-1);
    } catch (err) {
      if (err instanceof ScriptFailure) return new RespError(err.message);
      throw err;
    } finally {
      this.call = undefined;
      lua.lua_settop(L, 0);
    }
  }

  private setArray(name: string, values: string[]): void {
    const { L, lua } = this;
    lua.lua_createtable(L, values.length, 0);
    for (let i = 0; i < values.length; i++) {
      lua.lua_pushstring(L, bytes(values[i]!));
      lua.lua_rawseti(L, -2, i + 1);
    }
    lua.lua_setglobal(L, name);
  }

  /** The message handler: notes the script line the error came from. */
  private onError(L: State): number {
    const ar = new this.lua.lua_Debug();
    this.errorLine = 0;
    for (let level = 1; this.lua.lua_getstack(L, level, ar); level++) {
      this.lua.lua_getinfo(L, 'Sl', ar);
      if (ar.source && text(ar.source) === '@user_script') {
        this.errorLine = ar.currentline;
        break;
      }
    }
    return 1;
  }

  /** The error reply for the error object on top of the stack. */
  private failure(): RespError {
    const { L, lua } = this;
    const suffix = ` script: ${this.running}, on @user_script:${this.errorLine}.`;
    if (lua.lua_type(L, -1) === lua.LUA_TTABLE) {
      lua.lua_getfield(L, -1, 'err');
      const err = lua.lua_tolstring(L, -1);
      if (err) return new RespError(`${text(err)}${suffix}`);
    }
    const msg = lua.lua_tolstring(L, -1);
    return new RespError(`ERR ${msg ? text(msg) : 'unknown error'}${suffix}`);
  }

  /** Lua value at `idx` → a Redis reply, as Redis converts it. */
  private toReply(idx: number): Reply {
    const { L, lua } = this;
    const t = lua.lua_type(L, idx);
    if (t === lua.LUA_TSTRING) return text(lua.lua_tolstring(L, idx)!);
    if (t === lua.LUA_TNUMBER) return Math.trunc(lua.lua_tonumber(L, idx)) || 0;
    if (t === lua.LUA_TBOOLEAN) return lua.lua_toboolean(L, idx) ? 1 : null;
    if (t !== lua.LUA_TTABLE) return null;
    const table = idx < 0 ? lua.lua_gettop(L) + idx + 1 : idx;
    if (this.field(table, this.errKey) === lua.LUA_TSTRING) {
      const e = text(lua.lua_tolstring(L, -1)!);
      lua.lua_pop(L, 1);
      return new RespError(e);
    }
    lua.lua_pop(L, 1);
    if (this.field(table, this.okKey) === lua.LUA_TSTRING) {
      const s = text(lua.lua_tolstring(L, -1)!);
      lua.lua_pop(L, 1);
      return new Status(s);
    }
    lua.lua_pop(L, 1);
    const out: Reply[] = [];
    for (let i = 1; ; i++) {
      if (lua.lua_rawgeti(L, table, i) === lua.LUA_TNIL) {
        lua.lua_pop(L, 1);
        break;
      }
      out.push(this.toReply(-1));
      lua.lua_pop(L, 1);
    }
    return out;
  }

  /** math.floor and math.ceil answer floats, and tostring prints numbers with %.14g (see header). */
  private installNumbers(): void {
    const { L, lua, aux } = this;
    lua.lua_getglobal(L, 'math');
    for (const [name, f] of [
      ['floor', Math.floor],
      ['ceil', Math.ceil],
    ] as const) {
      lua.lua_pushcfunction(L, (L2) => {
        lua.lua_pushnumber(L2, f(aux.luaL_checknumber(L2, 1)));
        return 1;
      });
      lua.lua_setfield(L, -2, name);
    }
    lua.lua_pop(L, 1);
    lua.lua_pushcfunction(L, (L2) => {
      if (lua.lua_type(L2, 1) === lua.LUA_TNUMBER)
        lua.lua_pushstring(L2, formatG(lua.lua_tonumber(L2, 1), 14));
      else lua.lua_pushstring(L2, aux.luaL_tolstring(L2, 1));
      return 1;
    });
    lua.lua_setglobal(L, 'tostring');
  }
}

/**
 * The Lua source of a script body: a `#!lua flags=…` line is read and checked as Redis reads it
 * (an unknown engine, option or flag is an error reply), then left blank so line numbers match.
 */
function scriptSource(body: string): string | RespError {
  if (!body.startsWith('#!')) return body;
  const end = body.indexOf('\n');
  const shebang = body
    .slice(2, end < 0 ? body.length : end)
    .trim()
    .split(/\s+/);
  if (shebang[0] !== 'lua') return new RespError(`ERR Could not find scripting engine '${shebang[0]}'`);
  for (const word of shebang.slice(1)) {
    if (!word.startsWith('flags=')) return new RespError(`ERR Unknown lua shebang option: ${word}`);
    for (const flag of word.slice('flags='.length).split(',').filter(Boolean)) {
      if (!SHEBANG_FLAGS.has(flag)) return new RespError(`ERR Unexpected flag in script shebang: ${flag}`);
    }
  }
  return end < 0 ? '' : body.slice(end);
}
