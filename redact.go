package grantretry

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
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

// minSecretLen is the shortest secret scrubbed out of an error message on
// its own; shorter ones cannot hold a credential, and scrubbing them would
// mangle the message.
const minSecretLen = 4

// scrub is err's message with the request's secrets removed: its query
// (whole and value by value), its user info, any user name or password in
// it, and the values of its headers and trailers (the credential alone of
// a "Bearer x" value too), each when it is minSecretLen bytes or longer.
// Error types of other packages may quote the URL or a header; this does
// not trust them not to. call.scrub removes the body as well.
func (rd redactor) scrub(err error, r *http.Request) string {
	return rd.scrubText(err.Error(), r)
}

// scrubText is scrub of an error's message, cut as cutErrorText cuts it.
func (rd redactor) scrubText(msg string, r *http.Request) string {
	if r == nil {
		return cutErrorText(msg)
	}
	t := newErrorText(msg)
	t.markSecrets(rd.sortedSecrets(r))
	return t.String()
}

// sortedSecrets is secretsOf, longest first, once each, without the ones
// shorter than minSecretLen. Longest first: a short value that is part of
// a longer secret must not cut it in two and leave its tail readable.
func (rd redactor) sortedSecrets(r *http.Request) []string {
	secrets := slices.DeleteFunc(rd.secretsOf(r), func(s string) bool { return len(s) < minSecretLen })
	slices.SortFunc(secrets, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(secrets)
}

// redacted stands in error text for what was removed from it.
const redacted = "REDACTED"

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
	for _, h := range []http.Header{r.Header, r.Trailer} {
		for k, vs := range h {
			secret := rd.secret(k)
			for _, v := range vs {
				secrets = appendQuoted(secrets, v)
				// "Bearer abc…": the credential alone, as a layer may quote it
				if _, cred, ok := strings.Cut(v, " "); ok && secret {
					secrets = appendQuoted(secrets, cred)
				}
			}
		}
	}
	return secrets
}

// appendQuoted appends v, and v trimmed of the spaces around it, each as it
// is and as an error may quote it: as fmt's %q and %+q (strconv.Quote,
// strconv.QuoteToASCII) and encoding/json write it, with and without
// json's HTML escapes, between the quotes.
func appendQuoted(secrets []string, v string) []string {
	for _, s := range []string{v, strings.TrimSpace(v)} {
		secrets = append(secrets, s, unquoted(strconv.Quote(s)), unquoted(strconv.QuoteToASCII(s)))
		for _, html := range []bool{true, false} {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(s) == nil {
				secrets = append(secrets, unquoted(strings.TrimSuffix(b.String(), "\n")))
			}
		}
	}
	return secrets
}

// unquoted is q without the quotes around it.
func unquoted(q string) string { return q[1 : len(q)-1] }

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

// maxDecodedBody bounds what bodyOmitted decodes of a body sent with a
// Content-Encoding: a body that decodes to more is read as one it cannot
// decode.
const maxDecodedBody = MaxLetterBody

// bodyOmitted is why a letter must leave out body (sent with header h),
// "" if it may keep it: the body carries credentials (bodySecrets), read
// as the server reads it, after undoing its Content-Encoding (gzip,
// x-gzip, deflate, identity). A form or multipart body whose encoding it
// cannot undo cannot be looked into, and is left out too: such a body is
// what a token request sends. Another body it cannot decode (a JSON
// application sent as br) is kept as sent.
func (rd redactor) bodyOmitted(h http.Header, body []byte) string {
	decoded, err := undoContentEncoding(h, body)
	if err != nil {
		if form := formMediaType(h); form != "" {
			return fmt.Sprintf("the body's Content-Encoding could not be undone to look for credentials in its %s fields (%v): letters are kept without credentials, so it was not kept; the client that made the call must make it again", form, err)
		}
		decoded = body
	}
	if names := rd.bodySecrets(h, decoded); names != nil {
		return credentialsOmitted(names)
	}
	return ""
}

