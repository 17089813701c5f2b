package echomq

// Repeat: fixed cadences (register/unregister/list/pump), over the scripts TypeScript's
// src/recurring/repeat.ts calls. A registration is a member of `P repeat` scored by its
// upcoming slot plus a `P repeat:<name>` record; the slot's occurrence is a delayed job
// already, and promote, releasing one, makes the next in the same call, on the server clock.
// The pump is the backstop for a slot nothing released; the consumer's recurrence leg runs it.

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/gomodule/redigo/redis"
)

// Repeat is a queue's cadences.
type Repeat struct{ q *Queue }

// Repeat returns the queue's cadences.
func (q *Queue) Repeat() *Repeat { return &Repeat{q: q} }

// RegisterOptions: zero values are the defaults.
type RegisterOptions struct {
	// FirstRunMs is the first occurrence's instant (epoch ms, server clock); nil: server now + everyMs.
	FirstRunMs *int64
	// CatchUp is the missed-run policy: "once" (default, "": one occurrence for the missed slots)
	// or "all" (every missed slot, oldest first, at most the pump's batch per call).
	CatchUp string
	// Attempts each occurrence may make; 0: 1 (the next occurrence is the retry).
	Attempts int
}

// RepeatView is a registered cadence.
type RepeatView struct {
	Name      string          `json:"name"`
	EveryMs   int64           `json:"everyMs"`
	Template  json.RawMessage `json:"template"`
	NextRunAt int64           `json:"nextRunAt"` // server-clock epoch ms of the next occurrence
	CatchUp   string          `json:"catchUp"`
	Attempts  int64           `json:"attempts,omitempty"`
	Runs      int64           `json:"runs"`
	LastRunAt *int64          `json:"lastRunAt,omitempty"`
	CreatedAt int64           `json:"createdAt"`
}

// PumpResult is a pump's outcome: the ids released, the server's now and the next due instant
// (-1: none registered).
type PumpResult struct {
	Minted  []string
	Now     int64
	NextDue int64
}

// Register registers a cadence: every everyMs from the first run, a job with template as its
// data and name as its name. "registered", or "exists" when the name is registered already
// (nothing changes; unregister first to change it).
func (r *Repeat) Register(ctx context.Context, name string, everyMs int64, template interface{}, opts RegisterOptions) (string, error) {
	if err := CheckName("repeat name", name); err != nil {
		return "", err
	}
	if everyMs < 1 {
		return "", newError("EMQINPUT", "everyMs must be a whole number >= 1, got %d", everyMs)
	}
	var first interface{} = "next"
	if opts.FirstRunMs != nil {
		if *opts.FirstRunMs < 0 {
			return "", newError("EMQINPUT", "FirstRunMs must be a whole number >= 0, got %d", *opts.FirstRunMs)
		}
		first = *opts.FirstRunMs
	}
	catchUp := opts.CatchUp
	if catchUp == "" {
		catchUp = "once"
	}
	if catchUp != "once" && catchUp != "all" {
		return "", newError("EMQINPUT", "CatchUp must be 'once' or 'all', got %q", opts.CatchUp)
	}
	maxText := ""
	if opts.Attempts != 0 {
		if opts.Attempts < 1 || opts.Attempts > 1000000 {
			return "", newError("EMQINPUT", "Attempts must be a whole number from 1 to 1000000, got %d", opts.Attempts)
		}
		maxText = strconv.Itoa(opts.Attempts)
	}
	payload, err := EncodeJSON(template, "repeat template", r.q.client.opts.MaxPayloadBytes)
	if err != nil {
		return "", err
	}
	n, err := redis.Int(r.q.Run(ctx, "register", "", name, everyMs, payload, first, r.q.Prefix, catchUp, maxText))
	if err != nil {
		return "", err
	}
	if n == 1 {
		return "registered", nil
	}
	return "exists", nil
}

// Unregister removes a cadence; occurrences made already stay ordinary jobs. True when it existed.
func (r *Repeat) Unregister(ctx context.Context, name string) (bool, error) {
	if err := CheckName("repeat name", name); err != nil {
		return false, err
	}
	n, err := redis.Int(r.q.Run(ctx, "unregister", "", r.q.Prefix, name))
	return n == 1, err
}

// List is every registered cadence, soonest next run first.
func (r *Repeat) List(ctx context.Context) ([]RepeatView, error) {
	records, err := r.q.records(ctx, "repeat", "repeat:", 0, -1)
	if err != nil {
		return nil, err
	}
	out := []RepeatView{}
	for _, rec := range records {
		row := rec.fields
		if row["every_ms"] == "" {
			continue // unregistered between the two reads
		}
		v := RepeatView{
			Name: rec.id, EveryMs: number(row["every_ms"]), Template: jsonOrText(row["template"]),
			NextRunAt: number(rec.score), CatchUp: "once", Runs: number(row["runs"]), CreatedAt: number(row["created"]),
			Attempts: number(row["max"]),
		}
		if row["catch_up"] == "all" {
			v.CatchUp = "all"
		}
		if s, ok := row["last"]; ok {
			n := number(s)
			v.LastRunAt = &n
		}
		out = append(out, v)
	}
	return out, nil
}

// Pump releases every due occurrence nothing released (at most batch; 0: 100).
func (r *Repeat) Pump(ctx context.Context, batch int) (PumpResult, error) {
	if batch == 0 {
		batch = 100
	}
	if batch < 1 {
		return PumpResult{}, newError("EMQINPUT", "batch must be a whole number >= 1, got %d", batch)
	}
	reply, err := redis.Values(r.q.Run(ctx, "pump", "", r.q.Prefix, batch))
	if err != nil {
		return PumpResult{}, err
	}
	if len(reply) < 3 {
		return PumpResult{}, newError("EMQPROTOCOL", "pump replied %v, not {minted, now_ms, next_due_ms, …}", reply)
	}
	minted, _ := redis.Strings(reply[0], nil)
	now, _ := redis.Int64(reply[1], nil)
	next, _ := redis.Int64(reply[2], nil)
	return PumpResult{Minted: minted, Now: now, NextDue: next}, nil
}

type storedRecord struct {
	id, score string
	fields    map[string]string
}

// records reads a set's members by rank with their records (prefix+record+member), pipelined.
func (q *Queue) records(ctx context.Context, set, record string, start, end int) ([]storedRecord, error) {
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	flat, err := redis.Strings(conn.Do("ZRANGE", q.Key(set), start, end, "WITHSCORES"))
	if err != nil || len(flat) == 0 {
		return nil, err
	}
	for i := 0; i < len(flat); i += 2 {
		conn.Send("HGETALL", q.Key(record+flat[i]))
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	out := make([]storedRecord, 0, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		row, err := redis.StringMap(conn.Receive())
		if err != nil {
			return nil, err
		}
		out = append(out, storedRecord{id: flat[i], score: flat[i+1], fields: row})
	}
	return out, nil
}
