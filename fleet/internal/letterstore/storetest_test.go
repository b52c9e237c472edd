package letterstore

import (
	"context"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// fleetHarness gives each test the fleet's letters on a new database;
// the other store is a second worker over the same table, as another
// operator's grantretry-fleet or a pipeline's worker is.
var fleetHarness = storetest.Harness{
	New: func(t *testing.T) storetest.Fixture {
		l, pool := newLetters(t)
		other := fleet.NewLetters(pool, fleet.WithLimit(5*time.Second))
		t.Cleanup(other.Close)
		return storetest.Fixture{
			Store: New(l, "storetest-w1"),
			Put: func(t *testing.T, letters ...*grantretry.Letter) {
				t.Helper()
				for _, x := range letters {
					if err := l.PutDeadLetter(context.Background(), x); err != nil {
						t.Fatal(err)
					}
				}
			},
			Other: New(other, "storetest-w2"),
		}
	},
}

// The fleet's letters keep the Store contract, and the operator's core
// does over them what it does over a directory.
func TestConformance(t *testing.T) { storetest.Run(t, fleetHarness) }
