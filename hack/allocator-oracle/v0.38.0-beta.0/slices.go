package main

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	resourceapi "k8s.io/api/resource/v1"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// newAllocator is structured.NewAllocator, which from 1.38 on takes slices in their internal
// form, converted as kube-scheduler's informer converts them.
func newAllocator(ctx context.Context, f structured.Features, state structured.AllocatedState, classes structured.DeviceClassLister, slices []*resourceapi.ResourceSlice, cache *cel.Cache) (structured.Allocator, error) {
	converted := make([]*draapi.ResourceSlice, 0, len(slices))
	for _, slice := range slices {
		var out draapi.ResourceSlice
		if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(slice, &out, nil); err != nil {
			return nil, err
		}
		converted = append(converted, &out)
	}
	return structured.NewAllocator(ctx, f, state, classes, converted, cache)
}

// emptyState is an allocated state with nothing in it; 1.38 tracks a shared device once,
// whatever its shares.
func emptyState() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.DeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

func insertShared(state structured.AllocatedState, id structured.DeviceID, _ *types.UID) {
	state.AllocatedSharedDeviceIDs.Insert(id)
}
