package longpoll

// OnWaiting returns p calling f when one of its polls begins to wait for
// the finish, its reads and follow done.
func OnWaiting(p Poller, f func()) Poller {
	p.waiting = f
	return p
}
