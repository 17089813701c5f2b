package echomq

// A thin Redis Cluster slot router (SPEC.md section 18). Every key of a queue shares the hash
// tag {<queue>}, so a queue's calls all go to one slot's primary; the router only has to know
// which node that is now and follow the cluster when it changes:
//
//  1. the map: CLUSTER SLOTS on connect, slot -> primary, and a redis.Pool per primary;
//  2. a queue's connection is bound to its slot's primary; a batch (Do, or Sends then Flush)
//     runs there in one round trip;
//  3. MOVED: the map is refreshed and the command sent again to the node MOVED named; ASK: the
//     command is sent to the importing node after ASKING, the map untouched;
//  4. a dropped connection, CLUSTERDOWN or TRYAGAIN (a failover or a migration under way): the
//     map is refreshed and the command sent again, backing off, until Options.ClusterWait has
//     passed, then a clear EMQNOSERVER error;
//  5. blocking reads (XREAD BLOCK on wake and events) get a connection of their own to the
//     slot's primary, and CLIENT UNBLOCK goes to that same node (a client id names a
//     connection of one server only).
//
// redigo (Debian's golang-github-gomodule-redigo-dev, the one Go dependency here) has no
// cluster client, and /usr/share/gocode holds nothing else: a third-party cluster client
// (mna/redisc, go-redis) would be a dependency nobody can install offline. One slot per queue
// makes a router this small enough.

import (
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// maxRedirects bounds the MOVED and ASK replies one command follows: more means the cluster
// is resharding that slot back and forth, and the caller hears so instead of a loop.
const maxRedirects = 5

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag (the text
// between the first '{' and the next '}', when not empty), else of the whole key, mod 16384.
func KeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// ── the map ─────────────────────────────────────────────────────────────────

// router is a cluster's slot map and its pools, one per node.
type router struct {
	seed string        // the URL Connect was given: every node is dialled with its credentials and TLS
	wait time.Duration // how long a call waits for the cluster to serve its slot again

	mu    sync.RWMutex
	slots [clusterSlots]string   // slot -> "host:port" of its primary; "" while unserved
	known []string               // every node the last map named, primaries and replicas: where a refresh asks
	pools map[string]*redis.Pool // "host:port" -> its pool

	refreshMu   sync.Mutex
	refreshedAt time.Time

	// What it followed, for tests and for operators reading a slow call.
	moved, asked, refreshes atomic.Int64
}

func newRouter(seed string, wait time.Duration) (*router, error) {
	r := &router{seed: seed, wait: wait, pools: map[string]*redis.Pool{}}
	if err := r.refresh(); err != nil {
		return nil, err
	}
	return r, nil
}

// dialNode opens a connection to the node at addr with the seed URL's credentials (a cluster
// has database 0 only, so the URL's path is dropped).
func (r *router) dialNode(addr string) (redis.Conn, error) {
	u, err := url.Parse(r.seed)
	if err != nil {
		return nil, err
	}
	u.Host, u.Path = addr, ""
	return redis.DialURL(u.String())
}

func (r *router) pool(addr string) *redis.Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pools[addr]
	if !ok {
		p = newPool(func() (redis.Conn, error) { return r.dialNode(addr) })
		r.pools[addr] = p
	}
	return p
}

// nodeOf is the primary serving slot, as the map says now ("" when none does).
func (r *router) nodeOf(slot int) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.slots[slot]
}

// refresh reads CLUSTER SLOTS from the first node that answers (the nodes of the last map, then
// the seed) and installs it. Callers that queued behind a refresh take its map instead of
// asking again.
func (r *router) refresh() error {
	asked := time.Now()
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	if r.refreshedAt.After(asked) {
		return nil
	}
	r.mu.RLock()
	candidates := append(append([]string{}, r.known...), seedAddr(r.seed))
	r.mu.RUnlock()
	var last error
	for _, addr := range candidates {
		slots, known, err := r.readSlots(addr)
		if err != nil {
			last = err
			continue
		}
		r.mu.Lock()
		r.slots, r.known = slots, known
		r.mu.Unlock()
		r.refreshedAt = time.Now()
		r.refreshes.Add(1)
		return nil
	}
	return newError("EMQNOSERVER", "no node of the Redis Cluster answered CLUSTER SLOTS (asked %s): %v", strings.Join(candidates, ", "), last)
}

