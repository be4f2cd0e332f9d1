package longpoll

import "github.com/google/uuid"

// OnWaiting returns p calling f when one of its polls begins to wait for
// the finish, its reads and follow done.
func OnWaiting(p Poller, f func()) Poller {
	p.TestSignals = &TestSignals{}
	p.TestSignals.Waiting.InitFunc(func(uuid.UUID) { f() })
	return p
}
