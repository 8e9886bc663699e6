package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// docAnchor is a reference to a section of a document under docs/, as comments and documents
	// write it: docs/api-decisions.md#money, or (operations.md#limits) inside docs/.
	docAnchor = regexp.MustCompile(`\b([a-z][a-z0-9-]*\.md)#([a-z0-9-]+)`)
	// outsideSpec is a citation of the product documents kept outside the repository: their
	// section numbers mean nothing to a reader of this one, whose decisions are in docs/. A whole
	// word: oapi-codegen's generated client speaks of an "interface specification" of its own.
	outsideSpec = regexp.MustCompile(`(?i)interface[- ]spec\b|spec §|\bspec \d+\.\d+|\(spec \d|contract (section |§ ?)?\d|contract\.md|shared/spec/`)
	heading     = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	notSlug     = regexp.MustCompile(`[^a-z0-9 -]`)
)

// anchors are the heading anchors of a Markdown file, as GitHub makes them.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if m := heading.FindStringSubmatch(line); m != nil && !inFence {
			s := strings.ToLower(m[1])
			s = notSlug.ReplaceAllString(s, "")
			out[strings.ReplaceAll(s, " ", "-")] = true
		}
	}
	return out
}

// sources are the files whose comments or text may cite a document: code, protos, SQL,
// configuration, scripts and the documents themselves.
func sources(rel string) bool {
	switch filepath.Ext(rel) {
	case ".go", ".proto", ".sql", ".yaml", ".yml", ".md", ".sh":
		return true
	}
	return filepath.Base(rel) == "Makefile"
}

var citingDirs = []string{"README.md", "Makefile", "docs", "proto", "services", "gateway", "cmd", "tests", "deploy", "sdk"}

// TestCitedSectionsExist fails when a comment or a document points at a section of a document
// under docs/ that has no such heading: the anchors are the contract between the code and the
// docs, so a heading renamed alone would leave comments pointing nowhere.
func TestCitedSectionsExist(t *testing.T) {
	base := root(t)
	cache := map[string]map[string]bool{}
	cited := 0
	walk(t, base, citingDirs, sources, func(rel, src string) {
		for _, m := range docAnchor.FindAllStringSubmatch(src, -1) {
			doc := filepath.Join(base, "docs", m[1])
			if _, err := os.Stat(doc); err != nil {
				continue // another file's anchor (a README of a library, a URL)
			}
			if cache[m[1]] == nil {
				cache[m[1]] = anchors(t, doc)
			}
			cited++
			if !cache[m[1]][m[2]] {
				t.Errorf("%s cites docs/%s#%s, which has no such section", rel, m[1], m[2])
			}
		}
	})
	// The code cites api-decisions.md in dozens of places; finding few means the walk is wrong.
	if cited < 40 {
		t.Fatalf("found %d citations of docs/ sections: is the layout still right?", cited)
	}
}

// TestNoOutsideDocumentIsCited fails when a comment or a document cites the product documents
// that live outside the repository ("contract 3", "interface spec 4.1"): a reader here cannot
// follow such a reference. Decisions are written in docs/api-decisions.md and cited by anchor.
func TestNoOutsideDocumentIsCited(t *testing.T) {
	base := root(t)
	self := filepath.Join("tests", "docs", "decisions_test.go")
	checked := 0
	walk(t, base, citingDirs, sources, func(rel, src string) {
		if rel == self {
			return
		}
		checked++
		for i, line := range strings.Split(src, "\n") {
			if m := outsideSpec.FindString(line); m != "" {
				t.Errorf("%s:%d cites a document outside the repository (%q): point at docs/ instead", rel, i+1, m)
			}
		}
	})
	if checked < 100 {
		t.Fatalf("checked %d files: is the layout still right?", checked)
	}
}
