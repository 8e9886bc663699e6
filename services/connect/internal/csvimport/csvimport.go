// Package csvimport turns an uploaded CSV file into validated profile rows, one record at a time
// and in constant memory (docs/api-decisions.md#imports).
//
// # The file
//
// The first line that is not blank is the header. Its names are trimmed and matched against the
// documented columns ignoring case: mobileNumber (required), externalId, firstName, lastName and
// email. Any other column is an attribute, keyed by its name as written (trimmed). A UTF-8 byte
// order mark at the start of the file is skipped. Fields are separated by commas and quoted with
// '"' (RFC 4180; a quote inside a quoted field is doubled); lines end with \n or \r\n.
//
// A file the Reader cannot read as CSV fails as a whole with an error wrapping [ErrNotCSV], whose
// message says why in words a person can act on: a binary, ZIP (xlsx) or UTF-16 file, NUL bytes
// anywhere, an empty file or no header line, a header that is not UTF-8, a column with no name or
// with a name longer than 100 characters or containing control characters, two columns with the
// same name (ignoring case), no mobileNumber column, more than [MaxColumns] columns, a quote that
// breaks the CSV structure (a '"' inside an unquoted field, a quoted field never closed or
// followed by other characters), or a record longer than [MaxRecordBytes]. Rows read before the
// problem have been returned by then; the caller decides what to keep.
//
// # Rows
//
// Every other record is a row, reported by its line number in the file (a quoted field may span
// lines, so line numbers can jump). Blank lines, and records whose cells are all empty or spaces
// (what spreadsheets export for an empty row) and that have no more fields than the header, are
// skipped and not counted. A row is either valid or reported with one [RowError] per bad cell; a
// bad row never stops the file. Cells are trimmed of surrounding white space, then:
//   - a cell must be valid UTF-8 and contain no control characters (tabs and line breaks
//     included), and must not be longer than [MaxFieldBytes] as written in the file (such a
//     cell is never held in memory: its content past the limit is read and dropped);
//   - mobileNumber is required and must be a valid number in strict E.164 form
//     ([phone.Parse]); the row carries its normalised form;
//   - email, when present, is a plain address (name@example.com: no display name, no angle
//     brackets) of at most 254 characters;
//   - externalId is at most 128 characters, firstName and lastName at most 100, an attribute
//     value at most 1000. A cell over its limit is an error, never truncated;
//   - a record with more or fewer fields than the header is one error for the whole row.
//
// Error messages never quote a cell: they name the line and the column, and say what is wrong.
//
// # Memory
//
// At most one record is held. encoding/csv reads whole records, so the Reader puts a guard in
// front of it that follows the quoting byte by byte and stops passing on a field's content past
// [MaxFieldBytes] (the cell is then reported too long) and a record's fields past the header's
// count (the row is then reported as having the wrong number of fields). What is left of one
// record is limited to [MaxRecordBytes]; a longer record fails the file.
package csvimport

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/phone"
)

const (
	// MaxErrors is how many row errors an import job keeps (the first 100,
	// docs/api-decisions.md#imports). The Reader reports every error; the caller stops keeping them.
	MaxErrors = 100
	// MaxColumns is the most columns a header may have.
	MaxColumns = 100
	// MaxFieldBytes is the longest field the Reader reads, in bytes as written in the file
	// between its enclosing quotes if it has them (a doubled quote counts two, a \r\n two). A
	// longer field is a cell error; its content past the limit is skipped without being held in
	// memory.
	MaxFieldBytes = 64 << 10
	// MaxRecordBytes is the most one record may take once its over-long fields are cut at
	// MaxFieldBytes and its fields past the header's count dropped. A longer record fails the
	// file with ErrNotCSV.
	MaxRecordBytes = 1 << 20
)

// Limits of one cell, in characters (Unicode code points), after trimming: a profile's (an
// attribute's key is its column's name).
const (
	maxHeaderName = domain.MaxAttrKey
	maxExternalID = domain.MaxExternalID
	maxName       = domain.MaxName
	maxAttribute  = domain.MaxAttrValue
)

// ErrNotCSV is wrapped by every error that fails a file as a whole: the file is not a CSV file
// the Reader can read. The wrapping error's message says why (and on which line, when it is a
// line); it is meant to be shown to the person who uploaded the file.
var ErrNotCSV = errors.New("not a CSV file we can read")

// notCSV returns an error wrapping ErrNotCSV with a reason.
func notCSV(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotCSV, fmt.Sprintf(format, args...))
}

