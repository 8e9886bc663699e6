package csvimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/mnvhq/mnv/services/platform/phone"
)

// result is everything a Reader returned for a file.
type result struct {
	rows []Row
	bad  [][]RowError
	err  error // the error that ended the file; nil for io.EOF
}

// readAll reads src to its end with the given limits.
func readAll(t testing.TB, src string, lim limits) (result, error) {
	t.Helper()
	r, err := newReader(strings.NewReader(src), lim)
	if err != nil {
		return result{}, err
	}
	return drain(t, r), nil
}

func drain(t testing.TB, r *Reader) result {
	t.Helper()
	var res result
	last := r.Line()
	for i := 0; ; i++ {
		if i > 1<<20 {
			t.Fatal("Next never ends")
		}
		row, errs, err := r.Next()
		if err == io.EOF {
			return res
		}
		if err != nil {
			if _, _, again := r.Next(); again != err {
				t.Errorf("Next after %v = %v, want the same error", err, again)
			}
			res.err = err
			return res
		}
		if r.Line() <= last {
			t.Errorf("Line() = %d after %d: not increasing", r.Line(), last)
		}
		last = r.Line()
		if errs == nil {
			if row.Line != r.Line() {
				t.Errorf("Row.Line = %d, Line() = %d", row.Line, r.Line())
			}
			res.rows = append(res.rows, row)
			continue
		}
		if !reflect.DeepEqual(row, Row{}) {
			t.Errorf("line %d: Row %+v returned with errors %v", r.Line(), row, errs)
		}
		for _, e := range errs {
			if e.Row != r.Line() {
				t.Errorf("RowError.Row = %d, Line() = %d", e.Row, r.Line())
			}
		}
		res.bad = append(res.bad, errs)
	}
}

func mustRead(t *testing.T, src string) result {
	t.Helper()
	res, err := readAll(t, src, defaultLimits)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	return res
}

func ptr(s string) *string { return &s }

// number parses one of the test numbers, which are valid.
func number(e164 string) phone.Number {
	n, err := phone.Parse(e164)
	if err != nil {
		panic(err)
	}
	return n
}

const (
	ae1 = "+971501234567"
	ae2 = "+971552345678"
	gb1 = "+447400123456"
)

func TestSample(t *testing.T) {
	b := Sample()
	if !strings.HasPrefix(string(b), "mobileNumber,externalId,firstName,lastName,email\r\n") {
		t.Fatalf("sample header: %q", strings.SplitN(string(b), "\n", 2)[0])
	}
	b[0] = 'X' // callers get their own copy
	if Sample()[0] != 'm' {
		t.Fatal("Sample shares its bytes")
	}
	if !strings.HasSuffix(SampleFileName, ".csv") {
		t.Errorf("SampleFileName = %q", SampleFileName)
	}
	res := mustRead(t, string(Sample()))
	if res.err != nil || len(res.bad) != 0 || len(res.rows) != 5 {
		t.Fatalf("sample: %d rows, bad %v, err %v; want 5 valid rows", len(res.rows), res.bad, res.err)
	}
	seen := map[string]bool{}
	for i, row := range res.rows {
		if row.Line != i+2 {
			t.Errorf("row %d: Line %d", i, row.Line)
		}
		if row.ExternalID == nil || row.FirstName == nil || row.LastName == nil || row.Email == nil || row.Attributes != nil {
			t.Errorf("row %d: %+v: want every column and no attributes", i, row)
		}
		if !strings.HasSuffix(*row.Email, "@example.com") {
			t.Errorf("row %d: email %q", i, *row.Email)
		}
		if seen[row.Number.E164] {
			t.Errorf("row %d: number repeated", i)
		}
		seen[row.Number.E164] = true
	}
	want := Row{Line: 2, Number: number(ae1), ExternalID: ptr("CUST-1001"), FirstName: ptr("Aisha"),
		LastName: ptr("Al Mansoori"), Email: ptr("aisha.almansoori@example.com")}
	if !reflect.DeepEqual(res.rows[0], want) {
		t.Errorf("first row %+v, want %+v", res.rows[0], want)
	}
}