// undoContentEncoding undoes h's Content-Encoding on body, the last coding
// first (at most maxCodings of them), up to maxDecodedBody bytes. Unlike
// SOAPEnvelope's decodeContent, which reads a response as best it can, it
// says when it cannot: what it cannot read, it cannot look into.
func undoContentEncoding(h http.Header, body []byte) ([]byte, error) {
	var codings []string
	for k, vs := range h {
		if !strings.EqualFold(k, "Content-Encoding") {
			continue
		}
		for _, v := range vs {
			for _, c := range strings.Split(v, ",") {
				if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
					codings = append(codings, c)
				}
			}
		}
	}
	if len(codings) > maxCodings {
		return nil, fmt.Errorf("%d Content-Encodings, more than the %d grantretry undoes", len(codings), maxCodings)
	}
	for i := len(codings) - 1; i >= 0; i-- {
		var r io.ReadCloser
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			r, err = gzip.NewReader(bytes.NewReader(body))
		case "deflate": // zlib, as RFC 9110 section 8.4.1.2 defines it
			if r, err = zlib.NewReader(bytes.NewReader(body)); err != nil {
				// raw DEFLATE, as some clients send it
				r, err = flate.NewReader(bytes.NewReader(body)), nil
			}
		default:
			return nil, fmt.Errorf("Content-Encoding %q is not one grantretry reads", codings[i])
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", codings[i], err)
		}
		b, err := io.ReadAll(io.LimitReader(r, maxDecodedBody+1))
		r.Close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %v", codings[i], err)
		case len(b) > maxDecodedBody:
			return nil, fmt.Errorf("%s: decodes to more than %d bytes", codings[i], maxDecodedBody)
		}
		body = b
	}
	return body, nil
}

// formMediaType is h's Content-Type if it is a form (URL-encoded or
// multipart), "" if not.
func formMediaType(h http.Header) string {
	for k, vs := range h {
		if !strings.EqualFold(k, "Content-Type") {
			continue
		}
		for _, v := range vs {
			if mt, _ := mediaType(v); mt == "application/x-www-form-urlencoded" || strings.HasPrefix(mt, "multipart/") {
				return mt
			}
		}
	}
	return ""
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
		// Up to a parameter, or to a second type a client listed after
		// it ("application/x-www-form-urlencoded, text/plain"), as a
		// server may read the first.
		mt = v[:strings.IndexAny(v+";", ";,")]
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
// token request: an object whose grant_type is an OAuth 2.0 grant
// (oauthGrant), alone or in a top-level array, after any UTF-8 byte order
// mark. A field inside an object of it is named by its path
// ("client.secret"). A JSON body of another kind is the work itself, and
// keeps its fields: a funder's application may well have a grant_type of
// its own ("capital"), beside an authorized representative and a
// signature.
func (rd redactor) tokenRequestFields(body []byte) []string {
	t := bytes.TrimLeft(bytes.TrimPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("\ufeff")), " \t\r\n")
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return nil
	}
	var v any
	// The first value only, as a server that decodes the body does.
	if json.NewDecoder(bytes.NewReader(t)).Decode(&v) != nil {
		return nil
	}
	objs, _ := v.([]any)
	if objs == nil {
		objs = []any{v}
	}
	var names []string
	for _, o := range objs {
		if obj, ok := o.(map[string]any); ok && tokenRequest(obj) {
			names = rd.credentialPaths(names, "", obj)
		}
	}
	return names
}

// tokenRequest reports whether obj has a grant_type (in any case) that is
// an OAuth 2.0 grant.
func tokenRequest(obj map[string]any) bool {
	for k, v := range obj {
		if g, ok := v.(string); ok && strings.EqualFold(k, "grant_type") && oauthGrant(g) {
			return true
		}
	}
	return false
}

// credentialPaths appends the paths of the credential fields of v, a
// decoded JSON value at path, at any depth.
func (rd redactor) credentialPaths(names []string, path string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if rd.credential(k) {
				names = append(names, p)
				continue
			}
			names = rd.credentialPaths(names, p, sub)
		}
	case []any:
		for _, sub := range v {
			names = rd.credentialPaths(names, path, sub)
		}
	}
	return names
}

// oauthGrants are the grant types RFC 6749 defines by name (section 4);
// the others are absolute URIs (section 4.5), as RFC 7522, 7523, 8628 and
// 8693 define theirs under urn:ietf:params:oauth:grant-type:.
var oauthGrants = []string{"authorization_code", "client_credentials", "password", "refresh_token"}

