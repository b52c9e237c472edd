package trail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// maxRecordBytes bounds one record, chain fields and newline included, so
// that a reader needs a bounded buffer.
const maxRecordBytes = 1 << 20

// chainBytes is the most the chain fields add to a record.
const chainBytes = len(`,"seq":18446744073709551615,"prev":"`) + 64 + len(`","hash":"`) + 64 + len(`"}`)

// checkRecords checks that p is a sequence of records Write can chain.
func checkRecords(p []byte) error {
	if len(p) > 0 && p[len(p)-1] != '\n' {
		return errors.New("the last record does not end with a newline")
	}
	for n, line := 1, p; len(line) > 0; n++ {
		i := bytes.IndexByte(line, '\n')
		if err := checkRecord(line[:i]); err != nil {
			return fmt.Errorf("line %d of the write: %w", n, err)
		}
		line = line[i+1:]
	}
	return nil
}

// reservedKeys are the chain's keys, quoted.
var reservedKeys = [][]byte{[]byte(`"seq"`), []byte(`"prev"`), []byte(`"hash"`)}

func checkRecord(line []byte) error {
	switch {
	case len(line) > maxRecordBytes-chainBytes:
		return fmt.Errorf("record of %d bytes is longer than the limit, %d", len(line), maxRecordBytes-chainBytes)
	case len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' || !json.Valid(line):
		return errors.New("not a JSON object on one line")
	case len(bytes.TrimSpace(line[1:len(line)-1])) == 0:
		return errors.New("an empty JSON object")
	}
	if k := reservedKey(line); k != "" {
		return fmt.Errorf("the record has a %s key, which the trail reserves", k)
	}
	return nil
}

// reservedKey returns the chain key, quoted, that line, valid JSON, has at
// any depth; "" if none. It scans the bytes, which costs little, and
// decodes the line only if it has a \u escape, the one way to spell a key
// with other bytes than its own.
func reservedKey(line []byte) string {
	for _, k := range reservedKeys {
		if hasKey(line, k) {
			return string(k)
		}
	}
	if bytes.Contains(line, []byte(`\u`)) {
		var v any
		if json.Unmarshal(line, &v) == nil {
			return reservedIn(v)
		}
	}
	return ""
}

// hasKey reports whether line, valid JSON, has the key k, quoted, spelt
// plainly. An unescaped quote, the name and a quote can only be a whole
// string: inside a string every quote is escaped. It is a key if a colon
// follows, after optional whitespace.
func hasKey(line, k []byte) bool {
	for i := 0; ; i++ {
		j := bytes.Index(line[i:], k)
		if j < 0 {
			return false
		}
		i += j
		if !escapedAt(line, i) && colonFollows(line[i+len(k):]) {
			return true
		}
	}
}

// escapedAt reports whether the byte at i is escaped: an odd number of
// backslashes before it.
func escapedAt(line []byte, i int) bool {
	n := 0
	for i > 0 && line[i-1] == '\\' {
		n, i = n+1, i-1
	}
	return n%2 == 1
}

func colonFollows(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// reservedIn returns the chain key, quoted, that the decoded JSON value v
// has at any depth; "" if none.
func reservedIn(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == FieldSeq || k == FieldPrev || k == FieldHash {
				return `"` + k + `"`
			}
			if r := reservedIn(e); r != "" {
				return r
			}
		}
	case []any:
		for _, e := range v {
			if r := reservedIn(e); r != "" {
				return r
			}
		}
	}
	return ""
}
