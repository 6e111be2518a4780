// Command cel-oracle answers, for DRA device selectors, what a Kubernetes release answers:
// whether API validation accepts a new selector, and what the scheduler's DeviceMatches returns
// for it on each given device. kopf-dra's differential CEL tests compare their own answers with
// these. The release is the one of the go.mod it is built with (build.sh VERSION: v0.36.3 for
// Kubernetes 1.36, v0.37.2 for 1.37); this source compiles against each.
//
// Protocol: one JSON request per stdin line, one JSON answer per stdout line, in order.
// Request: {"expression": string, "driver": string, "devices": [resource.k8s.io/v1 Device]}.
// A panic of cel-go is answered as a compile error "panic: ...".
// Answer: {"compile": null | string, "maxCost": string, "results": [{"value": bool} |
// {"error": string, "cost": bool}, each with "actual": number]}; "compile" is validation's error
// (then "results" is empty); "maxCost" is validation's cost estimate (a decimal string, since it
// may not fit a double); "cost" marks an evaluation stopped by the runtime cost limit; "actual"
// is the runtime cost tracked up to the end (or the stop) of the evaluation.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/dynamic-resource-allocation/cel"
)

type request struct {
	Expression string               `json:"expression"`
	Driver     string               `json:"driver"`
	Devices    []resourceapi.Device `json:"devices"`
}

type result struct {
	Value  *bool   `json:"value,omitempty"`
	Error  string  `json:"error,omitempty"`
	Cost   bool    `json:"cost,omitempty"`
	Actual *uint64 `json:"actual,omitempty"`
}

type answer struct {
	Compile *string  `json:"compile"`
	MaxCost string   `json:"maxCost,omitempty"`
	Results []result `json:"results"`
}

// The DRA gates of the local control plane (operators/localcluster/controlplane.py) that the CEL
// environment depends on.
var features = cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}

func validate(expression string) (*string, uint64) {
	// What validateCELSelector does for a new or changed selector.
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		msg := fmt.Sprintf("too long: may not be more than %d bytes", resourceapi.CELSelectorExpressionMaxLength)
		return &msg, 0
	}
	envType := environment.NewExpressions
	result := cel.GetCompiler(features).CompileCELExpression(expression, cel.Options{EnvType: &envType})
	if result.Error != nil {
		msg := result.Error.Error()
		return &msg, result.MaxCost
	}
	if result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		msg := "too complex, exceeds cost limit"
		return &msg, result.MaxCost
	}
	return nil, result.MaxCost
}

func evaluate(req request) answer {
	msg, maxCost := validate(req.Expression)
	if msg != nil {
		return answer{Compile: msg, MaxCost: strconv.FormatUint(maxCost, 10), Results: []result{}}
	}
	// What the scheduler's allocator does: the stored-expressions environment, no estimate.
	program := cel.GetCompiler(features).CompileCELExpression(req.Expression, cel.Options{DisableCostEstimation: true})
	if program.Error != nil {
		msg := "scheduler: " + program.Error.Error()
		return answer{Compile: &msg, Results: []result{}}
	}
	results := make([]result, 0, len(req.Devices))
	for _, d := range req.Devices {
		matches, details, err := program.DeviceMatches(context.Background(), cel.Device{
			Driver:                   req.Driver,
			AllowMultipleAllocations: d.AllowMultipleAllocations,
			Attributes:               d.Attributes,
			Capacity:                 d.Capacity,
		})
		actual := details.ActualCost()
		if err != nil {
			results = append(results, result{Error: err.Error(), Cost: strings.Contains(err.Error(), "cost limit exceeded"), Actual: actual})
			continue
		}
		value := matches
		results = append(results, result{Value: &value, Actual: actual})
	}
	return answer{MaxCost: strconv.FormatUint(maxCost, 10), Results: results}
}

// answerOf is evaluate, with a panic of cel-go (a constant map literal with a bytes key panics
// while the program is planned) answered as a refusal: the API server's handler recovers it
// and the request fails, so no such selector is ever stored.
func answerOf(req request) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("panic: %v", r)
			a = answer{Compile: &msg, Results: []result{}}
		}
	}()
	return evaluate(req)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "bad request: %v\n", err)
			os.Exit(2)
		}
		if err := enc.Encode(answerOf(req)); err != nil {
			fmt.Fprintf(os.Stderr, "write: %v\n", err)
			os.Exit(2)
		}
		if err := out.Flush(); err != nil {
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "read: %v\n", err)
		os.Exit(2)
	}
}
