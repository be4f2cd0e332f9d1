package store

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRunnableCountsSkip: an owner counted far below the limit skips the
// check for a second, and only while its count and the admissions since
// stay within half of the limit; a failed check, or a limit of 1, means
// a check every time.
func TestRunnableCountsSkip(t *testing.T) {
	t.Parallel()
	var rc runnableCounts
	alice, bob := uuid.New(), uuid.New()
	now := time.Now()
	if rc.skip(alice, 5000, now) {
		t.Fatal("skipped an owner never counted")
	}
	rc.counted(alice, 10, now)
	for i := range 100 {
		if !rc.skip(alice, 5000, now.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("admission %d after a count of 10 of 5,000 was checked", i)
		}
	}
	if rc.skip(alice, 5000, now.Add(runnableRecount)) {
		t.Fatal("skipped a count a second old")
	}
	if rc.skip(bob, 5000, now) {
		t.Fatal("skipped another owner")
	}
	rc.counted(alice, 2490, now)
	for range 10 { // up to 2,500 with this one
		if !rc.skip(alice, 5000, now) {
			t.Fatal("checked below half of the limit")
		}
	}
	if rc.skip(alice, 5000, now) {
		t.Fatal("skipped at half of the limit")
	}
	rc.counted(alice, 0, now)
	if rc.skip(alice, 1, now) {
		t.Fatal("skipped under a limit of 1")
	}
	var skipped []bool
	for range 3 {
		skipped = append(skipped, rc.skip(alice, 4, now))
	}
	if !skipped[0] || !skipped[1] || skipped[2] {
		t.Fatalf("under a limit of 4 after a count of 0: skipped %v, want 2 admissions unchecked, then a check", skipped)
	}
	rc.counted(alice, -1, now)
	if rc.skip(alice, 5000, now) {
		t.Fatal("skipped after a failed check")
	}
}
