package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// plainLogger returns a logger that writes the shipper's log to w as
// plain lines, one per entry, for the person at the terminal:
//
//	grantretry-worm: warning: MSG: ERROR (key value, …)
//	grantretry-worm: error: MSG: ERROR (key value, …)
//
// with no time, caller or stack trace: an error here is the store's or
// the trail's, not the program's, and its message says what it is.
func plainLogger(w io.Writer) *zap.Logger {
	return zap.New(&plainCore{LevelEnabler: zapcore.InfoLevel, w: w, mu: new(sync.Mutex)})
}

// plainCore is plainLogger's zapcore.Core. It is safe for concurrent use.
type plainCore struct {
	zapcore.LevelEnabler
	mu     *sync.Mutex // guards writes to w, shared with the cores With returns
	w      io.Writer
	fields []zapcore.Field
}

func (c *plainCore) With(fields []zapcore.Field) zapcore.Core {
	cp := *c
	cp.fields = append(slices.Clip(c.fields), fields...)
	return &cp
}

func (c *plainCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *plainCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fields...) {
		f.AddTo(enc)
	}
	var b strings.Builder
	b.WriteString("grantretry-worm: ")
	switch {
	case e.Level == zapcore.WarnLevel:
		b.WriteString("warning: ")
	case e.Level > zapcore.WarnLevel:
		b.WriteString("error: ")
	}
	b.WriteString(e.Message)
	if err, ok := enc.Fields["error"]; ok {
		fmt.Fprintf(&b, ": %v", err)
	}
	delete(enc.Fields, "error")
	delete(enc.Fields, "errorVerbose")
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s %v", sep, k, enc.Fields[k])
	}
	if len(keys) > 0 {
		b.WriteString(")")
	}
	b.WriteString("\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := io.WriteString(c.w, b.String())
	return err
}

func (c *plainCore) Sync() error { return nil }
