package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/config"
)

func TestString(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unset gives default", nil, "def"},
		{"set", map[string]string{"MNV_X": "value"}, "value"},
		{"trimmed", map[string]string{"MNV_X": "  value \n"}, "value"},
		{"empty gives default", map[string]string{"MNV_X": ""}, "def"},
		{"blank gives default", map[string]string{"MNV_X": "  \t"}, "def"},
		{"other variable ignored", map[string]string{"MNV_Y": "value"}, "def"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(tt.env)
			if got := e.String("MNV_X", "def"); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
			if err := e.Err(); err != nil {
				t.Errorf("Err = %v, want nil", err)
			}
		})
	}
}

func TestInt(t *testing.T) {
	tests := []struct {
		name    string
		value   *string
		want    int
		wantErr bool
	}{
		{"unset gives default", nil, 7, false},
		{"blank gives default", ptr(" "), 7, false},
		{"set", ptr("42"), 42, false},
		{"negative", ptr("-3"), -3, false},
		{"zero", ptr("0"), 0, false},
		{"trimmed", ptr(" 42\n"), 42, false},
		{"not a number", ptr("forty"), 7, true},
		{"float", ptr("4.2"), 7, true},
		{"unit", ptr("42s"), 7, true},
		{"overflow", ptr("99999999999999999999"), 7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(envOf("MNV_N", tt.value))
			if got := e.Int("MNV_N", 7); got != tt.want {
				t.Errorf("Int = %d, want %d", got, tt.want)
			}
			checkErr(t, e.Err(), tt.wantErr, "MNV_N")
		})
	}
}

func TestFloat(t *testing.T) {
	tests := []struct {
		name    string
		value   *string
		want    float64
		wantErr bool
	}{
		{"unset gives default", nil, 7, false},
		{"blank gives default", ptr(" "), 7, false},
		{"integer", ptr("42"), 42, false},
		{"fraction", ptr("0.25"), 0.25, false},
		{"zero", ptr("0"), 0, false},
		{"negative", ptr("-1.5"), -1.5, false},
		{"not a number", ptr("fast"), 7, true},
		{"NaN", ptr("NaN"), 7, true},
		{"infinity", ptr("+Inf"), 7, true},
		{"unit", ptr("5/s"), 7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(envOf("MNV_F", tt.value))
			if got := e.Float("MNV_F", 7); got != tt.want {
				t.Errorf("Float = %v, want %v", got, tt.want)
			}
			checkErr(t, e.Err(), tt.wantErr, "MNV_F")
		})
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		name    string
		value   *string
		want    time.Duration
		wantErr bool
	}{
		{"unset gives default", nil, time.Second, false},
		{"seconds", ptr("1.5s"), 1500 * time.Millisecond, false},
		{"minutes", ptr("2m"), 2 * time.Minute, false},
		{"compound", ptr("1h30m"), 90 * time.Minute, false},
		{"zero", ptr("0"), 0, false},
		{"bare number", ptr("5"), time.Second, true},
		{"unknown unit", ptr("5 days"), time.Second, true},
		{"garbage", ptr("soon"), time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(envOf("MNV_D", tt.value))
			if got := e.Duration("MNV_D", time.Second); got != tt.want {
				t.Errorf("Duration = %v, want %v", got, tt.want)
			}
			checkErr(t, e.Err(), tt.wantErr, "MNV_D")
		})
	}
}

func TestBool(t *testing.T) {
	tests := []struct {
		name    string
		value   *string
		def     bool
		want    bool
		wantErr bool
	}{
		{"unset gives default true", nil, true, true, false},
		{"unset gives default false", nil, false, false, false},
		{"true", ptr("true"), false, true, false},
		{"1", ptr("1"), false, true, false},
		{"TRUE", ptr("TRUE"), false, true, false},
		{"false", ptr("false"), true, false, false},
		{"0", ptr("0"), true, false, false},
		{"yes is not a boolean", ptr("yes"), true, true, true},
		{"on is not a boolean", ptr("on"), false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(envOf("MNV_B", tt.value))
			if got := e.Bool("MNV_B", tt.def); got != tt.want {
				t.Errorf("Bool = %v, want %v", got, tt.want)
			}
			checkErr(t, e.Err(), tt.wantErr, "MNV_B")
		})
	}
}

