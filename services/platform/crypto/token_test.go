package crypto_test

import (
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func TestNewToken(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
	}{
		{"api key prefix", "mnv_"},
		{"sdk token prefix", "mnvsdk_"},
		{"client secret prefix", "mnvsec_"},
		{"no prefix", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[string]bool{}
			for range 200 {
				tok := crypto.NewToken(tt.prefix)
				rest, ok := strings.CutPrefix(tok, tt.prefix)
				if !ok {
					t.Fatalf("NewToken(%q) = %q: prefix missing", tt.prefix, tok)
				}
				if len(rest) != crypto.TokenChars || crypto.TokenChars != 40 {
					t.Fatalf("NewToken(%q) = %q: %d random characters, want 40", tt.prefix, tok, len(rest))
				}
				for _, c := range rest {
					if !strings.ContainsRune(base62, c) {
						t.Fatalf("NewToken(%q) = %q: %q is not base62", tt.prefix, tok, c)
					}
				}
				if seen[tok] {
					t.Fatalf("NewToken(%q) returned %q twice", tt.prefix, tok)
				}
				seen[tok] = true
				if !crypto.WellFormed(tt.prefix, tok) {
					t.Fatalf("WellFormed(%q, NewToken) = false for %q", tt.prefix, tok)
				}
			}
		})
	}
}

// TestNewTokenUsesWholeAlphabet guards against a biased or truncated alphabet: over many tokens
// every base62 character must show up, and nothing else.
func TestNewTokenUsesWholeAlphabet(t *testing.T) {
	counts := map[rune]int{}
	for range 500 {
		for _, c := range crypto.NewToken("") {
			counts[c]++
		}
	}
	// 20,000 characters: each of the 62 expected about 322 times; missing one by chance has
	// probability far below 1e-100.
	for _, c := range base62 {
		if counts[c] == 0 {
			t.Errorf("character %q never appeared in 500 tokens", c)
		}
	}
	if len(counts) != len(base62) {
		t.Errorf("tokens used %d distinct characters, want %d", len(counts), len(base62))
	}
}

func TestHint(t *testing.T) {
	tests := []struct {
		token, want string
	}{
		{"mnv_abcdefgh1234", "1234"},
		{"abcd", "abcd"},
		{"abc", "abc"},
		{"", ""},
		{"abcde", "bcde"},
	}
	for _, tt := range tests {
		if got := crypto.Hint(tt.token); got != tt.want {
			t.Errorf("Hint(%q) = %q, want %q", tt.token, got, tt.want)
		}
	}
}

func TestWellFormed(t *testing.T) {
	const prefix = "mnv_"
	body := func(n int) string { return strings.Repeat("aB3", n/3+1)[:n] }
	tests := []struct {
		name string
		s    string
		want bool
	}{
		{"issued token", prefix + body(40), true},
		{"31 characters is too short", prefix + body(31), false},
		{"32 characters is the minimum", prefix + body(32), true},
		{"128 characters is the maximum", prefix + body(128), true},
		{"129 characters is too long", prefix + body(129), false},
		{"prefix only", prefix, false},
		{"empty", "", false},
		{"no prefix", body(40), false},
		{"wrong prefix", "mnvsdk_" + body(40), false},
		{"prefix of other case", "MNV_" + body(40), false},
		{"prefix not at start", "x" + prefix + body(40), false},
		{"double quotes around", `"` + prefix + body(40) + `"`, false},
		{"quote inside", prefix + body(20) + `"` + body(20), false},
		{"single quote inside", prefix + body(20) + "'" + body(20), false},
		{"space inside", prefix + body(20) + " " + body(20), false},
		{"trailing space", prefix + body(40) + " ", false},
		{"leading space", " " + prefix + body(40), false},
		{"trailing newline", prefix + body(40) + "\n", false},
		{"newline inside", prefix + body(20) + "\n" + body(20), false},
		{"tab inside", prefix + body(20) + "\t" + body(20), false},
		{"NUL inside", prefix + body(20) + "\x00" + body(20), false},
		{"underscore inside", prefix + body(20) + "_" + body(20), false},
		{"dash inside", prefix + body(20) + "-" + body(20), false},
		{"base64 plus and slash", prefix + body(38) + "+/", false},
		{"non-ASCII letter", prefix + body(39) + "é", false},
		{"non-ASCII digit", prefix + body(39) + "٣", false},
		{"fullwidth letter", prefix + body(39) + "Ａ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := crypto.WellFormed(prefix, tt.s); got != tt.want {
				t.Errorf("WellFormed(%q, %q) = %v, want %v", prefix, tt.s, got, tt.want)
			}
		})
	}
}
