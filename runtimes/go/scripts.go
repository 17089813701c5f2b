package echomq

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// Script is one protocol script, loaded verbatim from protocol/scripts/<verb>.lua. Its
// contract header's `-- KEYS:` line is the one source of its key order (SPEC.md section 1).
type Script struct {
	Name string
	Keys []string
	Body string
	SHA  string
}

// Scripts are the protocol's scripts by verb.
type Scripts map[string]*Script

var keysLine = regexp.MustCompile(`(?m)^-- KEYS:(.*)$`)

// ParseScript reads a script's body and its KEYS line.
func ParseScript(name, body string) (*Script, error) {
	m := keysLine.FindStringSubmatch(body)
	if m == nil {
		return nil, fmt.Errorf("protocol/scripts/%s.lua has no \"-- KEYS:\" line in its contract", name)
	}
	sum := sha1.Sum([]byte(body))
	return &Script{Name: name, Keys: strings.Fields(m[1]), Body: body, SHA: hex.EncodeToString(sum[:])}, nil
}

// LoadScripts loads every .lua file of dir (the protocol's scripts directory).
func LoadScripts(dir string) (Scripts, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no protocol scripts in %s (point ECHOMQ_PROTOCOL or Options.ProtocolDir at the protocol directory)", dir)
	}
	out := Scripts{}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".lua")
		s, err := ParseScript(name, string(body))
		if err != nil {
			return nil, err
		}
		out[name] = s
	}
	return out, nil
}

// FindProtocolDir is $ECHOMQ_PROTOCOL, else the first `protocol` directory holding scripts
// found walking up from the working directory (runtimes/go sits two levels below it).
func FindProtocolDir() (string, error) {
	if dir := os.Getenv("ECHOMQ_PROTOCOL"); dir != "" {
		return dir, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		candidate := filepath.Join(dir, "protocol")
		if _, err := os.Stat(filepath.Join(candidate, "scripts", "hello.lua")); err == nil {
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no protocol/scripts found above the working directory; set ECHOMQ_PROTOCOL")
		}
		dir = parent
	}
}

// Eval runs a script with EVALSHA, and once more with EVAL and the body on NOSCRIPT (a new or
// restarted server). Error replies come back as redis.Error, unmapped.
func (s *Script) Eval(conn redis.Conn, keys []string, argv []interface{}) (interface{}, error) {
	args := make([]interface{}, 0, 2+len(keys)+len(argv))
	args = append(args, s.SHA, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, argv...)
	reply, err := conn.Do("EVALSHA", args...)
	if re, ok := err.(redis.Error); ok && strings.HasPrefix(string(re), "NOSCRIPT") {
		args[0] = s.Body
		reply, err = conn.Do("EVAL", args...)
	}
	return reply, err
}
