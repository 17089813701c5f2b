package echomq

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ProtocolVersions are the protocol versions this runtime speaks (hello's lowest and highest;
// SPEC.md section 22.4).
var ProtocolVersions = []int{1, 2}

// DefaultProtocolVersion is the version hello stamps on a queue that has none: 2, because the
// previous release already speaks 1 and 2, so it can share every queue this one creates (SPEC
// 22.4). A fleet that still holds a release speaking 1 only sets Options.ProtocolVersion to 1
// until it has rolled.
const DefaultProtocolVersion = 2

// KnownLevel is the SPEC feature level this runtime was written for (SPEC.md section 22.2).
const KnownLevel = 2

// Options configure a Client. Every zero value takes the default of SPEC.md section 25.1.
type Options struct {
	// ProtocolDir is the protocol directory (scripts/ inside); "": FindProtocolDir().
	ProtocolDir string
	// DefaultAttempts are the attempts of a job admitted without its own; 0: 3.
	DefaultAttempts int
	// MaxPayloadBytes is the largest encoded payload, result or progress; 0: 512 KiB.
	MaxPayloadBytes int
	// ProtocolVersion is the version hello stamps on a queue that has none (one of
	// ProtocolVersions); 0 means DefaultProtocolVersion (2), 1 keeps new queues readable by a
	// release that speaks 1 only. A queue that has one keeps it: the runtime speaks the stored
	// version there (Queue.ProtocolVersion).
	ProtocolVersion int
	// ClusterWait is how long a call on a Redis Cluster waits for its slot to be served again
	// after a dropped connection, CLUSTERDOWN or TRYAGAIN (a failover, a migration), retrying
	// with back-off, before it fails with EMQNOSERVER; 0 means 10 s. Unused on a single server.
	ClusterWait time.Duration
}

// Client is a connection pool to one Redis, or a slot router over a Redis Cluster's primaries
// (cluster.go), and the protocol's scripts.
type Client struct {
	pool    *redis.Pool // a single server's; nil on a cluster
	cluster *router     // a cluster's map and pools; nil on a single server
	url     string
	scripts Scripts
	opts    Options
}

// Connect opens a pool to the Redis at url (redis://host:port/db) and loads the scripts. A
// node of a Redis Cluster (INFO's cluster_enabled:1) is detected: the client then reads the
// cluster's slot map from it and routes each queue's calls to its slot's primary (cluster.go).
// The url is one seed; the map names the other nodes.
func Connect(url string, opts Options) (*Client, error) {
	if opts.ProtocolDir == "" {
		dir, err := FindProtocolDir()
		if err != nil {
			return nil, err
		}
		opts.ProtocolDir = dir
	}
	if opts.DefaultAttempts == 0 {
		opts.DefaultAttempts = 3
	}
	if opts.MaxPayloadBytes == 0 {
		opts.MaxPayloadBytes = 512 * 1024
	}
	if opts.ProtocolVersion == 0 {
		opts.ProtocolVersion = DefaultProtocolVersion
	}
	if opts.ClusterWait == 0 {
		opts.ClusterWait = 10 * time.Second
	}
	if opts.ClusterWait < 0 {
		return nil, newError("EMQINPUT", "ClusterWait must be a duration >= 0 (0: 10 s), got %v", opts.ClusterWait)
	}
	if !speaks(opts.ProtocolVersion) {
		return nil, newError("EMQINPUT", "ProtocolVersion must be one of %v (the versions this runtime speaks), got %d", ProtocolVersions, opts.ProtocolVersion)
	}
	scripts, err := LoadScripts(opts.ProtocolDir + "/scripts")
	if err != nil {
		return nil, err
	}
	c := &Client{url: url, scripts: scripts, opts: opts}
	probe, err := c.dial()
	if err != nil {
		return nil, newError("EMQNOSERVER", "no redis-server at %s: %v", url, err)
	}
	info, err := redis.String(probe.Do("INFO", "cluster"))
	probe.Close()
	if err != nil {
		return nil, newError("EMQNOSERVER", "no redis-server at %s: %v", url, err)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		if c.cluster, err = newRouter(url, opts.ClusterWait); err != nil {
			return nil, err
		}
		return c, nil
	}
	c.pool = newPool(c.dial)
	return c, nil
}

// newPool is a pool of connections from dial, checked with a PING when idle 10 s or more.
func newPool(dial func() (redis.Conn, error)) *redis.Pool {
	return &redis.Pool{
		MaxIdle:     16,
		IdleTimeout: time.Minute,
		Dial:        dial,
		TestOnBorrow: func(conn redis.Conn, at time.Time) error {
			if time.Since(at) < 10*time.Second {
				return nil
			}
			_, err := conn.Do("PING")
			return err
		},
	}
}

func (c *Client) dial() (redis.Conn, error) { return redis.DialURL(c.url) }

// Close closes the pool (every node's, on a cluster).
func (c *Client) Close() error {
	if c.cluster != nil {
		return c.cluster.close()
	}
	return c.pool.Close()
}

// Conn borrows a pooled connection (close it to give it back): reads need no script. On a
// cluster it is bound to the slot of the first key a command names.
func (c *Client) Conn() redis.Conn { return c.connFor(-1) }

// Scripts are the loaded protocol scripts.
func (c *Client) Scripts() Scripts { return c.scripts }

// Queue is one queue's keys and verbs.
type Queue struct {
	client *Client
	Name   string
	Prefix string // emq:{<name>}:
	slot   int    // the Redis Cluster slot of every key of the queue (its hash tag)

	helloMu  sync.Mutex
	greeting *Greeting // hello's answer, once it came

	siblingsMu sync.Mutex
	siblings   map[string]*Queue // other queues' handles, for flows across queues (flows.go)
}

// Queue returns a handle on the queue `name`.
func (c *Client) Queue(name string) (*Queue, error) {
	if err := CheckName("queue name", name); err != nil {
		return nil, err
	}
	prefix := queuePrefix(name)
	return &Queue{client: c, Name: name, Prefix: prefix, slot: KeySlot(prefix)}, nil
}

// conn borrows a connection to the node serving the queue's slot (close it to give it back).
func (q *Queue) conn() redis.Conn { return q.client.connFor(q.slot) }

// dialBlocking opens a connection of its own, for a blocking read of the queue's streams, to
// the node serving its slot.
func (q *Queue) dialBlocking() (redis.Conn, error) { return q.client.dialFor(q.slot) }

// queuePrefix is the prefix of every key of the queue `name` (SPEC.md section 4): the braces
// keep them in one Redis Cluster slot.
func queuePrefix(name string) string { return "emq:{" + name + "}:" }

// Key is the full name of the queue's key `name` (SPEC.md section 4).
func (q *Queue) Key(name string) string { return q.Prefix + name }

// JobKey is the key of a job's row.
func (q *Queue) JobKey(id string) string { return q.Prefix + "job:" + id }

func speaks(version int) bool {
	for _, v := range ProtocolVersions {
		if v == version {
			return true
		}
	}
	return false
}

// Greeting is what hello told this runtime about a queue and its server (SPEC.md section 19.1).
type Greeting struct {
	Version  int      // the queue's protocol version: the one this runtime speaks on it
	Level    int      // the feature level of the scripts that answered (SPEC 22.2)
	Features []string // the server's optional commands found ("emq.promote", "emq.stalled.check"), and "emq.timers" when the module's timers run: read by name
}

// GreetingOf reads hello's reply by the evolution rule (SPEC 22.1): the three entries this
// runtime knows, by position, and nothing else (a later level may append entries); a bare
// integer is a level-1 reply.
func GreetingOf(reply interface{}) (*Greeting, error) {
	if n, ok := reply.(int64); ok {
		return &Greeting{Version: int(n), Level: 1}, nil
	}
	entries, err := redis.Values(reply, nil)
	if err != nil || len(entries) == 0 {
		return nil, newError("EMQPROTOCOL", "hello replied %v, not {version, level, features}: are protocol/scripts/ this runtime's?", reply)
	}
	g := &Greeting{Level: 1}
	version, err := redis.Int(entries[0], nil)
	if err != nil {
		return nil, newError("EMQPROTOCOL", "hello's version is %v, not an integer", entries[0])
	}
	g.Version = version
	if len(entries) > 1 {
		if g.Level, err = redis.Int(entries[1], nil); err != nil {
			return nil, newError("EMQPROTOCOL", "hello's level is %v, not an integer", entries[1])
		}
	}
	if len(entries) > 2 {
		g.Features, _ = redis.Strings(entries[2], nil)
	}
	return g, nil
}

// hello stamps or checks the protocol version, once per handle, before any other call: it
// passes the versions this runtime speaks and learns the one to speak on this queue.
func (q *Queue) hello(conn redis.Conn) (*Greeting, error) {
	q.helloMu.Lock()
	defer q.helloMu.Unlock()
	if q.greeting != nil {
		return q.greeting, nil
	}
	conn.Do("SADD", "emq:queues", q.Name) // for tools; best effort
	s := q.client.scripts["hello"]
	argv := []interface{}{q.client.opts.ProtocolVersion, ProtocolVersions[0], ProtocolVersions[len(ProtocolVersions)-1]}
	reply, err := s.Eval(conn, []string{q.Key("meta")}, argv)
	if err != nil {
		return nil, fromReply(err)
	}
	g, err := GreetingOf(reply)
	if err != nil {
		return nil, err
	}
	if !speaks(g.Version) { // hello refuses such a queue itself; a foreign script might not
		return nil, newError("EMQPROTOCOL", "queue %s is at protocol version %d, this runtime speaks %v", q.Name, g.Version, ProtocolVersions)
	}
	q.greeting = g
	return g, nil
}

// Greeting says hello (once per handle) and returns its answer: the queue's protocol version,
// the scripts' feature level and the server's optional commands.
func (q *Queue) Greeting(ctx context.Context) (*Greeting, error) {
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return q.hello(conn)
}

// ProtocolVersion is the queue's protocol version now (meta `version`, read after hello): a
// migrate by any runtime since this handle's hello shows here.
func (q *Queue) ProtocolVersion(ctx context.Context) (int, error) {
	conn, err := q.connContext(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := q.hello(conn); err != nil {
		return 0, err
	}
	version, err := redis.String(conn.Do("HGET", q.Key("meta"), "version"))
	if err != nil && err != redis.ErrNil {
		return 0, err
	}
	return int(number(version)), nil
}

// Run calls a protocol script with KEYS built from its contract (`jobID` fills the `job` key),
// on a connection borrowed under ctx: a done ctx makes no call (a script, once sent, runs to
// its end on the server: it is atomic).
func (q *Queue) Run(ctx context.Context, name, jobID string, argv ...interface{}) (interface{}, error) {
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return q.runOn(conn, name, jobID, argv)
}

func (q *Queue) runOn(conn redis.Conn, name, jobID string, argv []interface{}) (interface{}, error) {
	if _, err := q.hello(conn); err != nil {
		return nil, err
	}
	s, ok := q.client.scripts[name]
	if !ok {
		return nil, newError("EMQINPUT", "no protocol script %s.lua", name)
	}
	keys := make([]string, len(s.Keys))
	for i, k := range s.Keys {
		if k == "job" {
			keys[i] = q.JobKey(jobID)
		} else {
			keys[i] = q.Key(k)
		}
	}
	reply, err := s.Eval(conn, keys, argv)
	if err != nil {
		return nil, fromReply(err)
	}
	return reply, nil
}

// ── admission ───────────────────────────────────────────────────────────────

// Dedupe deduplicates by a key of the caller's own (SPEC.md section 13).
type Dedupe struct {
	Key   string `json:"key"`   // 1-200 characters; "" is refused
	Mode  string `json:"mode"`  // "throttle" or "debounce"; "" is refused
	TTLMs int64  `json:"ttlMs"` // how long the key holds; 0: until the kept job ends
}

// JobOptions are a job's admission options. Every zero value means "absent": the default
// named on the field applies.
type JobOptions struct {
	ID       string   // "": a minted id (ids.go)
	Name     string   // at most 200 characters; "": none
	Priority int      // 0 to 2097152, lower runs first; 0: none (before any prioritised job)
	Group    string   // the lane the job waits in; "": none
	Attempts int      // 1 to 1000000; 0: the client's DefaultAttempts (3)
	Backoff  *Backoff // nil: the consumer's policy
	Dedupe   *Dedupe  // nil: no deduplication but the id's
	// Timeout is each attempt's execution timeout (SPEC 8.1), whole ms >= 1, stored on the row
	// (`timeout`): it wins over the consumer's TimeoutMs, in either runtime. 0: the consumer's.
	Timeout time.Duration
}

// Admitted is an admission's outcome: Status "enqueued" (or "scheduled"), "duplicate", or
// "deduplicated" with ID the kept job's.
type Admitted struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

type admission struct {
	id                                       string
	payload, prio, group, name, max, backoff string
	dedupeKey, dedupeSpec                    string
	timeout                                  string // the row's `timeout` in ms; '' for the consumer's
}

// tuple is the job's part of an enqueue call: the 9 fields, or with timed the 14 (the 13-field
// form's retention, tags and lifo left ”, then timeout_ms; SPEC 19.2).
func (a admission) tuple(timed bool) []interface{} {
	t := []interface{}{a.id, a.payload, a.prio, a.group, a.name, a.max, a.backoff, a.dedupeKey, a.dedupeSpec}
	if timed {
		t = append(t, "", "", "", "", a.timeout)
	}
	return t
}

// timedMarker announces enqueue's 14-field tuples (never a job id).
const timedMarker = "#14"

// EncodeJSON encodes a value for the wire (SPEC.md section 5.1): a json.RawMessage goes as is.
func EncodeJSON(value interface{}, what string, limit int) (string, error) {
	var text []byte
	if raw, ok := value.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return "", newError("EMQINPUT", "%s is not valid JSON", what)
		}
		text = raw
	} else {
		var err error
		if text, err = json.Marshal(value); err != nil {
			return "", newError("EMQINPUT", "%s cannot be encoded as JSON: %v", what, err)
		}
	}
	if len(text) > limit {
		return "", newError("EMQTOOBIG", "%s is %d bytes encoded, over the %d-byte limit; store large data elsewhere and enqueue a reference", what, len(text), limit)
	}
	return string(text), nil
}

