package tenancy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// PartitionsVar, when set to a number of partitions, makes a service rebuild its tenant tables
// hash-partitioned by client_id after migrating (PartitionFromEnv). It is a test mode: native
// partitioning has the rule a distributed database has (the partition key in every unique key,
// foreign keys matched on it), so the store and money tests run on it prove on plain PostgreSQL
// that the schema and its statements hold on Citus.
const PartitionsVar = "MNV_TEST_HASH_PARTITIONS"

// Beginner opens a transaction: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// PartitionFromEnv runs Partition in a transaction of its own with the number of partitions
// PartitionsVar asks for, and does nothing when it is unset. A service calls it after migrating.
func PartitionFromEnv(ctx context.Context, db Beginner, s Schema) error {
	v := os.Getenv(PartitionsVar)
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > 64 {
		return fmt.Errorf("%s=%q: want a number of partitions from 2 to 64", PartitionsVar, v)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("partition %s: %w", s.Name, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := Partition(ctx, tx, s, n); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Partition rebuilds each tenant table of a migrated schema as a table hash-partitioned by
// client_id into n partitions, keeping its columns, defaults, checks, indexes, privileges,
// storage parameters (on the partitions), rows and the foreign keys to and from it. Tables
// already partitioned are left as they are, so a second start does nothing. Call it inside a
// transaction (db a pgx.Tx): a failure leaves the schema as it was. It fails where the schema
// breaks the rule, e.g. "unique constraint on partitioned table must include all partitioning
// columns".
func Partition(ctx context.Context, db DB, s Schema, n int) error {
	if err := s.Validate(); err != nil {
		return err
	}
	// The advisory lock serialises replicas starting together; the transaction holds it.
	if _, err := db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('mnv.partition.' || $1))`, s.Name); err != nil {
		return fmt.Errorf("partition %s: lock: %w", s.Name, err)
	}
	var todo []string
	for _, t := range s.Of(Tenant) {
		var kind string
		err := queryRow(ctx, db, `SELECT c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = $2 AND NOT c.relispartition`, []any{s.Name, t.Name}, &kind)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		} else if err != nil {
			return fmt.Errorf("partition %s.%s: %w", s.Name, t.Name, err)
		}
		if kind == "r" {
			todo = append(todo, t.Name)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// Foreign keys to or from the tables rebuilt: dropped first, made again on the new tables.
	rows, err := db.Query(ctx, `
		SELECT DISTINCT k.conname, k.conrelid::regclass::text, pg_get_constraintdef(k.oid)
		FROM pg_constraint k JOIN pg_class c ON c.oid IN (k.conrelid, k.confrelid) JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE k.contype = 'f' AND n.nspname = $1 AND c.relname = ANY ($2)`, s.Name, todo)
	if err != nil {
		return fmt.Errorf("partition %s: foreign keys: %w", s.Name, err)
	}
	type fk struct{ name, table, def string }
	fks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fk, error) {
		var f fk
		return f, r.Scan(&f.name, &f.table, &f.def)
	})
	if err != nil {
		return fmt.Errorf("partition %s: foreign keys: %w", s.Name, err)
	}
	for _, f := range fks {
		if _, err := db.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DROP CONSTRAINT %s`, f.table, pgx.Identifier{f.name}.Sanitize())); err != nil {
			return fmt.Errorf("partition %s: drop %s: %w", s.Name, f.name, err)
		}
	}
	for _, name := range todo {
		if err := partitionTable(ctx, db, s.Name, name, n); err != nil {
			return fmt.Errorf("partition %s.%s: %w", s.Name, name, err)
		}
	}
	for _, f := range fks {
		if _, err := db.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT %s %s`, f.table, pgx.Identifier{f.name}.Sanitize(), f.def)); err != nil {
			return fmt.Errorf("partition %s: foreign key %s on %s: %w", s.Name, f.name, f.table, err)
		}
	}
	return nil
}

func partitionTable(ctx context.Context, db DB, schema, name string, n int) error {
	qual := pgx.Identifier{schema, name}.Sanitize()
	oldName := name + "_unpartitioned"
	old := pgx.Identifier{schema, oldName}.Sanitize()
	var reloptions []string
	if err := queryRow(ctx, db, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, []any{qual}, &reloptions); err != nil {
		return err
	}
	// Sequences owned by a column (serial) would go with the old table.
	rows, err := db.Query(ctx, `SELECT a.attname, pg_get_serial_sequence($1, a.attname)
		FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
		  AND a.attidentity = '' AND pg_get_serial_sequence($1, a.attname) IS NOT NULL`, qual)
	if err != nil {
		return err
	}
	type owned struct{ column, sequence string }
	seqs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (owned, error) {
		var o owned
		return o, r.Scan(&o.column, &o.sequence)
	})
	if err != nil {
		return err
	}
	// The privileges granted on the table (the ledger's append-only rule is one).
	rows, err = db.Query(ctx, `SELECT coalesce(g.rolname, 'PUBLIC'), a.privilege_type
		FROM pg_class c, aclexplode(c.relacl) a LEFT JOIN pg_roles g ON g.oid = a.grantee
		WHERE c.oid = $1::regclass`, qual)
	if err != nil {
		return err
	}
	type grant struct{ grantee, privilege string }
	grants, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) {
		var g grant
		return g, r.Scan(&g.grantee, &g.privilege)
	})
	if err != nil {
		return err
	}
	// Columns a row is copied by: generated ones are computed again.
	rows, err = db.Query(ctx, `SELECT quote_ident(attname) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum`, qual)
	if err != nil {
		return err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	list := strings.Join(cols, ", ")

	stmts := []string{}
	for _, o := range seqs {
		stmts = append(stmts, fmt.Sprintf(`ALTER SEQUENCE %s OWNED BY NONE`, o.sequence))
	}
	stmts = append(stmts,
		fmt.Sprintf(`ALTER TABLE %s RENAME TO %s`, qual, pgx.Identifier{oldName}.Sanitize()),
		fmt.Sprintf(`CREATE TABLE %s (LIKE %s INCLUDING ALL) PARTITION BY HASH (%s)`, qual, old, Column),
	)
	with := ""
	if len(reloptions) > 0 {
		with = " WITH (" + strings.Join(reloptions, ", ") + ")"
	}
	for i := range n {
		stmts = append(stmts, fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d)%s`,
			pgx.Identifier{schema, fmt.Sprintf("%s_p%d", name, i)}.Sanitize(), qual, n, i, with))
	}
	if len(grants) > 0 {
		stmts = append(stmts, fmt.Sprintf(`REVOKE ALL ON %s FROM PUBLIC, CURRENT_USER`, qual))
		for _, g := range grants {
			grantee := g.grantee
			if grantee != "PUBLIC" {
				grantee = pgx.Identifier{grantee}.Sanitize()
			}
			stmts = append(stmts, fmt.Sprintf(`GRANT %s ON %s TO %s`, g.privilege, qual, grantee))
		}
	}
	stmts = append(stmts,
		fmt.Sprintf(`INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM %s`, qual, list, list, old),
		fmt.Sprintf(`DROP TABLE %s`, old),
	)
	for _, o := range seqs {
		stmts = append(stmts, fmt.Sprintf(`ALTER SEQUENCE %s OWNED BY %s.%s`, o.sequence, qual, pgx.Identifier{o.column}.Sanitize()))
	}
	for _, q := range stmts {
		if _, err := db.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func queryRow(ctx context.Context, db DB, sql string, args []any, dest ...any) error {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
