package helmchart

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	repoRoot = "../../.."
	chart    = "../../helm/parley"
)

// manifest is the part of a rendered object these tests read.
type manifest struct {
	Kind       string            `yaml:"kind"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Template struct {
			Spec struct {
				InitContainers []struct {
					Command []string `yaml:"command"`
					Env     []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"initContainers"`
				Containers []struct {
					Args []string `yaml:"args"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func helmTemplate(t *testing.T, args ...string) map[string]manifest {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		var err error
		if helm, err = exec.LookPath("helm"); err != nil {
			t.Skip("helm is not installed (.ci/deploy.sh installs it)")
		}
	}
	out, err := exec.Command(helm, append([]string{"template", "t", chart}, args...)...).Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, exitStderr(err))
	}
	objs := map[string]manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var m manifest
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if m.Kind != "" {
			objs[m.Kind] = m
		}
	}
	return objs
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// renderPodConfig runs the init container's script as the pod named pod
// would, with the ConfigMap and the Secret's keys as files, and returns the
// rendered config file's path.
func renderPodConfig(t *testing.T, objs map[string]manifest, secret map[string]string, pod string) string {
	t.Helper()
	sts := objs["StatefulSet"]
	if len(sts.Spec.Template.Spec.InitContainers) != 1 {
		t.Fatalf("want one init container, got %d", len(sts.Spec.Template.Spec.InitContainers))
	}
	init := sts.Spec.Template.Spec.InitContainers[0]
	root := t.TempDir()
	mounts := map[string]string{} // volume name -> directory standing in for it
	var script string
	for _, vm := range init.VolumeMounts {
		dir := filepath.Join(root, vm.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		mounts[vm.MountPath] = dir
		var files map[string]string
		switch vm.Name {
		case "config-base":
			files = objs["ConfigMap"].Data
		case "secrets":
			files = secret
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	script = objs["ConfigMap"].Data["render.sh"]
	for mountPath, dir := range mounts {
		script = strings.ReplaceAll(script, mountPath+"/", dir+"/")
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "POD_NAME="+pod)
	for _, e := range init.Env {
		if e.Name != "POD_NAME" {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the init script: %v\n%s", err, out)
	}
	return filepath.Join(mounts["/config"], "parley.yaml")
}

func buildParley(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "parley")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/parley")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serve starts the binary with the pod's arguments, on loopback and a data
// directory of the test's, waits until /readyz answers 200, then stops it
// with SIGTERM and wants exit 0.
func serve(t *testing.T, bin string, args []string, config string) {
	t.Helper()
	args = append([]string{}, args...)
	for i := range args {
		if args[i] == "/etc/parley/parley.yaml" {
			args[i] = config
		}
	}
	args = append(args, "--http", "127.0.0.1:0", "--tcp", "off", "--data", t.TempDir())
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "HTTP" && f[1] == "API" {
				addrs <- f[2]
			}
		}
		exited <- cmd.Wait()
	}()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	var base string
	select {
	case base = <-addrs:
	case err := <-exited:
		exited <- err
		t.Fatalf("parley refused the rendered config: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("parley printed no HTTP address\n%s", stderr.String())
	}
	// An embedded-NATS node waits up to 10 s for routes to peers that do
	// not exist here before it is ready.
	deadline := time.Now().Add(40 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered 200 (last: %v)\n%s", err, stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit 0\n%s", err, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("no exit 40 s after SIGTERM\n%s", stderr.String())
	}
}

func readConfig(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("rendered config: %v\n%s", err, b)
	}
	return m
}

// The default values: one node on its embedded store. The config a pod
// gets starts a node that becomes ready and stops cleanly on SIGTERM.
func TestChartDefaultConfigServes(t *testing.T) {
	objs := helmTemplate(t)
	path := renderPodConfig(t, objs, objs["Secret"].StringData, "t-parley-0")
	cfg := readConfig(t, path)
	if cfg["data_dir"] != "/data" || cfg["node_id"] != 0 || cfg["http_addr"] != ":8080" {
		t.Errorf("rendered config: %v", cfg)
	}
	for _, k := range []string{"token_key", "postgres_url", "nats_cluster_listen"} {
		if _, ok := cfg[k]; ok {
			t.Errorf("a single node's config has %s", k)
		}
	}
	serve(t, buildParley(t), objs["StatefulSet"].Spec.Template.Spec.Containers[0].Args, path)
}

// Cluster values with embedded NATS: pod 1 gets node_id 1, advertises its
// own route address under the headless Service, carries the Secret's
// values intact (quotes and YAML-special characters included), and the
// config starts a clustered node on PostgreSQL.
func TestChartClusterConfigServes(t *testing.T) {
	pg := os.Getenv("PARLEY_TEST_PG")
	if pg == "" {
		t.Skip("PARLEY_TEST_PG (PostgreSQL) is not set")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	routePort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	schema := fmt.Sprintf("ci_chart_%d", os.Getpid())
	t.Cleanup(func() {
		if psql, err := exec.LookPath("psql"); err == nil {
			exec.Command(psql, pg, "-qc", "drop schema if exists "+schema+" cascade").Run()
		}
	})
	tokenKey := `it's: a "token" key # with, [yaml] {specials} 0123456789`
	objs := helmTemplate(t, "-f", chart+"/ci/cluster-values.yaml",
		"--set-string", "secrets.postgresURL="+pg,
		"--set-string", "secrets.tokenKey="+strings.ReplaceAll(tokenKey, ",", `\,`),
		"--set", "postgres.schema="+schema,
		"--set", "cluster.nats.routePort="+strconv.Itoa(routePort),
		"--set", "drainWindowSeconds=1",
		"--set", "replicaCount=2")
	path := renderPodConfig(t, objs, objs["Secret"].StringData, "t-parley-1")
	cfg := readConfig(t, path)
	wantAdvertise := fmt.Sprintf("t-parley-1.t-parley-headless.default.svc.cluster.local:%d", routePort)
	if cfg["node_id"] != 1 || cfg["nats_cluster_advertise"] != wantAdvertise || cfg["token_key"] != tokenKey ||
		cfg["postgres_url"] != pg || cfg["postgres_schema"] != schema {
		t.Errorf("rendered config: %v", cfg)
	}
	if routes, _ := cfg["nats_routes"].([]any); len(routes) != 2 {
		t.Errorf("nats_routes %v: want the 2 pods", cfg["nats_routes"])
	}
	serve(t, buildParley(t), objs["StatefulSet"].Spec.Template.Spec.Containers[0].Args, path)
}
