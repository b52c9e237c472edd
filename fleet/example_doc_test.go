package fleet_test

import (
	"os"
	"strings"
	"testing"
)

// The code docs/fleet.md shows is Example_withFleet, which compiles: the
// page's block between its "example_test.go" markers is example_test.go
// from its imports on.
func TestFleetGuideShowsTheExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want := string(src[strings.Index(string(src), "import ("):])
	page, err := os.ReadFile("../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- begin: fleet/example_test.go -->\n```go\n", "```\n<!-- end: fleet/example_test.go -->"
	doc := string(page)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/fleet.md has no block between %q and %q", begin, end)
	}
	if got := doc[i+len(begin) : j]; got != want {
		t.Errorf("docs/fleet.md's code block is not example_test.go from its imports on; put this between the markers:\n%s", want)
	}
}