// TestErrAccumulates checks that every problem is reported at once, each naming its variable.
func TestErrAccumulates(t *testing.T) {
	e := config.FromMap(map[string]string{
		"MNV_PORT":    "eighty",
		"MNV_TIMEOUT": "forever",
		"MNV_DEBUG":   "maybe",
		"MNV_NAME":    "ok",
		"MNV_WORKERS": "4",
	})
	e.Int("MNV_PORT", 80)
	e.Duration("MNV_TIMEOUT", time.Second)
	e.Bool("MNV_DEBUG", false)
	e.String("MNV_NAME", "")
	e.Int("MNV_WORKERS", 1)
	e.Require("MNV_TOKEN", e.Secret("MNV_TOKEN"))

	err := e.Err()
	if err == nil {
		t.Fatal("Err = nil, want four problems")
	}
	msg := err.Error()
	for _, want := range []string{"MNV_PORT", "MNV_TIMEOUT", "MNV_DEBUG", "MNV_TOKEN"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Err %q does not name %s", msg, want)
		}
	}
	for _, fine := range []string{"MNV_NAME", "MNV_WORKERS"} {
		if strings.Contains(msg, fine) {
			t.Errorf("Err %q names %s, which is fine", msg, fine)
		}
	}
	if n := len(strings.Split(msg, "\n")); n != 4 {
		t.Errorf("Err has %d lines, want 4: %q", n, msg)
	}
}

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withNewline := write("with-newline", "s3cret-from-file\n")
	withCRLF := write("with-crlf", "s3cret-from-file\r\n")
	plain := write("plain", "s3cret-from-file")
	empty := write("empty", "")
	missing := filepath.Join(dir, "does-not-exist")

	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string // a substring of Err, "" for none
	}{
		{"unset is empty, no error", nil, "", ""},
		{"from NAME", map[string]string{"MNV_KEY": "s3cret"}, "s3cret", ""},
		{"from NAME, trimmed", map[string]string{"MNV_KEY": " s3cret\n"}, "s3cret", ""},
		{"from NAME_FILE, trailing newline trimmed", map[string]string{"MNV_KEY_FILE": withNewline}, "s3cret-from-file", ""},
		{"from NAME_FILE, CRLF trimmed", map[string]string{"MNV_KEY_FILE": withCRLF}, "s3cret-from-file", ""},
		{"from NAME_FILE, no newline", map[string]string{"MNV_KEY_FILE": plain}, "s3cret-from-file", ""},
		{"from NAME_FILE, empty file", map[string]string{"MNV_KEY_FILE": empty}, "", ""},
		{"both set is an error", map[string]string{"MNV_KEY": "s3cret", "MNV_KEY_FILE": plain}, "", "MNV_KEY"},
		{"missing file is an error", map[string]string{"MNV_KEY_FILE": missing}, "", "MNV_KEY_FILE"},
		{"directory is an error", map[string]string{"MNV_KEY_FILE": dir}, "", "MNV_KEY_FILE"},
		{"blank NAME with NAME_FILE reads the file", map[string]string{"MNV_KEY": " ", "MNV_KEY_FILE": plain}, "s3cret-from-file", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(tt.env)
			if got := e.Secret("MNV_KEY"); got != tt.want {
				t.Errorf("Secret = %q, want %q", got, tt.want)
			}
			err := e.Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Err = %v, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("Err = nil, want an error naming %s", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("Err = %v, want it to name %s", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Err %q quotes the secret", err)
			}
		})
	}
}

func TestRequire(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		wantErr bool
	}{
		{"empty is an error", "", true},
		{"set is fine", "x", false},
		{"space is a value", " ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(nil)
			e.Require("MNV_NEEDED", tt.value)
			checkErr(t, e.Err(), tt.wantErr, "MNV_NEEDED")
		})
	}
}

func TestNewUsesLookup(t *testing.T) {
	var asked []string
	e := config.New(func(k string) (string, bool) {
		asked = append(asked, k)
		if k == "MNV_A" {
			return "from-lookup", true
		}
		return "", false
	})
	if got := e.String("MNV_A", "def"); got != "from-lookup" {
		t.Errorf("String = %q, want from-lookup", got)
	}
	if got := e.String("MNV_B", "def"); got != "def" {
		t.Errorf("String = %q, want def", got)
	}
	if len(asked) != 2 || asked[0] != "MNV_A" || asked[1] != "MNV_B" {
		t.Errorf("lookup asked %q, want [MNV_A MNV_B]", asked)
	}
}

func TestFromOS(t *testing.T) {
	t.Setenv("MNV_CONFIG_TEST_VALUE", "12")
	e := config.FromOS()
	if got := e.Int("MNV_CONFIG_TEST_VALUE", 0); got != 12 {
		t.Errorf("Int = %d, want 12", got)
	}
	if err := e.Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
}

func ptr(s string) *string { return &s }

func envOf(name string, v *string) map[string]string {
	if v == nil {
		return nil
	}
	return map[string]string{name: *v}
}

func checkErr(t *testing.T, err error, wantErr bool, name string) {
	t.Helper()
	if (err != nil) != wantErr {
		t.Fatalf("Err = %v, wantErr %v", err, wantErr)
	}
	if err != nil && !strings.Contains(err.Error(), name) {
		t.Errorf("Err = %q does not name %s", err, name)
	}
}

func TestDatabaseURL(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"the service's own", map[string]string{"MNV_SVC_DATABASE_URL": "postgres://own"}, "postgres://own", false},
		{"the shared one", map[string]string{"DATABASE_URL": "postgres://shared"}, "postgres://shared", false},
		{"own wins", map[string]string{"MNV_SVC_DATABASE_URL": "postgres://own", "DATABASE_URL": "postgres://shared"}, "postgres://own", false},
		{"neither is an error", nil, "", true},
		{"a file form is not read", map[string]string{"DATABASE_URL_FILE": "/run/secrets/db"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := config.FromMap(tt.env)
			if got := e.DatabaseURL("MNV_SVC_DATABASE_URL"); got != tt.want {
				t.Errorf("DatabaseURL = %q, want %q", got, tt.want)
			}
			if err := e.Err(); (err != nil) != tt.wantErr || err != nil && !strings.Contains(err.Error(), "DATABASE_URL") {
				t.Errorf("Err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}