func TestHeader(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		want  []Row  // when the header is accepted
		notOK string // else: a part of the ErrNotCSV message
	}{
		{name: "exact", src: "mobileNumber\n" + ae1 + "\n", want: []Row{{Line: 2, Number: number(ae1)}}},
		{name: "case", src: "MOBILENUMBER,ExternalID,FIRSTNAME,lastname,EMail\n" + ae1 + ",x,F,L,a@example.com\n",
			want: []Row{{Line: 2, Number: number(ae1), ExternalID: ptr("x"), FirstName: ptr("F"), LastName: ptr("L"), Email: ptr("a@example.com")}}},
		{name: "BOM", src: "\xEF\xBB\xBFmobileNumber,email\n" + ae1 + ",\n", want: []Row{{Line: 2, Number: number(ae1)}}},
		{name: "spaces around names", src: " mobileNumber ,\t firstName\t\n" + ae1 + ", Ann \n",
			want: []Row{{Line: 2, Number: number(ae1), FirstName: ptr("Ann")}}},
		{name: "quoted names", src: `"mobileNumber","first, name"` + "\n" + ae1 + ",x\n",
			want: []Row{{Line: 2, Number: number(ae1), Attributes: map[string]string{"first, name": "x"}}}},
		{name: "attribute columns keep their spelling", src: "Tier, Plan Name ,mobileNumber,empty\r\ngold, pro ," + gb1 + ",\r\n",
			want: []Row{{Line: 2, Number: number(gb1), Attributes: map[string]string{"Tier": "gold", "Plan Name": "pro"}}}},
		{name: "blank lines before the header", src: "\n\r\nmobileNumber\n" + ae1 + "\n", want: []Row{{Line: 4, Number: number(ae1)}}},
		{name: "no rows", src: "mobileNumber,email\n"},
		{name: "no final newline", src: "mobileNumber", want: nil},
		{name: "100 columns", src: "mobileNumber" + cols(99) + "\n" + ae1 + strings.Repeat(",", 99) + "\n",
			want: []Row{{Line: 2, Number: number(ae1)}}},
		{name: "header name of 100 characters", src: "mobileNumber," + strings.Repeat("é", 100) + "\n" + ae1 + ",v\n",
			want: []Row{{Line: 2, Number: number(ae1), Attributes: map[string]string{strings.Repeat("é", 100): "v"}}}},

		{name: "empty file", src: "", notOK: "the file is empty"},
		{name: "only blank lines", src: "\n\n\r\n", notOK: "no header line"},
		{name: "only a BOM", src: "\xEF\xBB\xBF", notOK: "no header line"},
		{name: "no mobileNumber", src: "phone,email\n+971501234567,a@example.com\n", notOK: "no mobileNumber column"},
		{name: "snake case is not the documented name", src: "mobile_number\n" + ae1 + "\n", notOK: "no mobileNumber column"},
		{name: "semicolons", src: "mobileNumber;email\n" + ae1 + ";a@example.com\n", notOK: "separated by commas"},
		{name: "duplicate", src: "mobileNumber,email,MobileNumber\n", notOK: "columns 1 and 3 of the header have the same name"},
		{name: "duplicate attribute ignoring case", src: "mobileNumber,tier,Tier \n", notOK: `the same name, "Tier"`},
		{name: "empty name", src: "mobileNumber,,email\n", notOK: "column 2 has no name"},
		{name: "trailing comma", src: "mobileNumber,email,\n", notOK: "column 3 has no name"},
		{name: "blank name", src: "mobileNumber,  \n", notOK: "column 2 has no name"},
		{name: "101 columns", src: "mobileNumber" + cols(100) + "\n", notOK: "more than 100 columns"},
		{name: "many columns", src: "mobileNumber" + cols(100000) + "\n", notOK: "more than 100 columns"},
		{name: "long name", src: "mobileNumber," + strings.Repeat("a", 101) + "\n", notOK: "longer than 100 characters"},
		{name: "huge name", src: "mobileNumber," + strings.Repeat("a", 200000) + "\n", notOK: "longer than 100 characters"},
		{name: "control character in a name", src: "mobileNumber,\"a\tb\"\n", notOK: "control character"},
		{name: "invalid UTF-8", src: "mobileNumber,na\xefme\n", notOK: "not valid UTF-8"},
		{name: "Latin-1", src: "mobileNumber,pr\xe9nom\n", notOK: "not valid UTF-8"},
		{name: "bare quote", src: "mobile\"Number\n", notOK: `line 1 has a quote (")`},
		{name: "unclosed quote", src: "\"mobileNumber\n" + ae1 + "\n", notOK: "not closed properly"},
		{name: "UTF-16", src: "\xFF\xFEm\x00o\x00", notOK: "UTF-16"},
		{name: "UTF-16 without BOM", src: "m\x00o\x00b\x00", notOK: "NUL bytes"},
		{name: "PNG", src: "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00", notOK: "binary file"},
		{name: "xlsx", src: "PK\x03\x04\x14\x00\x06\x00", notOK: "ZIP archive"},
		{name: "xls", src: "\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1\x00\x00", notOK: ".xls"},
		{name: "NUL after the first 512 bytes of the header", src: "mobileNumber," + strings.Repeat("a", 600) + "\x00\n", notOK: "line 1 contains a NUL byte"},
		{name: "PDF", src: "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", notOK: "no mobileNumber column"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := readAll(t, tt.src, defaultLimits)
			if tt.notOK != "" {
				if !errors.Is(err, ErrNotCSV) || !strings.Contains(err.Error(), tt.notOK) {
					t.Fatalf("NewReader: %v; want ErrNotCSV with %q", err, tt.notOK)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewReader: %v", err)
			}
			if res.err != nil || len(res.bad) != 0 || !reflect.DeepEqual(res.rows, tt.want) {
				t.Fatalf("got rows %+v, bad %v, err %v; want %+v", res.rows, res.bad, res.err, tt.want)
			}
		})
	}
}

// cols returns n attribute columns, each preceded by a comma.
func cols(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, ",c%d", i)
	}
	return b.String()
}

