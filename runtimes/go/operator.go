package echomq

// The operator's verbs over the whole queue, as TypeScript's queue.migrate, lanes.list and
// queue.obliterate: step the queue's protocol version up while its fleet runs (SPEC 19.41),
// list the lanes with their counts and settings, and delete every key of the queue (19.36).

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// MigrateOptions configure a migrate. Every zero value takes the default named on the field.
type MigrateOptions struct {
	// To is the version to step up to, one step at a time; 0: the highest this runtime speaks.
	To int
	// Window is how recently a consumer must have beaten to count as alive (one that gives its
	// beatMs also counts within three of its beats); 0: one minute.
	Window time.Duration
}

// MigrateResult is a migrate's outcome.
type MigrateResult struct {
	From      int // the queue's version before
	Version   int // the version stored now
	Consumers int // the alive consumers the last step checked (0 when no step was needed)
}

// Migrate steps the queue's protocol version up to opts.To once every alive consumer speaks it:
// ErrFleet names one that does not (nothing written); a step down is refused (EMQINPUT).
func (q *Queue) Migrate(ctx context.Context, opts MigrateOptions) (MigrateResult, error) {
	highest := ProtocolVersions[len(ProtocolVersions)-1]
	to := opts.To
	if to == 0 {
		to = highest
	}
	if to < 1 || to > highest {
		return MigrateResult{}, newError("EMQINPUT", "migrate To must be a version from 1 to %d (the highest this runtime speaks), got %d", highest, to)
	}
	if opts.Window < 0 {
		return MigrateResult{}, newError("EMQINPUT", "migrate Window must be >= 0 (0: one minute), got %v", opts.Window)
	}
	window := opts.Window
	if window == 0 {
		window = time.Minute
	}
	from, err := q.ProtocolVersion(ctx)
	if err != nil {
		return MigrateResult{}, err
	}
	if to < from {
		return MigrateResult{}, newError("EMQINPUT", "queue %s is at protocol %d: a step down to %d is not made in place (jobs written under %d may rely on its rules); roll back to a release that speaks %d", q.Name, from, to, from, from)
	}
	out := MigrateResult{From: from, Version: from}
	for out.Version < to {
		reply, err := redis.Int64s(q.Run(ctx, "migrate", "", q.Prefix, out.Version, out.Version+1, window.Milliseconds()))
		if err != nil {
			return out, err
		}
		if len(reply) < 2 {
			return out, newError("EMQPROTOCOL", "migrate replied %v, not {version, alive}", reply)
		}
		out.Version, out.Consumers = int(reply[0]), int(reply[1])
	}
	q.helloMu.Lock()
	if q.greeting != nil {
		q.greeting.Version = out.Version
	}
	q.helloMu.Unlock()
	return out, nil
}

// LaneInfo is a lane with its counts and settings, as TypeScript's lanes.list() reads it.
type LaneInfo struct {
	Group       string
	Pending     int64      // its jobs waiting
	Running     int64      // its jobs running, across every consumer
	Paused      bool       // Lanes.Pause holds it
	Concurrency int64      // its own cap, else the lanes' default; 0: unlimited
	Rate        *RateLimit // its own rate limit, else the lanes' default; nil: none
}

// List reads every lane seen on the queue, by name, with its counts and settings.
func (l *Lanes) List(ctx context.Context) ([]LaneInfo, error) {
	q := l.q
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	groups, err := redis.Strings(conn.Do("SMEMBERS", q.Key("lanes")))
	if err != nil {
		return nil, err
	}
	sort.Strings(groups)
	// The settings and the counts in one transaction: one moment's picture.
	conn.Send("MULTI")
	conn.Send("HGETALL", q.Key("lanes:running"))
	conn.Send("HGETALL", q.Key("lanes:concurrency"))
	conn.Send("HGETALL", q.Key("lanes:rate"))
	conn.Send("SMEMBERS", q.Key("lanes:paused"))
	for _, g := range groups {
		conn.Send("ZCARD", q.Key("g:"+g+":pending"))
	}
	replies, err := redis.Values(conn.Do("EXEC"))
	if err != nil {
		return nil, err
	}
	running, _ := redis.StringMap(replies[0], nil)
	concurrency, _ := redis.StringMap(replies[1], nil)
	rates, _ := redis.StringMap(replies[2], nil)
	pausedList, _ := redis.Strings(replies[3], nil)
	paused := map[string]bool{}
	for _, g := range pausedList {
		paused[g] = true
	}
	setting := func(m map[string]string, g string) string {
		if v, ok := m[g]; ok {
			return v
		}
		return m["*"]
	}
	out := make([]LaneInfo, len(groups))
	for i, g := range groups {
		pending, _ := redis.Int64(replies[4+i], nil)
		out[i] = LaneInfo{
			Group: g, Pending: pending, Running: number(running[g]), Paused: paused[g],
			Concurrency: number(setting(concurrency, g)), Rate: parseRate(setting(rates, g)),
		}
	}
	return out, nil
}

// parseRate reads a stored rate, '<max>:<per_ms>'; nil for none or one it cannot read.
func parseRate(spec string) *RateLimit {
	maxText, perText, ok := strings.Cut(spec, ":")
	max, errMax := strconv.ParseInt(maxText, 10, 64)
	per, errPer := strconv.ParseInt(perText, 10, 64)
	if !ok || errMax != nil || errPer != nil || max < 1 || per < 1 {
		return nil
	}
	return &RateLimit{Max: max, PerMs: per}
}

// ObliterateOptions configure an obliterate. Every zero value takes the default named on the
// field.
type ObliterateOptions struct {
	// Force goes on while jobs are active (their consumers then find their jobs gone); false:
	// refused with EMQSTATE while any job runs, nothing deleted.
	Force bool
	// Batch is the keys looked at per script call (SCAN COUNT, 1 to 100000); 0: 1000.
	Batch int
}

// Obliterate deletes every key of the queue, a batch per call, meta last, and returns how
// many. The first call pauses the queue, so no consumer claims while the keys go; the next call
// on this handle says hello again (a fresh queue). When ctx ends between batches the rest stays
// (the queue paused): call Obliterate again to finish.
func (q *Queue) Obliterate(ctx context.Context, opts ObliterateOptions) (int64, error) {
	batch := opts.Batch
	if batch == 0 {
		batch = 1000
	}
	if batch < 1 || batch > 100000 {
		return 0, newError("EMQINPUT", "obliterate Batch must be a whole number from 1 to 100000 (0: 1000), got %d", batch)
	}
	force := "0"
	if opts.Force {
		force = "1"
	}
	var deleted int64
	for cursor := "0"; ; {
		reply, err := redis.Values(q.Run(ctx, "obliterate", "", q.Prefix, cursor, batch, force))
		if err != nil {
			return deleted, err
		}
		if len(reply) < 2 {
			return deleted, newError("EMQPROTOCOL", "obliterate replied %v, not [deleted, cursor]", reply)
		}
		n, _ := redis.Int64(reply[0], nil)
		deleted += n
		if cursor, _ = redis.String(reply[1], nil); cursor == "0" {
			break
		}
	}
	q.helloMu.Lock()
	q.greeting = nil // meta is gone: the next call stamps the queue again
	q.helloMu.Unlock()
	conn, err := q.connContext(ctx)
	if err != nil {
		return deleted, err
	}
	defer conn.Close()
	_, err = conn.Do("SREM", "emq:queues", q.Name) // outside the queue's keys (SPEC 19.36)
	return deleted, err
}
