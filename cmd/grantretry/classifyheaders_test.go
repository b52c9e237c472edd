package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// curl -D writes every header block it receives: an interim 100 Continue
// (curl asks for one before a large upload), a redirect it followed. The
// answer is the last block: its status and its headers.
func TestClassifyHeadersTakesTheFinalAnswer(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "answer.body")
	os.WriteFile(body, []byte(`{"message":"quota"}`), 0o600)
	for name, headers := range map[string]string{
		"100 Continue first": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nRetry-After: 600\r\n\r\n",
		"after a redirect":   "HTTP/1.1 302 Found\r\nLocation: /v2/apply\r\nRetry-After: 5\r\n\r\nHTTP/2 403 \r\ncontent-type: application/json\r\nretry-after: 600\r\n\r\n",
		"LF line ends":       "HTTP/1.1 100 Continue\n\nHTTP/1.1 403 Forbidden\nRetry-After: 600\n",
	} {
		t.Run(name, func(t *testing.T) {
			h := filepath.Join(dir, "answer.headers")
			os.WriteFile(h, []byte(headers), 0o600)
			code, out, errOut := classifyRun(t, "-headers", h, body)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, l := range []string{"answer:      403, ", "verdict:     owed:403;quota:retry_after", "(in 10m0s)"} {
				if !strings.Contains(out, l) {
					t.Errorf("output lacks %q:\n%s", l, out)
				}
			}
		})
	}
}

// With neither -status nor a status line in -headers, the command judges
// the answer as a 500, and its output says that the status was assumed.
func TestClassifySaysWhenItAssumesTheStatus(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "answer.body")
	os.WriteFile(body, []byte(`{"message":"quota"}`), 0o600)
	h := filepath.Join(dir, "answer.headers")
	os.WriteFile(h, []byte("Content-Type: application/json\r\nRetry-After: 600\r\n"), 0o600)
	const assumed = "answer:      500 (assumed: neither -status nor a status line in -headers gives one), "
	for _, args := range [][]string{{"-headers", h, body}, {body}} {
		if _, out, _ := classifyRun(t, args...); !strings.Contains(out, assumed) {
			t.Errorf("%v: output lacks %q:\n%s", args, assumed, out)
		}
	}
	for _, args := range [][]string{{"-status", "500", "-headers", h, body}, {"-status", "500", body}} {
		if _, out, _ := classifyRun(t, args...); strings.Contains(out, "assumed") {
			t.Errorf("%v: a status given is not assumed:\n%s", args, out)
		}
	}
}
