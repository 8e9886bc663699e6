package otp_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/verification/internal/otp"
)

func keyring(t *testing.T, spec string) *crypto.Keyring {
	t.Helper()
	k, err := crypto.ParseKeyring(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestGenerateLengthAndDigits(t *testing.T) {
	for _, n := range []int{otp.MinLength, 6, otp.MaxLength} {
		for range 200 {
			c, err := otp.Generate(n)
			if err != nil {
				t.Fatal(err)
			}
			if !(otp.Rules{Length: n}).WellFormed(c) {
				t.Fatalf("Generate(%d) gave a code of %d characters or not digits", n, len(c.Digits()))
			}
		}
	}
	for _, n := range []int{0, 3, 11, -1} {
		if _, err := otp.Generate(n); err == nil {
			t.Errorf("Generate(%d) accepted", n)
		}
	}
}

// TestGenerateUniform: every digit of every position about equally often (a modulo-biased or
// unpadded generator fails it: leading zeros missing, or low digits favoured). 60 000 4-digit
// codes, 6 000 expected per digit and position; chi-square with 9 degrees of freedom above 40
// has a probability below 1e-5 for a uniform source.
func TestGenerateUniform(t *testing.T) {
	const n, length = 60000, 4
	var counts [length][10]int
	for range n {
		c, err := otp.Generate(length)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range c.Digits() {
			counts[i][d-'0']++
		}
	}
	for pos := range counts {
		chi := 0.0
		for _, got := range counts[pos] {
			d := float64(got) - n/10.0
			chi += d * d / (n / 10.0)
		}
		if chi > 40 {
			t.Errorf("position %d: chi-square %.1f for counts %v", pos, chi, counts[pos])
		}
	}
}

func TestHashBoundAndRotated(t *testing.T) {
	old := crypto.NewKeySpec("k1")
	h1 := otp.NewHasher(keyring(t, old))
	b := otp.Binding{WorkflowID: "wf-1", StepID: "st-1", Number: "+447700900123"}
	code, err := otp.Generate(6)
	if err != nil {
		t.Fatal(err)
	}
	keyID, sum := h1.Sum(code, b)
	if keyID != "k1" || bytes.Contains(sum, []byte(code.Digits())) {
		t.Fatalf("key %q", keyID)
	}
	other := otp.Parse(fmt.Sprintf("%06d", (atoi(code.Digits())+1)%1000000))
	cases := []struct {
		name string
		h    *otp.Hasher
		c    otp.Code
		b    otp.Binding
		want bool
	}{
		{"the code", h1, code, b, true},
		{"the code typed", h1, otp.Parse(code.Digits()), b, true},
		{"another code", h1, other, b, false},
		{"another workflow", h1, code, otp.Binding{WorkflowID: "wf-2", StepID: "st-1", Number: b.Number}, false},
		{"another step", h1, code, otp.Binding{WorkflowID: "wf-1", StepID: "st-2", Number: b.Number}, false},
		{"another number", h1, code, otp.Binding{WorkflowID: "wf-1", StepID: "st-1", Number: "+447700900124"}, false},
		{"the empty code", h1, otp.Code{}, b, false},
		{"after a rotation (old key kept)", otp.NewHasher(keyring(t, crypto.NewKeySpec("k2")+","+old)), code, b, true},
		{"another service's keys", otp.NewHasher(keyring(t, crypto.NewKeySpec("k1"))), code, b, false},
		{"the old key dropped", otp.NewHasher(keyring(t, crypto.NewKeySpec("k2"))), code, b, false},
	}
	for _, tc := range cases {
		if got := tc.h.Matches(tc.c, tc.b, keyID, sum); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The hash is keyed: the same code and binding under another key is another hash.
	if _, sum2 := otp.NewHasher(keyring(t, crypto.NewKeySpec("k1"))).Sum(code, b); bytes.Equal(sum, sum2) {
		t.Fatal("the hash does not depend on the key")
	}
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := otp.Rules{Length: 6, TTL: 5 * time.Minute, MaxAttempts: 3}
	live := func(attempts int) otp.State {
		return otp.State{IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(4 * time.Minute), Attempts: attempts}
	}
	cases := []struct {
		name         string
		st           otp.State
		matched      bool
		want         otp.Outcome
		wantAttempts int
	}{
		{"right first time", live(0), true, otp.Matched, 0},
		{"right after two wrong", live(2), true, otp.Matched, 2},
		{"wrong, attempts left", live(0), false, otp.Mismatch, 1},
		{"second wrong", live(1), false, otp.Mismatch, 2},
		{"last wrong", live(2), false, otp.Exhausted, 3},
		{"right but none left", live(3), true, otp.Exhausted, 3},
		{"right but expired", otp.State{ExpiresAt: now}, true, otp.Expired, 0},
		{"wrong and expired: no attempt counted", otp.State{ExpiresAt: now.Add(-time.Second), Attempts: 1}, false, otp.Expired, 1},
	}
	for _, tc := range cases {
		got, attempts := r.Decide(tc.st, tc.matched, now)
		if got != tc.want || attempts != tc.wantAttempts {
			t.Errorf("%s: Decide = %v, %d attempts; want %v, %d", tc.name, got, attempts, tc.want, tc.wantAttempts)
		}
	}
}

func TestMayResend(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := otp.Rules{ResendCooldown: 30 * time.Second, MaxResends: 2}
	cases := []struct {
		name      string
		st        otp.State
		wantErr   error
		wantAfter time.Duration
	}{
		{"after the cooldown", otp.State{IssuedAt: now.Add(-30 * time.Second)}, nil, 0},
		{"during the cooldown", otp.State{IssuedAt: now.Add(-10 * time.Second)}, &otp.CooldownError{}, 20 * time.Second},
		{"the last resend", otp.State{IssuedAt: now.Add(-time.Hour), Resends: 1}, nil, 0},
		{"the cap", otp.State{IssuedAt: now.Add(-time.Hour), Resends: 2}, otp.ErrResendCap, 0},
	}
	for _, tc := range cases {
		err := r.MayResend(tc.st, now)
		var cd *otp.CooldownError
		switch {
		case tc.wantErr == nil && err != nil, tc.wantErr != nil && err == nil:
			t.Errorf("%s: MayResend = %v, want %v", tc.name, err, tc.wantErr)
		case errors.As(tc.wantErr, &cd):
			if !errors.As(err, &cd) || cd.RetryAfter != tc.wantAfter {
				t.Errorf("%s: MayResend = %v, want a cooldown of %s", tc.name, err, tc.wantAfter)
			}
		case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
			t.Errorf("%s: MayResend = %v, want %v", tc.name, err, tc.wantErr)
		}
	}
}

// TestCodePrintsNothing: however a code is printed, logged or encoded, its digits stay out.
func TestCodePrintsNothing(t *testing.T) {
	code := otp.Parse("48151623")
	type wrapper struct {
		Code otp.Code
		Ptr  *otp.Code
	}
	w := wrapper{Code: code, Ptr: &code}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%s", "%d", "%q", "%x", "%+v", "%#v"} {
		fmt.Fprintf(&out, verb+"|", code)
		fmt.Fprintf(&out, verb+"|", w)
	}
	fmt.Fprint(&out, code, w, []otp.Code{code})
	j, _ := json.Marshal(w)
	out.Write(j)

	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&out), zap.DebugLevel)
	log := zap.New(core)
	log.Info("code", zap.Any("any", code), zap.Reflect("reflect", w), zap.Stringer("stringer", code), zap.Any("ptr", &code))
	slog.New(slog.NewJSONHandler(&out, nil)).Info("code", "code", code, "w", w)

	if strings.Contains(out.String(), code.Digits()) || strings.Contains(out.String(), "4815") {
		t.Fatalf("a code's digits were printed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "[code]") {
		t.Fatalf("nothing printed the placeholder:\n%s", out.String())
	}
	if err := json.Unmarshal([]byte(`"1234"`), new(otp.Code)); err == nil {
		t.Fatal("a code decoded from JSON")
	}
}
