package main

import (
	"github.com/go-logr/logr"
	resourceapi "k8s.io/api/resource/v1"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
)

// The conversion logs each version it cannot parse (and keeps the attribute, failing only where
// it is read); a log line per request on stderr is noise to the differential.
func init() {
	klog.SetLogger(logr.Discard())
}

// celDevice is the device as this release's scheduler hands it to CEL: 1.38 converts each
// ResourceSlice to its internal form first (attributes and capacities by domain and name, values
// parsed), and the allocator passes the slice's string lookup.
func celDevice(driver string, d resourceapi.Device) cel.Device {
	in := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, Devices: []resourceapi.Device{d}}}
	var out draapi.ResourceSlice
	if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(in, &out, nil); err != nil {
		panic(err)
	}
	c := out.Spec.Devices[0]
	return cel.Device{
		Driver:                   driver,
		AllowMultipleAllocations: c.AllowMultipleAllocations,
		Attributes:               c.Attributes,
		Capacity:                 c.Capacity,
		LookupUniqueString:       out.LookupUniqueString,
	}
}
