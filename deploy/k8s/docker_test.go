package k8s_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// repoRoot is the repository, from this module's directory.
const repoRoot = "../.."

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

func parseDockerfile(file string) ([]instruction, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = n
		}
		if s, cont := strings.CutSuffix(line, "\\"); cont {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out, sc.Err()
}

// stage is one FROM … of a Dockerfile.
type stage struct {
	base, alias string
	ins         []instruction
}

func stages(ins []instruction) []stage {
	var out []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			var s stage
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					s.alias = fields[i+1]
					i++
				case s.base == "":
					s.base = fields[i]
				}
			}
			out = append(out, s)
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].ins = append(out[len(out)-1].ins, in)
		}
	}
	return out
}

var goBuild = regexp.MustCompile(`\bgo build\b.*\s-o\s+(\S+)\s+\./(\S+)`)

// workspaceModules lists the `use` directories of go.work.
func workspaceModules(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	var mods []string
	inUse := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "use ("):
			inUse = true
		case inUse && line == ")":
			inUse = false
		case inUse && line != "":
			mods = append(mods, filepath.Clean(line))
		case strings.HasPrefix(line, "use "):
			mods = append(mods, filepath.Clean(strings.TrimPrefix(line, "use ")))
		}
	}
	return mods, nil
}

// copies are the repository paths a stage's COPY instructions take from the build context.
func copies(s stage) []string {
	var out []string
	for _, in := range s.ins {
		if in.cmd != "COPY" && in.cmd != "ADD" {
			continue
		}
		fields := strings.Fields(in.args)
		var srcs []string
		from := false
		for _, f := range fields {
			if strings.HasPrefix(f, "--from=") {
				from = true
			}
			if !strings.HasPrefix(f, "--") {
				srcs = append(srcs, f)
			}
		}
		if from || len(srcs) < 2 {
			continue
		}
		for _, s := range srcs[:len(srcs)-1] {
			out = append(out, filepath.Clean(s))
		}
	}
	return out
}

// covered reports whether path is one of the copied paths or inside one.
func covered(copied []string, path string) bool {
	for _, c := range copied {
		if c == "." || c == path || strings.HasPrefix(path, c+"/") {
			return true
		}
	}
	return false
}