func (q *Queue) admission(data interface{}, opts *JobOptions) (admission, error) {
	if opts == nil {
		opts = &JobOptions{}
	}
	a := admission{id: opts.ID, group: opts.Group, name: opts.Name}
	if a.id == "" {
		id, err := MintID()
		if err != nil {
			return a, err
		}
		a.id = id
	}
	if err := CheckID(a.id); err != nil {
		return a, err
	}
	if a.group != "" {
		if err := CheckName("group", a.group); err != nil {
			return a, err
		}
	}
	if len(a.name) > 200 {
		return a, newError("EMQINPUT", "name must be a string of at most 200 characters")
	}
	payload, err := EncodeJSON(data, "job data", q.client.opts.MaxPayloadBytes)
	if err != nil {
		return a, err
	}
	a.payload = payload
	if opts.Priority < 0 || opts.Priority > 1<<21 {
		return a, newError("EMQINPUT", "priority must be a whole number from 0 to 2097152, got %d", opts.Priority)
	}
	a.prio = strconv.Itoa(opts.Priority)
	attempts := opts.Attempts
	if attempts == 0 {
		attempts = q.client.opts.DefaultAttempts
	}
	if attempts < 1 || attempts > 1000000 {
		return a, newError("EMQINPUT", "attempts must be a whole number from 1 to 1000000, got %d", attempts)
	}
	a.max = strconv.Itoa(attempts)
	if opts.Backoff != nil {
		if err := opts.Backoff.Validate(); err != nil {
			return a, err
		}
		text, err := opts.Backoff.MarshalJSON()
		if err != nil {
			return a, err
		}
		a.backoff = string(text)
	}
	if opts.Timeout != 0 {
		ms := opts.Timeout.Milliseconds()
		if ms < 1 || time.Duration(ms)*time.Millisecond != opts.Timeout {
			return a, newError("EMQINPUT", "timeout must be a whole number of ms >= 1 (or 0: the consumer's TimeoutMs), got %v", opts.Timeout)
		}
		a.timeout = strconv.FormatInt(ms, 10)
	}
	if d := opts.Dedupe; d != nil {
		if d.Key == "" || len(d.Key) > 200 {
			return a, newError("EMQINPUT", "dedupe key must be a string of 1-200 characters")
		}
		if d.Mode != "throttle" && d.Mode != "debounce" {
			return a, newError("EMQINPUT", "dedupe mode must be 'throttle' or 'debounce', got %q", d.Mode)
		}
		if d.TTLMs < 0 {
			return a, newError("EMQINPUT", "dedupe ttl must be a whole number of ms >= 1, got %d", d.TTLMs)
		}
		a.dedupeKey, a.dedupeSpec = d.Key, d.Mode
		if d.TTLMs > 0 {
			a.dedupeSpec += ":" + strconv.FormatInt(d.TTLMs, 10)
		}
	}
	return a, nil
}

