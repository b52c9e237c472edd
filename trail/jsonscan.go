package trail

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"
)

// maxJSONDepth is the deepest nesting encoding/json accepts.
const maxJSONDepth = 10000

// strPlain marks the bytes that stand for themselves inside a JSON
// string: not a quote, not a backslash, not a control character.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// lsb and msb are the low and the high bit of every byte of a word.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hexDigit marks the bytes that are hex digits.
var hexDigit = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEF" {
		t[c] = true
	}
	return t
}()

// scanRecordJSON reports whether line is one JSON object, accepting
// exactly what json.Unmarshal accepts into a map[string]json.RawMessage
// (an object, or null),
// and returns the string values of its top-level keys msg and disposition
// as that map and json.Unmarshal into a string would give them: the last
// of a key given twice, nil if the key is missing or its value is not a
// string. It reads the bytes once and allocates only for a key or a value
// with an escape or a byte that is not UTF-8, which it decodes as
// encoding/json does.
func scanRecordJSON(line []byte) (msg, disp []byte, ok bool) {
	s := jsonScanner{b: line}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == 'n' { // null decodes into a nil map
		ok := s.literal("null")
		s.ws()
		return nil, nil, ok && s.i == len(s.b)
	}
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, nil, false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.ws()
		return nil, nil, s.i == len(s.b)
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return nil, nil, false
		}
		k0 := s.i
		esc, good := s.str()
		if !good {
			return nil, nil, false
		}
		key := s.b[k0:s.i]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return nil, nil, false
		}
		s.i++
		s.ws()
		v0 := s.i
		if s.i < len(s.b) && s.b[s.i] == '"' {
			vesc, good := s.str()
			if !good {
				return nil, nil, false
			}
			if kind := keyKind(key, esc); kind == keyMsg {
				msg = stringValue(s.b[v0:s.i], vesc)
			} else if kind == keyDisposition {
				disp = stringValue(s.b[v0:s.i], vesc)
			}
		} else {
			if !s.value(2) {
				return nil, nil, false
			}
			if kind := keyKind(key, esc); kind == keyMsg {
				msg = nil
			} else if kind == keyDisposition {
				disp = nil
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return nil, nil, false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			s.ws()
			return msg, disp, s.i == len(s.b)
		default:
			return nil, nil, false
		}
	}
}

// The top-level keys scanRecordJSON looks for.
const (
	keyOther = iota
	keyMsg
	keyDisposition
)

// keyKind says which of the keys wanted key, quoted, is once unescaped;
// it is small enough to be inlined, and calls keyName only for a key that
// may be one.
func keyKind(key []byte, escaped bool) int {
	if !escaped && len(key) != len(`"msg"`) && len(key) != len(`"disposition"`) {
		return keyOther
	}
	return keyName(key, escaped)
}

// keyName says which of the keys wanted key, quoted, is once unescaped.
func keyName(key []byte, escaped bool) int {
	k := key[1 : len(key)-1]
	if escaped {
		var s string
		if json.Unmarshal(key, &s) != nil {
			return keyOther
		}
		k = []byte(s)
	}
	switch string(k) {
	case "msg":
		return keyMsg
	case "disposition":
		return keyDisposition
	}
	return keyOther
}

// stringValue returns the content of the JSON string raw, quoted, as
// json.Unmarshal into a string gives it; never nil.
func stringValue(raw []byte, escaped bool) []byte {
	v := raw[1 : len(raw)-1]
	if !escaped && utf8.Valid(v) {
		return v
	}
	var s string
	json.Unmarshal(raw, &s) // raw is a valid string
	return append([]byte{}, s...)
}

// jsonScanner checks JSON text as encoding/json's scanner does.
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str reads the string that starts at s.i, a quote, and says whether it
// holds an escape and whether it is a valid string.
func (s *jsonScanner) str() (escaped, ok bool) {
	b, i := s.b, s.i+1
	for {
		// Eight bytes at a time to the first quote, backslash or control
		// character: the lowest high bit the tests leave is its byte's
		// (a false one can only come after a true one).
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			q, bs := x^(lsb*'"'), x^(lsb*'\\')
			if m := ((x-lsb*0x20)&^x | (q-lsb)&^q | (bs-lsb)&^bs) & msb; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto special
			}
			i += 8
		}
		for i < len(b) && strPlain[b[i]] {
			i++
		}
	special:
		if i >= len(b) {
			return false, false
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return escaped, true
		case '\\':
			escaped = true
			if i+1 >= len(b) {
				return false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(b) || !hexDigit[b[i+2]] || !hexDigit[b[i+3]] || !hexDigit[b[i+4]] || !hexDigit[b[i+5]] {
					return false, false
				}
				i += 6
			default:
				return false, false
			}
		default: // a control character
			return false, false
		}
	}
}

// value reads the value that starts at s.i, at nesting depth depth (the
// top-level value's is 1).
func (s *jsonScanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{' || c == '[':
		if depth > maxJSONDepth {
			return false
		}
		return s.container(depth)
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// container reads the object or array that starts at s.i.
func (s *jsonScanner) container(depth int) bool {
	object := s.b[s.i] == '{'
	end := byte(']')
	if object {
		end = '}'
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		return true
	}
	for {
		if object {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return false
			}
			if _, ok := s.str(); !ok {
				return false
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
			s.ws()
		}
		if !s.value(depth + 1) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case end:
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *jsonScanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	b, i := s.b, s.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	s.i = i
	return true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