func TestCells(t *testing.T) {
	const header = "mobileNumber,externalId,firstName,lastName,email,tier\n"
	tests := []struct {
		name   string
		record string
		want   *Row     // a valid row (Line 2)
		column string   // else the bad column ("" for the whole row)
		msg    string   // and part of its message
		more   []string // other bad columns expected, in order after column
	}{
		{name: "all columns", record: ae1 + ",E1,Ann,Lee,ann@example.com,gold",
			want: &Row{Line: 2, Number: number(ae1), ExternalID: ptr("E1"), FirstName: ptr("Ann"), LastName: ptr("Lee"), Email: ptr("ann@example.com"), Attributes: map[string]string{"tier": "gold"}}},
		{name: "empty optional cells are nil", record: ae1 + ",,, ,,",
			want: &Row{Line: 2, Number: number(ae1)}},
		{name: "cells are trimmed", record: " " + ae1 + "\t, E1 ,\" Ann \",Lee\u00a0, ann@example.com , gold ",
			want: &Row{Line: 2, Number: number(ae1), ExternalID: ptr("E1"), FirstName: ptr("Ann"), LastName: ptr("Lee"), Email: ptr("ann@example.com"), Attributes: map[string]string{"tier": "gold"}}},
		{name: "number normalised", record: "+4407400123456,,,,,", want: &Row{Line: 2, Number: number(gb1)}},
		{name: "quoted cell with commas and quotes", record: ae1 + `,"a,b",Ann,"O""Brien",,"x, ""y"""`,
			want: &Row{Line: 2, Number: number(ae1), ExternalID: ptr("a,b"), FirstName: ptr("Ann"), LastName: ptr(`O"Brien`), Attributes: map[string]string{"tier": `x, "y"`}}},
		{name: "unicode names", record: ae1 + ",,عائشة,Müller-Łukasz,,", want: &Row{Line: 2, Number: number(ae1), FirstName: ptr("عائشة"), LastName: ptr("Müller-Łukasz")}},
		{name: "limits are inclusive", record: ae1 + "," + strings.Repeat("x", 128) + "," + strings.Repeat("é", 100) + "," + strings.Repeat("n", 100) + "," + strings.Repeat("a", 242) + "@example.com," + strings.Repeat("ü", 1000),
			want: &Row{Line: 2, Number: number(ae1), ExternalID: ptr(strings.Repeat("x", 128)), FirstName: ptr(strings.Repeat("é", 100)), LastName: ptr(strings.Repeat("n", 100)),
				Email: ptr(strings.Repeat("a", 242) + "@example.com"), Attributes: map[string]string{"tier": strings.Repeat("ü", 1000)}}},

		{name: "number missing", record: ",E1,,,,", column: "mobileNumber", msg: "required"},
		{name: "number blank", record: "  ,E1,,,,", column: "mobileNumber", msg: "required"},
		{name: "number without plus", record: "971501234567,,,,,", column: "mobileNumber", msg: "not a mobile number in E.164 form"},
		{name: "number with spaces", record: "+971 50 123 4567,,,,,", column: "mobileNumber", msg: "E.164 form"},
		{name: "number 00 prefix", record: "00971501234567,,,,,", column: "mobileNumber", msg: "E.164 form"},
		{name: "number national form", record: "0501234567,,,,,", column: "mobileNumber", msg: "E.164 form"},
		{name: "number as a spreadsheet float", record: "9.71501E+11,,,,,", column: "mobileNumber", msg: "E.164 form"},
		{name: "number invalid", record: "+9715012345,,,,,", column: "mobileNumber", msg: "not a valid mobile number"},
		{name: "number unknown country", record: "+999501234567,,,,,", column: "mobileNumber", msg: "not a valid mobile number"},
		{name: "email with a name", record: ae1 + ",,,,Ann <ann@example.com>,", column: "email", msg: "not a plain e-mail address"},
		{name: "email in angle brackets", record: ae1 + ",,,,<ann@example.com>,", column: "email", msg: "plain e-mail"},
		{name: "email without at", record: ae1 + ",,,,ann.example.com,", column: "email", msg: "plain e-mail"},
		{name: "two emails", record: ae1 + ",,,,\"a@example.com, b@example.com\",", column: "email", msg: "plain e-mail"},
		{name: "email with comment", record: ae1 + ",,,,a@example.com (Ann),", column: "email", msg: "plain e-mail"},
		{name: "email too long", record: ae1 + ",,,," + strings.Repeat("a", 243) + "@example.com,", column: "email", msg: "longer than 254 characters"},
		{name: "externalId too long", record: ae1 + "," + strings.Repeat("x", 129) + ",,,,", column: "externalId", msg: "longer than 128 characters"},
		{name: "firstName too long", record: ae1 + ",," + strings.Repeat("é", 101) + ",,,", column: "firstName", msg: "longer than 100 characters"},
		{name: "lastName too long", record: ae1 + ",,," + strings.Repeat("n", 101) + ",,", column: "lastName", msg: "longer than 100 characters"},
		{name: "attribute too long", record: ae1 + ",,,,," + strings.Repeat("ü", 1001), column: "tier", msg: "longer than 1000 characters"},
		{name: "tab inside a cell", record: ae1 + ",,\"A\tnn\",,,", column: "firstName", msg: "control character"},
		{name: "line break inside a cell", record: ae1 + ",,,\"Le\ne\",,", column: "lastName", msg: "control character"},
		{name: "escape character", record: ae1 + ",\x1b[31m,,,,", column: "externalId", msg: "control character"},
		{name: "DEL", record: ae1 + ",,,,,a\x7fb", column: "tier", msg: "control character"},
		{name: "C1 control", record: ae1 + ",,,,,a\u0085b", column: "tier", msg: "control character"},
		{name: "invalid UTF-8", record: ae1 + ",,Jos\xe9,,,", column: "firstName", msg: "not valid UTF-8"},
		{name: "control character in the number", record: "+97150\x01234567,,,,,", column: "mobileNumber", msg: "control character"},
		{name: "one error per bad cell", record: "123,,\"a\tb\",,nope,", column: "mobileNumber", msg: "E.164", more: []string{"firstName", "email"}},
		{name: "too few fields", record: ae1 + ",E1", column: "", msg: "the record has 2 fields, the header has 6"},
		{name: "too many fields", record: ae1 + ",E1,,,,,extra", column: "", msg: "more fields than the header's 6"},
		{name: "far too many fields", record: ae1 + strings.Repeat(",x", 100000), column: "", msg: "more fields than the header's 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustRead(t, header+tt.record+"\n"+ae2+",next,,,,\n")
			if res.err != nil {
				t.Fatalf("file error: %v", res.err)
			}
			next := Row{Line: 3 + strings.Count(tt.record, "\n"), Number: number(ae2), ExternalID: ptr("next")}
			if len(res.rows) == 0 || !reflect.DeepEqual(res.rows[len(res.rows)-1], next) {
				t.Fatalf("the next row was not read right: %+v", res.rows)
			}
			if tt.want != nil {
				if len(res.bad) != 0 || len(res.rows) != 2 || !reflect.DeepEqual(res.rows[0], *tt.want) {
					t.Fatalf("got %+v, bad %v; want %+v", res.rows[0], res.bad, *tt.want)
				}
				return
			}
			if len(res.rows) != 1 || len(res.bad) != 1 {
				t.Fatalf("got rows %+v, bad %v; want one bad record", res.rows, res.bad)
			}
			errs := res.bad[0]
			if len(errs) != 1+len(tt.more) {
				t.Fatalf("errors %v; want %d", errs, 1+len(tt.more))
			}
			if e := errs[0]; e.Row != 2 || e.Column != tt.column || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("error %+v; want row 2, column %q, message with %q", e, tt.column, tt.msg)
			}
			for i, c := range tt.more {
				if errs[i+1].Column != c || errs[i+1].Row != 2 {
					t.Errorf("error %d: %+v; want column %q", i+1, errs[i+1], c)
				}
			}
		})
	}
}

