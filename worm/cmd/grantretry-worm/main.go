// Command grantretry-worm anchors a grantretry audit trail in write-once
// storage (an S3 bucket with Object Lock) and verifies it there:
//
//	grantretry-worm ship [flags] FILE...     seal and anchor the trail's records, then exit
//	grantretry-worm ship -follow [flags] FILE  ship the live trail FILE beside its pipeline
//	grantretry-worm verify [flags] [FILE...] verify the store, and the local files against it
//	grantretry-worm version
//
// Credentials come from the usual AWS_* environment. Exit status: 0
// shipped or verified, 1 tampering, a gap, nothing anchored or a failure
// to ship (ship -follow exits when the shipper stops for good, once it
// has anchored what it owes, within -timeout), 2 misuse, or a verify
// that could not look (a store that does not answer, a file that cannot
// be read): so 1 from verify always means a problem found.
// See docs/write-once.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/grantretry/grantretry/worm"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  grantretry-worm ship [-follow] -bucket NAME [-endpoint URL] [-prefix P] [flags] FILE...
  grantretry-worm verify -bucket NAME [-endpoint URL] [-prefix P] [flags] [FILE...]
  grantretry-worm version
`

// errUsage is misuse, already reported.
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "grantretry-worm", version())
		return 0
	case "ship":
		err = ship(args[1:], stdout, stderr)
	case "verify":
		var ok bool
		ok, err = verify(args[1:], stdout, stderr)
		if err == nil && !ok {
			return 1
		}
		if err != nil && !errors.Is(err, errUsage) {
			msg := err.Error()
			if !strings.HasPrefix(msg, "grantretry") {
				msg = "grantretry-worm: " + msg
			}
			fmt.Fprintln(stderr, msg+" (not verified)")
			return 2
		}
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "grantretry-worm: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		msg := err.Error()
		if !strings.HasPrefix(msg, "grantretry") {
			msg = "grantretry-worm: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 1
	}
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// storeFlags are the flags every command that talks to the store has.
type storeFlags struct {
	endpoint, bucket, prefix, region string
}

func (s *storeFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&s.endpoint, "endpoint", "", "S3 endpoint `URL`; empty for AWS S3")
	fs.StringVar(&s.bucket, "bucket", "", "the bucket, made with Object Lock enabled (required)")
	fs.StringVar(&s.prefix, "prefix", "", "the trail's folder in the bucket")
	fs.StringVar(&s.region, "region", "", "the bucket's region; empty for AWS_REGION, else us-east-1")
}

func (s *storeFlags) store(ctx context.Context) (*worm.Store, error) {
	return worm.NewStore(ctx, worm.StoreConfig{Endpoint: s.endpoint, Bucket: s.bucket, Prefix: s.prefix, Region: s.region})
}

// durationFlag is a time.Duration that also takes days (30d) and years
// of 365 days (3y).
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "" // unset: the help says the default in words
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err == nil {
		*f.d = d
	}
	return err
}

func parseDuration(s string) (time.Duration, error) {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "y": 365 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("not a duration: %q", s)
			}
			return time.Duration(v * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("not a duration: %q", s)
	}
	return d, nil
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("grantretry-worm "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args, reporting misuse as errUsage.
func parse(fs *flag.FlagSet, args []string, sf *storeFlags, stderr io.Writer) error {
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if sf.bucket == "" {
		fmt.Fprintf(stderr, "grantretry-worm: %s: -bucket is required\n", strings.TrimPrefix(fs.Name(), "grantretry-worm "))
		return errUsage
	}
	return nil
}

func ship(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ship", stderr)
	var sf storeFlags
	sf.add(fs)
	o := worm.Options{}
	follow := fs.Bool("follow", false, "ship the live trail FILE beside its pipeline until SIGINT or SIGTERM")
	queue := fs.String("queue", "", "the queue `DIR` of sealed segments not anchored yet; default .BASE.worm beside FILE with -follow, else a temporary one")
	stream := fs.String("stream", "", "the stream's name; default the live file's base name")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to keep trying to anchor before giving up (once, or at the end of -follow)")
	fs.Var(durationFlag{&o.Retention}, "retention", "how long each object is locked (default three calendar years and a day; never less than the bucket's default)")
	fs.IntVar(&o.SegmentSize, "segment-size", worm.DefaultSegmentSize, "seal a segment at this many `bytes`")
	fs.DurationVar(&o.SegmentAge, "segment-age", worm.DefaultSegmentAge, "seal a segment when its first record is this old")
	fs.DurationVar(&o.Heartbeat, "heartbeat", worm.DefaultHeartbeat, "write a checkpoint at least this often")
	if err := parse(fs, args, &sf, stderr); err != nil {
		return err
	}
	files := fs.Args()
	switch {
	case len(files) == 0:
		fmt.Fprintln(stderr, "grantretry-worm: ship: no FILE")
		return errUsage
	case *follow && len(files) != 1:
		fmt.Fprintln(stderr, "grantretry-worm: ship -follow: one FILE, the live file of the trail")
		return errUsage
	case o.SegmentSize <= 0 || o.SegmentAge <= 0 || o.Heartbeat <= 0:
		fmt.Fprintln(stderr, "grantretry-worm: ship: -segment-size, -segment-age and -heartbeat must be positive")
		return errUsage
	}
	ctx := context.Background()
	st, err := sf.store(ctx)
	if err != nil {
		return err
	}
	var src worm.Source
	var name string
	if *follow {
		f, err := worm.FollowFiles(*stream, files[0])
		if err != nil {
			return err
		}
		src, name = f, f.Stream()
		if *queue == "" {
			*queue = filepath.Join(filepath.Dir(files[0]), "."+filepath.Base(files[0])+".worm")
		}
	} else {
		f, err := worm.OpenFiles(*stream, files...)
		if err != nil {
			return err
		}
		src, name = f, f.Stream()
		if *queue == "" {
			dir, err := os.MkdirTemp("", "grantretry-worm-queue-")
			if err != nil {
				return err
			}
			// Removing it loses nothing: its segments are cut from the
			// files, which a new run reads again.
			defer os.RemoveAll(dir)
			*queue = dir
		}
	}
	o.Store, o.Source, o.QueueDir, o.Logger = st, src, *queue, plainLogger(stderr)
	s, err := worm.NewShipper(o)
	if err != nil {
		return err
	}
	if *follow {
		s.Start()
		untilSignalOrStop(s)
	}
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := s.Close(cctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: stream %s anchored in s3://%s/%s\n", name, st.Bucket(), st.Prefix())
	return nil
}

// untilSignalOrStop returns on SIGINT or SIGTERM, or once the shipper has
// stopped for good: then nothing more is read, and running on would only
// hide it. Close still anchors what the stop owes the store.
func untilSignalOrStop(s *worm.Shipper) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	tick := time.NewTicker(worm.DefaultPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-sig:
			return
		case <-tick.C:
			if s.Err() != nil {
				return
			}
		}
	}
}

func verify(args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlags("verify", stderr)
	var sf storeFlags
	sf.add(fs)
	o := worm.VerifyOptions{MinRetention: worm.DefaultRetention, MaxCheckpointAge: worm.DefaultMaxCheckpointAge}
	stream := fs.String("stream", "", "the local files' stream; default the live file's base name")
	fs.Var(durationFlag{&o.MinRetention}, "min-retention", "the retention every object must have from its upload (default 1096d, the least three calendar years and a day come to)")
	fs.DurationVar(&o.MaxCheckpointAge, "max-checkpoint-age", worm.DefaultMaxCheckpointAge, "how old a stream's last checkpoint may be, unless the shipper closed it")
	if err := parse(fs, args, &sf, stderr); err != nil {
		return false, err
	}
	ctx := context.Background()
	st, err := sf.store(ctx)
	if err != nil {
		return false, err
	}
	if files := fs.Args(); len(files) > 0 {
		src, err := worm.OpenFiles(*stream, files...)
		if err != nil {
			return false, err
		}
		o.Local = src
	}
	rep, err := worm.Verify(ctx, st, o)
	var ve *worm.VerifyError
	if err != nil && !errors.As(err, &ve) {
		return false, err
	}
	for _, s := range rep.Streams {
		printStream(stdout, s, o.Local != nil)
	}
	if ve == nil {
		return true, nil
	}
	for _, p := range ve.Problems {
		fmt.Fprintf(stdout, "FAIL %s: %s\n", p.Kind, p)
	}
	fmt.Fprintf(stderr, "grantretry-worm: verify: %s\n", plural(len(ve.Problems), "problem"))
	return false, nil
}

func printStream(w io.Writer, s worm.StreamReport, local bool) {
	fmt.Fprintf(w, "stream %s: %s anchored in %s", s.Stream, plural(s.Records, "record"), plural(s.Segments, "segment"))
	if s.Records > 0 {
		fmt.Fprintf(w, ", seq 1 to %d, last hash %s", s.LastSeq, s.LastHash)
	}
	if !s.LastCheckpoint.IsZero() {
		state := "running"
		switch {
		case s.Closed:
			state = "closed"
		case s.Stopped:
			state = "stopped"
		}
		fmt.Fprintf(w, "; last checkpoint %s (%s)", s.LastCheckpoint.UTC().Format(time.RFC3339), state)
	}
	fmt.Fprintln(w)
	if local {
		fmt.Fprintf(w, "  local: %s equal to their anchored copies", plural(s.Local, "record"))
		if s.AtRisk > 0 {
			fmt.Fprintf(w, "; window at risk: %s from seq %d not anchored yet", plural(s.AtRisk, "record"), s.AtRiskFrom)
		}
		fmt.Fprintln(w)
	}
}

// plural returns "1 noun" or "N nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
