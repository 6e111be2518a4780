// Command featuregates prints the feature gates of the Kubernetes release it is built against,
// as kube-scheduler knows them (every gate its command registers in the default feature gate),
// with their versioned specs and their dependencies, as JSON. hack/featuregates/generate.sh builds it once per pinned release and
// writes operators/api/gates/<minor>.json, which kopf-dra's --feature-gates reads.
package main

import (
	"encoding/json"
	"os"
	"sort"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	// kube-scheduler's command registers its gates in the default feature gate: Kubernetes'
	// (pkg/features), the generic API server's, client-go's, logging's and metrics'.
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

type spec struct {
	Version                 string `json:"version"`
	Default                 bool   `json:"default"`
	PreRelease              string `json:"preRelease"`
	LockToDefault           bool   `json:"lockToDefault,omitempty"`
	MinCompatibilityVersion string `json:"minCompatibilityVersion,omitempty"`
}

type table struct {
	Release      string              `json:"release"`
	Gates        map[string][]spec   `json:"gates"`
	Dependencies map[string][]string `json:"dependencies"`
}

func main() {
	if len(os.Args) != 2 {
		panic("usage: featuregates RELEASE")
	}
	gate := utilfeature.DefaultMutableFeatureGate
	out := table{
		Release:      os.Args[1],
		Gates:        map[string][]spec{},
		Dependencies: map[string][]string{},
	}
	for name, specs := range gate.GetAllVersioned() {
		converted := make([]spec, 0, len(specs))
		for _, s := range specs {
			one := spec{Default: s.Default, PreRelease: string(s.PreRelease), LockToDefault: s.LockToDefault}
			if s.Version != nil {
				one.Version = s.Version.String()
			}
			if s.MinCompatibilityVersion != nil {
				one.MinCompatibilityVersion = s.MinCompatibilityVersion.String()
			}
			converted = append(converted, one)
		}
		out.Gates[string(name)] = converted
	}
	for name, deps := range gate.Dependencies() {
		names := make([]string, 0, len(deps))
		for _, d := range deps {
			names = append(names, string(d))
		}
		sort.Strings(names)
		out.Dependencies[string(name)] = names
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", " ")
	if err := encoder.Encode(out); err != nil {
		panic(err)
	}
}