// Row is one valid record of the file.
type Row struct {
	// Line is the 1-based line number in the file on which the record starts (the header is
	// line 1, unless blank lines precede it), for error reports and resume bookkeeping.
	Line int
	// Number is the mobileNumber cell as [phone.Parse] read it: normalised E.164, country
	// code, national number and region, so nothing downstream parses it again.
	Number phone.Number
	// ExternalID is the externalId cell, trimmed; nil when the column is absent or the cell
	// is empty.
	ExternalID *string
	// FirstName is the firstName cell, trimmed; nil when the column is absent or the cell is
	// empty.
	FirstName *string
	// LastName is the lastName cell, trimmed; nil when the column is absent or the cell is
	// empty.
	LastName *string
	// Email is the email cell, trimmed; nil when the column is absent or the cell is empty.
	Email *string
	// Attributes holds the other columns' non-empty cells, trimmed, keyed by the column's name
	// as written in the header (trimmed); nil when there are none.
	Attributes map[string]string
}

// RowError is one problem of a record that is not imported.
type RowError struct {
	// Row is the line number on which the record starts (2 or more).
	Row int
	// Column is the column's name as written in the header (trimmed), or "" for a problem of
	// the whole record (a wrong number of fields).
	Column string
	// Message says what is wrong, without quoting the cell.
	Message string
}

// limits are the Reader's memory limits; tests shrink them.
type limits struct {
	field   int // MaxFieldBytes
	record  int // MaxRecordBytes
	columns int // MaxColumns
}

var defaultLimits = limits{field: MaxFieldBytes, record: MaxRecordBytes, columns: MaxColumns}

// colKind is what a column holds.
type colKind uint8

const (
	colAttribute colKind = iota
	colMobile
	colExternalID
	colFirstName
	colLastName
	colEmail
)

// knownColumns maps the lower-cased documented names to their kind.
var knownColumns = map[string]colKind{
	"mobilenumber": colMobile,
	"externalid":   colExternalID,
	"firstname":    colFirstName,
	"lastname":     colLastName,
	"email":        colEmail,
}

type column struct {
	kind colKind
	name string // as written in the header, trimmed
}

// Reader reads profile rows from a CSV file, one record at a time. It is not safe for
// concurrent use.
type Reader struct {
	g     *guard
	cr    *csv.Reader
	lim   limits
	cols  []column
	attrs int   // number of attribute columns
	line  int   // line of the last record returned
	err   error // sticky error that ends the file
}

// NewReader reads and checks the header of the CSV file src. Every problem of the file itself
// (see the package documentation) is an error wrapping [ErrNotCSV]; a read error of src is
// returned as it is, wrapped with context but not as ErrNotCSV, since the file may be fine.
func NewReader(src io.Reader) (*Reader, error) {
	return newReader(src, defaultLimits)
}

func newReader(src io.Reader, lim limits) (*Reader, error) {
	br := bufio.NewReaderSize(src, guardChunk)
	head, err := br.Peek(512)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("csvimport: reading the file: %w", err)
	}
	if err := sniff(head); err != nil {
		return nil, err
	}
	if bytes.HasPrefix(head, utf8BOM) {
		_, _ = br.Discard(len(utf8BOM))
	}
	r := &Reader{g: newGuard(br, lim), lim: lim}
	r.cr = csv.NewReader(r.g)
	r.cr.FieldsPerRecord = -1 // the Reader checks the count, so that one bad row is one row error
	r.cr.ReuseRecord = true
	if err := r.readHeader(); err != nil {
		return nil, err
	}
	r.g.maxFields = len(r.cols)
	return r, nil
}

var (
	utf8BOM    = []byte{0xEF, 0xBB, 0xBF}
	utf16LEBOM = []byte{0xFF, 0xFE}
	utf16BEBOM = []byte{0xFE, 0xFF}
	zipMagic   = []byte("PK\x03\x04")
	oleMagic   = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
)

// sniff recognises, from the start of the file, files that are not CSV text, to say what they
// are. The guard catches any NUL byte further on.
func sniff(head []byte) error {
	switch {
	case len(head) == 0:
		return notCSV("the file is empty")
	case bytes.HasPrefix(head, utf16LEBOM), bytes.HasPrefix(head, utf16BEBOM):
		return notCSV("the file is UTF-16 text; save it as CSV in UTF-8")
	case bytes.HasPrefix(head, zipMagic):
		return notCSV("the file is a ZIP archive (an Excel .xlsx workbook?); save it as CSV")
	case bytes.HasPrefix(head, oleMagic):
		return notCSV("the file is an Excel .xls workbook or another Office document; save it as CSV")
	case bytes.IndexByte(head, 0) >= 0:
		return notCSV("the file contains NUL bytes: it is a binary file, not CSV text")
	}
	return nil
}