// oauthGrant reports whether g, a grant_type's value, is an OAuth 2.0
// grant: one of oauthGrants, or an absolute URI ("urn:...",
// "https://...").
func oauthGrant(g string) bool {
	if slices.Contains(oauthGrants, strings.ToLower(g)) {
		return true
	}
	u, err := url.Parse(g)
	return err == nil && u.Scheme != "" && (u.Opaque != "" || u.Host != "")
}

// minBodyRun is the shortest run of a request body's bytes removed from
// error text: a shorter one is as likely the text's own words, and cannot
// hold much of an applicant's data.
const minBodyRun = 8

// scrub is err's message with the call's request removed from it: every
// run of minBodyRun bytes or more that is also a run of the request body,
// as it is or as Go quotes it (%q), and the redactor's secrets and header
// values (redactor.scrub), in the text cut as cutErrorText cuts it. It
// runs on errors only, never on the success path: an inner layer, a
// reconciler or a sink may quote the request in its error, and the text
// goes into Error, the audit lines, the letter and the span. Each distinct
// text is scrubbed once per call (scrubCache), however many of those write
// it.
func (c *call) scrub(err error) string { return c.scrubText(err.Error()) }

// scrubText is scrub of a text of the call's: an error's message, or a
// classifier's reason.
func (c *call) scrubText(msg string) string {
	if c.req == nil {
		return cutErrorText(msg)
	}
	// Whether the body can be checked, or need not be: no inner layer was
	// given a body the call does not hold (a stream, or one whose
	// reading failed) while the call made no attempt, and then the text is
	// the caller's body's own, or grantretry's.
	runs := c.out.Attempts > 0 || c.p.buf != nil || c.p.getBody != nil
	sc := c.scrubs()
	secrets, key, done, ok := sc.lookup(c, msg, runs)
	if ok {
		return done
	}
	t := newErrorText(msg)
	t.markSecrets(secrets)
	out := t.String()
	if runs {
		out = c.p.scrubRuns(t)
	}
	sc.store(key, out)
	return out
}

// scrubCache is what a call's scrubs share: the request's secrets, listed
// once, and the texts already scrubbed. It is made on the error path only,
// and kept with the call's audit fields (auditShared), so that the success
// path pays nothing for it. mu guards its fields; a scrub does not hold it
// while it reads the body (GetBody is the caller's).
type scrubCache struct {
	mu      sync.Mutex
	secrets []string          // sortedSecrets of the call's request; nil until the first scrub
	texts   map[string]string // scrubKey -> the text as scrubbed
}

// maxScrubbedTexts bounds a call's scrubCache: a call has an error per
// attempt and a few of its own, and a call with more keeps the first.
const maxScrubbedTexts = 32

// scrubs returns the call's scrubCache, making it at the first scrub.
func (c *call) scrubs() *scrubCache {
	s := c.shared(nil)
	if s.scrubs == nil {
		s.scrubs = new(scrubCache)
	}
	return s.scrubs
}

// lookup returns the request's secrets, the key of msg, and msg as scrubbed
// before, if it was. The scrubbed text depends on the bytes of msg that
// are kept and the margin a run or a secret may reach past them
// (scrubbedSpan), on its length, and on whether the body is checked.
func (sc *scrubCache) lookup(c *call, msg string, runs bool) (secrets []string, key, done string, ok bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.secrets == nil {
		sc.secrets = c.t.cfg.redact.sortedSecrets(c.req)
		if sc.secrets == nil {
			sc.secrets = []string{}
		}
	}
	span := scrubbedSpan(msg, sc.secrets)
	key = strconv.Itoa(len(msg)) + strconv.FormatBool(runs) + ":" + msg[:span]
	done, ok = sc.texts[key]
	return sc.secrets, key, done, ok
}

// store keeps key's scrubbed text, while the cache has room.
func (sc *scrubCache) store(key, out string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.texts == nil {
		sc.texts = make(map[string]string)
	}
	if len(sc.texts) < maxScrubbedTexts {
		sc.texts[key] = out // key is a string of its own (lookup), not a slice of the message
	}
}

// maxErrorText is the most of an error's text grantretry keeps, wherever
// it writes it (Error, the audit lines, a letter, a span): its first
// maxErrorText bytes, then how many more there were. Only that much is
// scrubbed, so an error that quotes a body of megabytes costs what its
// first KiB do; with the note, the text fits an audit field (maxFieldText)
// uncut.
const maxErrorText = maxFieldText - 64

