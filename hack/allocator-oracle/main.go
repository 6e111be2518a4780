// Command allocator-oracle feeds one allocation problem to upstream's structured allocator
// (k8s.io/dynamic-resource-allocation, "experimental" channel) and prints the outcome in the
// JSON shape of `kopf-dra simulate`, so kopf-dra's differential tests can compare the two.
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
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
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
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
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
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
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

func run() output {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		msg := fmt.Sprintf("decode input: %v", err)
		return output{Outcome: "error", Error: &msg}
	}
	f := structured.Features{
		AdminAccess:            in.Features["DRAAdminAccess"],
		ConsumableCapacity:     in.Features["DRAConsumableCapacity"],
		DeviceBindingAndStatus: in.Features["DRADeviceBindingConditions"] && in.Features["DRAResourceClaimDeviceStatus"],
		DeviceTaints:           in.Features["DRADeviceTaints"],
		ListTypeAttributes:     in.Features["DRAListTypeAttributes"],
		PartitionableDevices:   in.Features["DRAPartitionableDevices"],
		PrioritizedList:        in.Features["DRAPrioritizedList"],
	}
	structured.EnableAllocators("experimental")
	ctx := context.Background()
	cache := cel.NewCache(100, cel.Features{
		EnableConsumableCapacity: f.ConsumableCapacity,
		EnableListTypeAttributes: f.ListTypeAttributes,
	})
	alloc, err := structured.NewAllocator(ctx, f, allocatedState(in.Allocated, f.ConsumableCapacity), classLister(in.Classes), in.Slices, cache)
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
		again, err := structured.NewAllocator(ctx, f, allocatedState(in.Allocated, f.ConsumableCapacity), classLister(in.Classes), in.Slices, cache)
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
