// Package migrations holds the SQL migrations of the connect schema, run by tern at start-up.
package migrations

import "embed"

// FS holds the numbered migrations (NNN_name.sql).
//
//go:embed *.sql
var FS embed.FS