func (r *Reader) readHeader() error {
	rec, err := r.cr.Read()
	if err == io.EOF {
		return notCSV("the file has no header line")
	}
	if err != nil {
		return r.readError(err)
	}
	r.line, _ = r.cr.FieldPos(0)
	if len(rec) > r.lim.columns {
		return notCSV("the header has more than %d columns", r.lim.columns)
	}
	cols := make([]column, len(rec))
	seen := make(map[string]int, len(rec))
	mobile := false
	for i, f := range rec {
		pos := i + 1
		name := strings.TrimSpace(f)
		switch {
		case strings.IndexByte(f, 0) >= 0 || len(name) > 4*maxHeaderName:
			return notCSV("the name of column %d in the header is longer than %d characters", pos, maxHeaderName)
		case !utf8.ValidString(name):
			return notCSV("the header line is not valid UTF-8 text; save the file as CSV in UTF-8")
		case name == "":
			return notCSV("column %d has no name in the header line", pos)
		case strings.IndexFunc(name, unicode.IsControl) >= 0:
			return notCSV("the name of column %d in the header contains a control character", pos)
		case utf8.RuneCountInString(name) > maxHeaderName:
			return notCSV("the name of column %d in the header is longer than %d characters", pos, maxHeaderName)
		}
		key := strings.ToLower(name)
		if prev, ok := seen[key]; ok {
			return notCSV("columns %d and %d of the header have the same name, %q (names are compared ignoring case)", prev, pos, name)
		}
		seen[key] = pos
		kind := knownColumns[key]
		switch kind {
		case colMobile:
			mobile = true
		case colAttribute:
			r.attrs++
		}
		cols[i] = column{kind: kind, name: name}
	}
	if !mobile {
		if len(rec) == 1 && strings.ContainsAny(rec[0], ";\t|") {
			return notCSV("the header has no mobileNumber column (columns must be separated by commas)")
		}
		return notCSV("the header has no mobileNumber column")
	}
	r.cols = cols
	return nil
}

// Next returns the next record of the file: a valid Row and nil, or a zero Row and the record's
// problems (at least one, one per bad cell, each with the record's line number). It skips blank
// lines and empty records (see the package documentation). At the end of the file it returns
// io.EOF. Any other error ends the file: an error wrapping ErrNotCSV when the rest of the file
// cannot be read as CSV (a quote breaking the structure, a NUL byte, an over-long record), or
// a read error of the underlying reader (not ErrNotCSV: the file may be fine, and reading it
// again may work). The error is returned again by every later call.
func (r *Reader) Next() (Row, []RowError, error) {
	rec, err := r.read()
	if err != nil {
		return Row{}, nil, err
	}
	row, errs := r.parse(r.line, rec)
	return row, errs, nil
}

// Record is a record of the file, read but not yet checked. Read and Check split Next, so that
// the reading, which must be in order, and the checking, which costs most, can run apart.
type Record struct {
	line   int
	fields []string
}

// Read returns the next record of the file, unchecked, with Next's errors.
func (r *Reader) Read() (Record, error) {
	rec, err := r.read()
	if err != nil {
		return Record{}, err
	}
	// The csv.Reader reuses its slice; the strings in it are its own.
	return Record{line: r.line, fields: slices.Clone(rec)}, nil
}

// Check checks a record from Read, as Next does. Unlike the rest of the Reader, it is safe to
// call from several goroutines at once, and while Read runs.
func (r *Reader) Check(rec Record) (Row, []RowError) {
	return r.parse(rec.line, rec.fields)
}

// Line returns the line number on which the last record returned by Next (or skipped by Skip)
// starts; before any, the header's line.
func (r *Reader) Line() int { return r.line }

// Skip skips the next records records without checking them, counting them as Next does (blank
// lines and empty records are not records): after Skip(r, n) on a new Reader, Next returns the
// file's record n+1. It is meant for resuming a job after a restart. It returns io.EOF if the
// file ends first, and Next's errors.
func Skip(r *Reader, records int) error {
	if records < 0 {
		return errors.New("csvimport: Skip: negative record count")
	}
	for range records {
		if _, err := r.read(); err != nil {
			return err
		}
	}
	return nil
}

// read returns the next record that is not empty.
func (r *Reader) read() ([]string, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		rec, err := r.cr.Read()
		if err != nil {
			r.err = r.readError(err)
			return nil, r.err
		}
		if len(rec) > len(r.cols) || !blank(rec) {
			r.line, _ = r.cr.FieldPos(0)
			return rec, nil
		}
	}
}