// cutErrorText is msg, or its first maxErrorText bytes and how many more
// there were.
func cutErrorText(msg string) string {
	if len(msg) <= maxErrorText {
		return msg
	}
	return msg[:maxErrorText] + cutNote(len(msg)-maxErrorText)
}

func cutNote(more int) string {
	return "...[" + strconv.Itoa(more) + " more bytes of the error not kept]"
}

// scrubbedSpan is how much of msg a scrub reads: the bytes it keeps, and as
// far past them as a run of the body or one of secrets that begins among
// them may reach.
func scrubbedSpan(msg string, secrets []string) int {
	margin := minBodyRun - 1
	if len(secrets) > 0 && len(secrets[0])-1 > margin {
		margin = len(secrets[0]) - 1 // the longest
	}
	return min(len(msg), maxErrorText+margin)
}

// errorText is an error's message being scrubbed: the bytes to remove are
// marked, among the ones kept.
type errorText struct {
	msg   string
	marks []bool // of msg's first maxErrorText bytes: to be removed
}

func newErrorText(msg string) *errorText {
	return &errorText{msg: msg, marks: make([]bool, min(len(msg), maxErrorText))}
}

// mark marks the bytes [from, to) that are kept.
func (t *errorText) mark(from, to int) {
	for i := from; i < to && i < len(t.marks); i++ {
		t.marks[i] = true
	}
}

// markSecrets marks every occurrence of each of secrets that begins among
// the bytes kept.
func (t *errorText) markSecrets(secrets []string) {
	for _, s := range secrets {
		text := t.msg[:min(len(t.msg), len(t.marks)+len(s)-1)]
		for at := 0; ; {
			i := strings.Index(text[at:], s)
			if i < 0 {
				break
			}
			t.mark(at+i, at+i+len(s))
			at += i + 1
		}
	}
}

// String is the kept text with each marked run replaced by redacted (runs
// that touch are one), at most maxErrorText bytes of it (a marker is
// longer than the shortest secrets), and the note of how many bytes of the
// message it left out.
func (t *errorText) String() string {
	var b strings.Builder
	b.Grow(len(t.marks))
	i := 0
	for i < len(t.marks) {
		if !t.marks[i] {
			if b.Len() == maxErrorText {
				break
			}
			b.WriteByte(t.msg[i])
			i++
			continue
		}
		if b.Len()+len(redacted) > maxErrorText {
			break
		}
		b.WriteString(redacted)
		for i < len(t.marks) && t.marks[i] {
			i++
		}
	}
	if i < len(t.msg) {
		b.WriteString(cutNote(len(t.msg) - i))
	}
	return b.String()
}

// scrubbedError is an error whose message call.scrub made: errors.Is and
// errors.As see the error it wraps.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubbed returns err with its message scrubbed, for an error the call
// hands back (Outcome.RecordErr).
func (c *call) scrubbed(err error) error {
	return &scrubbedError{msg: c.scrub(err), err: err}
}

// scrubRuns marks in t every run of minBodyRun bytes or more that is a run
// of the body, among the bytes kept and as far past them as such a run may
// reach, and returns t as scrubbed. The marker itself, with the text beside
// it, could make a run of a body that holds it ("REDACTED" in a body that
// was scrubbed before): a changed text is checked against the body again,
// and if it holds a run, only "-" is left. A body the call does not hold
// (streamed once, or one whose GetBody fails) cannot be checked: the text
// is withheld (bodyUnchecked).
func (p *payload) scrubRuns(t *errorText) string {
	if len(t.msg) < minBodyRun || p.empty() {
		return t.String()
	}
	ix := newRunIndex(t.msg[:min(len(t.msg), len(t.marks)+minBodyRun-1)], true)
	if p.eachChunk(ix.scan) != nil {
		return bodyUnchecked
	}
	for i, m := range ix.marks {
		if m {
			t.mark(i, i+1)
		}
	}
	out := t.String()
	if !slices.Contains(t.marks, true) {
		return out
	}
	check := newRunIndex(out, false)
	if p.eachChunk(check.scan) != nil || check.hits > 0 {
		return "-"
	}
	return out
}

