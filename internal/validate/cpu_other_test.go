//go:build !unix

package validate

import "time"

func processCPU() time.Duration { return 0 }
