// Command k8s-schemas writes JSON schemas of the built-in Kubernetes kinds
// a chart uses, in the file layout kubeconform reads
// (<kind>[-<group>]-<version>.json, "standalone-strict": every schema
// self-contained, unknown fields refused), derived by reflection from the
// k8s.io/api Go types of the pinned Kubernetes version: the types the API
// server itself decodes manifests into.
//
// kubeconform's own schemas are downloaded from GitHub at run time; this
// makes validation work where only the Go module proxy is reachable.
//
//	go run ./cmd/k8s-schemas --out DIR
//	kubeconform -strict -schema-location 'DIR/{{ .ResourceKind }}{{ .KindSuffix }}.json' manifests.yaml
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func main() {
	out := flag.String("out", "", "directory to write the schemas to (required)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "k8s-schemas: --out is required")
		os.Exit(2)
	}
	n, err := write(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-schemas:", err)
		os.Exit(1)
	}
	fmt.Printf("%d schemas in %s\n", n, *out)
}

func write(dir string) (int, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		batchv1.AddToScheme, networkingv1.AddToScheme, rbacv1.AddToScheme, autoscalingv2.AddToScheme} {
		if err := add(scheme); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	n := 0
	for gvk, t := range scheme.AllKnownTypes() {
		// Only resources: a kind with ObjectMeta, not its List nor the
		// options and events the scheme also knows.
		if strings.HasSuffix(gvk.Kind, "List") || !hasObjectMeta(t) {
			continue
		}
		s := schemaOf(t, map[reflect.Type]bool{})
		apiVersion := gvk.Version
		suffix := "-" + gvk.Version
		if gvk.Group != "" {
			apiVersion = gvk.Group + "/" + gvk.Version
			suffix = "-" + strings.Split(gvk.Group, ".")[0] + "-" + gvk.Version
		}
		props := s["properties"].(map[string]any)
		props["apiVersion"] = map[string]any{"type": "string", "enum": []string{apiVersion}}
		props["kind"] = map[string]any{"type": "string", "enum": []string{gvk.Kind}}
		s["required"] = []string{"apiVersion", "kind"}
		s["$schema"] = "http://json-schema.org/schema#"
		b, err := json.MarshalIndent(s, "", " ")
		if err != nil {
			return n, err
		}
		name := strings.ToLower(gvk.Kind) + suffix + ".json"
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func hasObjectMeta(t reflect.Type) bool {
	f, ok := t.FieldByName("ObjectMeta")
	return ok && f.Type == reflect.TypeOf(metav1.ObjectMeta{})
}

var (
	quantity    = reflect.TypeOf(resource.Quantity{})
	intOrString = reflect.TypeOf(intstr.IntOrString{})
	timeT       = reflect.TypeOf(metav1.Time{})
	microTime   = reflect.TypeOf(metav1.MicroTime{})
	duration    = reflect.TypeOf(metav1.Duration{})
	rawExt      = reflect.TypeOf(runtime.RawExtension{})
	unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

func nullable(s map[string]any) map[string]any {
	if t, ok := s["type"].(string); ok {
		s["type"] = []string{t, "null"}
	}
	return s
}

// schemaOf is t's JSON schema as encoding/json (and so the API server's
// decoder) reads it.
func schemaOf(t reflect.Type, seen map[reflect.Type]bool) map[string]any {
	switch t {
	case quantity:
		return map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	case intOrString:
		return map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	case timeT, microTime, duration:
		return map[string]any{"type": []string{"string", "null"}}
	case rawExt:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(schemaOf(t.Elem(), seen))
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": []string{"string", "null"}} // base64
		}
		return map[string]any{"type": []string{"array", "null"}, "items": schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return map[string]any{"type": []string{"object", "null"}, "additionalProperties": schemaOf(t.Elem(), seen)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if reflect.PointerTo(t).Implements(unmarshaler) || seen[t] {
			return map[string]any{} // its own format, or a recursive type
		}
		seen[t] = true
		defer delete(seen, t)
		props := map[string]any{}
		addFields(t, props, seen)
		return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	}
	return map[string]any{}
}

func addFields(t reflect.Type, props map[string]any, seen map[reflect.Type]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(ft, props, seen)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		props[name] = schemaOf(f.Type, seen)
	}
}