func admitted(id string, reply interface{}, added string) Admitted {
	switch r := reply.(type) {
	case []byte:
		return Admitted{ID: string(r), Status: "deduplicated"}
	case int64:
		if r == 1 {
			return Admitted{ID: id, Status: added}
		}
	}
	return Admitted{ID: id, Status: "duplicate"}
}

// Enqueue adds a job that can run now; idempotent on the id.
func (q *Queue) Enqueue(ctx context.Context, data interface{}, opts *JobOptions) (Admitted, error) {
	out, err := q.EnqueueMany(ctx, []Item{{Data: data, Opts: opts}})
	if err != nil {
		return Admitted{}, err
	}
	return out[0], nil
}

// Item is one job of EnqueueMany.
type Item struct {
	Data interface{}
	Opts *JobOptions
}

const admissionChunk = 1000

// EnqueueMany adds many jobs, one script call per chunk of 1000, statuses in input order.
// Every job is checked before the first call. Each chunk is admitted whole or not at all: when
// ctx ends (or Redis fails) between chunks, the statuses of the chunks admitted so far come
// back with the error, and the rest were not sent.
func (q *Queue) EnqueueMany(ctx context.Context, items []Item) ([]Admitted, error) {
	jobs := make([]admission, len(items))
	for i, it := range items {
		a, err := q.admission(it.Data, it.Opts)
		if err != nil {
			return nil, err
		}
		jobs[i] = a
	}
	out := make([]Admitted, 0, len(jobs))
	for start := 0; start < len(jobs); start += admissionChunk {
		part := jobs[start:min(start+admissionChunk, len(jobs))]
		argv := []interface{}{q.Prefix}
		// Every tuple of a call has one width: the 14 fields only for a call with a timed job,
		// so plain enqueues stay 9 wide.
		timed := false
		for _, a := range part {
			timed = timed || a.timeout != ""
		}
		if timed {
			argv = append(argv, timedMarker)
		}
		for _, a := range part {
			argv = append(argv, a.tuple(timed)...)
		}
		reply, err := redis.Values(q.Run(ctx, "enqueue", "", argv...))
		if err != nil {
			return out, err
		}
		for i, r := range reply {
			out = append(out, admitted(part[i].id, r, "enqueued"))
		}
	}
	return out, nil
}

