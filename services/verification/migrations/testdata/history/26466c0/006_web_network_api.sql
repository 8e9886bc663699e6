-- NETWORK_API in the browser flow: a VERIFY capture through an operator's CAMARA API opens a WEB
-- session waiting for the operator's authorization, and the transaction waits with it until the
-- operator sends the browser back to mnv's callback, which completes both.

ALTER TABLE verification.transactions DROP CONSTRAINT transactions_status_check;
ALTER TABLE verification.transactions ADD CONSTRAINT transactions_status_check
    CHECK (status IN ('PENDING', 'AUTHORIZATION_PENDING', 'CAPTURED', 'NO_NETWORK_IDENTITY'));

-- The page the browser goes back to after the operator's authorization: on the origin the
-- capture came from (which the client allowed), checked when the capture stored it.
-- code_challenge: the S256 challenge of a verifier the capturing page keeps; completion_hash:
-- the SHA-256 of the one-time code the callback gives the browser that comes back. The flow is
-- captured only when one request shows both (the page that captured is the browser the operator
-- saw), so a link to the operator that an attacker got from his own capture completes nothing.
ALTER TABLE verification.transactions
    ADD COLUMN return_url text CHECK (length(return_url) BETWEEN 1 AND 4096),
    ADD COLUMN code_challenge text CHECK (length(code_challenge) = 43),
    ADD COLUMN completion_hash bytea;

-- The callback finds the transaction of a WEB session by the session (002's index), which a
-- session has one of at most: every capture opens its own session.
DROP INDEX verification.transactions_session;
CREATE UNIQUE INDEX transactions_session ON verification.transactions (session_id);
