// Redis's `cjson` library for the memory engine's Lua: cjson.decode and cjson.encode with
// lua-cjson's mapping (objects and arrays to tables, JSON null to the cjson.null sentinel,
// numbers to Lua numbers, text as UTF-8 bytes), and errors a script can pcall.
import { bytes, type Fengari, type State, text } from './fengari.js';

/** The value cjson.null stands for (a light userdata in lua-cjson). */
const NULL = { cjson: 'null' };

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function installCjson(f: Fengari, L: State): void {
  const { lua, lauxlib } = f;
  const fail = (L2: State, message: string): never => lauxlib.luaL_error(L2, bytes(message));

  const push = (L2: State, v: Json): void => {
    if (v === null) lua.lua_pushlightuserdata(L2, NULL);
    else if (typeof v === 'boolean') lua.lua_pushboolean(L2, v);
    else if (typeof v === 'number') lua.lua_pushnumber(L2, v);
    else if (typeof v === 'string') lua.lua_pushstring(L2, Buffer.from(v, 'utf8'));
    else if (Array.isArray(v)) {
      lua.lua_createtable(L2, v.length, 0);
      v.forEach((item, i) => {
        push(L2, item);
        lua.lua_rawseti(L2, -2, i + 1);
      });
    } else {
      lua.lua_createtable(L2, 0, Object.keys(v).length);
      for (const [k, item] of Object.entries(v)) {
        push(L2, item);
        lua.lua_setfield(L2, -2, k);
      }
    }
  };

  const read = (L2: State, idx: number, depth: number): Json => {
    if (depth > 1000) fail(L2, 'Cannot serialise, excessive nesting (1001)');
    const t = lua.lua_type(L2, idx);
    if (t === lua.LUA_TNIL) return null;
    if (t === lua.LUA_TBOOLEAN) return lua.lua_toboolean(L2, idx);
    if (t === lua.LUA_TNUMBER) return lua.lua_tonumber(L2, idx);
    if (t === lua.LUA_TSTRING) return Buffer.from(lua.lua_tolstring(L2, idx)!).toString('utf8');
    if (t === lua.LUA_TLIGHTUSERDATA && lua.lua_touserdata(L2, idx) === NULL) return null;
    if (t !== lua.LUA_TTABLE) return fail(L2, 'Cannot serialise: unsupported type');
    const abs = idx < 0 ? lua.lua_gettop(L2) + idx + 1 : idx;
    const entries: [string | number, Json][] = [];
    let array = true;
    lua.lua_pushnil(L2);
    while (lua.lua_next(L2, abs) !== 0) {
      let key: string | number;
      if (lua.lua_type(L2, -2) === lua.LUA_TNUMBER) {
        key = lua.lua_tonumber(L2, -2);
        if (!Number.isInteger(key) || key < 1) array = false;
      } else {
        key = text(lua.lua_tolstring(L2, -2) ?? bytes(''));
        array = false;
      }
      entries.push([key, read(L2, -1, depth + 1)]);
      lua.lua_pop(L2, 1);
    }
    if (entries.length === 0) return {};
    if (array) {
      const out: Json[] = [];
      for (const [k, v] of entries) out[(k as number) - 1] = v;
      return Array.from(out, (v) => v ?? null);
    }
    return Object.fromEntries(entries.map(([k, v]) => [String(k), v]));
  };

  lua.lua_createtable(L, 0, 3);
  lua.lua_pushcfunction(L, (L2) => {
    const s = lua.lua_tolstring(L2, 1);
    if (s === null) return fail(L2, "bad argument #1 to 'decode' (string expected)");
    let v: Json;
    try {
      v = JSON.parse(Buffer.from(s).toString('utf8')) as Json;
    } catch (err) {
      return fail(L2, `Expected value but found invalid token: ${(err as Error).message}`);
    }
    push(L2, v);
    return 1;
  });
  lua.lua_setfield(L, -2, 'decode');
  lua.lua_pushcfunction(L, (L2) => {
    const v = read(L2, 1, 0);
    lua.lua_pushstring(L2, Buffer.from(JSON.stringify(v).replace(/\//g, '\\/'), 'utf8'));
    return 1;
  });
  lua.lua_setfield(L, -2, 'encode');
  lua.lua_pushlightuserdata(L, NULL);
  lua.lua_setfield(L, -2, 'null');
  lua.lua_setglobal(L, 'cjson');
}
