package notify

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// The chatd_chat payload, the one codec of what the triggers write
// (sql/triggers/010_snapshot.sql, 040_notify.sql) and the hub reads:
//
//	<chat_id> <snapshot_version> <owner_id>
//
// the chat's and its owner's uuids in their text form, and the chat's new
// snapshot_version in decimal: 1 for a new chat, SnapshotDeleted for a
// deleted one. TestChatPayloadFromTheTriggers checks it against what the
// triggers send.

// Snapshots an Event carries besides a chat's snapshot_version.
const (
	// SnapshotDeleted: the chat was deleted (the triggers send it).
	SnapshotDeleted int64 = 0
	// SnapshotResync: re-read everything; notifications may have been
	// lost (the hub's own, after a reconnect; never in a payload).
	SnapshotResync int64 = -1
)

// parseChatPayload reads a chatd_chat payload; false for anything else.
func parseChatPayload(payload string) (Event, bool) {
	f := strings.Split(payload, " ")
	if len(f) != 3 {
		return Event{}, false
	}
	id, err1 := uuid.Parse(f[0])
	snap, err2 := strconv.ParseInt(f[1], 10, 64)
	owner, err3 := uuid.Parse(f[2])
	if err1 != nil || err2 != nil || err3 != nil || snap < SnapshotDeleted {
		return Event{}, false
	}
	return Event{ChatID: id, Snapshot: snap, OwnerID: owner}, true
}