// blank reports whether every field of rec is empty or white space.
func blank(rec []string) bool {
	for _, f := range rec {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

// readError turns an error of encoding/csv into the error the Reader returns.
func (r *Reader) readError(err error) error {
	var (
		pe *csv.ParseError
		se *sourceError
	)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, ErrNotCSV):
		return err
	case errors.As(err, &se):
		return fmt.Errorf("csvimport: reading the file: %w", se.err)
	case errors.As(err, &pe):
		switch {
		case errors.Is(pe.Err, csv.ErrBareQuote):
			return notCSV(`line %d has a quote (") inside a field that does not start with one; quote the whole field and double the quotes inside it`, pe.Line)
		case errors.Is(pe.Err, csv.ErrQuote) && pe.StartLine != pe.Line:
			return notCSV(`a quoted field in the record starting on line %d is not closed properly (a quote is missing, or other characters follow the closing quote; read up to line %d)`, pe.StartLine, pe.Line)
		case errors.Is(pe.Err, csv.ErrQuote):
			return notCSV(`line %d has a quoted field that is not closed properly (a quote is missing, or other characters follow the closing quote)`, pe.Line)
		}
		return notCSV("line %d: %v", pe.Line, pe.Err)
	}
	return notCSV("%v", err)
}

// parse checks the record that starts on line; it only reads the Reader's header and limits.
func (r *Reader) parse(line int, rec []string) (Row, []RowError) {
	if len(rec) != len(r.cols) {
		msg := fmt.Sprintf("the record has %d fields, the header has %d", len(rec), len(r.cols))
		if len(rec) > len(r.cols) {
			msg = fmt.Sprintf("the record has more fields than the header's %d", len(r.cols))
		}
		return Row{}, []RowError{{Row: line, Message: msg}}
	}
	row := Row{Line: line}
	var errs []RowError
	for i, cell := range rec {
		col := &r.cols[i]
		v, msg := r.clean(cell)
		if msg == "" {
			msg = r.set(&row, col, v)
		}
		if msg != "" {
			errs = append(errs, RowError{Row: line, Column: col.name, Message: msg})
		}
	}
	if errs != nil {
		return Row{}, errs
	}
	return row, nil
}

// clean trims a cell and checks what every cell must be; it returns the trimmed cell, or a
// message.
func (r *Reader) clean(cell string) (string, string) {
	if strings.IndexByte(cell, 0) >= 0 { // the guard's overflow marker
		return "", fmt.Sprintf("longer than %s", byteSize(r.lim.field))
	}
	v := strings.TrimSpace(cell)
	switch {
	case !utf8.ValidString(v):
		return "", "not valid UTF-8 text"
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "", "contains a control character (such as a tab or a line break)"
	}
	return v, ""
}

// set checks the trimmed cell v of column col and stores it in row; it returns a message when
// the cell is not valid.
func (r *Reader) set(row *Row, col *column, v string) string {
	switch col.kind {
	case colMobile:
		if v == "" {
			return "a mobile number is required"
		}
		n, err := phone.Parse(v)
		switch {
		case errors.Is(err, phone.ErrNotE164):
			return "not a mobile number in E.164 form (a + then the country code and the number, digits only)"
		case err != nil:
			return "not a valid mobile number (unknown country code, or a length or prefix its numbering plan does not allow)"
		}
		row.Number = n
	case colExternalID:
		return setText(&row.ExternalID, v, maxExternalID)
	case colFirstName:
		return setText(&row.FirstName, v, maxName)
	case colLastName:
		return setText(&row.LastName, v, maxName)
	case colEmail:
		if v == "" {
			return ""
		}
		if msg := domain.EmailProblem(v); msg != "" {
			return msg
		}
		row.Email = &v
	case colAttribute:
		if v == "" {
			return ""
		}
		if tooLong(v, maxAttribute) {
			return fmt.Sprintf("longer than %d characters", maxAttribute)
		}
		if row.Attributes == nil {
			row.Attributes = make(map[string]string, r.attrs)
		}
		row.Attributes[col.name] = v
	}
	return ""
}

// setText stores a non-empty v of at most limit characters in *dst.
func setText(dst **string, v string, limit int) string {
	if v == "" {
		return ""
	}
	if tooLong(v, limit) {
		return fmt.Sprintf("longer than %d characters", limit)
	}
	*dst = &v
	return ""
}

// tooLong reports whether s has more than limit characters.
func tooLong(s string, limit int) bool {
	return len(s) > limit && utf8.RuneCountInString(s) > limit
}
