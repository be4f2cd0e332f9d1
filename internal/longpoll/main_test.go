package longpoll_test

import (
	"testing"

	"github.com/chatd/chatd/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
