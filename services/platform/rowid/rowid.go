// Package rowid mints the ids of rows a service writes at its request rate (verifications,
// ledger entries): UUIDv7, whose first 48 bits are the time in milliseconds. Ids minted one
// after another sort together, so a B-tree over them grows at its right edge: an insert lands
// on a page a recent insert already touched, instead of a random page that PostgreSQL reads
// and, the first time after a checkpoint, writes whole to the WAL. With random (v4) ids that
// full-page image was most of the WAL a verify wrote.
//
// An id that grants access by itself (a browser transaction's id, a session's) stays random:
// a v7 id tells when it was minted and keeps 74 random bits, not 122.
package rowid

import "github.com/google/uuid"

// New is a new UUIDv7, in its canonical text form.
func New() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does, as uuid.New then panics.
		panic(err)
	}
	return id.String()
}
