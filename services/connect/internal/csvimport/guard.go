package csvimport

import (
	"bytes"
	"fmt"
	"io"
)

// guard sits between the file and encoding/csv and keeps the memory a record can take bounded.
//
// encoding/csv reads a whole record, however long, before returning it: a 50 MiB quoted field,
// or a line of millions of commas, would be held in memory at once. The guard follows the CSV
// quoting rules byte by byte (a field is quoted when it starts with '"'; inside, '""' is a quote
// and '"' followed by ',' or a line break closes it) and, without ever buffering a record:
//
//   - passes the input through unchanged while no limit is reached, so encoding/csv sees
//     exactly the file (line numbers included) for every ordinary file;
//   - when a field's content passes maxField bytes, stops passing its content on and writes a
//     NUL byte instead, the overflow marker: the field ends up as its first maxField+1 bytes and
//     a NUL, which the Reader reports as a cell error for that column. Line breaks inside a
//     dropped quoted field are still passed on, so line numbers stay right;
//   - when a record reaches its maxFields-th separator, writes `,"` and a NUL and drops the rest
//     of the record (line breaks inside quotes excepted), closing that synthetic quoted field
//     with '"' at the end of the record: encoding/csv sees maxFields+1 fields, which the Reader
//     reports as a wrong field count;
//   - fails the file (ErrNotCSV) on a NUL byte in the input (a binary or UTF-16 file), and when
//     what it passes on for one record exceeds maxRecord bytes.
//
// A NUL byte therefore never reaches encoding/csv from the file itself: every NUL in a field the
// Reader sees is the guard's marker.
//
// Errors of the underlying reader are returned as *sourceError, after the bytes read with them.
type guard struct {
	src   io.Reader
	inbuf []byte
	obuf  []byte // output of the last fill; obuf[opos:] is not yet returned
	opos  int
	err   error // sticky: io.EOF, a fatal ErrNotCSV error or a *sourceError
	fatal error // set by step, moved to err by fill
	empty int   // consecutive reads that returned nothing

	maxField  int // content bytes of one field, as written in the file
	maxFields int // fields of one record passed on before collapsing the rest
	maxRecord int // bytes passed on for one record

	state     lexState
	line      int // 1-based line of the next input byte
	recLine   int // line on which the current record starts
	fieldLen  int // content bytes of the current field seen so far
	fields    int // separators seen in the current record
	recordLen int // bytes passed on for the current record
	overflow  bool
	collapse  bool
}

// lexState is where the guard is in the CSV grammar.
type lexState uint8

const (
	stFieldStart lexState = iota // at the start of a field (or of a record)
	stUnquoted                   // in a field that does not start with a quote
	stQuoted                     // in a quoted field
	stQuote                      // in a quoted field, just after a quote: a closing one, or half of ""
)

// sourceError is a read error of the underlying reader: not a problem of the file's content.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

const guardChunk = 4096

func newGuard(src io.Reader, l limits) *guard {
	return &guard{
		src:       src,
		inbuf:     make([]byte, guardChunk),
		obuf:      make([]byte, 0, 3*guardChunk+4),
		maxField:  l.field,
		maxFields: l.columns,
		maxRecord: l.record,
		line:      1,
		recLine:   1,
	}
}

// Read implements io.Reader for encoding/csv.
func (g *guard) Read(p []byte) (int, error) {
	for g.opos == len(g.obuf) {
		if g.err != nil {
			return 0, g.err
		}
		g.fill()
	}
	n := copy(p, g.obuf[g.opos:])
	g.opos += n
	return n, nil
}

// fill reads one chunk of input and puts what it passes on into obuf.
func (g *guard) fill() {
	g.obuf, g.opos = g.obuf[:0], 0
	n, err := g.src.Read(g.inbuf)
	in := g.inbuf[:n]
	for i := 0; i < len(in); {
		if k := g.run(in[i:]); k > 0 {
			i += k
		} else {
			g.step(in[i])
			i++
		}
		if g.fatal != nil {
			g.err = g.fatal
			return
		}
	}
	switch {
	case err == io.EOF:
		g.finish()
		g.err = io.EOF
		if g.fatal != nil {
			g.err = g.fatal
		}
	case err != nil:
		g.err = &sourceError{err}
	case n == 0:
		if g.empty++; g.empty >= 100 {
			g.err = &sourceError{io.ErrNoProgress}
		}
	default:
		g.empty = 0
	}
}

