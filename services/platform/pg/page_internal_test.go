package pg

import "testing"

func TestSortsByOutput(t *testing.T) {
	for _, tc := range []struct {
		columns, order, want string
	}{
		{columns: "id::text, name, created_at", order: "created_at DESC, id", want: "id"},
		{columns: "c.id::text, c.name", order: "c.created_at DESC, id", want: "id"},
		{columns: "id::text AS id, name", order: "id", want: "id"},
		{columns: "coalesce(a, b)::text, id::text", order: "created_at DESC, id ASC NULLS LAST", want: "id"},
		{columns: "id::text, name, created_at", order: "created_at DESC, rows.id", want: ""},
		{columns: "c.id::text, c.name", order: "c.created_at DESC, c.id", want: ""},
		{columns: "id, name", order: "created_at DESC, id", want: ""},
		{columns: "id::text AS ref, name", order: "id", want: ""},
		{columns: "seq, amount::text", order: "seq DESC", want: ""},
		{columns: "lower(name)::text AS name", order: "name", want: ""},
		{columns: "count(*) OVER (PARTITION BY a, b), id::text", order: "b, id", want: "id"},
	} {
		if got := sortsByOutput(tc.columns, tc.order); got != tc.want {
			t.Errorf("sortsByOutput(%q, %q) = %q, want %q", tc.columns, tc.order, got, tc.want)
		}
	}
}
