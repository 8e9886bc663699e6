package rowid

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNew(t *testing.T) {
	var ids []string
	for range 1000 {
		ids = append(ids, New())
		if len(ids)%250 == 0 {
			time.Sleep(2 * time.Millisecond) // across milliseconds too
		}
	}
	for _, s := range ids {
		u, err := uuid.Parse(s)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%q: version %v, variant %v, err %v; want a RFC 9562 version 7", s, u.Version(), u.Variant(), err)
		}
	}
	// What the package is for: ids in minting order are in index order.
	if !slices.IsSorted(ids) {
		t.Error("ids minted one after another do not sort in minting order")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Error("an id was minted twice")
	}
}
