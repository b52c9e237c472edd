// Package operator is the operator's core, shared by cmd/grantretry and
// the fleet's grantretry-fleet, so that both tools do and say the same:
// the redeliver flags (RedeliverFlags: selection, -rate, -budget,
// -deadline, -concurrency, -header and -header-env) and the client they
// make (NewClient); a run over a Store (Run: which letters are due, late,
// refused or ambiguous, the pace, the workers, the stop on a signal, each
// letter's line and the Summary); list, show and retire over a Store; the
// exit codes (ExitCode); and the dry run's plan, which names the
// operator's headers without showing them. A tool is its flag parsing,
// opening its Store (DirStore for a directory), and a call to the core.
package operator

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// WithHeaders sets its headers on a clone of each request, replacing any
// of the same name, and never touches the caller's request.
type WithHeaders struct {
	Next   http.RoundTripper
	Header http.Header
}

// RoundTrip sends a clone of r with the headers set.
func (w WithHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	setHeaders(r.Header, w.Header)
	return w.Next.RoundTrip(r)
}

func setHeaders(dst, src http.Header) {
	for name, vs := range src {
		dst[name] = slices.Clone(vs)
	}
}

// Credentials are the operator's headers, with where each value came from,
// so a dry run can name its source without showing it.
type Credentials struct {
	// Header holds the headers given, by canonical name.
	Header http.Header
	source map[string]string // canonical name -> "-header" or "$VAR"
	// seen counts the -header and -header-env flags so far, by flag, so
	// that an error can point at one without quoting it.
	seen map[string]int
	// Err is the first bad -header or -header-env. It is kept here, not
	// returned by Set, because the flag package would quote the argument,
	// secret and all, in its message. It names the flag by position and
	// the header by name, when that is a valid one, and nothing else.
	Err error
}

// next counts one more flag and returns its position, 1 for the first.
func (c *Credentials) next(flagName string) int {
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	c.seen[flagName]++
	return c.seen[flagName]
}

// fail records the first problem with the n-th flagName. name is shown
// only if it is a valid header name: anything else may be a secret that
// landed there by mistake.
func (c *Credentials) fail(flagName string, n int, name, problem string) {
	if c.Err != nil {
		return
	}
	where := fmt.Sprintf("%s #%d", flagName, n)
	if validHeaderName(name) {
		where += " (" + http.CanonicalHeaderKey(name) + ")"
	}
	c.Err = fmt.Errorf("%s: %s", where, problem)
}

func (c *Credentials) add(name, value, source string) {
	if c.Header == nil {
		c.Header, c.source = http.Header{}, map[string]string{}
	}
	name = http.CanonicalHeaderKey(name)
	c.Header.Add(name, value)
	c.source[name] = source
}

// fromTheLetter reports whether a redelivery takes the header canon (in
// canonical form) from the letter. HeaderCorrelationID is not canonical
// ("X-Correlation-ID"), hence the conversions.
func fromTheLetter(canon string) bool {
	switch canon {
	case http.CanonicalHeaderKey(grantretry.HeaderIdempotencyKey),
		http.CanonicalHeaderKey(grantretry.HeaderCorrelationID),
		"Host", "Content-Length":
		return true
	}
	return false
}

// checkName says what is wrong with a header name given by a flag, ""
// if nothing.
func checkName(name string) string {
	if !validHeaderName(name) {
		return "not a valid header name (the argument is not shown: it may hold a secret)"
	}
	if fromTheLetter(http.CanonicalHeaderKey(name)) {
		return "comes from the letter, not from a flag"
	}
	return ""
}

// checkValue says what is wrong with a header value given by a flag, ""
// if nothing; it never quotes the value.
func checkValue(value string) string {
	if value == "" {
		return "empty value"
	}
	if strings.ContainsFunc(value, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) {
		return "control character in the value"
	}
	return ""
}

