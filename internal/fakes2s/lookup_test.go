package fakes2s_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

func TestLookupFindsTrackingNumbers(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t)
	ctx := context.Background()
	var want []string
	for range 2 {
		want = append(want, submit(ctx, client, f.URL(), "GRANT-42", "").tracking)
	}
	submit(ctx, client, f.URL(), "GRANT-43", "")

	got, err := fakes2s.Lookup(ctx, client, f.URL(), "GRANT-42")
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Lookup(GRANT-42) = %v, %v; want %v", got, err, want)
	}
	got, err = fakes2s.Lookup(ctx, client, f.URL(), "GRANT-44")
	if err != nil || len(got) != 0 {
		t.Errorf("Lookup(GRANT-44) = %v, %v; want nothing recorded", got, err)
	}
	if f.Queries() != 2 || f.Received() != 3 {
		t.Errorf("queries %d, received %d; want 2, 3: a query is no submission", f.Queries(), f.Received())
	}
}

func TestLookupFindsDroppedApplication(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: 1})
	client := newClient(t)
	ctx := context.Background()
	if s := submit(ctx, client, f.URL(), "GRANT-42", ""); s.err == nil {
		t.Fatal("submit succeeded, want the connection dropped")
	}
	got, err := fakes2s.Lookup(ctx, client, f.URL(), "GRANT-42")
	if err != nil || !slices.Equal(got, []string{"GRANT10000001"}) {
		t.Errorf("Lookup = %v, %v; want [GRANT10000001]", got, err)
	}
}

func TestQueryFailRateFailsLookup(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1, QueryFailRate: 1})
	client := newClient(t)
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
	f.Close()
	got, err := fakes2s.Lookup(context.Background(), newClient(t), f.URL(), "GRANT-42")
	if err == nil || errors.Is(err, fakes2s.ErrQueryFailed) || errors.Is(err, fakes2s.ErrMalformed) {
		t.Errorf("Lookup = %v, %v; want the client's error", got, err)
	}
}
