package grantsgov

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grantretry/grantretry"
)

// FuzzClassifyFault holds ClassifyFault and the envelope reader to their
// contract on any body: no panic, the body unchanged, the MTOM root part
// a part of the body, and a verdict only under a reason the package names.
func FuzzClassifyFault(f *testing.F) {
	bodies, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.body"))
	for _, b := range bodies {
		data, err := os.ReadFile(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(fault("Authorization error")))
	f.Add([]byte(response(`<ns2:Success>false</ns2:Success><ns2:ErrorMessage>Authorization error</ns2:ErrorMessage>`)))
	f.Add([]byte("--uuid:x\n\n<a/>\n--uuid:x--"))
	f.Add([]byte(""))
	names := map[string]bool{reasonUnknown: true}
	for _, r := range rules {
		names[r.name] = true
	}
	resp := &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{}}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		_, found := soapEnvelope(resp, body)
		c, ok := ClassifyFault(resp, body)
		if ok && !names[c.Reason] {
			t.Fatalf("reason %q is none of the package's", c.Reason)
		}
		if !ok && c != (grantretry.Classification{}) {
			t.Fatalf("not ok, yet %+v", c)
		}
		if ok && strings.HasPrefix(c.Reason, "grantsgov:") && !found {
			t.Fatal("a verdict without an envelope")
		}
		if !bytes.Equal(body, orig) {
			t.Fatal("the body changed")
		}
	})
}