func TestLineNumbers(t *testing.T) {
	src := "mobileNumber,firstName,note\r\n" + // 1
		ae1 + ",Ann,plain\r\n" + // 2
		"\r\n" + // 3: blank
		"\n" + // 4: blank
		",,\n" + // 5: empty record, skipped
		"  , ,\t\n" + // 6: spaces only, skipped
		ae2 + ",\"Bo\nb\",x\n" + // 7-8: a line break inside a quoted cell
		gb1 + ",\"Carl\n\",\"a, b\nc\n\"\n" + // 9-12: trailing line break trimmed; line break inside the attribute
		"+971563456789,\"Di\r\n\",\"quoted,\"\"comma\"\"\"\r\n" + // 13-14
		"+971501234568,Ed\n" + // 15: too few fields
		",,,\n" + // 16: empty, but more fields than the header
		"+971501234569,Fay,\"\"" // 17: no final newline
	res := mustRead(t, src)
	if res.err != nil {
		t.Fatal(res.err)
	}
	var lines []int
	for _, r := range res.rows {
		lines = append(lines, r.Line)
	}
	if want := []int{2, 13, 17}; !reflect.DeepEqual(lines, want) {
		t.Errorf("valid rows on lines %v, want %v", lines, want)
	}
	if res.rows[1].FirstName == nil || *res.rows[1].FirstName != "Di" || res.rows[1].Attributes["note"] != `quoted,"comma"` {
		t.Errorf("row on line 13: %+v", res.rows[1])
	}
	type bad struct {
		row    int
		column string
	}
	var got []bad
	for _, errs := range res.bad {
		for _, e := range errs {
			got = append(got, bad{e.Row, e.Column})
		}
	}
	want := []bad{{7, "firstName"}, {9, "note"}, {15, ""}, {16, ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors %+v, want %+v", got, want)
	}
}

func TestFileErrorsAfterGoodRows(t *testing.T) {
	// More than the 512 bytes NewReader looks at before the problem.
	good := "mobileNumber,firstName,note\n" + ae1 + ",Ann," + strings.Repeat("n", 600) + "\n" + ae2 + ",Bob,\n"
	tests := []struct {
		name string
		rest string
		msg  string
	}{
		{"bare quote", "+447400123456,Ca\"rl\n+971563456789,Di\n", `line 4 has a quote (")`},
		{"text after a closing quote", "+447400123456,\"Carl\"x\n+971563456789,Di\n", "line 4 has a quoted field that is not closed properly"},
		{"quote never closed", "+447400123456,\"Carl\n+971563456789,Di\n", "record starting on line 4 is not closed properly"},
		{"NUL byte", "+447400123456,Ca\x00rl\n", "line 4 contains a NUL byte"},
		{"NUL byte far on", strings.Repeat(gb1+",Carl\n", 1000) + "+447400123456,\x00\n", "line 1004 contains a NUL byte"},
		{"binary tail", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "line 6 contains a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustRead(t, good+tt.rest)
			if !errors.Is(res.err, ErrNotCSV) || !strings.Contains(res.err.Error(), tt.msg) {
				t.Fatalf("err %v; want ErrNotCSV with %q", res.err, tt.msg)
			}
			if len(res.rows) < 2 || res.rows[0].Line != 2 || res.rows[1].Line != 3 {
				t.Errorf("rows before the error: %+v", res.rows)
			}
		})
	}
}

