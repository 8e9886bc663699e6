// Package readme reads the runnable parts of the README: its shell blocks, what each is marked
// to do, and the answers it shows, so that a test can run them in order against a real local
// suite and hold the README to what the suite answers.
//
// The conventions, which the README states for its readers too:
//   - A ```sh block is pasted and run as it is, in order, in one shell session (variables carry
//     from block to block). It must exit 0.
//   - A ```json block right after a ```sh block shows what the block prints: one JSON document
//     per command that prints one. A string holding "…" stands for any value (ids, keys, times);
//     an object shows the keys that matter (the answer may hold more); an array whose last
//     element is "…" may go on.
//   - An HTML comment just before a block says how to treat it: <!-- readme: skip --> (not run:
//     the make targets themselves, production snippets), <!-- readme: background --> (started
//     and left running, e.g. a receiver).
package readme

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Mode says how a shell block is treated.
type Mode string

// Modes of a block.
const (
	Run        Mode = "run"
	Skip       Mode = "skip"
	Background Mode = "background"
)

// Block is one shell block of the README.
type Block struct {
	// Line is the line of the block's opening fence, for messages.
	Line int
	Code string
	Mode Mode
	// Shown is the JSON the README shows the block printing; empty when it shows none.
	Shown string
}

const directive = "<!-- readme:"

// Blocks returns the shell blocks of a Markdown document, in order.
func Blocks(md []byte) ([]Block, error) {
	var (
		out     []Block
		sc      = bufio.NewScanner(bytes.NewReader(md))
		line    int
		pending Mode // from a directive comment, for the next block
		lastSh  = -1 // index in out of the block an output block would belong to
	)
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(text, directive):
			m := Mode(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(text, directive), "-->")))
			if m != Skip && m != Background && m != Run {
				return nil, fmt.Errorf("line %d: unknown directive %q", line, m)
			}
			pending = m
			continue
		case strings.HasPrefix(text, "```") && len(text) > 3:
			lang, start := strings.Fields(text[3:])[0], line
			var code strings.Builder
			closed := false
			for sc.Scan() {
				line++
				if strings.TrimSpace(sc.Text()) == "```" {
					closed = true
					break
				}
				code.WriteString(sc.Text())
				code.WriteByte('\n')
			}
			if !closed {
				return nil, fmt.Errorf("line %d: the block is not closed", start)
			}
			switch lang {
			case "sh":
				mode := Run
				if pending != "" {
					mode = pending
				}
				out = append(out, Block{Line: start, Code: code.String(), Mode: mode})
				lastSh = len(out) - 1
			case "json":
				if lastSh == len(out)-1 && lastSh >= 0 && out[lastSh].Shown == "" && out[lastSh].Mode == Run {
					out[lastSh].Shown = code.String()
				}
				lastSh = -1
			default:
				lastSh = -1
			}
			pending = ""
			continue
		case text == "":
			continue
		}
		// Prose between a shell block and a JSON block detaches them.
		lastSh = -1
		if pending != "" {
			return nil, fmt.Errorf("line %d: a readme directive must come right before a block", line)
		}
	}
	return out, sc.Err()
}

// Wildcard is the mark that makes a shown string stand for any value.
const Wildcard = "…"

// Match checks that actual (the block's output: JSON documents, one after another) answers what
// shown shows, document by document.
func Match(shown, actual string) error {
	want, err := documents(shown)
	if err != nil {
		return fmt.Errorf("the README's JSON does not parse: %w", err)
	}
	got, err := documents(actual)
	if err != nil {
		return fmt.Errorf("the output is not JSON documents: %w", err)
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d JSON documents printed, the README shows %d", len(got), len(want))
	}
	for i := range want {
		if err := match("$", want[i], got[i]); err != nil {
			return fmt.Errorf("document %d: %w", i+1, err)
		}
	}
	return nil
}

func documents(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var out []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

func match(path string, want, got any) error {
	switch w := want.(type) {
	case string:
		if strings.Contains(w, Wildcard) {
			return nil
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: an object is shown, %s answered", path, kind(got))
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: shown, not answered", path, k)
			}
			if err := match(path+"."+k, wv, gv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: an array is shown, %s answered", path, kind(got))
		}
		open := len(w) > 0 && w[len(w)-1] == Wildcard
		if open {
			w = w[:len(w)-1]
		}
		if len(g) < len(w) || (!open && len(g) != len(w)) {
			return fmt.Errorf("%s: %d elements shown, %d answered", path, len(w), len(g))
		}
		for i := range w {
			if err := match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: %v shown, %v answered", path, show(want), show(got))
	}
	return nil
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