// checkDockerfile returns the problems of the Dockerfile of component c: every base image
// pinned (a version tag, not latest, or a digest; scratch needs none), a CGO-free `go build` of
// the component's main package, which exists, from a stage that copies every module of go.work
// (the workspace build of make build); a final stage that runs as a numeric non-root user,
// copies the binary from the builder and runs it as its exec-form ENTRYPOINT.
func checkDockerfile(root, file string, c component) []string {
	ins, err := parseDockerfile(file)
	if err != nil {
		return []string{err.Error()}
	}
	var p []string
	st := stages(ins)
	if len(st) == 0 {
		return []string{"no FROM"}
	}
	aliases := map[string]bool{}
	for _, s := range st {
		switch {
		case s.base == "scratch" || aliases[s.base]:
		case strings.Contains(s.base, "$"):
			p = append(p, fmt.Sprintf("FROM %s: a variable base image is not pinned", s.base))
		default:
			if why := imageProblem(s.base); why != "" {
				p = append(p, fmt.Sprintf("FROM %s: %s", s.base, why))
			}
		}
		if s.alias != "" {
			aliases[s.alias] = true
		}
	}

	// The build.
	var builder *stage
	var binary string
	for i := range st {
		for _, in := range st[i].ins {
			if in.cmd != "RUN" {
				continue
			}
			mm := goBuild.FindStringSubmatch(in.args)
			if mm == nil {
				continue
			}
			builder, binary = &st[i], mm[1]
			if pkg := filepath.Clean(mm[2]); pkg != c.cmd {
				p = append(p, fmt.Sprintf("line %d: builds ./%s, want ./%s", in.line, pkg, c.cmd))
			}
			if !strings.Contains(in.args, "CGO_ENABLED=0") && !stageEnvHas(st[i], "CGO_ENABLED=0") {
				p = append(p, fmt.Sprintf("line %d: go build without CGO_ENABLED=0 (the final image has no C library)", in.line))
			}
		}
	}
	if builder == nil {
		p = append(p, "no RUN … go build -o <binary> ./<package>")
	}
	if src, err := os.ReadFile(filepath.Join(root, c.cmd, "main.go")); err != nil || !strings.Contains(string(src), "package main") {
		p = append(p, fmt.Sprintf("%s/main.go: no main package there", c.cmd))
	}
	if builder != nil {
		copied := copies(*builder)
		if !covered(copied, "go.work") {
			p = append(p, "the builder does not copy go.work")
		}
		mods, err := workspaceModules(root)
		if err != nil {
			p = append(p, err.Error())
		}
		for _, mod := range mods {
			if !covered(copied, filepath.Join(mod, "go.mod")) {
				p = append(p, fmt.Sprintf("the builder does not copy %s/go.mod, which go.work uses", mod))
			}
		}
	}

	// The final stage.
	final := st[len(st)-1]
	user := ""
	var entry []string
	copiedBinary := map[string]bool{}
	for _, in := range final.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &entry); err != nil {
				p = append(p, fmt.Sprintf("line %d: ENTRYPOINT is not in exec form", in.line))
			}
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) >= 3 && strings.HasPrefix(f[0], "--from=") && binary != "" && f[1] == binary {
				copiedBinary[f[len(f)-1]] = true
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	switch {
	case user == "":
		p = append(p, "the final stage sets no USER (it would run as root)")
	case !regexp.MustCompile(`^[0-9]+$`).MatchString(uid):
		p = append(p, fmt.Sprintf("USER %s: use a numeric uid, so that runAsNonRoot can verify it", user))
	case uid == "0":
		p = append(p, "USER 0 is root")
	case uid != "65532":
		p = append(p, fmt.Sprintf("USER %s: the manifests run as 65532", user))
	}
	if len(entry) == 0 {
		p = append(p, "the final stage has no ENTRYPOINT")
	} else if !copiedBinary[entry[0]] {
		p = append(p, fmt.Sprintf("ENTRYPOINT %s is not the binary copied from the builder (%s)", entry[0], binary))
	}
	return p
}

func stageEnvHas(s stage, kv string) bool {
	for _, in := range s.ins {
		if in.cmd == "ENV" && strings.Contains(in.args, kv) {
			return true
		}
	}
	return false
}

// resolveInCopy copies what the Dockerfile's builder copies into a temporary directory and
// asks the go command whether the main package resolves there, with the module proxy off.
// It returns skip=true when the module cache lacks a module (then only a network would tell).
func resolveInCopy(root, file, tmp string, c component) (problem string, skip bool, err error) {
	ins, err := parseDockerfile(file)
	if err != nil {
		return "", false, err
	}
	var builder *stage
	st := stages(ins)
	for i := range st {
		for _, in := range st[i].ins {
			if in.cmd == "RUN" && goBuild.MatchString(in.args) {
				builder = &st[i]
			}
		}
	}
	if builder == nil {
		return "no go build", false, nil
	}
	for _, src := range copies(*builder) {
		if err := copyTree(filepath.Join(root, src), filepath.Join(tmp, src)); err != nil {
			return "", false, err
		}
	}
	cmd := exec.Command("go", "list", "-deps", "./"+c.cmd)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "module lookup disabled") {
			return "", true, nil
		}
		return fmt.Sprintf("go list ./%s in the copied files: %v\n%s", c.cmd, err, out), false, nil
	}
	return "", false, nil
}

// copyTree copies a file or a directory, leaving out test binaries and profiles.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if strings.HasSuffix(path, ".test") || strings.HasSuffix(path, ".prof") || !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
