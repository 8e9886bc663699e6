package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PageQuery is a list read a page at a time: the rows FROM and WHERE select, in Order.
type PageQuery struct {
	// Columns is the select list of a row, as scan reads it.
	Columns string
	// From is the FROM and WHERE clauses of the rows, their parameters $1, $2... in Args.
	From string
	// Order is the ORDER BY of the rows, without the keywords; it must be total (end with a
	// unique column) for pages not to overlap.
	Order string
	Args  []any
}

// Page reads the rows of q from offset, at most limit, and the count of all of them. Both come
// from one statement, so from one snapshot: a row written meanwhile is in both or in neither,
// and a page never holds more than its total says. (A count of its own, before or after the
// page, saw other rows whenever a write fell in between.) The count is an uncorrelated
// subquery, planned once per statement, so it costs what a separate count did, and the page
// keeps its LIMIT plan. A page past the end has no row to carry the count: it is counted apart
// (an empty first page is a count of 0).
func Page[T any](ctx context.Context, db DB, q PageQuery, limit, offset int64, scan func(pgx.Row) (T, error)) ([]T, int64, error) {
	n := len(q.Args)
	sql := fmt.Sprintf(`SELECT (SELECT count(*) %s), %s %s ORDER BY %s LIMIT $%d OFFSET $%d`,
		q.From, q.Columns, q.From, q.Order, n+1, n+2)
	rows, err := db.Query(ctx, sql, append(q.Args[:n:n], limit, offset)...)
	if err != nil {
		return nil, 0, err
	}
	var total int64
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) {
		return scan(countedRow{r, &total})
	})
	if err != nil {
		return nil, 0, err
	}
	if len(items) == 0 && offset > 0 {
		if err := db.QueryRow(ctx, `SELECT count(*) `+q.From, q.Args...).Scan(&total); err != nil {
			return nil, 0, err
		}
	}
	return items, total, nil
}

// countedRow is a row of Page's statement as its scan expects it: the count, the first column,
// goes to total.
type countedRow struct {
	pgx.CollectableRow
	total *int64
}

func (r countedRow) Scan(dest ...any) error {
	return r.CollectableRow.Scan(append([]any{r.total}, dest...)...)
}
