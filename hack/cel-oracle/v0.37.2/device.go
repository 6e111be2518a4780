package main

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

// celDevice is the device as this release's scheduler hands it to CEL: its v1 attributes and
// capacities as they are (1.36, 1.37).
func celDevice(driver string, d resourceapi.Device) cel.Device {
	return cel.Device{
		Driver:                   driver,
		AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes:               d.Attributes,
		Capacity:                 d.Capacity,
	}
}
