// Command cel-oracle answers, for DRA device selectors, what a Kubernetes release answers:
// whether API validation accepts a new selector, and what the scheduler's DeviceMatches returns
// for it on each given device. kopf-dra's differential CEL tests compare their own answers with
// these. The release is the one of the go.mod it is built with (build.sh VERSION: v0.36.3 for
// Kubernetes 1.36, v0.37.2 for 1.37, v0.38.0-beta.0 for 1.38); this source compiles against each,
// with the version's device.go (beside its go.mod) saying how that release hands a device to CEL.
//
// Protocol: one JSON request per stdin line, one JSON answer per stdout line, in order.
// Request: {"expression": string, "driver": string, "devices": [resource.k8s.io/v1 Device],
// "derived": bool}. A panic of cel-go is answered as a compile error "panic: ...".
// Answer: {"compile": null | string, "maxCost": string, "results": [{"value": bool} |
// {"error": string, "cost": bool}, each with "actual": number]}; "compile" is validation's error
// (then "results" is empty); "maxCost" is validation's cost estimate (a decimal string, since it
// may not fit a double); "cost" marks an evaluation stopped by the runtime cost limit; "actual"
// is the runtime cost tracked up to the end (or the stop) of the evaluation.
//
// With "derived": true the expression is a claim request's derived attribute (1.37,
// DRADerivedAttributes): "compile" is what validation says of a new one (validateCELExpression
// with derivedAttribute set: the DerivedAttribute option, its own cost limit), and each result
// is {"attribute": DeviceAttribute} or {"error": string, "cost": bool} from the scheduler's
// GetOrCompileDerivedAttribute and EvaluateDerivedAttribute. The attribute holds the fields
// the library set, an empty list included (its JSON tags would drop it); 1.38's library returns
// the value in its internal form instead, written as the same JSON. A library without
// derived attributes (v0.36.3) answers the compile error "this library has no derived
// attributes": the option and the methods are looked up by reflection, so that this source
// still builds against it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
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
	Derived    bool                 `json:"derived"`
}

type result struct {
	Value     *bool          `json:"value,omitempty"`
	Attribute map[string]any `json:"attribute,omitempty"`
	Error     string         `json:"error,omitempty"`
	Cost      bool           `json:"cost,omitempty"`
	Actual    *uint64        `json:"actual,omitempty"`
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
		matches, details, err := program.DeviceMatches(context.Background(), celDevice(req.Driver, d))
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

// noDerived is the answer of a library without derived attributes (before 1.37).
const noDerived = "this library has no derived attributes"

// derivedMaxCost is resourceapi.DeviceClaimDerivedAttributeCELMaxCost (1.37; v0.36.3's API has
// no such constant): a derived expression's own limit is the smaller of it and a selector's.
const derivedMaxCost = 1000000

// derivedOptions sets Options.DerivedAttribute, false when the library has no such option.
func derivedOptions(options *cel.Options) bool {
	field := reflect.ValueOf(options).Elem().FieldByName("DerivedAttribute")
	if !field.IsValid() {
		return false
	}
	field.SetBool(true)
	return true
}

func validateDerived(expression string) (*string, uint64) {
	// What validateCELExpression does for a new derived attribute (derivedAttribute true).
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		msg := fmt.Sprintf("too long: may not be more than %d bytes", resourceapi.CELSelectorExpressionMaxLength)
		return &msg, 0
	}
	envType := environment.NewExpressions
	options := cel.Options{EnvType: &envType}
	if !derivedOptions(&options) {
		msg := noDerived
		return &msg, 0
	}
	result := cel.GetCompiler(features).CompileCELExpression(expression, options)
	if result.Error != nil {
		msg := result.Error.Error()
		return &msg, result.MaxCost
	}
	if result.MaxCost > min(uint64(resourceapi.CELSelectorExpressionMaxCost), derivedMaxCost) {
		msg := "too complex, exceeds cost limit"
		return &msg, result.MaxCost
	}
	return nil, result.MaxCost
}

// attributeJSON is a DeviceAttribute as a JSON object of the fields that are set (nil
// pointers and nil slices left out, empty slices kept).
func attributeJSON(attr *resourceapi.DeviceAttribute) map[string]any {
	out := map[string]any{}
	v := reflect.ValueOf(attr).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if (f.Kind() != reflect.Pointer && f.Kind() != reflect.Slice) || f.IsNil() {
			continue
		}
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		out[name] = f.Interface()
	}
	return out
}

// derivedJSON is what EvaluateDerivedAttribute returned, as the JSON of a DeviceAttribute: 1.37
// returns a *DeviceAttribute, 1.38 the value in the internal form of an attribute (int64, bool,
// string, a version, or a slice of one of those; a version is its String()).
func derivedJSON(value any) map[string]any {
	switch v := value.(type) {
	case *resourceapi.DeviceAttribute:
		return attributeJSON(v)
	case int64:
		return map[string]any{"int": v}
	case bool:
		return map[string]any{"bool": v}
	case string:
		return map[string]any{"string": v}
	case []int64:
		return map[string]any{"ints": v}
	case []bool:
		return map[string]any{"bools": v}
	case []string:
		return map[string]any{"strings": v}
	case fmt.Stringer:
		return map[string]any{"version": v.String()}
	}
	if rv := reflect.ValueOf(value); rv.Kind() == reflect.Slice {
		versions := make([]string, rv.Len())
		for i := range rv.Len() {
			stringer, ok := rv.Index(i).Interface().(fmt.Stringer)
			if !ok {
				panic(fmt.Sprintf("derived attribute: unexpected element %T", rv.Index(i).Interface()))
			}
			versions[i] = stringer.String()
		}
		return map[string]any{"versions": versions}
	}
	panic(fmt.Sprintf("derived attribute: unexpected value %T", value))
}

func evaluateDerived(req request) answer {
	msg, maxCost := validateDerived(req.Expression)
	if msg != nil {
		return answer{Compile: msg, MaxCost: strconv.FormatUint(maxCost, 10), Results: []result{}}
	}
	// What the scheduler's allocator does: its cache's GetOrCompileDerivedAttribute (the
	// stored-expressions environment, no estimate), then EvaluateDerivedAttribute per device.
	compile := reflect.ValueOf(cel.NewCache(1, features)).MethodByName("GetOrCompileDerivedAttribute")
	if !compile.IsValid() {
		msg := noDerived
		return answer{Compile: &msg, Results: []result{}}
	}
	program := compile.Call([]reflect.Value{reflect.ValueOf(req.Expression)})[0].Interface().(cel.CompilationResult)
	if program.Error != nil {
		msg := "scheduler: " + program.Error.Error()
		return answer{Compile: &msg, Results: []result{}}
	}
	evaluate := reflect.ValueOf(program).MethodByName("EvaluateDerivedAttribute")
	results := make([]result, 0, len(req.Devices))
	for _, d := range req.Devices {
		out := evaluate.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.ValueOf(celDevice(req.Driver, d))})
		var actual *uint64
		if details, ok := out[1].Interface().(interface{ ActualCost() *uint64 }); ok && !out[1].IsNil() {
			actual = details.ActualCost()
		}
		if err, _ := out[2].Interface().(error); err != nil {
			results = append(results, result{Error: err.Error(), Cost: strings.Contains(err.Error(), "cost limit exceeded"), Actual: actual})
			continue
		}
		results = append(results, result{Attribute: derivedJSON(out[0].Interface()), Actual: actual})
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
	if req.Derived {
		return evaluateDerived(req)
	}
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
