-- A session is written twice: inserted at capture, then marked used by the verification that
-- consumes it, a moment later. At the default fillfactor its page is full by then, so the update
-- writes the new row version on another page and inserts it into every index of the table; with
-- room left on each page it stays on its own (a heap-only tuple update: no index entries, less
-- WAL). Only pages written from now on keep the room.
ALTER TABLE verification.sessions SET (fillfactor = 80);
