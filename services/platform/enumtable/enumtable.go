// Package enumtable converts the values of a domain type (a status, a role, a kind: a string
// type of the rules packages) to the enum the API carries, and back, through one table per
// type.
//
// The generated enums name their values with their type's prefix (ROLE_ADMIN) and the domain
// without it (ADMIN); converting by name ("ROLE_"+r) made a new or misspelt value read as
// UNSPECIFIED without a word. A table is written once, a value missing from it is found by
// Check in the type's tests, and reading back a number the table does not hold says so.
package enumtable

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Table converts D to E and back. The zero E (the enum's UNSPECIFIED) is never in it: it is
// what an unknown D converts to, and what reads back as not found.
type Table[D comparable, E ~int32] struct {
	to   map[D]E
	from map[E]D
}

// New is the table of pairs. Two values of D on one E would make the way back ambiguous, and
// UNSPECIFIED as a value would hide a missing one: both panic, at start-up.
func New[D comparable, E ~int32](pairs map[D]E) Table[D, E] {
	t := Table[D, E]{to: make(map[D]E, len(pairs)), from: make(map[E]D, len(pairs))}
	for d, e := range pairs {
		if e == 0 {
			panic(fmt.Sprintf("enumtable: %v maps to UNSPECIFIED", d))
		}
		if other, dup := t.from[e]; dup {
			panic(fmt.Sprintf("enumtable: %v and %v both map to %v", other, d, e))
		}
		t.to[d], t.from[e] = e, d
	}
	return t
}

// Enum is d in the API: UNSPECIFIED when the table does not hold d (an empty value, say).
func (t Table[D, E]) Enum(d D) E { return t.to[d] }

// Domain is e read back, and whether the table holds it (false for UNSPECIFIED and for a
// number this version does not know).
func (t Table[D, E]) Domain(e E) (D, bool) {
	d, ok := t.from[e]
	return d, ok
}

// Check is nil when the table holds exactly values (the type's constants) and every value of
// enum but UNSPECIFIED: a type's test calls it, so a state added on one side only fails there.
func Check[D comparable, E ~int32](t Table[D, E], values []D, enum protoreflect.EnumDescriptor) error {
	var errs []error
	seen := map[D]bool{}
	for _, d := range values {
		seen[d] = true
		if _, ok := t.to[d]; !ok {
			errs = append(errs, fmt.Errorf("%s: %v has no API value", enum.Name(), d))
		}
	}
	for d := range t.to {
		if !seen[d] {
			errs = append(errs, fmt.Errorf("%s: the table holds %v, which is not one of the type's values", enum.Name(), d))
		}
	}
	for i := 0; i < enum.Values().Len(); i++ {
		v := enum.Values().Get(i)
		if v.Number() == 0 {
			continue
		}
		if _, ok := t.from[E(v.Number())]; !ok {
			errs = append(errs, fmt.Errorf("%s: no value reads as %s", enum.Name(), v.Name()))
		}
	}
	return errors.Join(errs...)
}