// run handles at once the content bytes at the start of p that need no decision: inside a field,
// up to the next byte that may end it (or a NUL), and up to the field's limit. It returns how
// many bytes it took; 0 leaves the next byte to step.
func (g *guard) run(p []byte) int {
	var k int
	switch g.state {
	case stUnquoted:
		k = bytes.IndexAny(p, ",\n\x00")
	case stQuoted:
		k = bytes.IndexAny(p, "\"\n\x00")
	default:
		return 0
	}
	if k < 0 {
		k = len(p)
	}
	if g.dropping() {
		return k
	}
	k = min(k, g.maxField-g.fieldLen)
	if k <= 0 {
		return 0
	}
	g.fieldLen += k
	g.obuf = append(g.obuf, p[:k]...)
	if g.recordLen += k; g.recordLen > g.maxRecord {
		g.fatal = g.tooLong()
	}
	return k
}

func (g *guard) step(b byte) {
	if b == 0 {
		g.fatal = notCSV("line %d contains a NUL byte (is it a binary file?)", g.line)
		return
	}
	switch g.state {
	case stFieldStart:
		switch b {
		case '"':
			g.state = stQuoted
			if !g.collapse {
				g.emit(b)
			}
		case ',':
			g.endField()
		case '\n':
			g.endRecord()
		default:
			g.state = stUnquoted
			g.content(b)
		}
	case stUnquoted:
		switch b {
		case ',':
			g.endField()
		case '\n':
			g.endRecord()
		default:
			g.content(b)
		}
	case stQuoted:
		if b == '"' {
			// Held back while dropping: closeQuote writes it if it turns out to close the field.
			g.state = stQuote
			if !g.dropping() {
				g.emit(b)
			}
			return
		}
		g.content(b)
	case stQuote:
		switch b {
		case '"': // the second half of "": content, counting both halves
			g.state = stQuoted
			if !g.dropping() {
				g.fieldLen++
			}
			g.content(b)
		case ',':
			g.closeQuote()
			g.endField()
		case '\n':
			g.closeQuote()
			g.endRecord()
		default:
			// encoding/csv refuses a character after a closing quote (ErrQuote), except the \r of
			// a \r\n; either way what follows is not quoted.
			g.closeQuote()
			g.state = stUnquoted
			g.content(b)
		}
	}
}

func (g *guard) dropping() bool { return g.overflow || g.collapse }

// content handles one content byte of the current field.
func (g *guard) content(b byte) {
	if b == '\n' { // only inside quotes: a line break outside ends the record
		g.line++
	}
	if g.dropping() {
		if b == '\n' {
			g.emit(b)
		}
		return
	}
	g.emit(b)
	if g.fieldLen++; g.fieldLen > g.maxField {
		g.overflow = true
		g.emit(0)
	}
}

// closeQuote writes the closing quote of an overflowing quoted field, held back in stQuoted.
func (g *guard) closeQuote() {
	if g.overflow && !g.collapse {
		g.emit('"')
	}
}

func (g *guard) endField() {
	g.state = stFieldStart
	if g.collapse {
		return
	}
	g.fields++
	g.fieldLen = 0
	g.overflow = false
	if g.fields >= g.maxFields {
		g.collapse = true
		g.emit(',')
		g.emit('"')
		g.emit(0)
		return
	}
	g.emit(',')
}

func (g *guard) endRecord() {
	if g.collapse {
		g.emit('"')
	}
	g.emit('\n')
	g.line++
	g.recLine = g.line
	g.state = stFieldStart
	g.fields, g.fieldLen, g.recordLen = 0, 0, 0
	g.overflow, g.collapse = false, false
}

// finish closes, at the end of the input, what the guard opened or held back. An unterminated
// quoted field of the file stays unterminated, so that encoding/csv reports it.
func (g *guard) finish() {
	switch {
	case g.collapse && g.state != stQuoted:
		g.emit('"')
	case g.overflow && g.state == stQuote:
		g.emit('"')
	}
}

func (g *guard) emit(b byte) {
	g.obuf = append(g.obuf, b)
	if g.recordLen++; g.recordLen > g.maxRecord && g.fatal == nil {
		g.fatal = g.tooLong()
	}
}

func (g *guard) tooLong() error {
	return notCSV("the record starting on line %d is longer than %s", g.recLine, byteSize(g.maxRecord))
}

// byteSize writes n as KiB or MiB when it is a whole number of them.
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
