// Redis's `redis` library for the memory engine's Lua, as Redis 7 offers it to a script:
// redis.call and redis.pcall (the command's arguments read and its reply converted as Redis
// does: numbers written with %.17g, nil as false, errors as {err=…}), error_reply and
// status_reply, sha1hex, the log and replication calls (no-ops here) and their constants.
import { createHash } from 'node:crypto';
import { bytes, type Fengari, formatG, type State, text } from './fengari.js';
import { type Reply, RespError, Status } from './resp.js';

/** Runs one Redis command for a script, with the script's database and session. */
export type ScriptCall = (argv: string[]) => Reply;

export function sha1hex(body: string): string {
  return createHash('sha1').update(Buffer.from(body, 'latin1')).digest('hex');
}

/**
 * Sets the global `redis` table. `current` is the command runner of the script running now
 * (undefined between scripts: redis.call then answers as Redis does outside a script).
 */
export function installRedis(f: Fengari, L: State, current: () => ScriptCall | undefined): void {
  const { lua, lauxlib: aux } = f;

  /** A Redis reply → the Lua value Redis pushes for it (errors as {err=…}). */
  const push = (reply: Reply): void => {
    if (reply === null) lua.lua_pushboolean(L, false);
    else if (typeof reply === 'string') lua.lua_pushstring(L, bytes(reply));
    else if (typeof reply === 'number') lua.lua_pushnumber(L, reply);
    else if (Array.isArray(reply)) {
      lua.lua_createtable(L, reply.length, 0);
      for (let i = 0; i < reply.length; i++) {
        push(reply[i]!);
        lua.lua_rawseti(L, -2, i + 1);
      }
    } else {
      lua.lua_createtable(L, 0, 1);
      lua.lua_pushstring(L, bytes(reply instanceof Status ? reply.text : reply.message));
      lua.lua_setfield(L, -2, reply instanceof Status ? 'ok' : 'err');
    }
  };

  /** The arguments of redis.call / redis.pcall, as Redis reads them. */
  const commandArgs = (L2: State): string[] | RespError => {
    const n = lua.lua_gettop(L2);
    if (n === 0) return new RespError('ERR Please specify at least one argument for this redis lib call');
    const argv: string[] = [];
    for (let i = 1; i <= n; i++) {
      const t = lua.lua_type(L2, i);
      if (t === lua.LUA_TNUMBER) argv.push(redisNumber(lua.lua_tonumber(L2, i)));
      else if (t === lua.LUA_TSTRING) argv.push(text(lua.lua_tolstring(L2, i)!));
      else return new RespError('ERR Lua redis lib command arguments must be strings or integers');
    }
    return argv;
  };

  const redisCall = (L2: State, raise: boolean): number => {
    const argv = commandArgs(L2);
    const call = current();
    let reply: Reply;
    if (argv instanceof RespError) reply = argv;
    else if (!call) reply = new RespError('ERR redis.call is only available inside a script');
    else reply = call(argv);
    push(reply);
    if (raise && reply instanceof RespError) lua.lua_error(L2);
    return 1;
  };

  lua.lua_createtable(L, 0, 16);
  const fn = (name: string, fun: (L: State) => number) => {
    lua.lua_pushcfunction(L, fun);
    lua.lua_setfield(L, -2, name);
  };
  fn('call', (L2) => redisCall(L2, true));
  fn('pcall', (L2) => redisCall(L2, false));
  const wrap = (field: 'err' | 'ok') => (L2: State) => {
    const s = aux.luaL_tolstring(L2, 1);
    lua.lua_createtable(L2, 0, 1);
    lua.lua_pushstring(L2, s);
    lua.lua_setfield(L2, -2, field);
    return 1;
  };
  fn('error_reply', wrap('err'));
  fn('status_reply', wrap('ok'));
  fn('sha1hex', (L2) => {
    lua.lua_pushstring(L2, bytes(sha1hex(text(aux.luaL_tolstring(L2, 1)))));
    return 1;
  });
  fn('log', () => 0);
  fn('setresp', () => 0);
  fn('set_repl', () => 0);
  fn('replicate_commands', (L2) => {
    lua.lua_pushboolean(L2, true);
    return 1;
  });
  for (const [name, value] of [
    ['LOG_DEBUG', 0],
    ['LOG_VERBOSE', 1],
    ['LOG_NOTICE', 2],
    ['LOG_WARNING', 3],
    ['REPL_NONE', 0],
    ['REPL_AOF', 1],
    ['REPL_SLAVE', 2],
    ['REPL_REPLICA', 2],
    ['REPL_ALL', 3],
    ['REDIS_VERSION_NUM', 0x070000],
  ] as const) {
    lua.lua_pushnumber(L, value);
    lua.lua_setfield(L, -2, name);
  }
  lua.lua_pushstring(L, '7.0.0');
  lua.lua_setfield(L, -2, 'REDIS_VERSION');
  lua.lua_setglobal(L, 'redis');
}

/** A number passed to redis.call, as Redis writes it: %.17g. */
function redisNumber(n: number): string {
  return Number.isInteger(n) && Math.abs(n) < 1e17 ? String(n) : formatG(n, 17);
}
