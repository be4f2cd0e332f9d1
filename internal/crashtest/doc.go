// Package crashtest holds the tests that put chatd under fire with real
// processes and real PostgreSQL, and a concurrency storm. It has no code of
// its own outside its tests.
//
// The tests build the chatd binary once per test binary (with -race when the
// tests run with it), run mockllm in-process with latency so that turns take
// time, and start `chatd server` processes against a database of the test's
// own. Every child runs in its own process group, is killed when its test
// ends, and gets SIGKILL if the test binary dies (Pdeathsig).
//
//   - TestKillRestart: two servers share a database while clients send
//     structured (and plain) messages, one at a time or two at once so that
//     they queue (the second sometimes interrupting the running turn or
//     deleted from the queue again; half the chats declare a client tool
//     the clients answer), and one client follows its chat with a
//     stream that reconnects through the restarts; servers are SIGKILLed at
//     seeded kill points — while a
//     provider call is unanswered, in the middle of a streamed answer, just
//     after an answer (while its step is committed), or at a random moment —
//     and restarted. Afterwards every request is finished with exactly one
//     receipt, every accepted message is in history exactly once (or was
//     deleted from the queue and cancelled), the stream delivered every
//     message, succeeded
//     values validate against their schema (with another validator than the
//     server's), and `chatd check` is clean. Half the chats run on a Gemini
//     model (the mock's Gemini format, which refuses lost or altered thought
//     signatures): kills land during Gemini calls, and no Gemini request
//     ends in provider_error. 50 kill points by default.
//   - TestZombieServerCannotCommit: a server frozen with SIGSTOP during a
//     provider call loses its lease; a second server takes over and finishes;
//     the thawed server's value reaches neither the history nor the receipt.
//   - TestPostgresRestartUnderLoad: PostgreSQL (a cluster of the test's own)
//     is stopped — fast, then immediately — and started again under load;
//     the server recovers on its own (/readyz, workers, a client's stream),
//     nothing is stranded, the checker is clean.
//   - TestSigtermDrains: SIGTERM stops claiming, lets the step in flight
//     finish (or cuts it at --drain-timeout), hands the chat back and exits 0
//     within the bound; the next server completes the work.
//   - TestStreamAcrossProcesses: a stream on a server without workers gets
//     every message of a turn another server runs, in order, exactly once.
//   - TestStorm (in-process, internal/testenv): 24 clients create, send,
//     queue, interrupt, edit, delete queued requests, answer client tool
//     calls and read streams at once; then every request a client saw has
//     exactly one receipt and a terminal lookup, and the checker is clean.
//   - TestHostileModelStorm: TestKillRestart's servers, kills and drivers
//     (three users), with a model that mixes hostile output (hostileKinds) into
//     random steps: numbers jsonb cannot store in server, client and
//     finalizer tool arguments, duplicate tool-call ids in a step,
//     read_file on a FIFO, numbers jsonb expands, more text than a step
//     may hold. Afterwards every request has exactly one receipt, no chat
//     is stuck, `chatd check` is clean, no client got a 5xx, and each
//     hostile kind was stored screened. 8 kill points
//     (CHATD_HOSTILE_KILLS).
//   - TestFailoverSynchronousStandby: a primary and a synchronous
//     streaming standby (pg_basebackup), two servers on a multi-host URL
//     with target_session_attrs=read-write, 300 structured turns of a 2 s
//     model; the primary is SIGKILLed (or stopped cleanly: a planned
//     switchover) a third of the way in and the standby promoted. Every
//     turn ends with exactly one receipt, the one its client saw, the last
//     within lease + 2 × latency + 15 s of the promotion; /readyz is 503
//     while no primary answers; webhooks and streams (cut at the failure
//     and the promotion, resumed on the other server) deliver everything
//     once; each server counts and logs its reconnection; no server exits;
//     the checker is clean; planned, no provider call follows a committed
//     step.
//   - TestFailoverAutomatic: the same on a pg_auto_failover formation
//     (monitor and two nodes) whose primary node is SIGKILLed: the monitor
//     promotes the standby by itself.
//   - TestFailoverAsynchronousStandby: what an asynchronous standby loses
//     with the primary (docs/operations.md#synchronous-and-asynchronous-standbys).
//   - TestDeleteOnAnotherReplica: a chat is deleted (by the test's own
//     store, as another replica would) while server A's provider call of
//     its structured turn is in flight — A frozen and thawed after, A
//     SIGKILLed after, A SIGKILLed before; no row comes back, the request
//     is cancelled (chat_deleted), server B delivers its webhook once.
//   - TestDeleteStorm: TestKillRestart's servers, drivers and kills, with
//     chats edited, interrupted and deleted meanwhile (40 chats, 3 kills;
//     CHATD_DELETE_STORM_CHATS, CHATD_DELETE_STORM_KILLS). Afterwards no
//     table has a row of a deleted chat, every request pending at its
//     chat's deletion is tombstoned cancelled, every receipt reached the
//     webhook, and `chatd check` is clean.
//
// The seeded tests print their seed (with -v, and on failure); set
// CHATD_CRASH_SEED to replay one. The schedule of kills and every answer of
// the mock follow from the seed; the interleaving of processes does not.
// CHATD_CRASH_KILLS, CHATD_STORM_CLIENTS and CHATD_STORM_OPS size the runs;
// `make crash-long` runs 500 kill points and a longer storm.
package crashtest
