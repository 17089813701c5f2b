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
