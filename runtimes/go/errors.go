// Package echomq is a Go runtime of the EchoMQ protocol (protocol/SPEC.md): it runs the
// protocol's Lua scripts, loaded from protocol/scripts as they are, over the same keys as the
// TypeScript runtime, so a Go producer can feed a TypeScript consumer and the reverse.
package echomq

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/gomodule/redigo/redis"
)

// Error is a refusal with a protocol error code (SPEC.md section 20): EMQKIND, EMQLEASE,
// EMQNOJOB, EMQSTATE, EMQINPUT, EMQPROTOCOL, or a runtime-only code such as EMQCLOSED.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + " " + e.Message }

// Is makes every *Error match the sentinel of its code, so callers write
// errors.Is(err, echomq.ErrLease) and never compare messages.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is, one per code a Go caller acts on (SPEC.md section 20); errors.As to
// *Error gives the code and message.
var (
	ErrLease    = &Error{Code: "EMQLEASE"}    // the lease is gone: another consumer holds the job
	ErrNoJob    = &Error{Code: "EMQNOJOB"}    // no job has that id
	ErrState    = &Error{Code: "EMQSTATE"}    // the job is not in a state the verb acts on
	ErrInput    = &Error{Code: "EMQINPUT"}    // bad input: the message says what and how to fix it
	ErrProtocol = &Error{Code: "EMQPROTOCOL"} // the queue is at a version this runtime does not speak
	ErrTooBig   = &Error{Code: "EMQTOOBIG"}   // an encoded payload, result or progress over the limit
	ErrNoServer = &Error{Code: "EMQNOSERVER"} // no redis-server answered
	ErrFleet    = &Error{Code: "EMQFLEET"}    // migrate: an alive consumer does not speak the version
	ErrCron     = &Error{Code: "EMQCRON"}     // a cron pattern or time zone this runtime cannot read
	ErrData     = &Error{Code: "EMQDATA"}     // a row holds a field that cannot be used: correct it first
	// WaitFor's ends other than a result.
	ErrJobFailed = &Error{Code: "EMQJOBFAILED"} // the job ended dead; the message is its error
	ErrCancelled = &Error{Code: "EMQCANCELLED"} // the job was cancelled
)

func newError(code, format string, args ...interface{}) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Runtimes switch on the code at the start of a script's error reply, never on the message.
var codePattern = regexp.MustCompile(`^(EMQ[A-Z]+) ?(.*)$`)

// fromReply turns a script's error reply into an *Error; other errors pass through.
func fromReply(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		if m := codePattern.FindStringSubmatch(string(re)); m != nil {
			return &Error{Code: m[1], Message: m[2]}
		}
	}
	return err
}

// Code is the protocol code of err ("" when it has none).
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
