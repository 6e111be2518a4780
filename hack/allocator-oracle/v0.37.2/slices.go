package main

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// newAllocator is structured.NewAllocator, which in 1.36 and 1.37 takes the v1 slices as they are.
func newAllocator(ctx context.Context, f structured.Features, state structured.AllocatedState, classes structured.DeviceClassLister, slices []*resourceapi.ResourceSlice, cache *cel.Cache) (structured.Allocator, error) {
	return structured.NewAllocator(ctx, f, state, classes, slices, cache)
}

// emptyState is an allocated state with nothing in it; 1.36 and 1.37 track each share of a
// shared device.
func emptyState() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

func insertShared(state structured.AllocatedState, id structured.DeviceID, share *types.UID) {
	state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, share))
}
