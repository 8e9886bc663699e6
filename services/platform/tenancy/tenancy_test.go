package tenancy_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// good follows the rule: a reference table, tenant tables keyed and linked by client_id, a
// local queue.
const good = `
CREATE SCHEMA shop;
CREATE TABLE shop.clients (id uuid PRIMARY KEY);
CREATE TABLE shop.orders (
	client_id uuid NOT NULL REFERENCES shop.clients (id),
	id bigserial,
	ref text NOT NULL,
	total bigint GENERATED ALWAYS AS (1) STORED,
	PRIMARY KEY (client_id, id),
	UNIQUE (client_id, ref)
) WITH (fillfactor = 90);
CREATE TABLE shop.lines (
	client_id uuid NOT NULL,
	order_id bigint NOT NULL,
	n int NOT NULL,
	PRIMARY KEY (client_id, order_id, n),
	FOREIGN KEY (client_id, order_id) REFERENCES shop.orders (client_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX lines_one_first ON shop.lines (client_id, order_id) WHERE n = 1;
CREATE TABLE shop.queue (seq bigserial PRIMARY KEY, client_id uuid NOT NULL, order_id bigint NOT NULL);
CREATE TABLE shop.schema_version (version int);
REVOKE UPDATE, DELETE ON shop.orders FROM CURRENT_USER;
`

var shop = tenancy.Schema{Name: "shop", Tables: []tenancy.Table{
	{Name: "clients", Class: tenancy.Reference, Why: "one row per client"},
	{Name: "orders", Class: tenancy.Tenant, Why: "a client's orders"},
	{Name: "lines", Class: tenancy.Tenant, Why: "an order's lines"},
	{Name: "queue", Class: tenancy.Local, Why: "a global queue"},
}}

