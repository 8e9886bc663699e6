// Package paging is the one way every list is paginated (docs/api-decisions.md#pagination): query
// page (0-based, default 0) and size (1 to 100, default 20); answers carry page, size, totalItems
// and totalPages.
package paging

import (
	"fmt"

	"github.com/mnvhq/mnv/services/platform/apierr"
)

// Bounds of a page.
const (
	DefaultSize = 20
	MaxSize     = 100
	// MaxPage keeps OFFSET within what Postgres can skip in reasonable time.
	MaxPage = 100_000
)

// Page is a validated page request.
type Page struct {
	Number int32
	Size   int32
}

// Parse validates the optional page and size of a request. Errors are INVALID_ARGUMENT on the
// offending field.
func Parse(page, size *int32) (Page, error) {
	p := Page{Size: DefaultSize}
	if page != nil {
		if *page < 0 || *page > MaxPage {
			return Page{}, apierr.Invalid("page", fmt.Sprintf("page must be between 0 and %d", MaxPage))
		}
		p.Number = *page
	}
	if size != nil {
		if *size < 1 || *size > MaxSize {
			return Page{}, apierr.Invalid("size", fmt.Sprintf("size must be between 1 and %d", MaxSize))
		}
		p.Size = *size
	}
	return p, nil
}

// Offset is the number of rows before the page.
func (p Page) Offset() int64 { return int64(p.Number) * int64(p.Size) }

// Limit is the number of rows in a page.
func (p Page) Limit() int64 { return int64(p.Size) }

// TotalPages is the number of pages that total items fill.
func (p Page) TotalPages(total int64) int32 {
	return int32((total + int64(p.Size) - 1) / int64(p.Size))
}