// EnqueueAt adds a job claimable at runAtMs (epoch ms, judged on the server's clock).
func (q *Queue) EnqueueAt(ctx context.Context, data interface{}, runAtMs int64, opts *JobOptions) (Admitted, error) {
	if runAtMs < 0 {
		return Admitted{}, newError("EMQINPUT", "runAtMs must be a whole number >= 0, got %d", runAtMs)
	}
	return q.schedule(ctx, data, "at", runAtMs, opts)
}

// EnqueueIn adds a job claimable `delay` from now, measured on the server's clock.
func (q *Queue) EnqueueIn(ctx context.Context, data interface{}, delay time.Duration, opts *JobOptions) (Admitted, error) {
	if delay < 0 {
		return Admitted{}, newError("EMQINPUT", "delay must be >= 0, got %v", delay)
	}
	return q.schedule(ctx, data, "in", delay.Milliseconds(), opts)
}

func (q *Queue) schedule(ctx context.Context, data interface{}, mode string, value int64, opts *JobOptions) (Admitted, error) {
	a, err := q.admission(data, opts)
	if err != nil {
		return Admitted{}, err
	}
	argv := []interface{}{a.id, a.payload, mode, value, a.prio, a.group, a.name, a.max, a.backoff, a.dedupeKey, a.dedupeSpec}
	if a.timeout != "" { // retention and tags '', then timeout_ms (SPEC 19.3)
		argv = append(argv, "", "", "", a.timeout)
	}
	reply, err := q.Run(ctx, "schedule", a.id, argv...)
	if err != nil {
		return Admitted{}, err
	}
	return admitted(a.id, reply, "scheduled"), nil
}