func seedAddr(seed string) string {
	if u, err := url.Parse(seed); err == nil && u.Host != "" {
		return u.Host
	}
	return seed
}

// readSlots asks the node at addr for its slot map: [start, end, [host, port, id], replicas...]
// per range.
func (r *router) readSlots(addr string) (slots [clusterSlots]string, known []string, err error) {
	conn := r.pool(addr).Get()
	defer conn.Close()
	ranges, err := redis.Values(conn.Do("CLUSTER", "SLOTS"))
	if err != nil {
		return slots, nil, err
	}
	seen := map[string]bool{}
	askedHost := addr[:strings.LastIndexByte(addr, ':')]
	for _, raw := range ranges {
		entry, err := redis.Values(raw, nil)
		if err != nil || len(entry) < 3 {
			return slots, nil, newError("EMQPROTOCOL", "CLUSTER SLOTS replied %v, not [start, end, node...] ranges", raw)
		}
		start, _ := redis.Int(entry[0], nil)
		end, _ := redis.Int(entry[1], nil)
		for i, n := range entry[2:] {
			node, _ := redis.Values(n, nil)
			if len(node) < 2 {
				continue
			}
			host, _ := redis.String(node[0], nil)
			port, _ := redis.Int(node[1], nil)
			if host == "" || host == "?" { // the node does not know its address: the one we asked
				host = askedHost
			}
			at := host + ":" + strconv.Itoa(port)
			if !seen[at] {
				seen[at] = true
				known = append(known, at)
			}
			if i == 0 && start >= 0 && end < clusterSlots {
				for s := start; s <= end; s++ {
					slots[s] = at
				}
			}
		}
	}
	if len(known) == 0 {
		return slots, nil, newError("EMQNOSERVER", "the Redis Cluster at %s serves no slot yet (CLUSTER SLOTS is empty): is it created?", addr)
	}
	return slots, known, nil
}

func (r *router) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pools {
		p.Close()
	}
	r.pools = map[string]*redis.Pool{}
	return nil
}

// ── following the cluster ───────────────────────────────────────────────────

type command struct {
	name string
	args []interface{}
}

type result struct {
	value interface{}
	err   error
}

// redirect is a MOVED or ASK reply: the slot and the node to send the command to.
type redirect struct {
	ask  bool
	slot int
	addr string
}

func redirectOf(err error) (redirect, bool) {
	re, ok := err.(redis.Error)
	if !ok {
		return redirect{}, false
	}
	parts := strings.Fields(string(re))
	if len(parts) != 3 || (parts[0] != "MOVED" && parts[0] != "ASK") {
		return redirect{}, false
	}
	slot, err := strconv.Atoi(parts[1])
	if err != nil || slot < 0 || slot >= clusterSlots {
		return redirect{}, false
	}
	return redirect{ask: parts[0] == "ASK", slot: slot, addr: parts[2]}, true
}

// transient is an error the cluster ends by itself: a slot without a primary for now
// (CLUSTERDOWN, a failover), keys of a call split by a migration (TRYAGAIN).
func transient(err error) bool {
	re, ok := err.(redis.Error)
	return ok && (strings.HasPrefix(string(re), "CLUSTERDOWN") || strings.HasPrefix(string(re), "TRYAGAIN"))
}

