package operator_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// dirHarness gives each test a new dead letter directory; the other
// store is a second worker of the same Dir, since one process redelivers
// from a directory at a time.
var dirHarness = storetest.Harness{
	New: func(t *testing.T) storetest.Fixture {
		d, err := deadletter.Open(filepath.Join(t.TempDir(), "letters"))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Fixture{
			Store: operator.DirStore{Dir: d},
			Put: func(t *testing.T, letters ...*grantretry.Letter) {
				t.Helper()
				for _, l := range letters {
					if err := d.PutDeadLetter(context.Background(), l); err != nil {
						t.Fatal(err)
					}
				}
			},
			Other: operator.DirStore{Dir: d},
		}
	},
}

func TestDirStore(t *testing.T) { storetest.Run(t, dirHarness) }
