package deadletter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/durable"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RetiredDir is the subdirectory of a Dir that holds the retired letters,
// each as <ID>.json: its [Retirement], which holds the letter.
const RetiredDir = "retired"

// ErrRetired matches the error about a letter that was retired: by
// [Dir.Get] and [Dir.Redeliver], and by a second [Dir.Retire] of it (and
// by fleet.Letters.Retire likewise).
var ErrRetired = errors.New("grantretry: the letter is retired")

// Retirement is the record of a retired letter: the letter as it waited,
// and who retired it, when and why. [Dir] keeps it as
// RetiredDir/<ID>.json; fleet.Letters in the letter's row. It is plain
// data, like a Letter.
type Retirement struct {
	ID        string             `json:"id"`         // the letter's
	RetiredAt time.Time          `json:"retired_at"` // in UTC
	RetiredBy string             `json:"retired_by"` // RetireOptions.By, or DefaultRetiredBy
	Reason    string             `json:"reason"`
	Letter    *grantretry.Letter `json:"letter"`
}

// RetireOptions are what [Dir.RetireWith] and fleet.Letters.RetireWith
// take besides the letter and the reason. The zero value retires as
// [DefaultRetiredBy] and writes no audit line.
type RetireOptions struct {
	// By names who retires the letter, as the record and the audit line
	// say it; "" is DefaultRetiredBy.
	By string
	// Trail, if not nil, gets the retirement's audit line
	// ([Retirement.Record]) once the retirement is durable: give it the
	// sink the Transport writes to ([grantretry.WithAuditTrail]), so that
	// the letter's calls and its retirement are on one trail.
	Trail grantretry.AuditSink
}

// DefaultRetiredBy names whoever runs the process, as "user@host": the
// operating system's user name (or $USER, or "unknown") and host name.
func DefaultRetiredBy() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return name
	}
	return name + "@" + host
}

// CheckRetireReason returns the error of a reason a retirement refuses:
// one that is empty or only white space, which would leave no record of
// why. The error matches [grantretry.ErrInvalidRequest].
func CheckRetireReason(id, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return fmt.Errorf("%w: letter %s not retired: give a reason, for the record", grantretry.ErrInvalidRequest, shownID(id))
	}
	return nil
}

// Fields returns the retirement's audit line's fields, in this order: the
// letter's correlation id, Idempotency-Key and submission id, its method,
// host and path (as a call's lines carry them, never the URL's query or
// user info), then [grantretry.FieldDeadLetterID], FieldRetiredBy and
// FieldRetiredReason. Log them with [grantretry.MsgRetired] at INFO to
// put the line on a zap logger; Record puts it on an audit sink.
func (r *Retirement) Fields() []zap.Field {
	l := r.Letter
	if l == nil {
		l = &grantretry.Letter{}
	}
	var host, path string
	if u, err := url.Parse(l.URL); err == nil {
		host, path = u.Host, u.EscapedPath()
	}
	return []zap.Field{
		zap.String(grantretry.FieldCorrelationID, l.CorrelationID),
		zap.String(grantretry.FieldIdempotencyKey, l.IdempotencyKey),
		zap.String(grantretry.FieldSubmissionID, l.SubmissionID),
		zap.String(grantretry.FieldMethod, l.Method),
		zap.String(grantretry.FieldHost, host),
		zap.String(grantretry.FieldPath, path),
		zap.String(grantretry.FieldDeadLetterID, r.ID),
		zap.String(grantretry.FieldRetiredBy, r.RetiredBy),
		zap.String(grantretry.FieldRetiredReason, r.Reason),
	}
}

// Record writes the retirement's audit line ([grantretry.MsgRetired], at
// INFO, timed at RetiredAt, with Fields) to sink, encoded as a Transport
// encodes its lines ([grantretry.AuditEncoderConfig]), and syncs it: the
// line is durable when Record returns nil. sink may be the trail file
// (package trail) or a fleet's Trail; `grantretry audit trace` shows the
// line after the calls of the letter's submission.
func (r *Retirement) Record(sink grantretry.AuditSink) error {
	if sink == nil {
		return fmt.Errorf("%w: letter %s: nil audit sink", grantretry.ErrInvalidRequest, r.ID)
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(grantretry.AuditEncoderConfig()), sink, zapcore.DebugLevel)
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: r.RetiredAt, Message: grantretry.MsgRetired}
	if err := core.Write(ent, r.Fields()); err != nil {
		return fmt.Errorf("grantretry: letter %s: retirement line: %w", r.ID, err)
	}
	if err := sink.Sync(); err != nil {
		return fmt.Errorf("grantretry: letter %s: retirement line: %w", r.ID, err)
	}
	return nil
}

