// Package archive is the archived form of a Dex session and its storage.
//
// An archived session is one object that holds the whole session as the API
// shows it: the session header as GetSession returns it (with its whole
// inbox), every history entry, every Step with its attempts, every folded
// turn (what a long session keeps of an older turn's Steps), and the events
// the cluster keeps. The same session gives the same bytes whether it is read
// from the leader's state (FromState) or through the API (FromAPI), so an
// export from a live cluster and one from the archive can be compared byte
// for byte.
//
// # Format
//
// An object is the line "dex-session-archive 1\n", then a DEFLATE stream of
// dex.v1.ArchiveRecord messages, each preceded by its length as a varint,
// then the SHA-256 of every byte before it (32 bytes). The records are one
// header, the history in seq order, the Steps in number order, the folded
// turns in turn order, the kept events in seq order, and one end record
// counting them. Messages are
// marshalled deterministically; the read-time field Step.waiting_reason (it
// describes the Workers alive now, not the session) is left out, so a
// rewrite of the same session writes the same object. format.Decode refuses an
// object whose checksum, magic line, version or record order is wrong.
// The format's code is api/archive/format, which depends on the wire types
// only: the server decodes an object to import it (ImportSession) without
// this package's stores and client.
//
// # Storage
//
// Open takes an archive URL and returns a Store over a gocloud.dev/blob
// bucket: file:///DIR (the default for a bare path), s3://BUCKET,
// gs://BUCKET or azblob://CONTAINER, with each driver's query parameters.
// An object's key is Key(id), "sessions/ID.dexsession". Put writes an object
// durably (on file://, the data and its directory are fsynced before Put
// returns) and overwrites the same key in place, so a leader that took over
// between an archive write and the delete that follows rewrites the same
// object. Get reads an object back and verifies it.
//
// The leader's use: obj, err := FromState(st, id); then
// store.Put(ctx, id, obj); and only after Put returned nil, the delete.
package archive
