package fakes2s_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

func tracking(apps []fakes2s.ApplicationInfo) []string {
	var out []string
	for _, a := range apps {
		out = append(out, a.TrackingNumber)
	}
	return out
}

func TestLookupFindsApplicationsBySubmissionTitle(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t, f)
	ctx := context.Background()
	var want []string
	for range 2 {
		want = append(want, submit(ctx, client, f.URL(), "GRANT-42", "").tracking)
	}
	submit(ctx, client, f.URL(), "GRANT-43", "")

	got, err := fakes2s.Lookup(ctx, client, f.URL(), "GRANT-42")
	if err != nil || !slices.Equal(tracking(got), want) {
		t.Errorf("Lookup(GRANT-42) = %+v, %v; want %v", got, err, want)
	}
	for _, a := range got {
		if a.SubmissionTitle != "GRANT-42" || a.Status != fakes2s.StatusReceived || a.ReceivedDateTime.IsZero() {
			t.Errorf("application %+v: want title GRANT-42, Received, with its ReceivedDateTime", a)
		}
	}
	got, err = fakes2s.Lookup(ctx, client, f.URL(), "GRANT-44")
	if err != nil || len(got) != 0 {
		t.Errorf("Lookup(GRANT-44) = %v, %v; want nothing recorded", got, err)
	}
	if f.Queries() != 2 || f.Received() != 3 {
		t.Errorf("queries %d, received %d; want 2, 3: a query is no submission", f.Queries(), f.Received())
	}
}

// Filters of different types must all match; GetSubmissionList filters
// alike; no filter lists everything; the status moves with SetStatus.
func TestListFilters(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t, f)
	ctx := context.Background()
	a := submit(ctx, client, f.URL(), "A", "").tracking
	b := submit(ctx, client, f.URL(), "B", "").tracking
	if err := f.SetStatus(b, fakes2s.StatusValidated); err != nil {
		t.Fatal(err)
	}
	if err := f.SetStatus(b, "Approved"); !errors.Is(err, fakes2s.ErrUnknownStatus) {
		t.Errorf("SetStatus(Approved) = %v, want ErrUnknownStatus", err)
	}
	if err := f.SetStatus("GRANT99999999", fakes2s.StatusValidated); !errors.Is(err, fakes2s.ErrUnknownTrackingNumber) {
		t.Errorf("SetStatus(unknown) = %v, want ErrUnknownTrackingNumber", err)
	}
	title := func(v string) fakes2s.Filter { return fakes2s.Filter{Type: fakes2s.FilterSubmissionTitle, Value: v} }
	status := func(v string) fakes2s.Filter { return fakes2s.Filter{Type: fakes2s.FilterStatus, Value: v} }
	for _, tc := range []struct {
		name    string
		op      string
		filters []fakes2s.Filter
		want    []string
	}{
		{"no filter", fakes2s.OpGetApplicationList, nil, []string{a, b}},
		{"tracking number", fakes2s.OpGetApplicationList, []fakes2s.Filter{{Type: fakes2s.FilterGrantsGovTrackingNumber, Value: b}}, []string{b}},
		{"title and status", fakes2s.OpGetApplicationList, []fakes2s.Filter{title("B"), status(fakes2s.StatusValidated)}, []string{b}},
		{"title and another status", fakes2s.OpGetApplicationList, []fakes2s.Filter{title("A"), status(fakes2s.StatusValidated)}, nil},
		{"two titles", fakes2s.OpGetApplicationList, []fakes2s.Filter{title("A"), title("B")}, []string{a, b}},
		{"submission list by title", fakes2s.OpGetSubmissionList, []fakes2s.Filter{title("A")}, []string{a}},
		{"submission list by status", fakes2s.OpGetSubmissionList, []fakes2s.Filter{status(fakes2s.StatusReceived)}, []string{a}},
	} {
		got, err := fakes2s.Query(ctx, client, f.URL(), tc.op, tc.filters...)
		if err != nil || !slices.Equal(tracking(got), tc.want) {
			t.Errorf("%s: %+v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestLookupFindsDroppedApplication(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: 1})
	client := newClient(t, f)
	ctx := context.Background()
	if s := submit(ctx, client, f.URL(), "GRANT-42", ""); s.err == nil {
		t.Fatal("submit succeeded, want the connection dropped")
	}
	got, err := fakes2s.Lookup(ctx, client, f.URL(), "GRANT-42")
	if err != nil || !slices.Equal(tracking(got), []string{"GRANT10000001"}) {
		t.Errorf("Lookup = %v, %v; want [GRANT10000001]", got, err)
	}
}

func TestQueryFailRateFailsLookup(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1, QueryFailRate: 1})
	client := newClient(t, f)
	ctx := context.Background()
	submit(ctx, client, f.URL(), "GRANT-42", "")
	got, err := fakes2s.Lookup(ctx, client, f.URL(), "GRANT-42")
	if !errors.Is(err, fakes2s.ErrQueryFailed) {
		t.Errorf("Lookup = %v, %v; want ErrQueryFailed", got, err)
	}
	if f.Queries() != 1 || f.Applications("GRANT-42") != 1 {
		t.Errorf("queries %d, applications %d; want 1, 1", f.Queries(), f.Applications("GRANT-42"))
	}
}

func TestLookupFailsWhenFunderIsGone(t *testing.T) {
	f, err := fakes2s.Start(fakes2s.Options{})
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(t, f)
	f.Close()
	got, err := fakes2s.Lookup(context.Background(), client, f.URL(), "GRANT-42")
	if err == nil || errors.Is(err, fakes2s.ErrQueryFailed) || errors.Is(err, fakes2s.ErrMalformed) {
		t.Errorf("Lookup = %v, %v; want the client's error", got, err)
	}
}