// retiredError is the error about a letter already retired: it says who
// retired it, when and why, and matches ErrRetired and, as a letter no
// longer waiting, fs.ErrNotExist.
type retiredError struct {
	id   string
	r    *Retirement // nil if its record does not read (bad)
	bad  error
	what string // "" or what was not done, after the id: " not sent"
}

func (e *retiredError) Error() string {
	if e.r == nil {
		return fmt.Sprintf("grantretry: letter %s%s: it has a retirement record, which does not read: %v", e.id, e.what, e.bad)
	}
	return fmt.Sprintf("grantretry: letter %s%s: it was retired at %s by %s: %s",
		e.id, e.what, e.r.RetiredAt.UTC().Format(time.RFC3339), e.r.RetiredBy, e.r.Reason)
}

func (e *retiredError) Is(target error) bool { return target == ErrRetired || target == fs.ErrNotExist }

func (d *Dir) retiredPath() string { return filepath.Join(d.dir, RetiredDir) }

// Retire takes the waiting letter id out of the directory for good, with
// reason on the record: as [Dir.RetireWith] with no options, so the
// record names [DefaultRetiredBy] and no audit line is written.
func (d *Dir) Retire(id, reason string) error {
	_, err := d.RetireWith(id, reason, RetireOptions{})
	return err
}

// RetireWith retires the waiting letter id: it leaves the waiting set
// (List, Get and Redeliver never return or send it again), and its
// [Retirement] (the letter, who, when, why) is kept as RetiredDir/<ID>.json,
// where [Dir.Retired] and [Dir.Retirement] read it. Use it for a letter
// that must not be sent again: one the funder refused for good, or work
// the applicant withdrew.
//
// The record is written durably and under its final name first, then the
// waiting file is removed and the directory synced. A crash in between
// leaves both files: the retirement wins, for List, Get, Redeliver and
// Retire alike, and the next Retire of the letter removes the waiting
// file (and says the letter is retired). With o.Trail, the audit line
// ([Retirement.Record]) is written last; a crash before it leaves the
// retirement without its line.
//
// It refuses, changing nothing: a reason that is empty or white space
// ([CheckRetireReason], matching [grantretry.ErrInvalidRequest]); an id
// that is not a letter ID (ErrBadLetter); a letter that is not waiting
// ([fs.ErrNotExist]); one retired already (ErrRetired); one whose
// redelivery is in flight, in this Dir or marked so on disk (ErrInFlight:
// wait for it, or, if no process is sending it, let Redeliver settle the
// mark first); and every letter of a Dir opened with OpenReadOnly
// ([fs.ErrPermission]).
func (d *Dir) RetireWith(id, reason string, o RetireOptions) (*Retirement, error) {
	if err := validateLetterID(id); err != nil {
		return nil, err
	}
	if err := CheckRetireReason(id, reason); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("%w: letter %s not retired: nil *deadletter.Dir", grantretry.ErrInvalidRequest, id)
	}
	if err := d.writable(); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not retired: %w", id, err)
	}
	if !d.claim(id) {
		return nil, fmt.Errorf("%w: letter %s not retired: a call is redelivering it", ErrInFlight, id)
	}
	defer d.unclaim(id)
	if since, marked := d.readMark(id); marked {
		return nil, fmt.Errorf("%w: letter %s not retired: it is marked in flight since %s (%s): a redelivery is sending it, or was killed sending it and Redeliver has not settled it yet",
			ErrInFlight, id, since.Format(time.RFC3339), d.sendingPath(id))
	}
	if r, err := d.Retirement(id); err == nil {
		return nil, d.retiredAgain(r)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("grantretry: letter %s not retired: %w", id, err)
	}
	l, err := readLetter(d.dir, id)
	if err != nil {
		return nil, err
	}
	if o.By == "" {
		o.By = DefaultRetiredBy()
	}
	r := &Retirement{ID: id, RetiredAt: time.Now().UTC(), RetiredBy: o.By, Reason: reason, Letter: l}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("grantretry: letter %s: %w", id, err)
	}
	if err := mkdirDurable(d.retiredPath()); err != nil {
		return nil, fmt.Errorf("grantretry: letter %s not retired: %w", id, err)
	}
	if err := d.writeFile(d.retiredPath(), id+letterExt, append(data, '\n'), d.publishNew); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: letter %s not retired: another process retired it meanwhile", ErrRetired, id)
		}
		return nil, fmt.Errorf("grantretry: letter %s not retired: %w", id, err)
	}
	if err := removeDurable(filepath.Join(d.dir, id+letterExt)); err != nil {
		return r, fmt.Errorf("grantretry: letter %s is retired, but its waiting file stays (List and Redeliver pass it over; Retire it again to remove it): %w", id, err)
	}
	if o.Trail != nil {
		if err := r.Record(o.Trail); err != nil {
			return r, err
		}
	}
	return r, nil
}

