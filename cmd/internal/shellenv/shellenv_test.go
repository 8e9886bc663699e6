package shellenv_test

import (
	"os/exec"
	"testing"

	"github.com/mnvhq/mnv/cmd/internal/shellenv"
)

// TestLinesEvalBack: what sh reads back from the lines is exactly the values, whatever they hold.
func TestLinesEvalBack(t *testing.T) {
	for _, value := range []string{"plain-value_1", "O'Brien", "two words", `$HOME;rm -rf /`, "a\nb", `back\slash`, "'"} {
		t.Run(value, func(t *testing.T) {
			lines := shellenv.Lines(shellenv.Var{Name: "X", Value: value}, shellenv.Var{Name: "Y", Value: ""})
			out, err := exec.Command("sh", "-c", "Y=stale\n"+lines+`printf '%s|%s' "$X" "${Y-unset}"`).Output()
			if err != nil {
				t.Fatalf("sh: %v (lines %q)", err, lines)
			}
			if string(out) != value+"|unset" {
				t.Fatalf("sh read %q from %q", out, lines)
			}
		})
	}
	if got := shellenv.Quote("mnv_abc-DEF"); got != "mnv_abc-DEF" {
		t.Fatalf("a safe value is quoted: %s", got)
	}
}