// runBatch runs a batch on conn in one round trip (ASKING before each command but inside a
// transaction, where one ASKING before MULTI covers the whole of it). The error is the
// connection's; replies, error replies included, are in the results.
func runBatch(conn redis.Conn, batch []command, asking bool, timeout time.Duration) ([]result, error) {
	receive := conn.Receive
	if timeout > 0 { // a caller's deadline (context.go) bounds each reply
		receive = func() (interface{}, error) { return redis.ReceiveWithTimeout(conn, timeout) }
	}
	inTx := false
	asked := make([]bool, len(batch))
	for i, c := range batch {
		if asking && !inTx {
			conn.Send("ASKING")
			asked[i] = true
		}
		switch strings.ToUpper(c.name) {
		case "MULTI":
			inTx = true
		case "EXEC", "DISCARD":
			inTx = false
		}
		conn.Send(c.name, c.args...)
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	out := make([]result, 0, len(batch))
	for i := range batch {
		if asked[i] {
			if _, err := receive(); conn.Err() != nil {
				return nil, err
			}
		}
		v, err := receive()
		if conn.Err() != nil {
			return nil, conn.Err()
		}
		out = append(out, result{v, err})
	}
	return out, nil
}

func isTx(batch []command) bool {
	for _, c := range batch {
		if strings.EqualFold(c.name, "MULTI") {
			return true
		}
	}
	return false
}

// retryable is the first result the cluster asks to send again (a redirect, or a transient
// error), nil when there is none.
func retryable(results []result) error {
	for _, res := range results {
		if _, ok := redirectOf(res.err); ok || transient(res.err) {
			return res.err
		}
	}
	return nil
}

// settle sends group again until the cluster takes it: to the node a MOVED or ASK named, or
// after a dropped connection, CLUSTERDOWN or TRYAGAIN to the slot's primary by a fresh map,
// backing off, within r.wait. A command whose connection dropped is sent again, though it may
// have run: the scripts are idempotent on job ids and fenced by lease tokens (SPEC 8), so the
// repeat answers `duplicate` (an enqueue), leaves claimed jobs to the reaper (a claim) or is
// refused as a lost lease (a completion); no job runs twice on account of it.
func (r *router) settle(group []command, slot int, cause error, timeout time.Duration) []result {
	deadline, bound := time.Now().Add(r.wait), "Options.ClusterWait"
	if timeout > 0 && timeout < r.wait {
		deadline, bound = time.Now().Add(timeout), "the call's deadline"
	}
	redirects := 0
	for attempt := 0; ; attempt++ {
		addr, asking := "", false
		if to, ok := redirectOf(cause); ok {
			if redirects++; redirects > maxRedirects {
				return failed(group, newError("EMQNOSERVER", "slot %d was redirected %d times in a row (last: %v): the cluster is resharding it back and forth; try again once it settles", to.slot, maxRedirects, cause))
			}
			addr, asking = to.addr, to.ask
			if to.ask {
				r.asked.Add(1)
			} else {
				r.moved.Add(1)
				if r.nodeOf(to.slot) != to.addr {
					r.refresh() // a slot moved: likely more did; the map follows them all
				}
			}
		} else {
			redirects = 0 // a migration answers ASK then TRYAGAIN until it ends: ClusterWait bounds that
			if step := backoffStep(attempt); time.Now().Add(step).After(deadline) {
				return failed(group, newError("EMQNOSERVER", "slot %d of the Redis Cluster (primary %s) was not served within %s: %v", slot, r.nodeOf(slot), bound, cause))
			} else {
				time.Sleep(step)
			}
			r.refresh()
			if addr = r.nodeOf(slot); addr == "" {
				cause = redis.Error("CLUSTERDOWN slot " + strconv.Itoa(slot) + " is not served")
				continue
			}
		}
		conn := r.pool(addr).Get()
		results, err := runBatch(conn, group, asking, timeout)
		conn.Close()
		if err != nil {
			cause = err
			continue
		}
		if e := retryable(results); e != nil {
			cause = e
			continue
		}
		return results
	}
}

// backoffStep is the wait before the attempt-th retry of a failover: 50 ms doubling to 1 s.
func backoffStep(attempt int) time.Duration {
	if attempt > 4 {
		return time.Second
	}
	return 50 * time.Millisecond << attempt
}

func failed(group []command, err error) []result {
	out := make([]result, len(group))
	for i := range out {
		out[i] = result{nil, err}
	}
	return out
}

// ── a queue's connection ────────────────────────────────────────────────────

// slotConn is a redis.Conn bound to a slot's primary, following the cluster when the slot
// moves. Sends are held until the next Receive (or Do), then run as one batch: a batch that
// must be sent again goes whole (a transaction) or a command at a time (the others). It is a
// redis.ConnWithTimeout, so a context's deadline (context.go) bounds its replies and retries.
type slotConn struct {
	r       *router
	timeout time.Duration // of the Do or Receive under way; 0: none
	slot    int           // -1: bound by the first command that names a key (Client.Conn)
	node    string
	conn    redis.Conn
	queued  []command
	replies []result
	err     error
}

func (c *slotConn) Close() error {
	c.err = errClosed
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	return nil
}

var errClosed = newError("EMQINPUT", "the connection is closed")

func (c *slotConn) Err() error { return c.err }

func (c *slotConn) Send(name string, args ...interface{}) error {
	if c.err != nil {
		return c.err
	}
	c.queued = append(c.queued, command{name, args})
	return nil
}

// Flush sends nothing yet: the batch runs at the next Receive, under that call's timeout.
func (c *slotConn) Flush() error { return c.err }

func (c *slotConn) runQueued() error {
	if c.err != nil {
		return c.err
	}
	if len(c.queued) > 0 {
		batch := c.queued
		c.queued = nil
		c.replies = append(c.replies, c.run(batch)...)
	}
	return nil
}

func (c *slotConn) Receive() (interface{}, error) {
	if err := c.runQueued(); err != nil {
		return nil, err
	}
	if len(c.replies) == 0 {
		return nil, newError("EMQINPUT", "Receive with no command sent")
	}
	res := c.replies[0]
	c.replies = c.replies[1:]
	return res.value, res.err
}

// Do runs what was sent and the command, and returns the command's reply with the first error
// reply among them, as redigo's connection does; Do("") returns every pending reply.
func (c *slotConn) Do(name string, args ...interface{}) (interface{}, error) {
	if name != "" {
		c.Send(name, args...)
	}
	if err := c.runQueued(); err != nil {
		return nil, err
	}
	pending := c.replies
	c.replies = nil
	if name == "" {
		values := make([]interface{}, len(pending))
		for i, res := range pending {
			values[i] = res.value
		}
		return values, nil
	}
	var first error
	for _, res := range pending {
		if res.err != nil {
			first = res.err
			break
		}
	}
	return pending[len(pending)-1].value, first
}

func (c *slotConn) DoWithTimeout(timeout time.Duration, name string, args ...interface{}) (interface{}, error) {
	c.timeout = timeout
	defer func() { c.timeout = 0 }()
	return c.Do(name, args...)
}

func (c *slotConn) ReceiveWithTimeout(timeout time.Duration) (interface{}, error) {
	c.timeout = timeout
	defer func() { c.timeout = 0 }()
	return c.Receive()
}

// run sends a batch to the slot's primary and settles what the cluster sent back.
func (c *slotConn) run(batch []command) []result {
	if c.slot < 0 {
		c.slot = slotOfBatch(batch)
	}
	if want := c.r.nodeOf(c.slot); c.conn == nil || c.node != want {
		if c.conn != nil {
			c.conn.Close()
		}
		c.node, c.conn = want, c.r.pool(want).Get()
	}
	results, err := runBatch(c.conn, batch, false, c.timeout)
	if err != nil {
		c.conn.Close()
		c.conn = nil
		return c.r.settle(batch, c.slot, err, c.timeout)
	}
	if isTx(batch) {
		if e := retryable(results); e != nil {
			return c.r.settle(batch, c.slot, e, c.timeout)
		}
		return results
	}
	for i := range results {
		if e := retryable(results[i : i+1]); e != nil {
			results[i] = c.r.settle(batch[i:i+1], slotOfBatch(batch[i:i+1]), e, c.timeout)[0]
		}
	}
	return results
}

// slotOfBatch is the slot of the first command of the batch that names a key (0 when none
// does: a keyless command is answered by any node).
func slotOfBatch(batch []command) int {
	for _, c := range batch {
		if key, ok := keyOf(c); ok {
			return KeySlot(key)
		}
	}
	return 0
}

// keyOf is the key a command is routed by: EVAL's and EVALSHA's first key, XREAD's first
// stream, else the first argument; none for the commands that name no key.
func keyOf(c command) (string, bool) {
	switch strings.ToUpper(c.name) {
	case "PING", "INFO", "CLIENT", "CLUSTER", "MULTI", "EXEC", "DISCARD", "TIME", "SCRIPT", "FLUSHALL", "FLUSHDB", "CONFIG", "ASKING", "DBSIZE":
		return "", false
	case "EVAL", "EVALSHA":
		if len(c.args) > 2 {
			if n, _ := redis.Int(c.args[1], nil); n > 0 {
				key, err := redis.String(c.args[2], nil)
				return key, err == nil
			}
		}
		return "", false
	case "XREAD", "XREADGROUP":
		for i, a := range c.args {
			if s, _ := redis.String(a, nil); strings.EqualFold(s, "STREAMS") && i+1 < len(c.args) {
				key, err := redis.String(c.args[i+1], nil)
				return key, err == nil
			}
		}
		return "", false
	}
	if len(c.args) == 0 {
		return "", false
	}
	key, err := redis.String(c.args[0], nil)
	return key, err == nil
}

// ── blocking reads ──────────────────────────────────────────────────────────

// pinnedConn is a connection of its own to one node, for a blocking read: it is never sent
// elsewhere (its client id names it there). A MOVED or a dropped connection refreshes the map
// and is returned: the reader dials again, to the slot's primary by the new map.
type pinnedConn struct {
	redis.Conn
	r    *router
	addr string
}

func (p *pinnedConn) DoWithTimeout(timeout time.Duration, name string, args ...interface{}) (interface{}, error) {
	reply, err := redis.DoWithTimeout(p.Conn, timeout, name, args...)
	p.followed(err)
	return reply, err
}

func (p *pinnedConn) ReceiveWithTimeout(timeout time.Duration) (interface{}, error) {
	reply, err := redis.ReceiveWithTimeout(p.Conn, timeout)
	p.followed(err)
	return reply, err
}

func (p *pinnedConn) Do(name string, args ...interface{}) (interface{}, error) {
	reply, err := p.Conn.Do(name, args...)
	p.followed(err)
	return reply, err
}

func (p *pinnedConn) followed(err error) {
	if _, moved := redirectOf(err); moved || transient(err) || (err != nil && p.Conn.Err() != nil) {
		p.r.refresh()
	}
}

func (r *router) dialSlot(slot int) (redis.Conn, error) {
	addr := r.nodeOf(slot)
	if addr == "" {
		r.refresh()
		if addr = r.nodeOf(slot); addr == "" {
			return nil, newError("EMQNOSERVER", "slot %d of the Redis Cluster has no primary now", slot)
		}
	}
	conn, err := r.dialNode(addr)
	if err != nil {
		r.refresh()
		return nil, err
	}
	return &pinnedConn{Conn: conn, r: r, addr: addr}, nil
}

// ── the client's side ───────────────────────────────────────────────────────

// connFor is a connection for a queue's slot: the node's on a cluster, the one server's
// otherwise (slot -1: bound by its first keyed command).
func (c *Client) connFor(slot int) redis.Conn {
	if c.cluster == nil {
		return c.pool.Get()
	}
	return &slotConn{r: c.cluster, slot: slot}
}

// dialFor opens a connection of its own for a blocking read of a queue's slot.
func (c *Client) dialFor(slot int) (redis.Conn, error) {
	if c.cluster == nil {
		return c.dial()
	}
	return c.cluster.dialSlot(slot)
}

// unblock ends the blocking read of client id on blocking (a connection from dialFor), sent
// to the node that connection is on: the id means another connection, or none, elsewhere.
func (c *Client) unblock(blocking redis.Conn, id int64) (int, error) {
	var conn redis.Conn
	if p, ok := blocking.(*pinnedConn); ok {
		conn = c.cluster.pool(p.addr).Get()
	} else {
		conn = c.pool.Get()
	}
	defer conn.Close()
	return redis.Int(conn.Do("CLIENT", "UNBLOCK", id))
}

// Cluster says whether the client is on a Redis Cluster (detected at Connect).
func (c *Client) Cluster() bool { return c.cluster != nil }