// bodyUnchecked stands for an error text that could not be checked against
// the request body, because the call does not hold it.
const bodyUnchecked = redacted + " (the request body was sent as a stream, or could not be read again: the error text cannot be checked against it)"

// errBodyNotHeld is eachChunk's error for a body the call does not hold.
var errBodyNotHeld = errors.New("body not held")

// eachChunk gives fn the request body in chunks: the buffer, or a fresh
// copy from GetBody. A body sent once as a stream is not held.
func (p *payload) eachChunk(fn func([]byte)) error {
	switch {
	case p.buf != nil:
		fn(p.buf)
		return nil
	case p.getBody != nil:
		rc, err := p.getBody()
		if err != nil {
			return err
		}
		defer rc.Close()
		b := make([]byte, 32<<10)
		for {
			n, err := rc.Read(b)
			fn(b[:n])
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	return errBodyNotHeld
}

// runIndex finds the runs of a text that are runs of a body read once, in
// chunks: it indexes the text's windows of minBodyRun bytes, each as the
// uint64 of its bytes, and rolls a window over the body. A counting filter
// over the windows not yet found skips most lookups, and once every window
// is found the rest of the body costs nothing.
type runIndex struct {
	text      string
	at        []int32  // the text's window positions, grouped by window
	groups    []window // the text's distinct windows, sorted
	counts    []uint8  // per filter slot, the windows not yet found; 255 sticks
	shift     uint
	remaining int
	marks     []bool // the text's bytes that are part of a run of the body
	hits      int

	raw, quoted rollingWindow
	quote       bool              // roll over the body as Go's %q quotes it, too
	pend        [utf8.UTFMax]byte // the bytes of a multi-byte rune read so far
	npend       int
}

// window is one distinct window of the text, and where it occurs:
// at[start:end].
type window struct {
	key        uint64
	start, end int32
	found      bool
}

// rollingWindow is the last minBodyRun bytes of a stream, the oldest in the
// low byte, as text windows are keyed. n counts the bytes rolled in, up to
// minBodyRun-1; in the quoted stream it goes on to 2*minBodyRun-1, the
// byte after which the last escape has left the window.
type rollingWindow struct {
	w uint64
	n int
}

func newRunIndex(text string, quote bool) *runIndex {
	ix := &runIndex{text: text, quote: quote, marks: make([]bool, len(text))}
	n := len(text) - minBodyRun + 1
	if n <= 0 {
		return ix
	}
	type keyAt struct {
		key uint64
		at  int32
	}
	all := make([]keyAt, n)
	var w uint64
	for i := 0; i < len(text); i++ {
		w = w>>8 | uint64(text[i])<<56
		if i >= minBodyRun-1 {
			all[i-minBodyRun+1] = keyAt{w, int32(i - minBodyRun + 1)}
		}
	}
	slices.SortFunc(all, func(a, b keyAt) int {
		if a.key != b.key {
			return cmpUint64(a.key, b.key)
		}
		return int(a.at - b.at)
	})
	ix.at = make([]int32, n)
	for i, k := range all {
		ix.at[i] = k.at
		if i == 0 || k.key != all[i-1].key {
			ix.groups = append(ix.groups, window{key: k.key, start: int32(i)})
		}
		ix.groups[len(ix.groups)-1].end = int32(i + 1)
	}
	slots, log := 1024, 10
	for slots < 8*len(ix.groups) {
		slots, log = slots<<1, log+1
	}
	ix.counts = make([]uint8, slots)
	ix.shift = uint(64 - log)
	for _, g := range ix.groups {
		if h := ix.hash(g.key); ix.counts[h] < 255 {
			ix.counts[h]++
		}
	}
	ix.remaining = len(ix.groups)
	return ix
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (ix *runIndex) hash(w uint64) uint64 { return (w * 0x9E3779B97F4A7C15) >> ix.shift }

// scan rolls the windows over the next chunk of the body: the raw one, and
// the one over the body as strconv.Quote writes it (a printable rune as it
// is, any other as its escape; see quoteRune).
func (ix *runIndex) scan(chunk []byte) {
	raw, quoted := ix.raw, ix.quoted
	defer func() { ix.raw, ix.quoted = raw, quoted }()
	for _, b := range chunk {
		if ix.remaining == 0 {
			return
		}
		raw.w = raw.w>>8 | uint64(b)<<56
		if raw.n < minBodyRun-1 {
			raw.n++
		} else if ix.counts[ix.hash(raw.w)] != 0 {
			ix.find(raw.w)
		}
		if !ix.quote {
			continue
		}
		if b >= utf8.RuneSelf {
			ix.quoteRune(&quoted, b)
			continue
		}
		for ix.npend > 0 { // a rune cut short: each of its bytes is \xNN
			ix.rollEscaped(&quoted, hexEscape(ix.pend[0]))
			ix.npend = copy(ix.pend[:], ix.pend[1:ix.npend])
		}
		switch b {
		case '"', '\\':
			ix.rollEscaped(&quoted, []byte{'\\', b})
		case '\a', '\b', '\f', '\n', '\r', '\t', '\v':
			ix.rollEscaped(&quoted, []byte{'\\', "abfnrtv"[strings.IndexByte("\a\b\f\n\r\t\v", b)]})
		default:
			if b < 0x20 || b == 0x7f {
				ix.rollEscaped(&quoted, hexEscape(b))
			} else {
				ix.rollPlain(&quoted, b)
			}
		}
	}
}

// quoteRune takes b, a byte of a multi-byte rune, into the quoted window
// as strconv.Quote writes the rune: as it is if it is printable, as \u or
// \U and its code point if not, and each byte of what is not UTF-8 as
// \xNN. The bytes of a rune cut by a chunk's end wait in pend.
func (ix *runIndex) quoteRune(quoted *rollingWindow, b byte) {
	ix.pend[ix.npend] = b
	ix.npend++
	for ix.npend > 0 && utf8.FullRune(ix.pend[:ix.npend]) {
		p := ix.pend[:ix.npend]
		r, size := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && size == 1:
			ix.rollEscaped(quoted, hexEscape(p[0]))
		case strconv.IsPrint(r):
			for _, c := range p[:size] {
				ix.rollPlain(quoted, c)
			}
		case r < 0x10000:
			ix.rollEscaped(quoted, fmt.Appendf(nil, "\\u%04x", r))
		default:
			ix.rollEscaped(quoted, fmt.Appendf(nil, "\\U%08x", r))
		}
		ix.npend = copy(ix.pend[:], p[size:])
	}
}

// hexEscape is b as strconv.Quote escapes a byte it cannot write: \xNN.
func hexEscape(b byte) []byte {
	const hex = "0123456789abcdef"
	return []byte{'\\', 'x', hex[b>>4], hex[b&15]}
}

// rollPlain rolls a byte the quoting wrote as it is into the quoted
// window. While the last minBodyRun bytes needed no escape, the quoted
// window is the raw one, and is not looked up twice.
func (ix *runIndex) rollPlain(quoted *rollingWindow, b byte) {
	quoted.w = quoted.w>>8 | uint64(b)<<56
	if quoted.n < minBodyRun-1 {
		quoted.n++
	} else if quoted.n < 2*minBodyRun-1 {
		// an escape is still in the window
		quoted.n++
		if ix.counts[ix.hash(quoted.w)] != 0 {
			ix.find(quoted.w)
		}
	}
}

// rollEscaped rolls an escape the quoting wrote into the quoted window,
// looking each window up.
func (ix *runIndex) rollEscaped(quoted *rollingWindow, esc []byte) {
	for _, e := range esc {
		quoted.w = quoted.w>>8 | uint64(e)<<56
		if quoted.n < minBodyRun-1 {
			quoted.n++
			continue
		}
		quoted.n = minBodyRun - 1 // an escape is in the window
		if ix.counts[ix.hash(quoted.w)] != 0 {
			ix.find(quoted.w)
		}
	}
}

// find marks the text's occurrences of window w, if it is one of the
// text's and was not found before.
func (ix *runIndex) find(w uint64) {
	i, ok := slices.BinarySearchFunc(ix.groups, w, func(g window, w uint64) int { return cmpUint64(g.key, w) })
	if !ok || ix.groups[i].found {
		return
	}
	g := &ix.groups[i]
	g.found = true
	ix.remaining--
	if h := ix.hash(w); ix.counts[h] < 255 {
		ix.counts[h]--
	}
	for _, at := range ix.at[g.start:g.end] {
		ix.hits++
		for j := at; j < at+minBodyRun; j++ {
			ix.marks[j] = true
		}
	}
}