func TestSkip(t *testing.T) {
	var b strings.Builder
	b.WriteString("mobileNumber,externalId\n")
	for i := range 50 {
		switch i % 5 {
		case 1:
			fmt.Fprintf(&b, "bad,E%d\n", i) // a bad record still counts
		case 2:
			fmt.Fprintf(&b, "\n,\n+97150123%04d,\"E\n%d\"\n", i, i) // blank lines do not; Line jumps
		case 3:
			fmt.Fprintf(&b, "+97150123%04d,E%d,extra\n", i, i) // wrong field count counts
		default:
			fmt.Fprintf(&b, "+97150123%04d,E%d\n", i, i)
		}
	}
	src := b.String()

	// Every record with the line it starts on, read with Next.
	r, err := NewReader(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for {
		_, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, r.Line())
	}
	if len(lines) != 50 {
		t.Fatalf("%d records, want 50", len(lines))
	}
	for _, n := range []int{0, 1, 2, 3, 7, 25, 49} {
		r, err := NewReader(strings.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := Skip(r, n); err != nil {
			t.Fatalf("Skip(%d): %v", n, err)
		}
		if n > 0 && r.Line() != lines[n-1] {
			t.Errorf("Skip(%d): Line() = %d, want %d", n, r.Line(), lines[n-1])
		}
		row, errs, err := r.Next()
		if err != nil {
			t.Fatalf("Skip(%d), Next: %v", n, err)
		}
		if r.Line() != lines[n] {
			t.Errorf("Skip(%d), Next: line %d, want record %d on line %d", n, r.Line(), n+1, lines[n])
		}
		if errs == nil && (row.ExternalID == nil || strings.ReplaceAll(*row.ExternalID, "\n", "") != fmt.Sprintf("E%d", n)) {
			t.Errorf("Skip(%d), Next: %+v", n, row)
		}
	}
	r, _ = NewReader(strings.NewReader(src))
	if err := Skip(r, 50); err != nil {
		t.Fatalf("Skip(all): %v", err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next after Skip(all): %v", err)
	}
	r, _ = NewReader(strings.NewReader(src))
	if err := Skip(r, 51); err != io.EOF {
		t.Fatalf("Skip past the end: %v, want io.EOF", err)
	}
	r, _ = NewReader(strings.NewReader(src))
	if err := Skip(r, -1); err == nil {
		t.Fatal("Skip(-1) succeeded")
	}
	// Skip stops at a broken file.
	r, _ = NewReader(strings.NewReader("mobileNumber\n" + ae1 + "\n\"\n"))
	if err := Skip(r, 5); !errors.Is(err, ErrNotCSV) {
		t.Fatalf("Skip over a broken record: %v", err)
	}
}

// TestOverlongFields checks that fields and records past the memory limits are reported without
// being held, and that line numbers stay right.
func TestOverlongFields(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	bigLines := strings.Repeat("ab\ncd", 1000) // 1000 line breaks: fine within a 64 KiB field
	src := "mobileNumber,note,other\n" +       // 1
		ae1 + "," + big + ",ok\n" + // 2: unquoted, too long
		ae2 + ",\"" + big + "\"\"" + big + "\",ok\n" + // 3: quoted, too long
		gb1 + ",\"" + strings.Repeat("a\"\"", MaxFieldBytes) + "\n" + bigLines + "\",\"x\ny\"\n" + // 4-1006: too long, over lines
		"+971563456789,\"" + bigLines + "\",ok\n" + // 1007-2007: fine size, but has line breaks
		"+971563456780," + strings.Repeat("\"y\",", 500000) + "\n" + // 2008: too many fields
		"+971563456781,\"ok\",\"" + strings.Repeat("q", MaxFieldBytes) + "\"\n" + // 2009: exactly the limit, inside its quotes
		"+971563456782,fine,ok\n" // 2010
	res := mustRead(t, src)
	if res.err != nil {
		t.Fatal(res.err)
	}
	type bad struct {
		row    int
		column string
		msg    string
	}
	var got []bad
	for _, errs := range res.bad {
		for _, e := range errs {
			got = append(got, bad{e.Row, e.Column, e.Message})
		}
	}
	want := []bad{
		{2, "note", "longer than 64 KiB"},
		{3, "note", "longer than 64 KiB"},
		{4, "note", "longer than 64 KiB"},
		{4, "other", "control character"},
		{1007, "note", "control character"},
		{2008, "", "more fields than the header's 3"},
		{2009, "other", "longer than 1000 characters"},
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].row == want[i].row && got[i].column == want[i].column && strings.Contains(got[i].msg, want[i].msg)
	}
	if !ok {
		t.Errorf("errors\n%+v\nwant\n%+v", got, want)
	}
	if len(res.rows) != 1 || res.rows[0].Line != 2010 {
		t.Errorf("rows %+v", res.rows)
	}
}

func TestRecordTooLong(t *testing.T) {
	field := strings.Repeat("z", MaxFieldBytes-10)
	src := "mobileNumber" + cols(30) + "\n" + ae1 + strings.Repeat(",a", 30) + "\n" + ae2 + strings.Repeat(","+field, 30) + "\n"
	res := mustRead(t, src)
	if !errors.Is(res.err, ErrNotCSV) || !strings.Contains(res.err.Error(), "the record starting on line 3 is longer than 1 MiB") {
		t.Fatalf("err %v", res.err)
	}
	if len(res.rows) != 1 {
		t.Errorf("rows %+v", res.rows)
	}
}

func TestReadErrors(t *testing.T) {
	boom := errors.New("connection reset")
	src := "mobileNumber\n" + strings.Repeat(ae1+"\n", 2000)
	r, err := NewReader(io.MultiReader(strings.NewReader(src), iotest.ErrReader(boom)))
	if err != nil {
		t.Fatal(err)
	}
	res := drain(t, r)
	if !errors.Is(res.err, boom) || errors.Is(res.err, ErrNotCSV) {
		t.Fatalf("err %v; want the read error, not ErrNotCSV", res.err)
	}
	if len(res.rows) != 2000 {
		t.Errorf("%d rows before the read error, want 2000", len(res.rows))
	}
	if _, err := NewReader(iotest.ErrReader(boom)); !errors.Is(err, boom) || errors.Is(err, ErrNotCSV) {
		t.Fatalf("NewReader: %v", err)
	}
	// Readers that return data in small pieces, or with io.EOF, read the same.
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"one byte": iotest.OneByteReader,
		"data EOF": iotest.DataErrReader,
		"half":     iotest.HalfReader,
	} {
		r, err := NewReader(wrap(strings.NewReader(string(Sample()) + "+9715,x,,,\n")))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res := drain(t, r); res.err != nil || len(res.rows) != 5 || len(res.bad) != 1 {
			t.Errorf("%s: %d rows, bad %v, err %v", name, len(res.rows), res.bad, res.err)
		}
	}
}

// TestMessagesNeverQuoteCells checks that no message repeats what a cell holds.
func TestMessagesNeverQuoteCells(t *testing.T) {
	numbers := []string{"+971501234567", "971501234567", "+97150123456", "+971 50 123 4567", "00971501234567",
		"+9715012345678901", "+99950123456", "+971501234567x", "0501234567", "+447400123456 ext 12", "\"+971501234567\t\""}
	var b strings.Builder
	b.WriteString("mobileNumber,email,firstName,externalId\n")
	for _, n := range numbers {
		fmt.Fprintf(&b, "%s,+971501234567@,x\x01,%s\n", n, strings.Repeat("7", 200))
		fmt.Fprintf(&b, "%s,x\n", n)
	}
	res := mustRead(t, b.String())
	if len(res.bad) != 2*len(numbers) {
		t.Fatalf("%d bad records, want %d", len(res.bad), 2*len(numbers))
	}
	for _, errs := range res.bad {
		for _, e := range errs {
			for _, n := range numbers {
				digits := strings.Map(func(r rune) rune {
					if r >= '0' && r <= '9' {
						return r
					}
					return -1
				}, n)
				if strings.Contains(e.Message, digits[len(digits)-6:]) || strings.Contains(e.Message, "777") {
					t.Errorf("message %q quotes a cell", e.Message)
				}
			}
		}
	}
	// Nor do file errors.
	res = mustRead(t, "mobileNumber\n+971501234567\n+971501234567\"x\n")
	if res.err == nil || strings.Contains(res.err.Error(), "234567") {
		t.Errorf("file error %v", res.err)
	}
}

// rowSource generates a CSV file of n rows without holding it: every row valid, or, when
// everyNth > 1, one row in everyNth valid and the others with a badly written number (the
// race detector makes phonenumbers' validation slow).
type rowSource struct {
	n, i, everyNth int
	buf            []byte
}

