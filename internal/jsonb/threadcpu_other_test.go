//go:build !linux

package jsonb

import "time"

func threadCPU() time.Duration { return 0 }