// ── reading rows ────────────────────────────────────────────────────────────

// ErrorInfo is a stored failure.
type ErrorInfo struct {
	Message string `json:"message"`
	Stack   string `json:"stack,omitempty"`
}

// JobView is a job's row decoded (SPEC.md sections 5 and 5.1). Its JSON form is the
// TypeScript runtime's JobView, field for field.
type JobView struct {
	ID              string           `json:"id"`
	Name            string           `json:"name,omitempty"`
	State           string           `json:"state"`
	Data            json.RawMessage  `json:"data"`
	Attempts        int64            `json:"attempts"`
	MaxAttempts     int64            `json:"maxAttempts"`
	Result          *json.RawMessage `json:"result,omitempty"`
	Error           *ErrorInfo       `json:"error,omitempty"`
	LastError       *ErrorInfo       `json:"lastError,omitempty"`
	Progress        *json.RawMessage `json:"progress,omitempty"`
	Group           string           `json:"group,omitempty"`
	Priority        *int64           `json:"priority,omitempty"`
	Backoff         *Backoff         `json:"backoff,omitempty"`
	Stalled         int64            `json:"stalled"`
	CancelRequested bool             `json:"cancelRequested"`
	CreatedAt       int64            `json:"createdAt"`
	RunAt           *int64           `json:"runAt,omitempty"`
	StartedAt       *int64           `json:"startedAt,omitempty"`
	FinishedAt      *int64           `json:"finishedAt,omitempty"`
	Consumer        string           `json:"consumer,omitempty"` // who made the latest claim, when it said
}

