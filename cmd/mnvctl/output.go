package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/cmd/internal/shellenv"
	"github.com/mnvhq/mnv/services/platform/apijson"
)

// The output formats of -o.
const (
	formatText = "text"
	formatJSON = "json"
	formatEnv  = "env"
)

// field is one named value of an answer.
type field struct{ name, value string }

// result is what a command prints, in each format it supports.
type result struct {
	// msg is the answer in the API's JSON shape (json), and by default in text too.
	msg proto.Message
	// lead are string fields put before msg's in json: the create answer's clientId, which
	// scripts read with jq -r .clientId. With msg nil they are the whole object.
	lead []field
	// text replaces the generic text of msg.
	text func(io.Writer) error
	// env are the variables of -o env, in order; a variable with an empty value is unset.
	env []field
}

// outputFlag adds -o to cmd; env only when the command reveals a credential.
func outputFlag(cmd *cobra.Command, env bool) *string {
	formats := "text or json"
	if env {
		formats = "text, json or env (export lines for eval)"
	}
	return cmd.Flags().StringP("output", "o", formatText, "output: "+formats)
}

// checkFormat is a usage error for a format cmd does not support, before any call is made.
func checkFormat(cmd *cobra.Command, format string, env bool) error {
	switch {
	case format == formatText || format == formatJSON || format == formatEnv && env:
		return nil
	case env:
		return usagef("-o %q: %s prints text, json or env", format, cmd.CommandPath())
	}
	return usagef("-o %q: %s prints text or json (it reveals no credential to export)", format, cmd.CommandPath())
}

// print writes r to w in format.
func (r result) print(w io.Writer, format string) error {
	switch format {
	case formatJSON:
		b, err := r.json()
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case formatEnv:
		vars := make([]shellenv.Var, len(r.env))
		for i, f := range r.env {
			vars[i] = shellenv.Var{Name: f.name, Value: f.value}
		}
		_, err := io.WriteString(w, shellenv.Lines(vars...))
		return err
	}
	if r.text != nil {
		return r.text(w)
	}
	if r.msg == nil {
		var b strings.Builder
		for _, f := range r.lead {
			b.WriteString(f.value + "\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	b, err := r.json()
	if err != nil {
		return err
	}
	return writeText(w, b)
}

// json is the answer as indented JSON: the lead fields, then msg's in the API's shapes
// (platform/apijson, the encoder the gateway answers with).
func (r result) json() ([]byte, error) {
	b := []byte{'{'}
	for _, f := range r.lead {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = apijson.AppendString(b, f.name)
		b = append(b, ':')
		b = apijson.AppendString(b, f.value)
	}
	if r.msg != nil {
		m := apijson.AppendMessage(nil, r.msg.ProtoReflect())
		if len(m) > 2 && len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, m[1:len(m)-1]...)
	}
	b = append(b, '}')
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// writeText writes JSON as aligned "key: value" lines, nested objects indented under their
// key and lists of objects as "- " items. Key order is the JSON's (the proto's field order).
func writeText(w io.Writer, js []byte) error {
	v, err := parseOrdered(js)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	writeObject(tw, v, "")
	return tw.Flush()
}

// ordered is a JSON value that keeps its keys' order.
type ordered struct {
	keys   []string
	fields []ordered // an object's values, by keys
	items  []ordered // an array's
	scalar string
	kind   byte // 'o' object, 'a' array, 's' scalar
}

func parseOrdered(js []byte) (ordered, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	return decodeOrdered(dec)
}

func decodeOrdered(dec *json.Decoder) (ordered, error) {
	tok, err := dec.Token()
	if err != nil {
		return ordered{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			o := ordered{kind: 'o'}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return ordered{}, err
				}
				v, err := decodeOrdered(dec)
				if err != nil {
					return ordered{}, err
				}
				o.keys, o.fields = append(o.keys, k.(string)), append(o.fields, v)
			}
			_, err := dec.Token()
			return o, err
		}
		a := ordered{kind: 'a'}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return ordered{}, err
			}
			a.items = append(a.items, v)
		}
		_, err := dec.Token()
		return a, err
	case nil:
		return ordered{kind: 's', scalar: "-"}, nil
	case string:
		if t == "" {
			return ordered{kind: 's', scalar: "-"}, nil
		}
		return ordered{kind: 's', scalar: t}, nil
	default:
		return ordered{kind: 's', scalar: fmt.Sprint(t)}, nil
	}
}

// writeObject writes o's fields at indent; the tab aligns the values of one object.
func writeObject(w io.Writer, o ordered, indent string) {
	for i, k := range o.keys {
		v := o.fields[i]
		switch {
		case v.kind == 'o':
			fmt.Fprintf(w, "%s%s:\n", indent, k)
			writeObject(w, v, indent+"  ")
		case v.kind == 'a' && len(v.items) > 0 && v.items[0].kind == 'o':
			fmt.Fprintf(w, "%s%s:\n", indent, k)
			for _, it := range v.items {
				writeObject(&itemWriter{w: w, first: true}, it, indent+"  ")
			}
		default:
			fmt.Fprintf(w, "%s%s:\t%s\n", indent, k, scalarText(v))
		}
	}
}

// scalarText is a scalar, or a list of scalars comma-separated; "-" for null or empty (a
// trailing blank would read as a value missing by mistake).
func scalarText(v ordered) string {
	if v.kind != 'a' {
		return v.scalar
	}
	if len(v.items) == 0 {
		return "-"
	}
	parts := make([]string, len(v.items))
	for i, it := range v.items {
		parts[i] = it.scalar
	}
	return strings.Join(parts, ", ")
}

// itemWriter marks the first line of a list item with "- " in place of its indent's end.
type itemWriter struct {
	w     io.Writer
	first bool
}

func (iw *itemWriter) Write(p []byte) (int, error) {
	if iw.first && len(p) >= 2 {
		iw.first = false
		q := bytes.Clone(p)
		copy(q[len(q)-len(bytes.TrimLeft(q, " "))-2:], "- ")
		return iw.w.Write(q)
	}
	return iw.w.Write(p)
}
