// Package deploy holds the deployment kit (Dockerfile and compose.yaml at
// the top of the repository, the systemd unit here) and its tests. No
// container engine runs on the machines that test Limbo, so what can be
// checked without one is: the binary the Dockerfile builds, built the way
// it builds it; the image's settings; the compose file's wiring; and the
// unit, by systemd-analyze.
package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerBuild is the Dockerfile's go build line.
var dockerBuild = regexp.MustCompile(`RUN (CGO_ENABLED=0 go build [^\\\n]*?) -o /out/limbo (\./cmd/limbo)`)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// binary builds limbo as the Dockerfile does, once per test run.
func binary(t *testing.T) string {
	t.Helper()
	m := dockerBuild.FindStringSubmatch(read(t, "../Dockerfile"))
	if m == nil {
		t.Fatal("the Dockerfile has no `RUN CGO_ENABLED=0 go build … -o /out/limbo ./cmd/limbo` line")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "limbo-deploy")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "limbo")
		// The Dockerfile's own words, run by the shell, with the output moved.
		cmd := exec.Command("sh", "-c", m[1]+" -o "+binPath+" "+m[2])
		cmd.Dir = ".."
		binOut, binErr = cmd.CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("building as the Dockerfile does: %v\n%s", binErr, binOut)
	}
	return binPath
}

// TestDockerfile: a multi-stage build whose binary is static (no dynamic
// loader, no shared library: it runs on distroless/static or scratch) and
// runs; the final stage is distroless, runs as a non-root user, keeps its
// SQLite database in a volume, and listens on every interface inside.
func TestDockerfile(t *testing.T) {
	df := read(t, "../Dockerfile")
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(df, -1)); n < 2 {
		t.Errorf("%d FROM lines: not a multi-stage build", n)
	}
	final := df[strings.LastIndex(df, "\nFROM "):]
	for _, want := range []string{"FROM gcr.io/distroless/static", "USER 65532:65532", `VOLUME ["/data"]`, "LIMBO_ADDR=0.0.0.0:8080",
		"LIMBO_DB=sqlite:/data/limbo.db", "--chown=65532:65532 /out/data /data", `ENTRYPOINT ["/usr/local/bin/limbo"]`} {
		if !strings.Contains(final, want) {
			t.Errorf("the final stage lacks %q", want)
		}
	}
	bin := binary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is not static: it has a %v segment", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries: %v", libs)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "limbo ") {
		t.Fatalf("the built binary: %v\n%s", err, out)
	}
	di := read(t, "../.dockerignore")
	for _, want := range []string{".git", "*.db", "*.audit-key"} {
		if !strings.Contains(di, want+"\n") {
			t.Errorf(".dockerignore does not keep %s out of the build context", want)
		}
	}
}

// TestCompose: limbo is built from this Dockerfile, waits for a healthy
// PostgreSQL, reaches it by its service name, must be given the shared
// audit key, and is published on loopback only.
func TestCompose(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Build       string            `yaml:"build"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "../compose.yaml")), &c); err != nil {
		t.Fatal(err)
	}
	pg, limbo := c.Services["postgres"], c.Services["limbo"]
	if !strings.HasPrefix(pg.Image, "postgres:") || len(pg.Healthcheck.Test) == 0 {
		t.Errorf("postgres: image %q, healthcheck %v", pg.Image, pg.Healthcheck.Test)
	}
	if limbo.Build != "." || limbo.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("limbo: build %q, depends_on %+v", limbo.Build, limbo.DependsOn)
	}
	db := limbo.Environment["LIMBO_DB"]
	if !strings.HasPrefix(db, "postgres://"+pg.Environment["POSTGRES_USER"]+":"+pg.Environment["POSTGRES_PASSWORD"]+"@postgres:5432/"+pg.Environment["POSTGRES_DB"]) {
		t.Errorf("LIMBO_DB %q does not reach the postgres service as it is set up", db)
	}
	if !strings.Contains(limbo.Environment["LIMBO_AUDIT_KEY"], "${LIMBO_AUDIT_KEY:?") {
		t.Errorf("LIMBO_AUDIT_KEY must be required from the environment (every instance shares it): %q", limbo.Environment["LIMBO_AUDIT_KEY"])
	}
	for _, p := range limbo.Ports {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("port %q is published beyond loopback", p)
		}
	}
}

// TestSystemdUnit: systemd-analyze verify accepts the unit, with the
// binary built as above in ExecStart's place; every variable the example
// environment file sets is one serve reads.
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit := read(t, "limbo.service")
	if !strings.Contains(unit, "ExecStart=/usr/local/bin/limbo serve\n") {
		t.Fatal("the unit's ExecStart is not /usr/local/bin/limbo serve")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "limbo.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "ExecStart=/usr/local/bin/limbo", "ExecStart="+binary(t), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	help, err := exec.Command(binary(t), "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^(LIMBO_[A-Z_]+)=`).FindAllStringSubmatch(read(t, "limbo.env.example"), -1) {
		if m[1] != "LIMBO_AUDIT_KEY" && !strings.Contains(string(help), "env "+m[1]+")") && !strings.Contains(string(help), "env "+m[1]+";") {
			t.Errorf("limbo.env.example sets %s, which serve does not read", m[1])
		}
	}
}
