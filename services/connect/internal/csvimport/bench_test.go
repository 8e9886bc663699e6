package csvimport

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkReader reads a generated file of valid rows.
func BenchmarkReader(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(&rowSource{n: 10_000, everyNth: 1})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkGuard measures the guard alone on the same file.
func BenchmarkGuard(b *testing.B) {
	file, err := io.ReadAll(&rowSource{n: 10_000, everyNth: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(file)))
	for b.Loop() {
		if _, err := io.Copy(io.Discard, newGuard(bytes.NewReader(file), defaultLimits)); err != nil {
			b.Fatal(err)
		}
	}
}