func (s *rowSource) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.i > s.n {
			return 0, io.EOF
		}
		if s.i == 0 {
			s.buf = append(s.buf, "mobileNumber,externalId,firstName,lastName,email,tier,note\r\n"...)
		} else {
			num := fmt.Sprintf("+97150%07d", s.i)
			if s.everyNth > 1 && s.i%s.everyNth != 0 {
				num = fmt.Sprintf("97150%07d", s.i)
			}
			s.buf = fmt.Appendf(s.buf, "%s,EXT-%d,Person,\"Number %d\",user%d@example.com,gold,\"a, \"\"quoted\"\" note\"\r\n", num, s.i, s.i, s.i)
		}
		s.i++
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// TestReadCheckMatchesNext reads the same file with Next, and with Read while goroutines Check
// the records out of order: the results must be the same, record for record.
func TestReadCheckMatchesNext(t *testing.T) {
	const rows = 2_000
	src := func() *Reader {
		r, err := NewReader(&rowSource{n: rows, everyNth: 3})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	type result struct {
		row  Row
		errs []RowError
	}
	var want []result
	for r := src(); ; {
		row, errs, err := r.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		want = append(want, result{row, errs})
	}

	r := src()
	var recs []Record
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	got := make([]result, len(recs))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := len(recs) - 1 - w; i >= 0; i -= 4 {
				row, errs := r.Check(recs[i])
				got[i] = result{row, errs}
			}
		}()
	}
	wg.Wait()
	if len(got) != rows || !reflect.DeepEqual(got, want) {
		t.Fatalf("Read+Check gave %d records, Next %d, or they differ", len(got), len(want))
	}
}

func TestConstantMemory(t *testing.T) {
	const rows = 200_000
	every := 1
	if raceEnabled {
		every = 20
	}
	r, err := NewReader(&rowSource{n: rows, everyNth: every})
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	var base, peak uint64
	valid, bad := 0, 0
	for i := 1; ; i++ {
		row, errs, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if errs != nil {
			bad++
		} else {
			valid++
			if row.Line != i+1 || row.Attributes["note"] != `a, "quoted" note` {
				t.Fatalf("row %d: %+v", i, row)
			}
		}
		switch {
		case i == 5_000: // phonenumbers' metadata is loaded by now
			base = heap()
		case i%25_000 == 0:
			peak = max(peak, heap())
		}
	}
	if valid+bad != rows || (every == 1 && bad != 0) {
		t.Fatalf("%d valid, %d bad rows; want %d rows", valid, bad, rows)
	}
	t.Logf("heap in use: %d KiB after 5000 rows, at most %d KiB later (input: 200k rows, ~%d MiB)", base>>10, peak>>10, rows*110>>20)
	if peak > base+2<<20 || peak > 8<<20 {
		t.Errorf("heap in use grew from %d KiB to %d KiB", base>>10, peak>>10)
	}
}

// TestAdversarialMemory reads files built to make a CSV reader hold them whole: one huge field,
// and a line of commas. The reader must report them, allocating far less than the file.
func TestAdversarialMemory(t *testing.T) {
	// 8 MiB for the files read to their end; 64 MiB for those that fail at 1 MiB.
	file := func(head string, pattern string, tail string) func() io.Reader {
		return func() io.Reader {
			return io.MultiReader(strings.NewReader(head), &repeatReader{b: []byte(pattern), n: 8 << 20}, strings.NewReader(tail))
		}
	}
	failing := func(head string, pattern string) func() io.Reader {
		return func() io.Reader {
			return io.MultiReader(strings.NewReader(head), &repeatReader{b: []byte(pattern), n: 64 << 20})
		}
	}
	tests := []struct {
		name string
		src  func() io.Reader
		bad  string // the one row error expected
		err  string // or the file error
	}{
		{"huge quoted field", file("mobileNumber,note\n"+ae1+",\"", "ab,\"\"", "\"\n"+ae2+",x\n"), "longer than 64 KiB", ""},
		{"huge unquoted field", file("mobileNumber,note\n"+ae1+",", "abcd", "\n"+ae2+",x\n"), "longer than 64 KiB", ""},
		{"a line of commas", file("mobileNumber,note\n"+ae1, ",", "\n"+ae2+",x\n"), "more fields than the header's 2", ""},
		{"a line of quoted fields", file("mobileNumber,note\n"+ae1, `,"a""b"`, "\n"+ae2+",x\n"), "more fields than the header's 2", ""},
		{"a field of line breaks", failing("mobileNumber,note\n"+ae1+",\"", "\n"), "", "the record starting on line 2 is longer than 1 MiB"},
		{"a record of fields of line breaks", failing("mobileNumber,note\n"+ae1+",", "\"\n\n\n\","), "", "the record starting on line 2 is longer than 1 MiB"},
	}
	_, _ = phone.Parse(ae1) // phonenumbers loads its metadata on first use
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			r, err := NewReader(tt.src())
			if err != nil {
				t.Fatal(err)
			}
			res := drain(t, r)
			runtime.ReadMemStats(&after)
			if tt.err != "" {
				if !errors.Is(res.err, ErrNotCSV) || !strings.Contains(res.err.Error(), tt.err) {
					t.Fatalf("err %v; want ErrNotCSV with %q", res.err, tt.err)
				}
			} else if res.err != nil || len(res.bad) != 1 || len(res.bad[0]) != 1 || !strings.Contains(res.bad[0][0].Message, tt.bad) || len(res.rows) != 1 {
				t.Fatalf("rows %+v, bad %v, err %v", res.rows, res.bad, res.err)
			}
			// TotalAlloc counts every allocation, freed or not: far below the size of the file.
			// A record failing at 1 MiB has been copied a few times by then.
			limit := uint64(3 << 20)
			if tt.err != "" {
				limit = 8 * MaxRecordBytes
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > limit {
				t.Errorf("allocated %d KiB reading it", alloc>>10)
			}
		})
	}
}

// repeatReader returns b repeated to n bytes.
type repeatReader struct {
	b   []byte
	n   int
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	for i := range p {
		p[i] = r.b[r.off]
		r.off = (r.off + 1) % len(r.b)
	}
	r.n -= len(p)
	return len(p), nil
}