func setup(t *testing.T, ddl string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		ddl   string // run after good
		extra []tenancy.Table
		want  []string
	}{
		{name: "the rule kept", want: nil},
		{
			name: "a table in no class",
			ddl:  `CREATE TABLE shop.notes (client_id uuid NOT NULL, id int, PRIMARY KEY (client_id, id));`,
			want: []string{"shop.notes: declared in no class (tenant, reference or coordinator-local): add it to the schema's tenancy declaration with a reason"},
		},
		{
			name: "keys without client_id",
			ddl: `ALTER TABLE shop.lines DROP CONSTRAINT lines_pkey, ADD PRIMARY KEY (order_id, n), ADD UNIQUE (n);
				CREATE UNIQUE INDEX lines_n ON shop.lines (lower(n::text));`,
			want: []string{
				"shop.lines (tenant): primary key lines_pkey leaves out client_id: PRIMARY KEY (order_id, n)",
				"shop.lines (tenant): unique constraint lines_n_key leaves out client_id: UNIQUE (n)",
				"shop.lines (tenant): unique index shop.lines_n leaves out client_id: CREATE UNIQUE INDEX lines_n ON shop.lines USING btree (lower((n)::text))",
			},
		},
		{
			name: "a foreign key by id alone",
			ddl: `ALTER TABLE shop.orders ADD UNIQUE (id);
				ALTER TABLE shop.lines DROP CONSTRAINT lines_client_id_order_id_fkey, ADD FOREIGN KEY (order_id) REFERENCES shop.orders (id);`,
			want: []string{
				"shop.lines (tenant): foreign key lines_order_id_fkey does not match client_id to orders.client_id: FOREIGN KEY (order_id) REFERENCES shop.orders(id)",
				"shop.orders (tenant): unique constraint orders_id_key leaves out client_id: UNIQUE (id)",
			},
		},
		{
			name: "client_id of the wrong type",
			ddl:  `ALTER TABLE shop.lines DROP CONSTRAINT lines_client_id_order_id_fkey; ALTER TABLE shop.queue ALTER client_id TYPE text, ALTER client_id DROP NOT NULL;`,
			want: nil, // a local table's client_id is its own business
		},
		{
			name: "a trigger on a tenant table",
			ddl: `CREATE FUNCTION shop.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
				CREATE TRIGGER orders_touch BEFORE UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.touch();
				CREATE TRIGGER queue_touch BEFORE UPDATE ON shop.queue FOR EACH ROW EXECUTE FUNCTION shop.touch();`,
			want: []string{"shop.orders (tenant): has trigger [orders_touch]: a distributed table runs no trigger on the coordinator; do the work in the store code"},
		},
		{
			name: "foreign keys across classes",
			ddl: `ALTER TABLE shop.queue ADD FOREIGN KEY (client_id, order_id) REFERENCES shop.orders (client_id, id);
				ALTER TABLE shop.orders ADD COLUMN seq bigint REFERENCES shop.queue (seq);`,
			want: []string{
				"shop.orders (tenant): foreign key orders_seq_fkey points at coordinator-local queue, which workers do not have: FOREIGN KEY (seq) REFERENCES shop.queue(seq)",
				"shop.queue (coordinator-local): foreign key queue_client_id_order_id_fkey points at tenant table orders, whose rows are spread over the workers: FOREIGN KEY (client_id, order_id) REFERENCES shop.orders(client_id, id)",
			},
		},
		{
			name: "a tenant table without a primary key",
			ddl:  `ALTER TABLE shop.lines DROP CONSTRAINT lines_pkey;`,
			want: []string{"shop.lines (tenant): has no primary key; give it one that includes client_id"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := setup(t, good+tt.ddl)
			s := tenancy.Schema{Name: shop.Name, Tables: append(slices.Clone(shop.Tables), tt.extra...)}
			got, err := tenancy.Check(context.Background(), conn, s)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestCheckDeclarationOrder(t *testing.T) {
	conn := setup(t, good)
	reordered := tenancy.Schema{Name: "shop", Tables: []tenancy.Table{shop.Tables[0], shop.Tables[2], shop.Tables[1], shop.Tables[3]}}
	got, err := tenancy.Check(context.Background(), conn, reordered)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"shop.lines (tenant): is declared before orders, which its foreign key lines_client_id_order_id_fkey points at: declare parents first (the order tables are distributed in)"}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestValidate(t *testing.T) {
	bad := tenancy.Schema{Name: "shop", Tables: []tenancy.Table{
		{Name: "a", Class: tenancy.Tenant, Why: "x"},
		{Name: "a", Class: tenancy.Tenant, Why: "x"},
		{Name: "b", Why: "x"},
		{Name: "c", Class: tenancy.Local},
	}}
	err := bad.Validate()
	want := "schema shop: a is declared twice; b has no class; c has no reason"
	if err == nil || err.Error() != want {
		t.Errorf("Validate: %v, want %s", err, want)
	}
}

func TestPartition(t *testing.T) {
	ctx := context.Background()
	conn := setup(t, good+`
		INSERT INTO shop.clients VALUES ('00000000-0000-0000-0000-000000000001'), ('00000000-0000-0000-0000-000000000002');
		INSERT INTO shop.orders (client_id, ref) VALUES ('00000000-0000-0000-0000-000000000001', 'a'), ('00000000-0000-0000-0000-000000000002', 'b');
		INSERT INTO shop.lines SELECT client_id, id, 1 FROM shop.orders;`)
	partition := func() error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := tenancy.Partition(ctx, tx, shop, 4); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	spread := func() tenancy.Spread {
		t.Helper()
		s, err := tenancy.SpreadOf(ctx, conn, shop)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := spread(); got != tenancy.Together {
		t.Errorf("spread on plain tables: %v, want together", got)
	}
	if err := partition(); err != nil {
		t.Fatal(err)
	}
	// Partitioned tenant tables stand in for distributed ones: a statement per client.
	if got := spread(); got != tenancy.PerClient {
		t.Errorf("spread on partitioned tables: %v, want per-client", got)
	}
	// A second run finds the tables partitioned and changes nothing.
	if err := partition(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	var kinds []string
	rows, _ := conn.Query(ctx, `SELECT relname || ':' || relkind::text FROM pg_class WHERE relnamespace = 'shop'::regnamespace
		AND relkind IN ('r', 'p') AND NOT relispartition ORDER BY 1`)
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"clients:r", "lines:p", "orders:p", "queue:r", "schema_version:r"}; !slices.Equal(kinds, want) {
		t.Errorf("tables %v, want %v", kinds, want)
	}
	var parts int
	var opts []string
	if err := conn.QueryRow(ctx, `SELECT count(*), (SELECT reloptions FROM pg_class WHERE oid = 'shop.orders_p0'::regclass)
		FROM pg_inherits WHERE inhparent = 'shop.orders'::regclass`).Scan(&parts, &opts); err != nil {
		t.Fatal(err)
	}
	if parts != 4 || !slices.Equal(opts, []string{"fillfactor=90"}) {
		t.Errorf("%d partitions with %v, want 4 with fillfactor=90", parts, opts)
	}
	// Rows, the serial sequence, the foreign key (cascading) and the privileges came along.
	if _, err := conn.Exec(ctx, `INSERT INTO shop.orders (client_id, ref) VALUES ('00000000-0000-0000-0000-000000000001', 'c')`); err != nil {
		t.Fatal(err)
	}
	var orders, lines int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM shop.orders), (SELECT count(*) FROM shop.lines), (SELECT max(id) FROM shop.orders)`).Scan(&orders, &lines, new(int64)); err != nil {
		t.Fatal(err)
	}
	if orders != 3 || lines != 2 {
		t.Errorf("%d orders and %d lines, want 3 and 2", orders, lines)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO shop.lines VALUES ('00000000-0000-0000-0000-000000000002', 1, 2)`); err == nil {
		t.Error("a line of another client's order was accepted: the foreign key was lost")
	}
	var canUpdate bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_class c, aclexplode(c.relacl) a
		WHERE c.oid = 'shop.orders'::regclass AND a.privilege_type = 'UPDATE') OR relacl IS NULL
		FROM pg_class WHERE oid = 'shop.orders'::regclass`).Scan(&canUpdate); err != nil {
		t.Fatal(err)
	}
	if canUpdate {
		t.Error("the owner may update shop.orders again: the revoked privilege was lost")
	}
}

// TestPartitionRefusesWhatCitusWould: a unique key without client_id stops the rebuild, with
// PostgreSQL's reason, and the transaction leaves the schema as it was.
func TestPartitionRefusesWhatCitusWould(t *testing.T) {
	ctx := context.Background()
	conn := setup(t, good+`ALTER TABLE shop.orders ADD UNIQUE (ref);`)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	err = tenancy.Partition(ctx, tx, shop, 4)
	if err == nil || !strings.Contains(err.Error(), "must include all partitioning columns") {
		t.Fatalf("Partition: %v, want a refusal naming the partitioning columns", err)
	}
}

func TestCitusStatements(t *testing.T) {
	other := tenancy.Schema{Name: "other", Tables: []tenancy.Table{{Name: "notes", Class: tenancy.Tenant, Why: "x"}}}
	got := tenancy.CitusStatements(shop, other)
	want := []string{
		"SELECT create_reference_table('shop.clients');",
		"SELECT create_distributed_table('shop.orders', 'client_id');",
		"SELECT create_distributed_table('shop.lines', 'client_id', colocate_with => 'shop.orders');",
		"SELECT create_distributed_table('other.notes', 'client_id', colocate_with => 'shop.orders');",
	}
	if !slices.Equal(got, want) {
		t.Errorf("statements:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNewStatement(t *testing.T) {
	s := tenancy.NewStatement(`UPDATE t SET n = i.n FROM i WHERE t.client_id = {client i} AND t.id = i.id AND {client i} IS NOT NULL`, 3)
	tests := []struct {
		spread tenancy.Spread
		want   string
	}{
		{tenancy.Together, `UPDATE t SET n = i.n FROM i WHERE t.client_id = i.client_id AND t.id = i.id AND i.client_id IS NOT NULL`},
		{tenancy.PerClient, `UPDATE t SET n = i.n FROM i WHERE t.client_id = $3::uuid AND t.id = i.id AND $3::uuid IS NOT NULL`},
	}
	for _, tt := range tests {
		if got := s.For(tt.spread); got != tt.want {
			t.Errorf("%v:\n got %s\nwant %s", tt.spread, got, tt.want)
		}
	}
}

func TestGroups(t *testing.T) {
	clients := []string{"b", "a", "b", "c", "a"}
	client := func(i int) string { return clients[i] }
	tests := []struct {
		name   string
		spread tenancy.Spread
		sorted bool
		want   []tenancy.Group
	}{
		{"together", tenancy.Together, true, []tenancy.Group{{Items: []int{0, 1, 2, 3, 4}}}},
		{"per client, as they come", tenancy.PerClient, false, []tenancy.Group{{"b", []int{0, 2}}, {"a", []int{1, 4}}, {"c", []int{3}}}},
		{"per client, sorted", tenancy.PerClient, true, []tenancy.Group{{"a", []int{1, 4}}, {"b", []int{0, 2}}, {"c", []int{3}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.spread.Groups(len(clients), client, tt.sorted)
			if !slices.EqualFunc(got, tt.want, func(a, b tenancy.Group) bool { return a.Client == b.Client && slices.Equal(a.Items, b.Items) }) {
				t.Errorf("groups %v, want %v", got, tt.want)
			}
			for _, g := range got {
				args := g.Args([]any{1})
				if want := 1 + min(len(g.Client), 1); len(args) != want {
					t.Errorf("group %q: %d arguments, want %d", g.Client, len(args), want)
				}
			}
		})
	}
}
