package trail

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// refRecordJSON is what the verifier read of a record before
// scanRecordJSON: the record decoded into a map of raw values.
func refRecordJSON(line []byte) (msg, disp string, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return "", "", false
	}
	return rawString(m["msg"]), rawString(m["disposition"]), true
}

var jsonScanSeeds = []string{
	`{}`, ` {} `, `{ }`, `{"msg":"a"}`, `{"msg":"a","msg":"b"}`, `{"msg":"a","msg":1}`, `{"msg":1,"msg":"c"}`,
	`{"m\u0073g":"esc key","disposition":"x\ty"}`, `{"msg":"\u00e9\n\"q\"","disposition":"ok"}`,
	`{"msg":"` + "\xff\xfe" + `","disposition":"` + "caf\xc3\xa9" + `"}`, `{"msg":"a"`, `{"msg":"a",}`, `{"msg" "a"}`,
	`{"msg":"a"}x`, `{"msg":"a"} `, "\t\r\n{\"a\":[1,2,{\"b\":null}],\"c\":true,\"d\":false}", `{"a":[]}`, `{"a":[,]}`,
	`{"a":-0.5e+10}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":.5}`, `{"a":1E-2}`, `{"a":tru}`, `{"a":truex}`,
	`{"a":nul}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\x7f\"}", `{"a":"\/"}`,
	`[]`, `"s"`, `1`, `null`, `{"a":1}{}`, `{"a":{"b":{"c":[[]]}}}`, `{"a":[1 2]}`, `{"a":{"b"}}`, `{"a":{"b":}}`,
	`{1:2}`, `{"a":1,"disposition":{"x":"y"}}`, `{"disposition":"d1","msg":"grantretry.disposition","disposition":"d2"}`,
	`{"msg":"\ud800"}`, `{"msg":"\\"}`, "{\"a\":1\n}", `{"a":+1}`, `{"a":1e+}`, `{"a":-01}`, `{"a":[1,]}`, `{"a":{,}}`,
	`{"msg":""}`, `{"":""}`, `{"a":"b`, `{"a`, `{`, ``, ` `,
	strings.Repeat(`{"a":`, maxJSONDepth-1) + `1` + strings.Repeat(`}`, maxJSONDepth-1),
	strings.Repeat(`{"a":`, maxJSONDepth) + `1` + strings.Repeat(`}`, maxJSONDepth),
	`{"x":` + strings.Repeat(`[`, maxJSONDepth-1) + strings.Repeat(`]`, maxJSONDepth-1) + `}`,
	`{"x":` + strings.Repeat(`[`, maxJSONDepth) + strings.Repeat(`]`, maxJSONDepth) + `}`,
}

func checkScanAgainstRef(t *testing.T, line []byte) {
	t.Helper()
	msg, disp, ok := scanRecordJSON(line)
	rmsg, rdisp, rok := refRecordJSON(line)
	if ok != rok || ok && (string(msg) != rmsg || string(disp) != rdisp) {
		t.Fatalf("%.200q: scanRecordJSON = %q, %q, %v; json.Unmarshal = %q, %q, %v", line, msg, disp, ok, rmsg, rdisp, rok)
	}
}

func TestScanRecordJSONMatchesUnmarshal(t *testing.T) {
	for _, s := range jsonScanSeeds {
		checkScanAgainstRef(t, []byte(s))
	}
	// Every prefix and every one-byte edit of a real record.
	rec := []byte(`{"level":"info","ts":"2026-12-01T23:23:21.597242903Z","msg":"grantretry.disposition","correlation_id":"f17961c4a57776f3","path":"/a\"b\\c\u00e9","attempt":1,"status":201,"retryable":false,"wait":"0s","latency":-1.5e-3,"extra":{"k":[null,true,{"z":"y"}]},"disposition":"succeeded","seq":3,"prev":"0d27","hash":"8df6"}`)
	for i := range rec {
		checkScanAgainstRef(t, rec[:i])
		for _, c := range []byte("\"\\{}[],:0 a\x00\xff") {
			edited := bytes.Clone(rec)
			edited[i] = c
			checkScanAgainstRef(t, edited)
		}
	}
}

func FuzzScanRecordJSON(f *testing.F) {
	for _, s := range jsonScanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkScanAgainstRef(t, line) })
}

// benchRecord is a disposition record as the Transport writes it.
const benchRecord = `{"level":"info","ts":"2026-12-01T23:23:21.597295242Z","msg":"grantretry.disposition","correlation_id":"f17961c4a57776f3","idempotency_key":"grant-84642ff59e0f82b0d6ae31dcf1d122d8","submission_id":"GRANT-00000001","method":"POST","host":"apply07.grants.gov","path":"/grantsws/rest/submit","disposition":"succeeded","attempts":1,"stop_reason":"success","status":201,"reason":"ok:201","error":"","payload_sha256":"2b5bb516084b0eb355478a6cf9cbaba8fef8549cf295a5efaac09ec119a49880","payload_bytes":37,"not_replayable":"","elapsed":"75.503µs","dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false,"seq":3,"prev":"0d274488f39f7768cb2d7d12a3f93ab025b2fb42cb2d78d9dcb3baa1469bf7f6","hash":"8df6b8e9a21b2784b85177508addd977d3658ab05813ec9e52fbe11b503879ed"}`

func BenchmarkScanRecordJSON(b *testing.B) {
	line := []byte(benchRecord)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, _, ok := scanRecordJSON(line); !ok {
			b.Fatal("not valid")
		}
	}
}
