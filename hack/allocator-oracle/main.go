// Command allocator-oracle feeds one allocation problem to upstream's structured allocator
// (k8s.io/dynamic-resource-allocation, "experimental" channel) and prints the outcome in the
// JSON shape of `kopf-dra simulate`, so kopf-dra's differential tests can compare the two.
// One source for every library version (v0.36.3, v0.37.2, v0.38.0-beta.0: the module directories
// beside it, each with its slices.go saying how that release's allocator takes slices): the
// allocator's Features are set by field name, and a gate whose field this version lacks is an
// error, never silently off.
//
// Input (stdin, JSON): {"features": {"DRAPrioritizedList": true, ...}, "node": Node,
// "classes": [DeviceClass], "slices": [ResourceSlice], "claims": [ResourceClaim],
// "allocated": [ResourceClaim with status.allocation]}.
// Output (stdout, JSON): {"outcome": "success"|"unsatisfiable"|"error", "error": string|null,
// "allocations": [AllocationResult, one per claim]}.
//
// With "repeat": N in the input, NewAllocator+Allocate run N more times on the same input (the
// CEL cache stays warm, as in kube-scheduler) and "timings_ns" lists each run's duration,
// measured here so that bench/bench_allocator.py times upstream without the pipe and JSON.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type input struct {
	Features  map[string]bool              `json:"features"`
	Node      *v1.Node                     `json:"node"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
	Repeat    int                          `json:"repeat"`
}

type output struct {
	Outcome     string                         `json:"outcome"`
	Error       *string                        `json:"error"`
	Allocations []resourceapi.AllocationResult `json:"allocations"`
	TimingsNs   []int64                        `json:"timings_ns,omitempty"`
}

type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

// allocatedState mirrors kube-scheduler's claim tracker (foreachAllocatedDevice).
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := emptyState()
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if consumable && r.ShareID != nil {
				insertShared(state, id, r.ShareID)
				if r.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// gateFields maps a feature gate to the structured.Features field it sets, as kube-scheduler's
// DRA plugin does; DeviceBindingAndStatus takes two gates and is set apart.
var gateFields = map[string]string{
	"DRAAdminAccess":               "AdminAccess",
	"DRAConsumableCapacity":        "ConsumableCapacity",
	"DRADeviceTaints":              "DeviceTaints",
	"DRAListTypeAttributes":        "ListTypeAttributes",
	"DRAPartitionableDevices":      "PartitionableDevices",
	"DRAPrioritizedList":           "PrioritizedList",
	"DRADeviceCompatibilityGroups": "CompatibilityGroups",
	"DRADerivedAttributes":         "DerivedAttributes",
	"DRAFractionalCapacityRange":   "FractionalCapacityRange",
	"DRAOptionalNodeOperations":    "OptionalNodeOperations",
}

// features sets the fields this library version has; a gate that is on but has no field here
// (a newer release's gate) or is unknown is an error.
func features(gates map[string]bool) (structured.Features, error) {
	var f structured.Features
	v := reflect.ValueOf(&f).Elem()
	set := func(field string, on bool) error {
		fv := v.FieldByName(field)
		if !fv.IsValid() {
			if on {
				return fmt.Errorf("this allocator has no feature %s", field)
			}
			return nil
		}
		fv.SetBool(on)
		return nil
	}
	for gate, on := range gates {
		switch gate {
		case "DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus":
			continue
		}
		field, ok := gateFields[gate]
		if !ok {
			return f, fmt.Errorf("unknown feature gate %s", gate)
		}
		if err := set(field, on); err != nil {
			return f, err
		}
	}
	err := set("DeviceBindingAndStatus", gates["DRADeviceBindingConditions"] && gates["DRAResourceClaimDeviceStatus"])
	return f, err
}

func run() output {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		msg := fmt.Sprintf("decode input: %v", err)
		return output{Outcome: "error", Error: &msg}
	}
	f, err := features(in.Features)
	if err != nil {
		msg := err.Error()
		return output{Outcome: "error", Error: &msg}
	}
	structured.EnableAllocators("experimental")
	ctx := context.Background()
	cache := cel.NewCache(100, cel.Features{
		EnableConsumableCapacity: f.ConsumableCapacity,
		EnableListTypeAttributes: f.ListTypeAttributes,
	})
	alloc, err := newAllocator(ctx, f, allocatedState(in.Allocated, f.ConsumableCapacity), classLister(in.Classes), in.Slices, cache)
	if err != nil {
		msg := err.Error()
		return output{Outcome: "error", Error: &msg}
	}
	results, err := alloc.Allocate(ctx, in.Node, in.Claims)
	if err != nil {
		msg := err.Error()
		return output{Outcome: "error", Error: &msg}
	}
	timings := make([]int64, 0, in.Repeat)
	for range in.Repeat {
		start := time.Now()
		again, err := newAllocator(ctx, f, allocatedState(in.Allocated, f.ConsumableCapacity), classLister(in.Classes), in.Slices, cache)
		if err == nil {
			_, err = again.Allocate(ctx, in.Node, in.Claims)
		}
		timings = append(timings, time.Since(start).Nanoseconds())
		if err != nil {
			msg := err.Error()
			return output{Outcome: "error", Error: &msg}
		}
	}
	if results == nil && len(in.Claims) > 0 {
		return output{Outcome: "unsatisfiable", Allocations: []resourceapi.AllocationResult{}, TimingsNs: timings}
	}
	if results == nil {
		results = []resourceapi.AllocationResult{}
	}
	return output{Outcome: "success", Allocations: results, TimingsNs: timings}
}

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(run()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