func TestSmallLimits(t *testing.T) {
	lim := limits{field: 16, record: 64, columns: 4}
	const d17 = "12345678901234567"
	tests := []struct {
		name string
		src  string
		want string // one line per record: its line number, then "ok" or the bad columns ("*": the whole row)
		err  string // or a part of the ErrNotCSV message
	}{
		{"field at the limit", "mobileNumber,a\n" + ae1 + ",1234567890123456\n", "2 ok", ""},
		{"field over the limit", "mobileNumber,a\n" + ae1 + "," + d17 + "\n" + ae2 + ",x\n", "2 a\n3 ok", ""},
		{"quoted field at the limit", "mobileNumber,a\n" + ae1 + ",\"1234567890123456\"\n", "2 ok", ""},
		{"quoted field over the limit", "mobileNumber,a\n" + ae1 + ",\"" + d17 + "\"\n" + ae2 + ",x\n", "2 a\n3 ok", ""},
		{"doubled quotes at the limit", "mobileNumber,a\n" + ae1 + ",\"" + strings.Repeat(`""`, 8) + "\"\n" + ae2 + ",x\n", "2 ok\n3 ok", ""},
		{"doubled quote crossing the limit", "mobileNumber,a\n" + ae1 + ",\"123456789012345\"\"\"\n" + ae2 + ",x\n", "2 a\n3 ok", ""},
		{"overflow then doubled quotes", "mobileNumber,a\n" + ae1 + ",\"" + d17 + `"""",""` + "\"\n" + ae2 + ",x\n", "2 a\n3 ok", ""},
		{"overflow with line breaks", "mobileNumber,a\n" + ae1 + ",\"123456789012345\n\n\n9\"\n" + ae2 + ",x\n", "2 a\n6 ok", ""},
		{"overflow, quote closes at EOF", "mobileNumber,a\n" + ae1 + ",\"" + d17 + "\"", "2 a", ""},
		{"overflow, CRLF after the quote", "mobileNumber,a\r\n" + ae1 + ",\"" + d17 + "\"\r\n" + ae2 + ",x\r\n", "2 a\n3 ok", ""},
		{"overflow, then a field", "mobileNumber,a,b\n" + ae1 + ",\"" + d17 + "\",b\n" + ae2 + ",x,\n", "2 a\n3 ok", ""},
		{"overflow hides a stray quote", "mobileNumber,a\n" + ae1 + "," + d17 + "\"\n" + ae2 + ",x\n", "2 a\n3 ok", ""},
		{"overflow hides garbage after the quote", "mobileNumber,a\n" + ae1 + ",\"" + d17 + "\"zz\n" + ae2 + ",x\n", "2 a\n3 ok", ""},
		{"overflow, quote never closed", "mobileNumber,a\n" + ae1 + ",\"" + d17 + "\n" + ae2 + ",x\n", "", "record starting on line 2 is not closed"},
		{"fields at the count", "mobileNumber,a\n" + ae1 + ",1\n", "2 ok", ""},
		// The guard reads ahead of the header's end: these records are cut at 4 fields.
		{"one field too many", "mobileNumber,a\n" + ae1 + ",1,2\n" + ae2 + ",x\n", "2 *\n3 ok", ""},
		{"collapsed fields with quotes and line breaks", "mobileNumber,a\n" + ae1 + ",1,2,3,\"4\n,\"\"\n\",5,\"\n\"\n" + ae2 + ",x\n", "2 *\n6 ok", ""},
		{"collapsed at EOF", "mobileNumber,a\n" + ae1 + ",1,2,3,4,5", "2 *", ""},
		{"collapsed, quote closed at EOF", "mobileNumber,a\n" + ae1 + ",1,2,3,\"4\"", "2 *", ""},
		{"collapsed, CRLF", "mobileNumber,a\r\n" + ae1 + ",1,2,3,\"4\"\r\n" + ae2 + ",x\r\n", "2 *\n3 ok", ""},
		{"collapsed, quote never closed", "mobileNumber,a\n" + ae1 + ",1,2,3,\"4\n" + ae2 + ",x\n", "", "not closed properly"},
		// Far enough from the header, records are cut at the header's count.
		{"collapsed at the header's count", "mobileNumber,a\n" + strings.Repeat("\n", 9000) + ae1 + ",1,\"2\n\",3\n" + ae2 + ",x\n", "9002 *\n9004 ok", ""},
		{"header at the column limit", "mobileNumber,a,b,c\n" + ae1 + ",1,2,3\n", "2 ok", ""},
		{"header over the column limit", "mobileNumber,a,b,c,d\n", "", "more than 4 columns"},
		{"header name over the field limit", "mobileNumber," + d17 + "\n", "", "column 2 in the header is longer"},
		{"record at the limit", "mobileNumber,a\n" + ae1 + ",1234567890123456,1234567890123456,123456789012345\n", "2 *", ""},
		{"record over the limit", "mobileNumber,a\n" + ae1 + ",1234567890123456,1234567890123456,1234567890123456\n", "", "the record starting on line 2 is longer than 64 bytes"},
		{"record over the limit with line breaks", "mobileNumber,a\n" + ae1 + ",\"" + d17 + strings.Repeat("\n", 60) + "\"\n", "", "the record starting on line 2 is longer than 64 bytes"},
		{"NUL", "mobileNumber,a\n" + ae1 + ",\"1\n\x00\"\n", "", "binary file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := newReader(strings.NewReader(tt.src), lim)
			var res result
			if err == nil {
				res = drain(t, r)
				err = res.err
			}
			if tt.err != "" {
				if !errors.Is(err, ErrNotCSV) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v; want ErrNotCSV with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, row := range res.rows {
				got = append(got, fmt.Sprintf("%d ok", row.Line))
			}
			for _, errs := range res.bad {
				s := fmt.Sprint(errs[0].Row)
				for _, e := range errs {
					c := e.Column
					if c == "" {
						c = "*"
					}
					s += " " + c
				}
				got = append(got, s)
			}
			slicesSortByLine(got)
			if g := strings.Join(got, "\n"); g != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", g, tt.want)
			}
		})
	}
}

