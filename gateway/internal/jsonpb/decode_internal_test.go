package jsonpb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRejectDuplicates holds the scanner to a plain reading of the same JSON with
// json.Decoder.Token: on valid JSON both find the same first duplicate (or none), and nothing
// makes the scanner panic.
func FuzzRejectDuplicates(f *testing.F) {
	for _, seed := range []string{
		`{"name":"ci","role":"MEMBER","role":"ADMIN"}`, `{"role":"MEMBER","r\u006fle":"ADMIN"}`,
		`{"a":{"b":[1,{"c":true,"c":null}]}}`, `[{"a":1},{"a":2}]`, `{"a":{"a":1}}`, `{"":1,"":2}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"k3":7}`,
		`{"a\"b":1,"a\"b":2}`, ` { "x" : [ ] , "y" : { } , "x" : -1.5e3 } `, `"str"`, `12`, `null`, `{}`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := rejectDuplicates(data) // must not panic on anything
		// encoding/json reads invalid UTF-8 as U+FFFD, protojson refuses it: no reference.
		if !json.Valid(data) || !utf8.Valid(data) {
			return
		}
		want := referenceDuplicates(data)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: scanner %v, reference %v", data, got, want)
		}
	})
}

// referenceDuplicates finds the first duplicate key of valid JSON the simple way.
func referenceDuplicates(data []byte) error {
	type frame struct {
		object bool
		keys   map[string]bool
		key    string
		inKey  bool
		index  int
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			switch {
			case !f.object:
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			case b.Len() > 0:
				b.WriteString("." + shorten(f.key, maxKeyInPath))
			default:
				b.WriteString(shorten(f.key, maxKeyInPath))
			}
		}
		return b.String()
	}
	done := func() {
		if n := len(stack); n > 0 {
			if top := stack[n-1]; top.object {
				top.inKey = true
			} else {
				top.index++
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil //nolint:nilerr // the end of the input: no duplicate (the error reports one)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, inKey: true, keys: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
			continue
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].inKey {
				top := stack[n-1]
				top.key, top.inKey = t, false
				if top.keys[t] {
					p := path()
					if len(p) > maxPath {
						cut := len(p) - maxPath
						for cut < len(p) && !utf8.RuneStart(p[cut]) {
							cut++
						}
						p = "…" + p[cut:]
					}
					return fmt.Errorf("duplicate field %s", strconv.Quote(p))
				}
				top.keys[t] = true
				continue
			}
		}
		done()
	}
}

// FuzzInteger holds the integer rule to exact arithmetic: a JSON number is taken for a kind
// exactly when math/big reads it as an integer within the kind's range.
func FuzzInteger(f *testing.F) {
	for _, seed := range []string{"0", "-0", "1", "-1", "3.0", "36e2", "360000e-2", "1.5", "1e-400", "1e400",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "18446744073709551615",
		"18446744073709551616", "0.000e5", "100e-2", "1E+2", "01", "1.", ".5", "-", "1e", "2147483648"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		valid := isNumber([]byte(lit))
		isLiteral := lit == "true" || lit == "false" || lit == "null" || strings.ContainsAny(lit, "\"[]{}, \t\r\n")
		if !isLiteral && valid != json.Valid([]byte(lit)) {
			t.Fatalf("isNumber(%q) = %v, json.Valid says otherwise", lit, valid)
		}
		if !valid || len(lit) > 40 {
			return // big.Rat would spell out huge exponents
		}
		r, ok := new(big.Rat).SetString(lit)
		if !ok {
			return // big.Rat refuses exponents past about a million
		}
		for k, rg := range intRanges {
			s := scanner{}
			got := s.checkInteger(k, token{kind: numberToken, raw: []byte(lit)}) == nil
			want := r.IsInt() && r.Num().Cmp(big.NewInt(rg.min)) >= 0 && r.Num().Cmp(new(big.Int).SetUint64(rg.max)) <= 0
			if got != want {
				t.Fatalf("%s as %v: accepted %v, want %v", lit, k, got, want)
			}
		}
	})
}
