package sdf

import "github.com/flashmend/flashmend/internal/sdf/zones"

// ZoneState is a zone's state in the NVMe ZNS sense (zones.State).
type ZoneState = zones.State

// The zone states.
const (
	ZoneEmpty    = zones.Empty
	ZoneOpen     = zones.Open
	ZoneFull     = zones.Full
	ZoneReadOnly = zones.ReadOnly
	ZoneOffline  = zones.Offline
)
