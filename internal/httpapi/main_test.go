package httpapi_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/testenv"
)

// TestMain runs the tests against PostgreSQL and then fails the run if any
// request answered a status that the route's documentation (routeDocs, and
// so the OpenAPI document) does not list.
func TestMain(m *testing.M) {
	log := httpapi.NewStatusLog()
	testenv.ObserveHTTP(log.Record)
	code := dbtest.Run(m)
	if code == 0 {
		if missing := log.Undocumented(); len(missing) > 0 {
			fmt.Fprintln(os.Stderr, "FAIL: statuses answered by the API but not documented in routeDocs:")
			for _, m := range missing {
				fmt.Fprintln(os.Stderr, "  "+m)
			}
			code = 1
		}
	}
	os.Exit(code)
}
