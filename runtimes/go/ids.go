package echomq

import (
	"crypto/rand"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Job ids (SPEC.md section 3): JOB, 10 Crockford base32 characters of the mint instant (epoch
// ms, 48 bits) and 10 of randomness. Minting is monotonic per process, so ids sort in mint
// order and jobs of equal priority are claimed in the order they were minted.

const (
	crockford   = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	idPrefix    = "JOB"
	timeChars   = 10
	randomChars = 10
	maxIDTime   = 1<<48 - 1
)

// MintedAt is the mint instant (epoch ms) a minted id holds in its time part, 0 for an id of
// another shape: the creation instant of a row enqueue wrote without created (SPEC.md section 3).
func MintedAt(id string) int64 {
	if len(id) != len(idPrefix)+timeChars+randomChars || !strings.HasPrefix(id, idPrefix) {
		return 0
	}
	var at int64
	for i := len(idPrefix); i < len(id); i++ {
		digit := strings.IndexByte(crockford, id[i])
		if digit < 0 {
			return 0
		}
		if i < len(idPrefix)+timeChars {
			at = at*32 + int64(digit)
		}
	}
	return at
}

// Minter mints JOB ids from a clock and a source of random bytes.
type Minter struct {
	mu       sync.Mutex
	now      func() int64
	random   func([]byte) error
	lastTime int64
	digits   [randomChars]byte
}

// NewMinter returns a minter over `now` (epoch ms) and `random` (fills its slice).
func NewMinter(now func() int64, random func([]byte) error) *Minter {
	return &Minter{now: now, random: random, lastTime: -1}
}

var defaultMinter = NewMinter(
	func() int64 { return time.Now().UnixMilli() },
	func(b []byte) error { _, err := rand.Read(b); return err },
)

// MintID mints a job id with the process's minter.
func MintID() (string, error) { return defaultMinter.Mint() }

func (m *Minter) fresh() error {
	var b [randomChars]byte
	if err := m.random(b[:]); err != nil {
		return newError("EMQINPUT", "id random source failed: %v", err)
	}
	// 256 is a multiple of 32: the low 5 bits of a uniform byte are uniform.
	for i := range b {
		m.digits[i] = b[i] & 31
	}
	return nil
}

// increment adds one to the random part; false when it was already all Z.
func (m *Minter) increment() bool {
	for i := randomChars - 1; i >= 0; i-- {
		if m.digits[i] < 31 {
			m.digits[i]++
			return true
		}
		m.digits[i] = 0
	}
	return false
}

// Mint returns the next id: a new millisecond draws fresh randomness; the same one (or a clock
// that stepped back) adds one to the random part, and on its overflow the time moves on by 1 ms.
func (m *Minter) Mint() (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.now()
	if t < 0 || t > maxIDTime {
		return "", newError("EMQINPUT", "id clock must return whole epoch ms in [0, 2^48), got %d", t)
	}
	if t > m.lastTime {
		m.lastTime = t
		if err := m.fresh(); err != nil {
			return "", err
		}
	} else if !m.increment() {
		if m.lastTime >= maxIDTime {
			return "", newError("EMQINPUT", "id clock has reached 2^48 ms")
		}
		m.lastTime++
		if err := m.fresh(); err != nil {
			return "", err
		}
	}
	var out strings.Builder
	out.WriteString(idPrefix)
	out.WriteString(EncodeTime(m.lastTime))
	for _, d := range m.digits {
		out.WriteByte(crockford[d])
	}
	return out.String(), nil
}

// EncodeTime is the 10-character time part of an id (and of an occurrence id) for epoch ms.
func EncodeTime(ms int64) string {
	var b [timeChars]byte
	for i := timeChars - 1; i >= 0; i-- {
		b[i] = crockford[ms%32]
		ms /= 32
	}
	return string(b[:])
}

// CheckID refuses an id the runtime would not send (SPEC.md section 25.1): JOB-prefixed, 4 to
// 512 characters, no whitespace or control characters.
func CheckID(id string) error {
	hint := "pass an id starting with JOB or leave it empty to mint one"
	if !strings.HasPrefix(id, idPrefix) {
		return newError("EMQKIND", "job id must be JOB-namespaced, got %q; %s", clipText(id, 64), hint)
	}
	bad := strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	if len(id) < 4 || len(id) > 512 || bad >= 0 {
		return newError("EMQKIND", "job id must be 4 to 512 characters with no whitespace or control characters, got %q (%d characters); %s", clipText(id, 64), len(id), hint)
	}
	return nil
}

// CheckName refuses a queue or group name that would break the key scheme (SPEC.md section 4).
func CheckName(what, name string) error {
	bad := strings.IndexFunc(name, func(r rune) bool {
		return r == '{' || r == '}' || unicode.IsSpace(r) || unicode.IsControl(r)
	})
	if name == "" || len(name) > 200 || bad >= 0 {
		return newError("EMQINPUT", "%s must be 1-200 characters without braces, whitespace or control characters, got %q", what, clipText(name, 64))
	}
	return nil
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
