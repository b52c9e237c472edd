package grantretry

import (
	"bytes"
	"encoding/json"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// What counts as a secret. A name (of a header or a query parameter) is a
// secret when, lower-cased, it is one of secretNames, contains one of
// secretParts, ends with one of secretEnds (Ocp-Apim-Subscription-Key,
// X-Functions-Key, access_key), or was named with WithRedact; the one
// exception is Idempotency-Key, which the audit trail records on purpose.
// Secrets never reach an audit line, an error message or a dead letter.
var (
	secretNames = []string{"key", "sig", "pwd", "pass", "code"}
	secretParts = []string{
		"auth", "token", "secret", "passw", "apikey", "api-key", "api_key",
		"session", "cookie", "signature", "credential", "private",
	}
	secretEnds = []string{"-key", "_key", ".key"}
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
	switch {
	case rd.extra[n]:
		return true
	case n == "idempotency-key":
		return false
	case slices.Contains(secretNames, n):
		return true
	}
	for _, s := range secretParts {
		if strings.Contains(n, s) {
			return true
		}
	}
	for _, s := range secretEnds {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// SecretName reports whether a header or query parameter called name
// carries a secret by the built-in rules: compared without regard to case,
// it contains one of "auth", "token", "secret", "passw", "apikey",
// "api-key", "api_key", "session", "cookie", "signature", "credential" or
// "private", ends with "-key", "_key" or ".key", or is "key", "sig", "pwd",
// "pass" or "code"; Idempotency-Key is not a secret. A Transport also
// treats as secret the names given to WithRedact.
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
// other parameters keep their order, separators and encoding. Both "&" and
// ";" count as separators, as some servers read them.
func (rd redactor) url(u *url.URL) (string, []string) {
	r := *u
	r.User, r.Fragment, r.RawFragment = nil, "", ""
	var dropped []string
	if u.RawQuery != "" {
		var b strings.Builder
		for _, p := range splitQuery(u.RawQuery) {
			if rd.secret(p.name) {
				dropped = append(dropped, p.name)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(p.sep)
			}
			b.WriteString(p.raw)
		}
		if dropped != nil { // else the query stays byte for byte as it was
			r.RawQuery = b.String()
		}
		sort.Strings(dropped)
		dropped = slices.Compact(dropped)
	}
	return r.String(), dropped
}

// queryPart is one name=value of a raw query.
type queryPart struct {
	raw         string // as it was, encoded
	name, value string // decoded where they decode
	sep         byte   // the separator before it: '&' or ';'
}

// splitQuery splits a raw query at every "&" and ";".
func splitQuery(raw string) []queryPart {
	var parts []queryPart
	sep := byte('&')
	for raw != "" {
		i := strings.IndexAny(raw, "&;")
		part := raw
		next := byte(0)
		if i >= 0 {
			part, next, raw = raw[:i], raw[i], raw[i+1:]
		} else {
			raw = ""
		}
		if part != "" {
			name, value, _ := strings.Cut(part, "=")
			parts = append(parts, queryPart{raw: part, name: unescapeQuery(name), value: unescapeQuery(value), sep: sep})
		}
		sep = next
	}
	return parts
}

func unescapeQuery(s string) string {
	if dec, err := url.QueryUnescape(s); err == nil {
		return dec
	}
	return s
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
	secrets := rd.secretsOf(r)
	// Longest first: a short value that is part of a longer secret must
	// not cut it in two and leave its tail readable.
	slices.SortFunc(secrets, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	for _, s := range slices.Compact(secrets) {
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
			for _, p := range splitQuery(u.RawQuery) {
				// as sent, as decoded, and as another layer may have
				// re-encoded it
				v := p.value
				_, rawValue, _ := strings.Cut(p.raw, "=")
				secrets = append(secrets, rawValue, v, url.QueryEscape(v), url.PathEscape(v))
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

// formSecretNames are the fields of a form or token request that carry
// credentials without a secret-looking name: OAuth 2.0's assertion grants
// (RFC 7521, 7523) and PKCE's code_verifier (RFC 7636). client_secret,
// password, refresh_token and code match the rules above.
var formSecretNames = []string{"assertion", "client_assertion", "code_verifier"}

// credential reports whether a field of a request body called name carries
// a credential.
func (rd redactor) credential(name string) bool {
	return rd.secret(name) || slices.Contains(formSecretNames, strings.ToLower(name))
}

// bodySecrets returns the names of the fields of a request body that carry
// credentials, by the rules of credential, sorted and once each; nil if it
// holds none. A body with such a field is never written down: what it
// holds is the credential itself. It reads the body as the funder's server
// may: an application/x-www-form-urlencoded form, a multipart form, and,
// whatever its Content-Type, a JSON token request (an object with a
// grant_type). The Content-Type is read as net/http's server reads it:
// under any spelling of its name, and by its media type even when a
// parameter after it does not parse.
func (rd redactor) bodySecrets(h http.Header, body []byte) []string {
	if len(body) == 0 {
		return nil
	}
	var names []string
	for k, vs := range h {
		if !strings.EqualFold(k, "Content-Type") {
			continue
		}
		for _, v := range vs {
			mt, params := mediaType(v)
			switch {
			case mt == "application/x-www-form-urlencoded":
				names = append(names, rd.formFields(body)...)
			case strings.HasPrefix(mt, "multipart/"):
				names = append(names, rd.multipartFields(body, params["boundary"])...)
			}
		}
	}
	names = append(names, rd.tokenRequestFields(body)...)
	sort.Strings(names)
	return slices.Compact(names)
}

// mediaType is the media type of a Content-Type value, lower-cased, and
// its parameters, nil if they do not parse.
func mediaType(v string) (string, map[string]string) {
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		mt, _, _ = strings.Cut(v, ";")
		return strings.ToLower(strings.TrimSpace(mt)), nil
	}
	return mt, params
}

// formFields returns the names of a URL-encoded form's credential fields.
func (rd redactor) formFields(body []byte) []string {
	var names []string
	for _, p := range splitQuery(string(body)) {
		if rd.credential(p.name) {
			names = append(names, p.name)
		}
	}
	return names
}

// multipartFields returns the names of a multipart form's credential
// parts. Without a boundary from the Content-Type, it takes the one the
// body opens with.
func (rd redactor) multipartFields(body []byte, boundary string) []string {
	if boundary == "" {
		first, _, _ := bytes.Cut(body, []byte("\n"))
		first = bytes.TrimRight(first, " \t\r")
		if !bytes.HasPrefix(first, []byte("--")) {
			return nil
		}
		boundary = string(first[2:])
	}
	var names []string
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextRawPart()
		if err != nil {
			return names
		}
		if n := p.FormName(); rd.credential(n) {
			names = append(names, n)
		}
	}
}

// tokenRequestFields returns the names of the credential fields of a JSON
// token request: a top-level object with a grant_type. A JSON body of
// another kind is the work itself, and keeps its fields.
func (rd redactor) tokenRequestFields(body []byte) []string {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil
	}
	var obj map[string]json.RawMessage
	// The first value only, as a server that decodes the body does.
	if json.NewDecoder(bytes.NewReader(body)).Decode(&obj) != nil {
		return nil
	}
	var names []string
	grant := false
	for k := range obj {
		if strings.EqualFold(k, "grant_type") {
			grant = true
		}
		if rd.credential(k) {
			names = append(names, k)
		}
	}
	if !grant {
		return nil
	}
	return names
}
