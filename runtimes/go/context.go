package echomq

// A context.Context on every call that talks to Redis. redigo 1.8.3 (Debian's) has no
// DoContext, so a borrowed connection is wrapped: a done context sends nothing, and its
// deadline bounds the wait for each reply. A script, once sent, runs to its end on the server
// (it is atomic), so a call is either not made or made whole; only a reply abandoned at the
// deadline leaves the outcome unknown, and the error says so.

import (
	"context"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
)

// notSent is the error of a call a done context kept from being made.
func notSent(ctx context.Context, what string) error {
	return fmt.Errorf("echomq: %s not sent: %w", what, ctx.Err())
}

// ctxConn is a pooled connection under a context.
type ctxConn struct {
	redis.Conn
	ctx context.Context
}

// withContext binds conn to ctx: Do and Flush refuse once ctx is done, and wait for a reply
// no longer than ctx's deadline.
func withContext(ctx context.Context, conn redis.Conn) redis.Conn {
	return &ctxConn{Conn: conn, ctx: ctx}
}

// remaining is the time to ctx's deadline; ok false when ctx has none.
func (c *ctxConn) remaining() (time.Duration, bool) {
	at, ok := c.ctx.Deadline()
	if !ok {
		return 0, false
	}
	if d := time.Until(at); d > 0 {
		return d, true
	}
	return time.Nanosecond, true
}

// late wraps an error met while ctx ended: the command went out, its reply was not read.
func (c *ctxConn) late(cmd string, err error) error {
	if err != nil && c.ctx.Err() != nil {
		return fmt.Errorf("echomq: %s was sent but its reply was not read before the context ended (it may have run): %w", cmd, c.ctx.Err())
	}
	return err
}

func (c *ctxConn) Do(cmd string, args ...interface{}) (interface{}, error) {
	if c.ctx.Err() != nil {
		return nil, notSent(c.ctx, cmd)
	}
	if d, ok := c.remaining(); ok {
		reply, err := redis.DoWithTimeout(c.Conn, d, cmd, args...)
		return reply, c.late(cmd, err)
	}
	return c.Conn.Do(cmd, args...)
}

func (c *ctxConn) Flush() error {
	if c.ctx.Err() != nil {
		return notSent(c.ctx, "the pipeline")
	}
	return c.Conn.Flush()
}

func (c *ctxConn) Receive() (interface{}, error) {
	if d, ok := c.remaining(); ok {
		reply, err := redis.ReceiveWithTimeout(c.Conn, d)
		return reply, c.late("a pipelined command", err)
	}
	return c.Conn.Receive()
}
