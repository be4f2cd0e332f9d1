package sql

// Advisory lock keys: every pg_advisory_* lock chatd takes, in one place.
// The SQL files write the numbers out (a trigger cannot read a Go
// constant); TestAdvisoryLockKeys checks that they and the Go code use
// only these. A key is never reused for another purpose, even once its
// lock is gone: a process of the older binary may still take it.
const (
	// LockClassClaim, with hashtext(chat id), serialises the claims of one
	// named chat (ChatClaimLock in queries/chats.sql).
	LockClassClaim = 16
	// LockClassFollow, with hashtext(owner id): a follower registers under
	// it exclusively (ChatFollowerRegister in queries/chat_followers.sql),
	// a writer checks for followers under it shared (chatd_followed in
	// triggers/005_followers.sql).
	LockClassFollow = 17
	// LockSweep (a single key), tried for its transaction by each batch of
	// the retention and tombstone sweeps (SweepTryLock in
	// queries/tombstones.sql): one replica sweeps at a time, the others
	// skip their round.
	LockSweep = 18
	// LockTestTemplate (a single key) serialises the test binaries that
	// build the template database on one server (internal/dbtest).
	LockTestTemplate = 72707353
)