// slicesSortByLine sorts "line ..." strings by their line number.
func slicesSortByLine(s []string) {
	num := func(x string) (n int) { fmt.Sscan(x, &n); return n }
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && num(s[j]) < num(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestGuardIsTransparent checks that, below its limits, the guard passes the file on unchanged.
func TestGuardIsTransparent(t *testing.T) {
	inputs := []string{
		string(Sample()),
		"a,\"b\nc\",\"\"\"\"\r\n\r\n,,\n\"x\"y\n\"unclosed",
		"\"\"\",\n\"\"\r\r\n\"a\"\"\"\",\"\"\"\r",
		"\xff\xfe\xfd,\"\xc3\x28\"\n",
	}
	for _, in := range inputs {
		if got := guardOutput(t, in, defaultLimits); got != in {
			t.Errorf("guard(%q) = %q", in, got)
		}
	}
}

func guardOutput(t testing.TB, in string, lim limits) string {
	t.Helper()
	out, err := io.ReadAll(newGuard(iotest.OneByteReader(strings.NewReader(in)), lim))
	if err != nil && !errors.Is(err, ErrNotCSV) {
		t.Fatal(err)
	}
	return string(out)
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int]string{MaxFieldBytes: "64 KiB", MaxRecordBytes: "1 MiB", 64: "64 bytes", 1536: "1536 bytes", 3 << 20: "3 MiB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// checkResult checks what every read must satisfy.
func checkResult(t *testing.T, res result) {
	t.Helper()
	for _, row := range res.rows {
		n, err := phone.Parse(row.Number.E164)
		if err != nil || n != row.Number {
			t.Fatalf("row with number %q: %v", phone.Mask(row.Number.E164), err)
		}
		if row.Line < 2 {
			t.Fatalf("row on line %d", row.Line)
		}
		for _, p := range []*string{row.ExternalID, row.FirstName, row.LastName, row.Email} {
			if p != nil && (*p == "" || strings.TrimSpace(*p) != *p) {
				t.Fatalf("cell %q not trimmed or empty", *p)
			}
		}
		if row.Attributes != nil && len(row.Attributes) == 0 {
			t.Fatal("empty attribute map")
		}
		for k, v := range maps.All(row.Attributes) {
			if k == "" || v == "" || strings.ContainsRune(v, 0) {
				t.Fatalf("attribute %q=%q", k, v)
			}
		}
	}
	for _, errs := range res.bad {
		if len(errs) == 0 {
			t.Fatal("empty error list")
		}
		for _, e := range errs {
			if e.Row < 2 || e.Message == "" {
				t.Fatalf("row error %+v", e)
			}
		}
	}
	if res.err != nil && !errors.Is(res.err, ErrNotCSV) {
		t.Fatalf("error %v is not ErrNotCSV", res.err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(Sample())
	f.Add([]byte("mobileNumber,email,tier\n+971501234567,a@example.com,\"x\ny\"\n,,\n\"+447400123456\",,\"\"\"\"\n"))
	f.Add([]byte("\xEF\xBB\xBFMobileNumber , note\r\n+971501234567,\"a,b\"\r\n+9715,\r\n+971552345678,\"unclosed\n"))
	f.Add([]byte("mobileNumber,a\n+971501234567,1,2,3\n+971501234567\n\n \n+4407400123456,\xff\n"))
	f.Add([]byte("mobileNumber,a\n+971501234567,\"12345678901234567\n\"\"x\"\n+447400123456,123456789012345678\n"))
	f.Add([]byte("mobileNumber\n+971501234567\"\n"))
	f.Add([]byte("a,mobileNumber,A\n"))
	small := limits{field: 16, record: 200, columns: 3}
	f.Fuzz(func(t *testing.T, data []byte) {
		// With the default limits, and with small ones that make every path of the guard
		// reachable.
		big, errBig := readAll(t, string(data), defaultLimits)
		if errBig != nil && !errors.Is(errBig, ErrNotCSV) {
			t.Fatalf("NewReader: %v is not ErrNotCSV", errBig)
		}
		checkResult(t, big)
		cut, errCut := readAll(t, string(data), small)
		if errCut != nil && !errors.Is(errCut, ErrNotCSV) {
			t.Fatalf("NewReader with small limits: %v is not ErrNotCSV", errCut)
		}
		checkResult(t, cut)
		if errBig != nil || errCut != nil || big.err != nil || cut.err != nil {
			return
		}
		// Both read the whole file. The limits only add errors: every record read with the
		// default limits is read, on the same line, with the small ones, and every row valid
		// with the small limits is the same row with the default ones.
		bigRows := map[int]Row{}
		lines := map[int]bool{}
		for _, r := range big.rows {
			bigRows[r.Line] = r
			lines[r.Line] = true
		}
		for _, e := range big.bad {
			lines[e[0].Row] = true
		}
		for _, r := range cut.rows {
			if b, ok := bigRows[r.Line]; !ok || !reflect.DeepEqual(b, r) {
				t.Fatalf("line %d: %+v with small limits, %+v (%v) with the default ones", r.Line, r, b, ok)
			}
			delete(lines, r.Line)
		}
		for _, e := range cut.bad {
			delete(lines, e[0].Row)
		}
		if len(lines) != 0 {
			t.Fatalf("records on lines %v lost with small limits", lines)
		}
	})
}

// FuzzGuard checks that the guard passes every file within its limits on unchanged, up to the
// first NUL byte.
func FuzzGuard(f *testing.F) {
	f.Add(Sample())
	f.Add([]byte("a,\"b\nc\",\"\"\"\"\r\n\r\n,,\n\"x\"y\n\"unclosed"))
	f.Add([]byte("a,b\n\x00c"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := string(data)
		if i := bytes.IndexByte(data, 0); i >= 0 {
			want = want[:i]
		}
		if got := guardOutput(t, string(data), defaultLimits); got != want {
			t.Fatalf("guard(%q) = %q", data, got)
		}
	})
}