// Get reads a job's row; nil when no job has that id.
func (q *Queue) Get(ctx context.Context, id string) (*JobView, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// The row and meta's version in one round trip: an absent max means 1 or 3 by it (SPEC 22.3).
	conn.Send("MULTI")
	conn.Send("HGETALL", q.JobKey(id))
	conn.Send("HGET", q.Key("meta"), "version")
	replies, err := redis.Values(conn.Do("EXEC"))
	if err != nil {
		return nil, err
	}
	row, err := redis.StringMap(replies[0], nil)
	if err != nil {
		return nil, err
	}
	if row["state"] == "" {
		return nil, nil
	}
	version, _ := redis.String(replies[1], nil)
	return DecodeRow(id, row, version), nil
}

// AttemptsWithoutMax is the attempts a row without `max` allows on a queue of this protocol
// version (meta `version`, "" when absent): 1 under version 1, 3 from version 2 (SPEC 22.3), as
// the scripts apply it.
func AttemptsWithoutMax(version string) int64 {
	if number(version) >= 2 {
		return 3
	}
	return 1
}

// jsonOrText is a JSON field as stored, or text another runtime stored plainly, as a JSON string.
func jsonOrText(v string) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	quoted, _ := json.Marshal(v)
	return quoted
}

func number(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n
}

// DecodeRow decodes a row (HGETALL) into its view; absent fields take SPEC.md's defaults, read
// with the queue's protocol version (meta `version`). Fields it does not know are ignored.
func DecodeRow(id string, row map[string]string, version string) *JobView {
	v := &JobView{ID: id, State: row["state"], Data: jsonOrText(row["payload"]), MaxAttempts: AttemptsWithoutMax(version)}
	v.Name, v.Group, v.Consumer = row["name"], row["group"], row["consumer"]
	if s, ok := row["attempts"]; ok {
		v.Attempts = number(s)
	}
	if s, ok := row["max"]; ok {
		v.MaxAttempts = number(s)
	}
	v.Stalled = number(row["stalled"])
	v.CancelRequested = row["cancel"] == "1"
	if s, ok := row["created"]; ok {
		v.CreatedAt = number(s)
	} else {
		v.CreatedAt = MintedAt(id) // enqueue leaves created off a row whose minted id holds it
	}
	if s, ok := row["prio"]; ok && s != "" {
		p := number(s)
		v.Priority = &p
	}
	if s := row["backoff"]; s != "" {
		if b, err := ParseBackoff(s); err == nil {
			v.Backoff = b
		}
	}
	if s, ok := row["result"]; ok {
		r := jsonOrText(s)
		v.Result = &r
	}
	if s, ok := row["error"]; ok {
		v.Error = &ErrorInfo{Message: s, Stack: row["stack"]}
	}
	if s, ok := row["last_error"]; ok {
		v.LastError = &ErrorInfo{Message: s, Stack: row["last_stack"]}
	}
	if s, ok := row["progress"]; ok {
		p := jsonOrText(s)
		v.Progress = &p
	}
	instant := func(field string) *int64 {
		if s, ok := row[field]; ok {
			n := number(s)
			return &n
		}
		return nil
	}
	v.RunAt, v.StartedAt, v.FinishedAt = instant("runat"), instant("started"), instant("finished")
	return v
}

// Cancel ends a waiting job at once ("cancelled") or asks a running one to stop ("requested").
func (q *Queue) Cancel(ctx context.Context, id string) (string, error) {
	return redis.String(q.Run(ctx, "cancel", id, q.Prefix, id))
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// connContext borrows a pooled connection under ctx (close it to give it back): every command
// on it honours ctx (context.go).
func (q *Queue) connContext(ctx context.Context) (redis.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, notSent(ctx, "queue "+q.Name+"'s call")
	}
	return withContext(ctx, q.conn()), nil
}
