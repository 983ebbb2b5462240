package harness

import "testing"

// The ports FreePorts returns are distinct: asked for one at a time, the
// kernel may hand out a just-closed port again.
func TestFreePortsAreDistinct(t *testing.T) {
	for range 20 {
		ports, err := FreePorts("127.0.0.1", 8)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p <= 0 || seen[p] {
				t.Fatalf("ports %v: %d is not a new free port", ports, p)
			}
			seen[p] = true
		}
	}
}