// shown is a header value as a dry run prints it: the operator's own, and
// any a letter should never have held, are named but not shown.
func (c *Credentials) shown(name, value string) string {
	if src, ok := c.source[name]; ok {
		return "[not shown: from " + src + "]"
	}
	if grantretry.SecretName(name) {
		return "[not shown]"
	}
	return value
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// HeaderFlag is the flag.Value of -header "Name: value". Set never
// fails: see Credentials.Err.
type HeaderFlag struct{ C *Credentials }

func (f HeaderFlag) String() string { return "" }

func (f HeaderFlag) Set(s string) error {
	n := f.C.next("-header")
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok {
		f.C.fail("-header", n, "", `want "Name: value" (the argument is not shown: it may hold a secret)`)
		return nil
	}
	if problem := cmp.Or(checkName(name), checkValue(value)); problem != "" {
		f.C.fail("-header", n, name, problem)
		return nil
	}
	f.C.add(name, value, "-header")
	return nil
}

// HeaderEnvFlag is the flag.Value of -header-env "Name=VAR". Set never
// fails: see Credentials.Err.
type HeaderEnvFlag struct{ C *Credentials }

func (f HeaderEnvFlag) String() string { return "" }

func (f HeaderEnvFlag) Set(s string) error {
	n := f.C.next("-header-env")
	name, env, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || env == "" {
		f.C.fail("-header-env", n, "", `want "Name=VAR" (the argument is not shown: it may hold a secret)`)
		return nil
	}
	if problem := checkName(name); problem != "" {
		f.C.fail("-header-env", n, name, problem)
		return nil
	}
	value, set := os.LookupEnv(env)
	switch {
	case !set:
		f.C.fail("-header-env", n, name, "the environment variable it names is not set (the name is not shown: a secret pasted in its place would not be set either)")
	case checkValue(value) != "":
		f.C.fail("-header-env", n, name, checkValue(value))
	default:
		f.C.add(name, value, "$"+env)
	}
	return nil
}

// WritePlan prints what redelivering l would send, built as Redeliver
// builds it, with the operator's headers named but not shown.
func WritePlan(w io.Writer, l *grantretry.Letter, c *Credentials) error {
	req, err := deadletter.NewRedeliveryRequest(context.Background(), l)
	if err != nil {
		return err
	}
	setHeaders(req.Header, c.Header)
	var b strings.Builder
	fmt.Fprintf(&b, "letter %s (dry run: nothing sent)\n  %s %s\n", l.ID, EscapeControl(req.Method), EscapeControl(req.URL.String()))
	if req.Host != req.URL.Host { // only the letter's own Host differs
		fmt.Fprintf(&b, "  Host: %s\n", EscapeControl(req.Host))
	}
	for _, name := range slices.Sorted(maps.Keys(req.Header)) {
		for _, v := range req.Header[name] {
			fmt.Fprintf(&b, "  %s: %s\n", name, EscapeControl(c.shown(name, v)))
		}
	}
	sum := sha256.Sum256(l.Body)
	fmt.Fprintf(&b, "  body: %d bytes, sha256 %s\n", len(l.Body), hex.EncodeToString(sum[:]))
	if l.SubmissionID != "" {
		fmt.Fprintf(&b, "  submission id: %s (in the audit trail; sent in no header)\n", l.SubmissionID)
	}
	if l.Ambiguous && l.IdempotencyKey != "" {
		fmt.Fprintf(&b, "  warning: its last attempt may have been applied: it is sent only with -trust-key\n")
	}
	for _, name := range l.Redacted {
		if _, ok := c.source[http.CanonicalHeaderKey(name)]; !ok {
			fmt.Fprintf(&b, "  warning: %s was left out of the letter and no -header gives it\n", name)
		}
	}
	for _, name := range l.RedactedQuery {
		fmt.Fprintf(&b, "  warning: query parameter %s was left out of the letter's URL; no flag can give it back\n", name)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// EscapeControl is s with every control character, and every byte that
// is not UTF-8, written as a Go escape (\x1b, \n, \u0085); s itself if it
// has none.
func EscapeControl(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
