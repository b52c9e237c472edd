package grantretry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// A Letter's JSON keeps every byte that was sent. JSON text is UTF-8, and
// encoding/json writes U+FFFD for any byte that is not; a funder's header
// value or query may hold such bytes (Latin-1 "Caf\xe9"), and a letter
// redelivered with U+FFFD in their place is not the call that was made.
// So a string field that is not valid UTF-8 is written twice: as JSON
// makes it (for a reader) and, byte for byte, base64 under "raw" (for
// the funder); a header whose values are not all valid UTF-8 likewise
// under "header_raw". Reading a letter, the raw forms win.

// letterFields is a Letter without its methods, so that encoding/json
// reads and writes its fields as they are tagged.
type letterFields Letter

// letterWire is a Letter as its JSON holds it.
type letterWire struct {
	*letterFields
	// Raw holds, by JSON field name, the string fields that are not valid
	// UTF-8, base64 (standard encoding).
	Raw map[string]string `json:"raw,omitempty"`
	// HeaderRaw holds the headers with a value that is not valid UTF-8:
	// every value of the header, base64, in order.
	HeaderRaw map[string][]string `json:"header_raw,omitempty"`
}

// rawFields are the string fields of a Letter whose bytes are kept, by
// JSON field name: those sent on the wire, and the submission id, which
// the audit trail is searched by.
func (l *Letter) rawFields() map[string]*string {
	return map[string]*string{
		"method":          &l.Method,
		"url":             &l.URL,
		"host":            &l.Host,
		"idempotency_key": &l.IdempotencyKey,
		"correlation_id":  &l.CorrelationID,
		"submission_id":   &l.SubmissionID,
	}
}

// MarshalJSON writes the letter's JSON form: its tagged fields and, for
// the values that are not valid UTF-8, their bytes in base64 under "raw"
// and "header_raw" (see LetterVersion), so that no byte sent is lost.
func (l Letter) MarshalJSON() ([]byte, error) {
	w := letterWire{letterFields: (*letterFields)(&l)}
	for name, p := range l.rawFields() {
		if !utf8.ValidString(*p) {
			if w.Raw == nil {
				w.Raw = map[string]string{}
			}
			w.Raw[name] = base64.StdEncoding.EncodeToString([]byte(*p))
		}
	}
	for name, vs := range l.Header {
		if validUTF8All(vs) {
			continue
		}
		if w.HeaderRaw == nil {
			w.HeaderRaw = map[string][]string{}
		}
		enc := make([]string, len(vs))
		for i, v := range vs {
			enc[i] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		w.HeaderRaw[name] = enc
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a letter's JSON form, of any version up to
// LetterVersion: the raw bytes, where the letter holds them, replace the
// fields' readable forms.
func (l *Letter) UnmarshalJSON(data []byte) error {
	var f letterFields
	w := letterWire{letterFields: &f}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	fields := (*Letter)(&f).rawFields()
	for name, b64 := range w.Raw {
		p, ok := fields[name]
		if !ok {
			return fmt.Errorf("grantretry: letter: raw bytes of %q, which is not a field kept raw", name)
		}
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return fmt.Errorf("grantretry: letter: raw bytes of %s: %w", name, err)
		}
		*p = string(b)
	}
	for name, enc := range w.HeaderRaw {
		vs := make([]string, len(enc))
		for i, e := range enc {
			b, err := base64.StdEncoding.DecodeString(e)
			if err != nil {
				return fmt.Errorf("grantretry: letter: raw bytes of header %s: %w", name, err)
			}
			vs[i] = string(b)
		}
		if f.Header == nil {
			f.Header = http.Header{}
		}
		f.Header[name] = vs
	}
	*l = Letter(f)
	return nil
}

func validUTF8All(vs []string) bool {
	for _, v := range vs {
		if !utf8.ValidString(v) {
			return false
		}
	}
	return true
}
