package echomq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Event is one job's event, expanded from an entry of the events stream (SPEC.md section 16).
type Event struct {
	Event    string            `json:"event"`
	ID       string            `json:"id"`       // the job id ('' for queue-wide events)
	StreamID string            `json:"streamId"` // the entry's id: resume after it
	Fields   map[string]string `json:"fields"`   // the entry's other fields
}

// ExpandEntry turns one stream entry into one event per job: an entry with `ids` stands for
// every job listed, each plural field (`attempts`) giving job i its singular (`attempt`).
func ExpandEntry(streamID string, flat []string) []Event {
	fields := map[string]string{}
	for i := 0; i+1 < len(flat); i += 2 {
		fields[flat[i]] = flat[i+1]
	}
	event, id, ids := fields["event"], fields["id"], fields["ids"]
	_, batched := fields["ids"]
	delete(fields, "event")
	delete(fields, "id")
	delete(fields, "ids")
	if !batched {
		return []Event{{Event: event, ID: id, StreamID: streamID, Fields: fields}}
	}
	plural := map[string][]string{} // singular -> every job's value
	shared := map[string]string{}
	for name, value := range fields {
		if singular := strings.TrimSuffix(name, "s"); singular != name {
			if _, ok := fields[singular]; ok {
				plural[singular] = strings.Split(value, " ")
				continue
			}
		}
		shared[name] = value
	}
	jobs := strings.Split(ids, " ")
	out := make([]Event, len(jobs))
	for i, jobID := range jobs {
		own := map[string]string{}
		for name, value := range shared {
			own[name] = value
		}
		for name, values := range plural {
			own[name] = ""
			if i < len(values) {
				own[name] = values[i]
			}
		}
		out[i] = Event{Event: event, ID: jobID, StreamID: streamID, Fields: own}
	}
	return out
}

// Events follows a queue's events stream on a connection of its own, resuming from the last
// entry it delivered after a dropped connection.
type Events struct {
	q       *Queue
	conn    redis.Conn
	LastID  string
	BlockMs int64
	Count   int
}

// Events starts a reader: from "$" (new events only), "0" (replay) or a stream id.
func (q *Queue) Events(ctx context.Context, from string) (*Events, error) {
	r := &Events{q: q, LastID: from, BlockMs: 5000, Count: 500}
	if from == "$" {
		// Pin '$' to a concrete id, so a reconnect resumes from it instead of skipping.
		conn, err := q.connContext(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		last, err := redis.Values(conn.Do("XREVRANGE", q.Key("events"), "+", "-", "COUNT", 1))
		if err != nil {
			return nil, err
		}
		r.LastID = "0-0"
		if len(last) > 0 {
			entry, _ := redis.Values(last[0], nil)
			r.LastID, _ = redis.String(entry[0], nil)
		}
	}
	return r, nil
}

// Next blocks up to BlockMs for the next entries and returns their events (none on timeout).
// When ctx ends first, the read is cut (its connection closed; the next call reconnects and
// resumes after LastID, so nothing is skipped) and the error wraps ctx.Err().
func (r *Events) Next(ctx context.Context) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, notSent(ctx, "the events read")
	}
	if r.conn == nil {
		conn, err := r.q.dialBlocking()
		if err != nil {
			return nil, err
		}
		r.conn = conn
	}
	conn, read := r.conn, make(chan struct{})
	go func() { // a done ctx ends the blocking read at once
		select {
		case <-ctx.Done():
			conn.Close()
		case <-read:
		}
	}()
	reply, err := redis.DoWithTimeout(conn, time.Duration(r.BlockMs)*time.Millisecond+3*time.Second,
		"XREAD", "COUNT", r.Count, "BLOCK", r.BlockMs, "STREAMS", r.q.Key("events"), r.LastID)
	close(read)
	if err != nil {
		r.conn.Close()
		r.conn = nil // reconnect next time, from LastID
		if ctx.Err() != nil {
			return nil, fmt.Errorf("echomq: the events read was cut: %w", ctx.Err())
		}
		return nil, err
	}
	if reply == nil {
		return nil, nil
	}
	var out []Event
	for _, stream := range reply.([]interface{}) {
		parts := stream.([]interface{})
		entries := parts[1].([]interface{})
		for _, e := range entries {
			pair := e.([]interface{})
			id, _ := redis.String(pair[0], nil)
			flat, _ := redis.Strings(pair[1], nil)
			r.LastID = id
			out = append(out, ExpandEntry(id, flat)...)
		}
	}
	return out, nil
}

// Close closes the reader's connection (a Next in progress returns an error).
func (r *Events) Close() error {
	if r.conn != nil {
		return r.conn.Close()
	}
	return nil
}
