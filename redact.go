package grantretry

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// What counts as a secret. A name (of a header or a query parameter) is a
// secret when, lower-cased, it is one of secretNames, contains one of
// secretParts, or was named with WithRedact. Secrets never reach an audit
// line, an error message or a dead letter.
var (
	secretNames = []string{"key", "sig", "pwd", "code"}
	secretParts = []string{
		"auth", "token", "secret", "passw", "apikey", "api-key", "api_key",
		"session", "cookie", "signature", "credential", "private",
	}
)

// redactor removes secrets from what the Transport writes down. Its zero
// value knows the built-in names only.
type redactor struct {
	extra map[string]bool // lower-cased names given to WithRedact
}

// secret reports whether the header or query parameter called name carries
// a secret.
func (rd redactor) secret(name string) bool {
	n := strings.ToLower(name)
	if rd.extra[n] {
		return true
	}
	for _, s := range secretNames {
		if n == s {
			return true
		}
	}
	for _, s := range secretParts {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// SecretName reports whether a header or query parameter called name
// carries a secret by the built-in rules: compared without regard to case,
// it contains one of "auth", "token", "secret", "passw", "apikey",
// "api-key", "api_key", "session", "cookie", "signature", "credential" or
// "private", or is "key", "sig", "pwd" or "code". A Transport also treats
// as secret the names given to WithRedact.
func SecretName(name string) bool { return redactor{}.secret(name) }

// header returns a copy of h without the headers that carry secrets and
// without the ones the Transport stamps, and the names it left out as
// secrets, sorted.
func (rd redactor) header(h http.Header) (kept http.Header, dropped []string) {
	for k, vs := range h {
		switch {
		case isStamped(k):
		case rd.secret(k):
			dropped = append(dropped, http.CanonicalHeaderKey(k))
		default:
			if kept == nil {
				kept = make(http.Header, len(h))
			}
			kept[k] = append([]string(nil), vs...)
		}
	}
	sort.Strings(dropped)
	return kept, dropped
}

// url returns u without user info, fragment and the query parameters that
// carry secrets, and the names of the parameters it left out, sorted. The
// other parameters keep their order and encoding.
func (rd redactor) url(u *url.URL) (string, []string) {
	r := *u
	r.User, r.Fragment, r.RawFragment = nil, "", ""
	var dropped []string
	if u.RawQuery != "" {
		var kept []string
		for _, part := range strings.Split(u.RawQuery, "&") {
			name, _, _ := strings.Cut(part, "=")
			if dec, err := url.QueryUnescape(name); err == nil {
				name = dec
			}
			if rd.secret(name) {
				dropped = append(dropped, name)
				continue
			}
			kept = append(kept, part)
		}
		r.RawQuery = strings.Join(kept, "&")
		sort.Strings(dropped)
		dropped = compactStrings(dropped)
	}
	return r.String(), dropped
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// redactedURL is the URL as the audit trail and error messages show it:
// scheme, host and path, never user info, query or fragment.
func redactedURL(u *url.URL) string {
	if u == nil {
		return "<nil URL>"
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// minSecretLen is the shortest secret scrubbed out of an error message on
// its own; shorter ones cannot hold a credential, and scrubbing them would
// mangle the message.
const minSecretLen = 4

// scrub is err's message with the request's secrets removed: its query
// (whole and value by value), its user info, any user name or password in
// it, and the values of its headers that carry secrets. Error types of
// other packages may quote the URL or a header; this does not trust them
// not to.
func (rd redactor) scrub(err error, r *http.Request) string {
	msg := err.Error()
	if r == nil {
		return msg
	}
	for _, s := range rd.secretsOf(r) {
		if len(s) >= minSecretLen {
			msg = strings.ReplaceAll(msg, s, "REDACTED")
		}
	}
	return msg
}

// secretsOf lists the strings of r that must not appear in a message.
func (rd redactor) secretsOf(r *http.Request) []string {
	var secrets []string
	if u := r.URL; u != nil {
		if u.RawQuery != "" {
			secrets = append(secrets, u.RawQuery)
			for _, vs := range u.Query() {
				for _, v := range vs {
					// as decoded, and as another layer may have re-encoded it
					secrets = append(secrets, v, url.QueryEscape(v), url.PathEscape(v))
				}
			}
		}
		if u.User != nil {
			secrets = append(secrets, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				secrets = append(secrets, p)
			}
		}
	}
	for k, vs := range r.Header {
		if !rd.secret(k) {
			continue
		}
		for _, v := range vs {
			secrets = append(secrets, v)
			// "Bearer abc…": the credential alone, as a layer may quote it
			if _, cred, ok := strings.Cut(v, " "); ok {
				secrets = append(secrets, cred)
			}
		}
	}
	return secrets
}
