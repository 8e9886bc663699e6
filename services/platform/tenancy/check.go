package tenancy

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what Check and Partition need of a connection, a pool or a transaction.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Check reads a migrated schema's catalog and returns, one line each, every way it breaks the
// rule for its declaration: a table declared in no class; a tenant table without a NOT NULL uuid
// client_id, or whose primary key, unique constraint, unique index or foreign key leaves it out;
// a trigger on a tenant or reference table; a foreign key a distributed database cannot keep
// (from a tenant table to a local one, from a reference or local table to a tenant one).
// No problems is nil.
func Check(ctx context.Context, db DB, s Schema) ([]string, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	tables, err := readTables(ctx, db, s.Name)
	if err != nil {
		return nil, err
	}
	var problems []string
	add := func(t *table, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s.%s (%s): ", s.Name, t.name, t.class)+fmt.Sprintf(format, args...))
	}
	byOID := map[uint32]*table{}
	for _, t := range tables {
		byOID[t.oid] = t
	}
	for _, t := range tables {
		c, ok := s.class(t.name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s.%s: declared in no class (tenant, reference or coordinator-local): add it to the schema's tenancy declaration with a reason", s.Name, t.name))
			continue
		}
		t.class = c
	}
	for _, t := range tables {
		if t.class == 0 {
			continue
		}
		if t.class != Local && len(t.triggers) > 0 {
			add(t, "has trigger %v: a distributed table runs no trigger on the coordinator; do the work in the store code", t.triggers)
		}
		if t.class == Tenant {
			switch {
			case t.clientID == 0:
				add(t, "has no %s column", Column)
			case t.clientIDType != "uuid" || !t.clientIDNotNull:
				add(t, "%s is %s (not null %v), want uuid NOT NULL", Column, t.clientIDType, t.clientIDNotNull)
			}
			if !slices.ContainsFunc(t.keys, func(k key) bool { return k.kind == 'p' }) {
				add(t, "has no primary key; give it one that includes %s", Column)
			}
			for _, k := range t.keys {
				if k.kind != 'f' && (t.clientID == 0 || !slices.Contains(k.cols, t.clientID)) {
					add(t, "%s %s leaves out %s: %s", k.what(), k.name, Column, k.def)
				}
			}
		}
		for _, k := range t.keys {
			if k.kind != 'f' {
				continue
			}
			ref, ok := byOID[k.refOID]
			if !ok {
				add(t, "foreign key %s points outside the schema: %s", k.name, k.def)
				continue
			}
			switch {
			case ref.class == 0:
				// Reported as undeclared already.
			case t.class == Tenant && ref.class == Tenant:
				i := slices.Index(k.cols, t.clientID)
				if t.clientID == 0 || i < 0 || ref.clientID == 0 || k.refCols[i] != ref.clientID {
					add(t, "foreign key %s does not match %s to %s.%s: %s", k.name, Column, ref.name, Column, k.def)
				}
			case t.class == Tenant && ref.class == Local:
				add(t, "foreign key %s points at coordinator-local %s, which workers do not have: %s", k.name, ref.name, k.def)
			case t.class != Tenant && ref.class == Tenant:
				add(t, "foreign key %s points at tenant table %s, whose rows are spread over the workers: %s", k.name, ref.name, k.def)
			case t.class == Reference && ref.class == Local:
				add(t, "foreign key %s points at coordinator-local %s: a reference table may point only at reference tables: %s", k.name, ref.name, k.def)
			}
			if t.class != Local && ref.class == t.class && ref != t && s.order(ref.name) > s.order(t.name) {
				add(t, "is declared before %s, which its foreign key %s points at: declare parents first (the order tables are distributed in)", ref.name, k.name)
			}
		}
	}
	slices.Sort(problems)
	return problems, nil
}

type table struct {
	oid             uint32
	name            string
	class           Class
	clientID        int16 // attnum, 0 when there is none
	clientIDType    string
	clientIDNotNull bool
	keys            []key
	triggers        []string
}

type key struct {
	name    string
	kind    byte // p, u, x (exclusion), i (unique index without a constraint), f
	cols    []int16
	refOID  uint32
	refCols []int16
	def     string
}

func (k key) what() string {
	switch k.kind {
	case 'p':
		return "primary key"
	case 'u':
		return "unique constraint"
	case 'x':
		return "exclusion constraint"
	}
	return "unique index"
}

// readTables reads the schema's ordinary and partitioned tables (not their partitions), with
// their client_id column, keys, unique indexes and triggers.
func readTables(ctx context.Context, db DB, schema string) ([]*table, error) {
	rows, err := db.Query(ctx, `
		SELECT c.oid, c.relname, coalesce(a.attnum, 0), coalesce(format_type(a.atttypid, a.atttypmod), ''), coalesce(a.attnotnull, false)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 AND NOT a.attisdropped
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY c.relname`, schema, Column)
	if err != nil {
		return nil, fmt.Errorf("tenancy: read tables of %s: %w", schema, err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*table, error) {
		t := &table{}
		return t, r.Scan(&t.oid, &t.name, &t.clientID, &t.clientIDType, &t.clientIDNotNull)
	})
	if err != nil {
		return nil, fmt.Errorf("tenancy: read tables of %s: %w", schema, err)
	}
	for _, t := range tables {
		// Constraints, then unique indexes that back no constraint (CREATE UNIQUE INDEX), whose
		// expression columns (attnum 0) never count as client_id.
		rows, err := db.Query(ctx, `
			SELECT conname, contype::text, conkey, coalesce(confrelid, 0)::oid, coalesce(confkey, '{}'), pg_get_constraintdef(oid)
			FROM pg_constraint WHERE conrelid = $1 AND contype IN ('p', 'u', 'x', 'f')
			UNION ALL
			SELECT i.indexrelid::regclass::text, 'i', i.indkey::int2[], 0::oid, '{}', pg_get_indexdef(i.indexrelid)
			FROM pg_index i WHERE i.indrelid = $1 AND i.indisunique
			  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = $1)
			ORDER BY 1`, t.oid)
		if err != nil {
			return nil, fmt.Errorf("tenancy: read keys of %s.%s: %w", schema, t.name, err)
		}
		t.keys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (key, error) {
			var k key
			var kind string
			err := r.Scan(&k.name, &kind, &k.cols, &k.refOID, &k.refCols, &k.def)
			k.kind = kind[0]
			return k, err
		})
		if err != nil {
			return nil, fmt.Errorf("tenancy: read keys of %s.%s: %w", schema, t.name, err)
		}
		rows, err = db.Query(ctx, `SELECT tgname FROM pg_trigger WHERE tgrelid = $1 AND NOT tgisinternal ORDER BY 1`, t.oid)
		if err != nil {
			return nil, fmt.Errorf("tenancy: read triggers of %s.%s: %w", schema, t.name, err)
		}
		if t.triggers, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, fmt.Errorf("tenancy: read triggers of %s.%s: %w", schema, t.name, err)
		}
	}
	return tables, nil
}
