package paging_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/paging"
)

func i32(v int32) *int32 { return &v }

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		page      *int32
		size      *int32
		want      paging.Page
		wantField string // "" for success
	}{
		{"defaults", nil, nil, paging.Page{Number: 0, Size: 20}, ""},
		{"page only", i32(3), nil, paging.Page{Number: 3, Size: 20}, ""},
		{"size only", nil, i32(50), paging.Page{Number: 0, Size: 50}, ""},
		{"both", i32(2), i32(10), paging.Page{Number: 2, Size: 10}, ""},
		{"size 1", nil, i32(1), paging.Page{Size: 1}, ""},
		{"size 100", nil, i32(100), paging.Page{Size: 100}, ""},
		{"page 0 explicit", i32(0), nil, paging.Page{Size: 20}, ""},
		{"page at max", i32(paging.MaxPage), nil, paging.Page{Number: paging.MaxPage, Size: 20}, ""},

		{"size 0", nil, i32(0), paging.Page{}, "size"},
		{"size 101", nil, i32(101), paging.Page{}, "size"},
		{"size negative", nil, i32(-1), paging.Page{}, "size"},
		{"page -1", i32(-1), nil, paging.Page{}, "page"},
		{"page past max", i32(paging.MaxPage + 1), nil, paging.Page{}, "page"},
		{"page bad, size fine", i32(-1), i32(10), paging.Page{}, "page"},
		{"page fine, size bad", i32(1), i32(1000), paging.Page{}, "size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := paging.Parse(tt.page, tt.size)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Parse error = %v", err)
				}
				if got != tt.want {
					t.Errorf("Parse = %+v, want %+v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse = %+v, want an error on %q", got, tt.wantField)
			}
			d := apierr.Parse(err)
			if d.Code != codes.InvalidArgument || d.Reason != fault.InvalidArgument || d.Field != tt.wantField {
				t.Errorf("error = %+v, want InvalidArgument / INVALID_ARGUMENT on field %q", d, tt.wantField)
			}
			if d.Message == "" {
				t.Error("error has no message")
			}
			if got != (paging.Page{}) {
				t.Errorf("Parse returned %+v with its error", got)
			}
		})
	}
}

func TestPageArithmetic(t *testing.T) {
	tests := []struct {
		name       string
		page       paging.Page
		total      int64
		offset     int64
		limit      int64
		totalPages int32
	}{
		{"no items", paging.Page{Number: 0, Size: 20}, 0, 0, 20, 0},
		{"one item", paging.Page{Number: 0, Size: 20}, 1, 0, 20, 1},
		{"exactly one page", paging.Page{Number: 0, Size: 20}, 20, 0, 20, 1},
		{"one past a page", paging.Page{Number: 0, Size: 20}, 21, 0, 20, 2},
		{"second page", paging.Page{Number: 1, Size: 20}, 40, 20, 20, 2},
		{"size 1", paging.Page{Number: 5, Size: 1}, 7, 5, 1, 7},
		{"size 100", paging.Page{Number: 3, Size: 100}, 1001, 300, 100, 11},
		// Offset must not overflow int32 at the largest page.
		{"largest page", paging.Page{Number: paging.MaxPage, Size: paging.MaxSize}, 0, int64(paging.MaxPage) * paging.MaxSize, 100, 0},
		{"many items", paging.Page{Number: 0, Size: 100}, 1<<31 - 1, 0, 100, 21474837},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.page.Offset(); got != tt.offset {
				t.Errorf("Offset = %d, want %d", got, tt.offset)
			}
			if got := tt.page.Limit(); got != tt.limit {
				t.Errorf("Limit = %d, want %d", got, tt.limit)
			}
			if got := tt.page.TotalPages(tt.total); got != tt.totalPages {
				t.Errorf("TotalPages(%d) = %d, want %d", tt.total, got, tt.totalPages)
			}
		})
	}
}
