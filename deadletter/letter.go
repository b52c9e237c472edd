package deadletter

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/grantretry/grantretry"
)

// ErrBadLetter matches every error about a letter that is malformed, lies
// about its body, cannot be read back, or cannot be redelivered safely.
var ErrBadLetter = errors.New("grantretry: bad letter")

// MaxLetterIDLen bounds a Letter's ID, which is also its file name.
const MaxLetterIDLen = 128

// letterError is an error about one letter that matches ErrBadLetter.
type letterError struct{ id, msg string }

func (e *letterError) Error() string {
	if e.id == "" {
		return "grantretry: letter: " + e.msg
	}
	return "grantretry: letter " + shownID(e.id) + ": " + e.msg
}

func (e *letterError) Is(target error) bool { return target == ErrBadLetter }

func badLetter(id, format string, args ...any) error {
	return &letterError{id: id, msg: fmt.Sprintf(format, args...)}
}

// shownID is id as an error message shows it: quoted, and cut short, unless
// it is a valid letter ID.
func shownID(id string) string {
	if validateLetterID(id) == nil {
		return id
	}
	if len(id) > 64 {
		id = id[:64] + "..."
	}
	return strconv.Quote(id)
}

// validateLetterID reports whether id is safe as a file name on every
// system: 1 to MaxLetterIDLen of A-Z a-z 0-9 . _ -, no leading dot, no
// "..", and not ending in ".result", which names a redelivery record.
func validateLetterID(id string) error {
	switch {
	case id == "":
		return badLetter(id, "no id")
	case len(id) > MaxLetterIDLen:
		return badLetter(id, "id is %d bytes, more than %d", len(id), MaxLetterIDLen)
	case id[0] == '.', strings.Contains(id, ".."), strings.HasSuffix(id, ".result"):
		return badLetter(id, "id is not a safe file name")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return badLetter(id, "id has %q, not a safe file name character", c)
		}
	}
	return nil
}

// validateLetter checks what a stored letter must get right: a safe ID, a
// version this package reads, and a body that matches its digest.
func validateLetter(l *grantretry.Letter) error {
	if l == nil {
		return badLetter("", "nil letter")
	}
	if err := validateLetterID(l.ID); err != nil {
		return err
	}
	if l.Version < 1 || l.Version > grantretry.LetterVersion {
		return badLetter(l.ID, "unsupported version %d (this package reads 1 to %d)", l.Version, grantretry.LetterVersion)
	}
	return checkLetterBody(l)
}

// checkLetterBody refuses a letter that lies about its body.
func checkLetterBody(l *grantretry.Letter) error {
	if l.BodyOmitted != "" {
		if len(l.Body) > 0 {
			return badLetter(l.ID, "body_omitted is set, yet the letter has a body")
		}
		return nil
	}
	if l.BodyBytes != int64(len(l.Body)) {
		return badLetter(l.ID, "body_bytes is %d, the body has %d", l.BodyBytes, len(l.Body))
	}
	sum := sha256.Sum256(l.Body)
	if l.BodySHA256 == hex.EncodeToString(sum[:]) || (len(l.Body) == 0 && l.BodySHA256 == "") {
		return nil
	}
	return badLetter(l.ID, "body does not match body_sha256")
}
