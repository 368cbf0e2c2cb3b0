// Package pushhttp holds what the three platform clients (apns, fcm,
// webpush) do alike: reading a bounded answer, Retry-After, the results of
// local failures, and fitting a notification into a platform's size limit.
package pushhttp

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/notify/provider"
)

// MaxBody is the most of an answer's body a client reads.
const MaxBody = 64 << 10

// MaxHeaderBytes bounds an answer's header block.
const MaxHeaderBytes = 64 << 10

// MaxRetryAfter caps a Retry-After (a larger one is taken as this).
const MaxRetryAfter = 24 * time.Hour

// ReadBody reads at most MaxBody bytes of resp's body, then closes it.
func ReadBody(resp *http.Response) []byte {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	resp.Body.Close()
	return b
}

// RetryAfter parses h's Retry-After: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3). Zero when absent, malformed or in the past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return MaxRetryAfter
			}
			return 0
		}
		if n > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	if d > MaxRetryAfter {
		return MaxRetryAfter
	}
	return d.Round(time.Second)
}

// Printable reports whether s is 1 to max bytes of printable ASCII without
// spaces: what a device token, registration token or topic may hold.
func Printable(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// BadTarget is the result for a target that can never work (no request
// was made).
func BadTarget(err error) provider.Result {
	return provider.Result{Reason: "bad target", Invalid: true, Err: err}
}

// BadNotification is the result for a notification that cannot be sent
// (no request was made); retrying does not help.
func BadNotification(err error) provider.Result {
	return provider.Result{Reason: "bad notification", Err: err}
}

// NoAnswer is the result for a request that got no answer (a dial, TLS
// or transport failure, a timeout, ctx ending): worth another try.
func NoAnswer(err error) provider.Result {
	return provider.Result{Reason: "no answer", Retry: true, Err: err}
}

// ValidCollapseID reports whether s is a valid Notification.CollapseID:
// empty, or at most 32 characters of [A-Za-z0-9_-].
func ValidCollapseID(s string) bool {
	if len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckNotification reports what is wrong with n, if anything.
func CheckNotification(n *provider.Notification) error {
	switch {
	case n == nil:
		return errors.New("no notification")
	case !ValidCollapseID(n.CollapseID):
		return errors.New("collapse id is not at most 32 characters of [A-Za-z0-9_-]")
	case n.TTL < 0:
		return errors.New("negative TTL")
	}
	return nil
}

// ErrTooLarge: even with an empty title and body the notification is over
// the platform's limit (its other fields are too long).
var ErrTooLarge = errors.New("notification too large for the platform")

// Fit returns encode(n) if it is at most limit bytes; else it shortens a
// copy of n's body, then its title if need be (at a rune boundary, marked
// with "…"), as little as it can for the encoding to fit. encode must not
// keep n.
func Fit(n *provider.Notification, limit int, encode func(*provider.Notification) ([]byte, error)) ([]byte, error) {
	b, err := encode(n)
	if err != nil || len(b) <= limit {
		return b, err
	}
	m := *n
	if b, err, ok := fitField(&m, &m.Body, n.Body, limit, encode); ok {
		return b, err
	}
	if b, err, ok := fitField(&m, &m.Title, n.Title, limit, encode); ok {
		return b, err
	}
	return nil, ErrTooLarge
}

// fitField finds the longest prefix of orig that, put in *field with "…",
// makes encode(m) fit in limit; *field is left "" if none does.
func fitField(m *provider.Notification, field *string, orig string, limit int, encode func(*provider.Notification) ([]byte, error)) ([]byte, error, bool) {
	*field = ""
	b, err := encode(m)
	if err != nil || len(b) > limit {
		return nil, err, err != nil
	}
	best := b
	lo, hi := 0, len(orig) // a prefix of lo bytes fits (0: the empty field)
	for lo < hi {
		mid := cut(orig, (lo+hi+1)/2)
		if mid <= lo {
			// No rune boundary between lo and the midpoint: try the next one up.
			mid = lo + 1
			for mid < len(orig) && !utf8.RuneStart(orig[mid]) {
				mid++
			}
			if mid > hi {
				break
			}
		}
		*field = orig[:mid] + "…"
		b, err := encode(m)
		if err != nil {
			return nil, err, true
		}
		if len(b) <= limit {
			lo, best = mid, b
		} else {
			hi = mid - 1
		}
	}
	return best, nil, true
}

// cut returns the largest rune boundary of s at or below i.
func cut(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
