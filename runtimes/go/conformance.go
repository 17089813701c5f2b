package echomq

// The conformance replayer (SPEC.md section 23, protocol/conformance/README.md): every case of
// protocol/conformance/*.json replayed with this runtime's script loader and a plain Redis
// client, compared with what the case expects.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// ConformanceFile holds the cases of one script.
type ConformanceFile struct {
	Script string            `json:"script"`
	Cases  []ConformanceCase `json:"cases"`
}

// ConformanceCase is a Redis state, one script call and what Redis must hold afterwards.
type ConformanceCase struct {
	Name  string     `json:"name"`
	Level int        `json:"level"` // the SPEC feature level the case needs; 0 (absent): 1
	Queue string     `json:"queue"`
	Setup [][]string `json:"setup"`
	Call  struct {
		Script string   `json:"script"`
		Keys   []string `json:"keys"`
		Argv   []string `json:"argv"`
	} `json:"call"`
	Expect struct {
		Reply  json.RawMessage              `json:"reply"`
		Error  *string                      `json:"error"`
		Keys   map[string]json.RawMessage   `json:"keys"`
		Events []map[string]json.RawMessage `json:"events"`
	} `json:"expect"`
}

// LoadConformance reads every case file of dir, sorted by file name.
func LoadConformance(dir string) ([]ConformanceFile, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []ConformanceFile
	for _, name := range names {
		text, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var f ConformanceFile
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

const toleranceMs = 5000

var (
	nowPlaceholder   = regexp.MustCompile(`^\$now(?:([+-])(\d+))?$`)
	rangePlaceholder = regexp.MustCompile(`^\$range:(-?\d+):(-?\d+)$`)
	integerText      = regexp.MustCompile(`^-?\d+$`)
)

func decodeJSON(raw json.RawMessage) (interface{}, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v interface{}
	err := dec.Decode(&v)
	return v, err
}

func show(v interface{}) string {
	switch x := v.(type) {
	case []byte:
		v = string(x)
	case []interface{}:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// knownPlaceholder: the placeholders of SPEC section 23 at KnownLevel.
func knownPlaceholder(p string) bool {
	return strings.HasPrefix(p, "$$") || p == "$any" || p == "$now_us" ||
		nowPlaceholder.MatchString(p) || rangePlaceholder.MatchString(p)
}

// unknownPlaceholder is the first placeholder of a case this replayer does not know (a later
// level's), looked for in every string of its setup and expectations before anything runs, so
// no case is replayed half-understood (SPEC 22.1, 23); "" when there is none.
func unknownPlaceholder(c *ConformanceCase) string {
	var found string
	var walk func(v interface{})
	walk = func(v interface{}) {
		switch x := v.(type) {
		case string:
			if found == "" && strings.HasPrefix(x, "$") && !knownPlaceholder(x) {
				found = x
			}
		case []interface{}:
			for _, e := range x {
				walk(e)
			}
		case map[string]interface{}:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, command := range c.Setup {
		for _, a := range command[1:] {
			walk(a)
		}
	}
	raws := []json.RawMessage{c.Expect.Reply}
	for _, k := range c.Expect.Keys {
		raws = append(raws, k)
	}
	for _, e := range c.Expect.Events {
		for _, f := range e {
			raws = append(raws, f)
		}
	}
	for _, raw := range raws {
		if len(raw) > 0 {
			v, _ := decodeJSON(raw)
			walk(v)
		}
	}
	return found
}

func instant(placeholder string, now int64) (int64, error) {
	m := nowPlaceholder.FindStringSubmatch(placeholder)
	if m == nil {
		return 0, fmt.Errorf("unknown placeholder %s (known: $any, $now±N, $now_us, $range:A:B, $$…)", placeholder)
	}
	n, _ := strconv.ParseInt("0"+m[2], 10, 64) // unknownPlaceholder let only known forms through
	if m[1] == "-" {
		n = -n
	}
	return now + n, nil
}

func setupArg(arg string, now int64) (string, error) {
	if strings.HasPrefix(arg, "$$") {
		return arg[1:], nil
	}
	if strings.HasPrefix(arg, "$") {
		t, err := instant(arg, now)
		return strconv.FormatInt(t, 10), err
	}
	return arg, nil
}

// replyValue maps a Redis reply to the JSON kinds a case compares with: integers stay int64,
// bulk and status strings become strings, arrays arrays, nil nil.
func replyValue(v interface{}) interface{} {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = replyValue(e)
		}
		return out
	}
	return v
}

// compare appends one line per mismatch between an expected JSON value (with placeholders)
// and an actual value (int64, string, []interface{} or nil).
func compare(expected, actual interface{}, now int64, path string, out *[]string) {
	if s, ok := expected.(string); ok && strings.HasPrefix(s, "$") {
		comparePlaceholder(s, actual, now, path, out)
		return
	}
	switch e := expected.(type) {
	case []interface{}:
		a, ok := actual.([]interface{})
		if !ok || len(a) != len(e) {
			*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", path, show(e), show(actual)))
			return
		}
		for i := range e {
			compare(e[i], a[i], now, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case json.Number:
		a, ok := actual.(int64)
		if !ok || e.String() != strconv.FormatInt(a, 10) {
			*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", path, e.String(), show(actual)))
		}
	case string:
		if a, ok := actual.(string); !ok || a != e {
			*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", path, show(e), show(actual)))
		}
	case nil:
		if actual != nil {
			*out = append(*out, fmt.Sprintf("%s: expected null, got %s", path, show(actual)))
		}
	default:
		*out = append(*out, fmt.Sprintf("%s: an expected reply holds no %T (Redis replies are scalars and arrays)", path, expected))
	}
}

func comparePlaceholder(p string, actual interface{}, now int64, path string, out *[]string) {
	if strings.HasPrefix(p, "$$") {
		if a, ok := actual.(string); !ok || a != p[1:] {
			*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", path, show(p[1:]), show(actual)))
		}
		return
	}
	if p == "$any" {
		if actual == nil {
			*out = append(*out, fmt.Sprintf("%s: expected a value, got null", path))
		}
		return
	}
	var n int64
	isInt := false
	switch a := actual.(type) {
	case int64:
		n, isInt = a, true
	case string:
		if integerText.MatchString(a) {
			v, err := strconv.ParseInt(a, 10, 64)
			n, isInt = v, err == nil
		}
	}
	if p == "$now_us" { // the server's TIME in µs: a lease token (SPEC.md section 8)
		target := now * 1000
		if !isInt || n-target > toleranceMs*1000 || target-n > toleranceMs*1000 {
			*out = append(*out, fmt.Sprintf("%s: expected $now_us (%d ± %d µs), got %s", path, target, toleranceMs*1000, show(actual)))
		}
		return
	}
	if m := rangePlaceholder.FindStringSubmatch(p); m != nil {
		lo, _ := strconv.ParseInt(m[1], 10, 64)
		hi, _ := strconv.ParseInt(m[2], 10, 64)
		if !isInt || n < lo || n > hi {
			*out = append(*out, fmt.Sprintf("%s: expected an integer in [%d, %d], got %s", path, lo, hi, show(actual)))
		}
		return
	}
	target, err := instant(p, now)
	if err != nil {
		*out = append(*out, path+": "+err.Error())
		return
	}
	if !isInt || n-target > toleranceMs || target-n > toleranceMs {
		*out = append(*out, fmt.Sprintf("%s: expected %s (%d ± %d ms), got %s", path, p, target, toleranceMs, show(actual)))
	}
}

func scoreValue(s string) float64 {
	switch s {
	case "inf", "+inf":
		return math.Inf(1)
	case "-inf":
		return math.Inf(-1)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

type keyExpectation struct {
	Type   string            `json:"type"`
	Value  json.RawMessage   `json:"value"`
	Length *int64            `json:"length"`
	Last   map[string]string `json:"last"`
}

func compareKey(conn redis.Conn, key string, raw json.RawMessage, now int64, out *[]string) error {
	typ, err := redis.String(conn.Do("TYPE", key))
	if err != nil {
		return err
	}
	if string(raw) == `"absent"` {
		if typ != "none" {
			*out = append(*out, fmt.Sprintf("%s: expected absent, found a %s", key, typ))
		}
		return nil
	}
	var e keyExpectation
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("%s: %v", key, err)
	}
	switch e.Type {
	case "hash", "zset", "set", "list", "string", "stream":
	default:
		// A key type this replayer does not know: refuse rather than pass a half-checked case.
		return fmt.Errorf("%s: expectation of type %q is not one this replayer knows (hash, zset, set, list, string, stream)", key, e.Type)
	}
	if typ != e.Type {
		found := "a " + typ
		if typ == "none" {
			found = "no key"
		}
		*out = append(*out, fmt.Sprintf("%s: expected a %s, found %s", key, e.Type, found))
		return nil
	}
	value, _ := decodeJSON(e.Value)
	switch e.Type {
	case "hash":
		actual, err := redis.StringMap(conn.Do("HGETALL", key))
		if err != nil {
			return err
		}
		want, _ := value.(map[string]interface{})
		fields := map[string]bool{}
		for f := range want {
			fields[f] = true
		}
		for f := range actual {
			fields[f] = true
		}
		names := make([]string, 0, len(fields))
		for f := range fields {
			names = append(names, f)
		}
		sort.Strings(names)
		for _, f := range names {
			a, inActual := actual[f]
			w, inWant := want[f]
			switch {
			case !inActual:
				*out = append(*out, fmt.Sprintf("%s %s: expected %s, field absent", key, f, show(w)))
			case !inWant:
				*out = append(*out, fmt.Sprintf("%s %s: unexpected field, value %s", key, f, show(a)))
			default:
				compare(w, a, now, key+" "+f, out)
			}
		}
	case "zset":
		flat, err := redis.Strings(conn.Do("ZRANGE", key, 0, -1, "WITHSCORES"))
		if err != nil {
			return err
		}
		want, _ := value.([]interface{})
		if len(flat)/2 != len(want) {
			*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", key, show(want), show(flat)))
			return nil
		}
		for i, w := range want {
			pair, _ := w.([]interface{})
			member, _ := pair[0].(string)
			if flat[2*i] != member {
				*out = append(*out, fmt.Sprintf("%s[%d]: expected member %s, got %s", key, i, member, flat[2*i]))
			}
			path := fmt.Sprintf("%s[%d] %s score", key, i, member)
			switch score := pair[1].(type) {
			case string:
				if strings.HasPrefix(score, "$") {
					compare(score, flat[2*i+1], now, path, out)
				} else if scoreValue(score) != scoreValue(flat[2*i+1]) {
					*out = append(*out, fmt.Sprintf("%s: expected score %s, got %s", path, score, flat[2*i+1]))
				}
			case json.Number:
				if scoreValue(score.String()) != scoreValue(flat[2*i+1]) {
					*out = append(*out, fmt.Sprintf("%s: expected score %s, got %s", path, score, flat[2*i+1]))
				}
			}
		}
	case "set":
		actual, err := redis.Strings(conn.Do("SMEMBERS", key))
		if err != nil {
			return err
		}
		want, _ := value.([]interface{})
		sort.Strings(actual)
		wantStrings := make([]string, len(want))
		for i, w := range want {
			wantStrings[i], _ = w.(string)
		}
		sort.Strings(wantStrings)
		got := make([]interface{}, len(actual))
		for i, a := range actual {
			got[i] = a
		}
		exp := make([]interface{}, len(wantStrings))
		for i, w := range wantStrings {
			exp[i] = w
		}
		compare(exp, got, now, key, out)
	case "list":
		actual, err := redis.Strings(conn.Do("LRANGE", key, 0, -1))
		if err != nil {
			return err
		}
		got := make([]interface{}, len(actual))
		for i, a := range actual {
			got[i] = a
		}
		compare(value, got, now, key, out)
	case "string":
		actual, err := redis.String(conn.Do("GET", key))
		if err != nil {
			return err
		}
		compare(value, actual, now, key, out)
	case "stream":
		length, err := redis.Int64(conn.Do("XLEN", key))
		if err != nil {
			return err
		}
		if e.Length != nil && length != *e.Length {
			*out = append(*out, fmt.Sprintf("%s: expected %d entries, got %d", key, *e.Length, length))
		}
		if e.Last != nil {
			entries, err := streamEntries(conn, "XREVRANGE", key, "+", "-", "COUNT", 1)
			if err != nil {
				return err
			}
			fields := map[string]string{}
			if len(entries) > 0 {
				fields = entries[0].fields
			}
			for f, w := range e.Last {
				var a interface{}
				if v, ok := fields[f]; ok {
					a = v
				}
				compare(w, a, now, key+" last entry "+f, out)
			}
		}
	}
	return nil
}

type streamEntry struct {
	id     string
	flat   []string
	fields map[string]string
}

func streamEntries(conn redis.Conn, cmd string, args ...interface{}) ([]streamEntry, error) {
	reply, err := redis.Values(conn.Do(cmd, args...))
	if err != nil {
		return nil, err
	}
	out := make([]streamEntry, 0, len(reply))
	for _, r := range reply {
		pair, _ := redis.Values(r, nil)
		id, _ := redis.String(pair[0], nil)
		flat, _ := redis.Strings(pair[1], nil)
		fields := map[string]string{}
		for i := 0; i+1 < len(flat); i += 2 {
			fields[flat[i]] = flat[i+1]
		}
		out = append(out, streamEntry{id: id, flat: flat, fields: fields})
	}
	return out, nil
}

// keysFollowContract: the case's KEYS have the script's `-- KEYS:` names, count and order.
func keysFollowContract(c *ConformanceCase, s *Script) []string {
	prefix := queuePrefix(c.Queue)
	var problems []string
	if len(c.Call.Keys) != len(s.Keys) {
		problems = append(problems, fmt.Sprintf("call.keys has %d keys, the contract of %s lists %d", len(c.Call.Keys), s.Name, len(s.Keys)))
	}
	for i, name := range s.Keys {
		key := ""
		if i < len(c.Call.Keys) {
			key = c.Call.Keys[i]
		}
		ok := key == prefix+name
		if name == "job" {
			ok = strings.HasPrefix(key, prefix+"job:") && len(key) > len(prefix)+4
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("KEYS[%d] should be the %s key under %s, got %q", i+1, name, prefix, key))
		}
	}
	return problems
}

// ReplayCase runs one case on conn (the database is flushed first) and returns every way
// Redis differs from what the case expects (none: the case passes). A case of a later SPEC level
// than KnownLevel is refused as a problem naming both levels; a placeholder this replayer does
// not know is an error naming the level it knows; neither touches Redis.
func ReplayCase(conn redis.Conn, scripts Scripts, c *ConformanceCase) ([]string, error) {
	if c.Level > KnownLevel {
		return []string{fmt.Sprintf("the case needs SPEC level %d; this replayer knows level %d (SPEC 22.2, 23)", c.Level, KnownLevel)}, nil
	}
	if p := unknownPlaceholder(c); p != "" {
		return nil, fmt.Errorf("unknown placeholder %s: this replayer knows those of SPEC level %d ($any, $now±N, $now_us, $range:A:B, $$…); a later level's case needs a replayer of that level (SPEC 23)", p, KnownLevel)
	}
	s := scripts[c.Call.Script]
	if s == nil {
		return []string{"no script protocol/scripts/" + c.Call.Script + ".lua"}, nil
	}
	if problems := keysFollowContract(c, s); len(problems) > 0 {
		return problems, nil
	}
	hasReply := len(c.Expect.Reply) > 0
	if hasReply == (c.Expect.Error != nil) {
		return []string{"expect needs exactly one of reply and error"}, nil
	}
	if _, err := conn.Do("FLUSHALL"); err != nil {
		return nil, err
	}
	t, err := redis.Int64s(conn.Do("TIME"))
	if err != nil {
		return nil, err
	}
	now := t[0]*1000 + t[1]/1000
	for _, command := range c.Setup {
		args := make([]interface{}, 0, len(command))
		for _, a := range command[1:] {
			v, err := setupArg(a, now)
			if err != nil {
				return []string{"setup: " + err.Error()}, nil
			}
			args = append(args, v)
		}
		if _, err := conn.Do(command[0], args...); err != nil {
			return []string{fmt.Sprintf("setup %v: %v", command, err)}, nil
		}
	}
	eventsKey := queuePrefix(c.Queue) + "events"
	before, err := streamEntries(conn, "XREVRANGE", eventsKey, "+", "-", "COUNT", 1)
	if err != nil {
		return nil, err
	}
	argv := make([]interface{}, len(c.Call.Argv))
	for i, a := range c.Call.Argv {
		argv[i] = a
	}
	reply, callErr := s.Eval(conn, c.Call.Keys, argv)

	var out []string
	var scriptErr redis.Error
	isScriptErr := false
	if callErr != nil {
		var ok bool
		if scriptErr, ok = callErr.(redis.Error); !ok {
			return nil, callErr // the connection failed, not the script
		}
		isScriptErr = true
	}
	switch {
	case isScriptErr && c.Expect.Error == nil:
		out = append(out, fmt.Sprintf("reply: expected %s, got error %q", string(c.Expect.Reply), string(scriptErr)))
	case isScriptErr:
		code, msg := *c.Expect.Error, string(scriptErr)
		if msg != code && !strings.HasPrefix(msg, code+" ") {
			out = append(out, fmt.Sprintf("error: expected %s, got %q", code, msg))
		}
	case c.Expect.Error != nil:
		out = append(out, fmt.Sprintf("error: expected %s, got reply %s", *c.Expect.Error, show(replyValue(reply))))
	default:
		want, err := decodeJSON(c.Expect.Reply)
		if err != nil {
			return nil, err
		}
		compare(want, replyValue(reply), now, "reply", &out)
	}

	keys := make([]string, 0, len(c.Expect.Keys))
	for k := range c.Expect.Keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := compareKey(conn, k, c.Expect.Keys[k], now, &out); err != nil {
			return nil, err
		}
	}

	start := "-"
	if len(before) > 0 {
		start = "(" + before[0].id
	}
	entries, err := streamEntries(conn, "XRANGE", eventsKey, start, "+")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if len(e.flat) < 4 || e.flat[0] != "event" || e.flat[2] != "id" {
			out = append(out, fmt.Sprintf("event %s: the first fields must be event and id, got %s", e.id, show(e.flat)))
		}
	}
	if len(entries) != len(c.Expect.Events) {
		got := make([]map[string]string, len(entries))
		for i, e := range entries {
			got[i] = e.fields
		}
		want, _ := json.Marshal(c.Expect.Events)
		out = append(out, fmt.Sprintf("events: expected %s, got %s", want, show(got)))
	} else {
		for i, fields := range c.Expect.Events {
			names := make([]string, 0, len(fields))
			for f := range fields {
				names = append(names, f)
			}
			sort.Strings(names)
			for _, f := range names {
				want, err := decodeJSON(fields[f])
				if err != nil {
					return nil, err
				}
				var actual interface{}
				if v, ok := entries[i].fields[f]; ok {
					actual = v
				}
				compare(want, actual, now, fmt.Sprintf("events[%d].%s", i, f), &out)
			}
		}
	}
	return out, nil
}
