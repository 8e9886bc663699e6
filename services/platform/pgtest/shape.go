package pgtest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// shapeQueries describe a schema's tables, columns, constraints, indexes and triggers, one
// line each, leaving out the migration tools' version tables.
var shapeQueries = []string{
	`SELECT format('column %s.%s %s null=%s default=%s generated=%s', table_name, column_name, data_type,
		is_nullable, coalesce(column_default, ''), coalesce(generation_expression, ''))
	FROM information_schema.columns WHERE table_schema = $1 AND table_name NOT LIKE '%\_version'`,
	`SELECT format('constraint %s.%s %s', c.relname, k.conname, pg_get_constraintdef(k.oid))
	FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1 AND c.relname NOT LIKE '%\_version'`,
	`SELECT format('index %s', indexdef) FROM pg_indexes WHERE schemaname = $1 AND tablename NOT LIKE '%\_version'`,
	`SELECT format('trigger %s', pg_get_triggerdef(t.oid))
	FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1 AND NOT t.tgisinternal`,
	`SELECT format('function %s(%s)', p.proname, pg_get_function_identity_arguments(p.oid))
	FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`,
}

// SchemaShape returns what a schema is made of, one sorted line per column, constraint, index,
// trigger and function: two databases migrated by different paths must have the same shape.
func SchemaShape(t testing.TB, url, schema string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var lines []string
	for _, q := range shapeQueries {
		rows, err := conn.Query(ctx, q, schema)
		if err != nil {
			t.Fatalf("schema shape: %v", err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("schema shape: %v", err)
		}
		lines = append(lines, got...)
	}
	if len(lines) == 0 {
		t.Fatalf("schema %s has nothing in it", schema)
	}
	slices.Sort(lines)
	return lines
}

// ShapeDiff lists the lines only one of two shapes has, for a test's failure message.
func ShapeDiff(a, b []string) string {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for _, x := range a {
		if !inb[x] {
			out = append(out, "- "+x)
		}
	}
	for _, x := range b {
		if !ina[x] {
			out = append(out, "+ "+x)
		}
	}
	return strings.Join(out, "\n")
}