// retiredAgain is Retire's error for a letter retired already; it removes
// a waiting file a retirement cut short left behind.
func (d *Dir) retiredAgain(r *Retirement) error {
	e := &retiredError{id: r.ID, r: r, what: " not retired again"}
	err := removeDurable(filepath.Join(d.dir, r.ID+letterExt))
	if err != nil {
		return errors.Join(e, fmt.Errorf("grantretry: letter %s: the waiting file its retirement left could not be removed: %w", r.ID, err))
	}
	return e
}

// removeDurable removes path and syncs its directory; a file gone already
// is no error.
func removeDurable(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// Retirement returns the record of the retired letter id. The error
// matches fs.ErrNotExist if id was not retired, and ErrBadLetter if id is
// not a letter ID or the record is not valid.
func (d *Dir) Retirement(id string) (*Retirement, error) {
	if err := validateLetterID(id); err != nil {
		return nil, err
	}
	path := filepath.Join(d.retiredPath(), id+letterExt)
	data, err := readFileLimited(path)
	if err != nil {
		return nil, fmt.Errorf("grantretry: letter %s: retirement record: %w", id, err)
	}
	r := new(Retirement)
	if err := json.Unmarshal(data, r); err != nil {
		return nil, badLetter(id, "%s: %v", path, err)
	}
	if err := validateLetter(r.Letter); err != nil {
		return nil, badLetter(id, "%s: %v", path, err)
	}
	if r.ID != id || r.Letter.ID != id {
		return nil, badLetter(id, "%s holds the retirement of letter %s", path, shownID(r.Letter.ID))
	}
	return r, nil
}

// Retired returns the records of the retired letters, in the order they
// were retired, then by ID. As List does, it returns every valid record,
// and err joins one error per file that is not one (matching
// ErrBadLetter). A directory with no RetiredDir has none.
func (d *Dir) Retired() ([]*Retirement, error) {
	ids, err := d.retiredIDs()
	if err != nil {
		return nil, err
	}
	var out []*Retirement
	var errs []error
	for id := range ids {
		r, err := d.Retirement(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Retirement) int {
		if c := a.RetiredAt.Compare(b.RetiredAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, errors.Join(errs...)
}

// retiredIDs returns the IDs that have a file in RetiredDir, valid or
// not: List leaves their waiting files out whatever the record holds.
func (d *Dir) retiredIDs() (map[string]bool, error) {
	entries, err := os.ReadDir(d.retiredPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("grantretry: dead letter directory: %w", err)
	}
	ids := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, letterExt) {
			continue
		}
		ids[strings.TrimSuffix(name, letterExt)] = true
	}
	return ids, nil
}

// retiredErr returns the error about id if it has a retirement record,
// nil if it has none; a record that cannot be read still counts. what
// says what was not done (" not sent"), or is "".
func (d *Dir) retiredErr(id, what string) error {
	r, err := d.Retirement(id)
	if err == nil {
		return &retiredError{id: id, r: r, what: what}
	}
	if _, serr := os.Lstat(filepath.Join(d.retiredPath(), id+letterExt)); serr == nil {
		return &retiredError{id: id, bad: err, what: what}
	}
	return nil
}
